"""Cancelling this project's rsk jobs, found by the ledger's ids (one remote call)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from rsk.cluster.remote import remote_for
from rsk.errors import UnavailableError, UsageError, not_ours
from rsk.ledger import guard
from rsk.ledger.store import Store
from rsk.local.paths import check_token
from rsk.ops.status import Model, attempt_of
from rsk.wire import answers
from rsk.wire.protocol import job_order, raise_for_error
from rsk.wire.states import first


class CancelResult(Model):
    job_id: str
    request_id: str | None = None
    task: str | None = None
    result: Literal["cancelled", "finished", "not-ours", "failed"]


class Charged(Model):
    """What a request's books hold after the cancel: the jobs this cancel found never started (settled at 0, their
    count given back: ADR 0069), and what its jobs used and still reserve (`rsk status` says the same later)."""

    request_id: str
    never_started: int
    cpu_hours_used: float
    gpu_hours_used: float
    cpu_hours_reserved: float  # the worst case of its jobs not yet ended
    gpu_hours_reserved: float


class CancelReport(Model):
    schema_version: int = 2
    target: str
    project: str
    counts: dict[str, int] = Field(default_factory=dict)  # every result's count, whatever `results` lists
    results: list[CancelResult]
    results_omitted: int = 0  # a brief report (MCP) lists what went wrong and the first others
    charged: list[Charged] = Field(default_factory=list)  # per request the ledger charges (a card's or a grant's)
    # what the caller should know: the project's lock was held (by a job, or another command of the project), so the
    # cancel went on without it and the journal does not record it (docs/adr/0056)
    warnings: list[str] = Field(default_factory=list)

    def brief(self, most: int) -> CancelReport:
        """Every job this cancel could not cancel (`failed`, `not-ours`) and the first `most` of the others, with the
        counts of all: an MCP answer of a 10,000-task cancel stays small."""

        def rank(r: CancelResult) -> int:
            return 0 if r.result in ("failed", "not-ours") else 1

        odd = sum(1 for r in self.results if rank(r) == 0)
        kept, left = first(self.results, odd + most, rank)
        return self.model_copy(update={"results": kept, "results_omitted": left}) if left else self


def cancel(target: str, project: str, *, job: str | None = None, request_id: str | None = None,
           batch: str | None = None) -> CancelReport:  # fmt: skip
    given = [(m, v) for m, v in (("job", job), ("rid", request_id), ("batch", batch)) if v]
    if len(given) != 1:
        raise UsageError("say what to cancel: a JOB, or --request-id R, or --batch B")
    mode, value = given[0]
    assert value is not None
    if mode != "job":
        check_token("request id", value)
    # the ledger's jobs are found by id, whatever name a job gave itself
    held = guard.held_jobs(Store(project).load(), target)
    # a request id takes its attempts too (R.a2, ...: rsk retry and rsk extend), as `rsk wait` follows them
    mine = {j: r for j, r in held.items() if (j == value if mode == "job" else value in (r, attempt_of(r)[0]))}
    with remote_for(target) as remote:
        out = remote.call("cancel", project, mode, value, stdin=guard.held_line(mine))
    raise_for_error(out)
    lines = answers.cancel(out)
    results = [  # in Slurm's order of the jobs (a batch: its tasks in order), whatever order the cluster answered
        CancelResult(job_id=c.job, request_id=c.rid or None, task=c.task or None, result=c.result)
        for c in sorted(lines, key=lambda c: job_order(c.job))
    ]
    # a pending task Slurm dropped at the cancel left no record to settle on later: it settles now, at 0
    store = Store(project)
    gone = {c.job for c in lines if c.result == "cancelled" and c.gone and c.job in mine}
    guard.settle(store, target, dict.fromkeys(gone, (0, None)), never=gone)
    costs = guard.request_costs(store, store.view(), target, set(mine.values()))
    charged = [Charged(request_id=rid, never_started=sum(1 for j in gone if mine[j] == rid), **cost)
               for rid, cost in costs.items()]  # fmt: skip
    counts: dict[str, int] = {}
    for r in results:
        counts[r.result] = counts.get(r.result, 0) + 1
    return CancelReport(target=target, project=project, counts=counts, results=results, charged=charged,
                        warnings=answers.warnings(out))  # fmt: skip


def refused(report: CancelReport) -> None:
    """A job that is not this project's, or that Slurm did not cancel, makes the answer an error document (`error`
    is the reason: `not-ours`, exit 2, or `cancel-failed`, exit 69), carrying the report's `results`, `counts`,
    `charged` and `warnings` (a brief report's `results` has every job it could not cancel, and `results_omitted`)."""
    theirs = [r for r in report.results if r.result == "not-ours"]
    failed = [r for r in report.results if r.result == "failed"]
    results: dict[str, object] = {
        "results": [r.model_dump() for r in report.results],
        "counts": report.counts,
        "charged": [c.model_dump() for c in report.charged],
        "warnings": report.warnings,
    }
    if report.results_omitted:  # a brief report keeps every job it could not cancel
        results["results_omitted"] = report.results_omitted
    if theirs:
        exc: UsageError | UnavailableError = not_ours(theirs[0].job_id, report.project, report.target)
        exc.details = results
        raise exc
    if failed:
        raise UnavailableError(
            f"Slurm did not cancel job {failed[0].job_id}"
            + (f" (and {len(failed) - 1} more)" if len(failed) > 1 else ""),
            "run the same cancel again in a minute; `rsk status` shows whether it still runs",
            code="cancel-failed",
            details=results,
        )
