"""Resolving intents without outcome on the cluster, and bringing the ledger in line (one remote call)."""

from __future__ import annotations

from typing import Literal

from rsk.cluster.remote import remote_for
from rsk.ledger import guard
from rsk.ledger.store import Store
from rsk.ops.status import Model, status_call
from rsk.wire import answers
from rsk.wire.protocol import raise_for_error


class ReconcileItem(Model):
    request_id: str
    plan_hash: str
    result: Literal["reconciled", "abandoned"]
    job_id: str | None = None


class ReconcileReport(Model):
    schema_version: int = 1
    target: str
    project: str
    open_intents: int
    stale_stages: int = 0  # results a killed job never published, set aside as partial
    items: list[ReconcileItem]


def reconcile(target: str, project: str) -> ReconcileReport:
    """Resolve intents without outcome on the cluster, then bring the ledger in line: holds of requests
    that have jobs become submitted, those of abandoned intents are released, ended jobs settle."""
    store = Store(project)
    with remote_for(target) as remote:
        out = remote.call("reconcile", project)
        raise_for_error(out)
        answer = answers.reconcile(out)
        found: dict[str, list[str]] = {}
        for r in answer.items:  # found by Slurm's word: held by id from now on, whatever name the job gives itself
            if r.result == "reconciled" and r.job:
                found.setdefault(r.rid, []).append(r.job)
        guard.adopt(store, target, found)
        status_call(remote, target, project)  # adopts and settles what the cluster knows
    items = [ReconcileItem(request_id=r.rid, plan_hash=r.plan, result=r.result, job_id=r.job) for r in answer.items]
    for item in items:  # the ledger follows what the cluster found
        if item.result == "abandoned":
            guard.release(store, item.request_id, "reconcile: the intent was abandoned (no job exists)")
    return ReconcileReport(target=target, project=project, open_intents=answer.open, stale_stages=answer.stale,
                           items=items)  # fmt: skip
