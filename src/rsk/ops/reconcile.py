"""Resolving intents without outcome on the cluster, and bringing the ledger in line (one remote call)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from rsk.cluster.remote import Remote, remote_for
from rsk.ledger import guard
from rsk.ledger.store import Store
from rsk.ops.status import Model, Status, status_call


class ReconcileItem(Model):
    request_id: str
    plan_hash: str
    result: Literal["reconciled", "abandoned", "unresolved"]
    job_id: str | None = None
    # unresolved: the jobs of the account since the hold that no book holds (ADR 0039)
    unknown_jobs: list[str] = Field(default_factory=list)


class ReconcileReport(Model):
    schema_version: int = 1
    target: str
    project: str
    open_intents: int
    stale_stages: int = 0  # results a killed job never published, set aside as partial
    # active jobs of the account since the ledger's oldest open hold, in no book, whose batch script Slurm did not give
    unknown_jobs: list[str] = Field(default_factory=list)
    items: list[ReconcileItem]


def reconcile(target: str, project: str) -> ReconcileReport:
    """Resolve intents without outcome on the cluster, then bring the ledger in line: holds of requests
    that have jobs become submitted, those of abandoned intents are released, ended jobs settle. An intent
    left unresolved (jobs of the account since the hold that no book holds) keeps its hold."""
    with remote_for(target) as remote:
        return reconcile_on(remote, target, project)[0]


def reconcile_on(remote: Remote, target: str, project: str) -> tuple[ReconcileReport, Status]:
    """`reconcile` over a connection the caller holds (a launch that must hear Slurm's word before it gives
    anything back), with the status read that brought the ledger in line."""
    store = Store(project)
    answer = guard.adopt_reconciled(remote, store, target, project)
    st, _ = status_call(remote, target, project)  # adopts and settles what the cluster knows
    items = [ReconcileItem(request_id=r.rid, plan_hash=r.plan, result=r.result, job_id=r.job,
                           unknown_jobs=r.unknown) for r in answer.items]  # fmt: skip
    for item in items:  # the ledger follows what the cluster found
        if item.result == "abandoned":
            guard.release(store, item.request_id, "reconcile: the intent was abandoned (no job exists)")
    report = ReconcileReport(target=target, project=project, open_intents=answer.open, stale_stages=answer.stale,
                             items=items, unknown_jobs=answer.unknown)  # fmt: skip
    return report, st
