"""A human releases a lost answer's stand-ins (`rsk grant release`, docs/adr/0051): first the cluster is asked for
the evidence it can give, and any sign that a job of the request may exist refuses the release."""

from __future__ import annotations

from rsk.errors import ConflictError, UnavailableError
from rsk.ledger import stand_ins
from rsk.ledger.stand_ins import Held
from rsk.ledger.store import Store
from rsk.ops.reconcile import reconcile
from rsk.ops.status import Model, status


class Released(Model):
    schema_version: int = 1
    target: str
    project: str
    request_id: str
    by: str
    reason: str
    released: list[Held]  # each book's stand-ins released (the jobs it holds are untouched)
    evidence: list[str]  # what the cluster was asked, and what it said


def release(target: str, project: str, request_id: str, by: str, reason: str) -> Released:
    """Release the request's stand-ins on the target when the cluster shows no sign of a job of it: reconcile
    (every open intent resolved from Slurm's evidence; none left unresolved, which would mean active jobs of the
    account since a hold that no book holds), then status (Slurm up; the request's jobs it lists adopted first).
    A job found on the way takes a stand-in's place, and the release is refused: the human looks again."""
    store = Store(project)
    before = stand_ins.count(store.view(), target, request_id)
    if not before:
        raise stand_ins.nothing_held(project, target, request_id)
    evidence: list[str] = []
    rec = reconcile(target, project)
    unresolved = [i for i in rec.items if i.result == "unresolved"]
    if unresolved or rec.unknown_jobs:
        jobs = sorted({j for i in unresolved for j in i.unknown_jobs} | set(rec.unknown_jobs))
        raise ConflictError(
            f"the cluster cannot rule out a job of request {request_id}: job(s) {','.join(jobs) or '?'} of the "
            "account, submitted since a hold whose outcome is unknown, are in no book and Slurm did not give their "
            "batch script: nothing was released",
            "try again when Slurm answers, or once those jobs have ended; `rsk reconcile` says what is unresolved",
            code="job-may-exist",
            details={"request_id": request_id, "unknown_jobs": jobs},
        )
    mine = [i for i in rec.items if i.request_id == request_id]
    said = ", ".join(i.result + (f" {i.job_id}" if i.job_id else "") for i in mine) or "none"
    evidence.append(f"reconcile: {rec.open_intents} open intent(s); of this request: {said}")
    st = status(target, project)
    if st.slurm != "up":
        raise UnavailableError(
            "Slurm does not answer: the cluster cannot say whether a job of the request exists; nothing was released",
            f"try `rsk grant release {request_id}` again when `rsk status` says Slurm is up",
            code="slurm-down",
        )
    listed = [j for j in st.jobs if j.request_id == request_id]
    evidence.append(f"status: Slurm up; {len(listed)} job(s) of this request listed"
                    + (": " + ", ".join(f"{j.job_id} {j.state}" for j in listed) if listed else ""))  # fmt: skip
    after = stand_ins.count(store.view(), target, request_id)
    if after != before:
        raise ConflictError(
            f"{before - after} job(s) of request {request_id} were found on the cluster just now and took the "
            "place of stand-ins: they ran or run, and are charged; nothing was released",
            f"look at `rsk status -r {request_id}`; release again only what you know never ran",
            code="job-found",
            details={"request_id": request_id, "stand_ins_before": before, "stand_ins_now": after},
        )
    evidence.append(
        "not seen: a job that ran and ended unseen (no batch script is left to read); the release is your word "
        "that the tasks never ran, and a job of them found later is charged again"
    )
    done = stand_ins.release(store, target, request_id, before, by, reason)
    return Released(target=target, project=project, request_id=request_id, by=by, reason=reason, released=done,
                    evidence=evidence)  # fmt: skip
