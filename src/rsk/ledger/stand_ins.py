"""Stand-ins a human releases: a lost answer's request keeps an `unfound:N` stand-in at its worst case for each task
no job was found for (docs/adr/0047); only a human can say such a task never ran (`rsk grant release`, ADR 0051).

A released stand-in stays in its charge's (or approval use's) jobs as spent nothing and counted as no job, so the
charge can settle; it is never a job id and never drops one. A job found later for the request takes a released
stand-in's place and is charged its worst case again (rsk.ledger.guard's adoption): the cluster's word wins over the
human's.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from rsk.errors import ConflictError, UsageError
from rsk.ledger.cards import human_entry
from rsk.ledger.models import Charge, JobCost, Ledger, Use, stand_in_open, unfound
from rsk.ledger.store import Store


class Held(BaseModel):
    """What one book of a request holds for tasks no job was found for."""

    model_config = ConfigDict(extra="forbid")

    book: str  # "charge CH" or "approval A"
    stand_ins: list[str]  # the `unfound:N` keys still held at their worst case
    gpu_hours: float  # their worst case together
    cpu_hours: float
    jobs: list[str]  # the jobs the book holds for the request (never touched by a release)


def _books(ledger: Ledger, target: str, request_id: str) -> list[tuple[str, dict[str, JobCost], Charge | Use]]:
    out: list[tuple[str, dict[str, JobCost], Charge | Use]] = [
        (f"charge {ch.id}", ch.job_costs, ch)
        for ch in ledger.charges
        if ch.target == target and ch.request_id == request_id and ch.state == "submitted"
    ]
    out += [(f"approval {a.id}", u.jobs, u) for a in ledger.approvals for u in a.uses
            if u.target == target and u.request_id == request_id and u.state == "submitted"]  # fmt: skip
    return out


def held(ledger: Ledger, target: str, request_id: str) -> list[Held]:
    """The request's books on the target that hold stand-ins at their worst case (pure)."""
    return [h for book, costs, _ in _books(ledger, target, request_id) if (h := _held(book, costs)) is not None]


def _held(book: str, costs: dict[str, JobCost]) -> Held | None:
    keys = sorted(k for k, c in costs.items() if stand_in_open(k, c))
    if not keys:
        return None
    gpu, cpu = sum(costs[k].gpu_hours_worst for k in keys), sum(costs[k].cpu_hours_worst for k in keys)
    jobs = sorted(k for k in costs if not unfound(k))
    return Held(book=book, stand_ins=keys, gpu_hours=gpu, cpu_hours=cpu, jobs=jobs)


def count(ledger: Ledger, target: str, request_id: str) -> int:
    return sum(len(h.stand_ins) for h in held(ledger, target, request_id))


def nothing_held(project: str, target: str, request_id: str) -> UsageError:
    return UsageError(
        f"request {request_id} holds no stand-in on {target} in project {project}",
        "a stand-in is what a lost answer's adoption keeps for a task no job was found for; `rsk grant list` and "
        f"`rsk status -r {request_id}` show the request's books",
        code="not-found",
        details={"request_id": request_id, "target": target, "project": project},
    )


def release_in(ledger: Ledger, target: str, request_id: str, expected: int) -> list[tuple[str, Held]]:
    """Release every stand-in the request's books hold on the target (pure, on the ledger held under the lock):
    each counts nothing and no job from then on; a charge with nothing else open settles. `expected` is how many
    the evidence was gathered for: when the books changed since (a job was found), nothing is released. Returns
    what was released, with each charge's new state ("settled" or "submitted"; "" for an approval's use)."""
    if count(ledger, target, request_id) != expected:
        raise ConflictError(
            f"request {request_id}'s books changed while the cluster was asked (a job of it was found, or another "
            "release ran): nothing was released",
            f"look again: `rsk status -r {request_id}`, then `rsk grant release {request_id}` if tasks are still "
            "held that never ran",
            code="books-changed",
        )
    done: list[tuple[str, Held]] = []
    for book, costs, owner in _books(ledger, target, request_id):
        h = _held(book, costs)
        if h is None:
            continue
        for key in h.stand_ins:
            c = costs[key]
            c.gpu_hours_used, c.cpu_hours_used, c.run_s, c.never_ran, c.at_worst = 0.0, 0.0, 0, True, False
        state = ""
        if isinstance(owner, Charge):
            if all(c.gpu_hours_used is not None for c in costs.values()):
                owner.state = "settled"
            state = owner.state
        done.append((state, h))
    return done


def release(store: Store, target: str, request_id: str, expected: int, by: str, reason: str) -> list[Held]:
    """A human's word that the request's tasks no job was found for never ran: their stand-ins are released, in
    one transaction, each book's release written to the audit with who and why."""
    with store.transaction() as ledger:
        done = release_in(ledger, target, request_id, expected)
        for state, h in done:
            detail = (f"{len(h.stand_ins)} stand-in(s) released ({','.join(h.stand_ins)}; {h.gpu_hours:.4f} GPU-h, "
                      f"{h.cpu_hours:.4f} CPU-h at worst) on the human's word that those tasks never ran: "
                      f"{reason or '(no reason given)'}")  # fmt: skip
            if state == "settled":
                detail += "; the charge settled"
            store.audit(human_entry(store.project, "stand-ins-released", by, request_id=request_id, rule=h.book,
                                    detail=detail))  # fmt: skip
    return [h for _, h in done]
