"""rsk gpus: every GPU of a target, free or held, and by which job, from the cluster's own GRES view.

Whose a held GPU is comes from the ledgers, never from the job: a job names itself (`scontrol update JobName=`), so
a job is shown as a project's request only when that project's ledger holds its id (a lease's step: its own record,
else its lease's job); any other is someone else's, its Slurm name shown as inert text (docs/adr/0057)."""

from __future__ import annotations

import re
from datetime import UTC, datetime

from pydantic import BaseModel, ConfigDict

from rsk.cluster.remote import remote_for
from rsk.wire import answers
from rsk.wire.gres import gpu_types, held_indices  # the one reading of GRES (rsk.wire.gres)
from rsk.wire.protocol import Output, raise_for_error


class Gpu(BaseModel):
    model_config = ConfigDict(extra="forbid")

    index: int  # Slurm's GRES index on the node (what IDX counts)
    type: str | None = None
    state: str  # free | held | unavailable (the node is down or drained)
    job_id: str | None = None
    project: str | None = None  # for rsk's jobs: the project whose ledger holds the job's id
    request_id: str | None = None  # ... and the request it holds it for
    job_name: str | None = None  # for other jobs: the name Slurm shows (the job's own words)
    since: datetime | None = None  # when the job (a lease's step) started: ISO 8601, UTC


class GpuNode(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str
    state: str
    partitions: list[str]
    total: int
    free: int
    gpus: list[Gpu]


class GpuInventory(BaseModel):
    model_config = ConfigDict(extra="forbid")

    schema_version: int = 2  # 2: `since` is always an ISO 8601 time (a lease's was epoch seconds in a string)
    target: str
    at: str
    total: int
    free: int
    nodes: list[GpuNode]


_DOWN = re.compile(r"DOWN|DRAIN|FAIL|NOT_RESPONDING|POWER|MAINT|RESERVED", re.IGNORECASE)


def said(when: datetime | None) -> str:
    """A time as the text forms print it: 2026-12-04 09:11:55 UTC (without UTC: the cluster's clock)."""
    if when is None:
        return "an unknown time"
    return when.strftime("%Y-%m-%d %H:%M:%S") + (" UTC" if when.tzinfo is not None else "")


def owners(target: str) -> dict[str, tuple[str, str]]:
    """job id -> (project, request id) for every job on the target that a ledger the caller may read holds (rsk.ledger
    .guard.held_jobs: unsettled, so every job that can hold a GPU now), and every step the ledger allowed into a lease
    whose job it holds. A ledger that cannot be read gives nothing: its jobs show as someone else's."""
    from rsk.errors import RskError
    from rsk.ledger.cards import projects
    from rsk.ledger.guard import held_jobs
    from rsk.ledger.store import Store
    from rsk.local.caller import rights

    r = rights()
    found: dict[str, tuple[str, str]] = {}
    for project in projects():
        if r is not None and not r.allows(project):
            continue  # through the broker, another user's command reads only the ledgers it may use
        try:
            ledger = Store(project).view()
        except RskError:
            continue
        held = held_jobs(ledger, target)
        found |= {j: (project, rid) for j, rid in held.items()}
        for lease in ledger.leases:
            if lease.target == target and lease.job_id in held:
                found |= {s.job_id: (project, s.request_id) for s in lease.steps or []}
    return found


def inventory_from(target: str, out: Output, types: dict[str, str] | None = None,
                   held_by: dict[str, tuple[str, str]] | None = None) -> GpuInventory:  # fmt: skip
    """The inventory from a `gpus` call's records (pure). `types`: a node's GPU type where the records do not say
    it (a lease's view, from the cluster's); `held_by`: whose each job is (`owners`): a step the ledger did not
    allow is its lease's job's."""
    answer = answers.gpus(out)
    held_by = held_by or {}
    holders: dict[tuple[str, int], answers.GpuHeldLine] = {}
    for h in answer.held:
        for idx in held_indices(h.gres):
            holders[(h.node, idx)] = h
    nodes = []
    for r in answer.nodes:
        down = bool(_DOWN.search(r.state))
        gpus = []
        for idx, kind in enumerate(gpu_types(r.gres)):
            kind = kind or (types or {}).get(r.name)
            held = holders.get((r.name, idx))
            if held is None:
                gpus.append(Gpu(index=idx, type=kind, state="unavailable" if down else "free"))
                continue
            owner = held_by.get(held.job) or held_by.get(held.job.partition("s")[0] if "s" in held.job else "")
            gpus.append(Gpu(index=idx, type=kind, state="held", job_id=held.job, since=held.start,
                            project=owner[0] if owner else None, request_id=owner[1] if owner else None,
                            job_name=None if owner else held.name))  # fmt: skip
        free = sum(g.state == "free" for g in gpus)
        nodes.append(GpuNode(name=r.name, state=r.state, partitions=r.partitions, total=len(gpus), free=free,
                             gpus=gpus))  # fmt: skip
    return GpuInventory(
        target=target,
        at=datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        total=sum(n.total for n in nodes),
        free=sum(n.free for n in nodes),
        nodes=nodes,
    )


def node_types(inv: GpuInventory) -> dict[str, str]:
    """Each node's GPU type, where all its GPUs are of one type."""
    out = {}
    for n in inv.nodes:
        kinds = {g.type for g in n.gpus}
        if len(kinds) == 1 and (kind := kinds.pop()) is not None:
            out[n.name] = kind
    return out


def inventory(target: str) -> GpuInventory:
    with remote_for(target) as remote:
        out = remote.call("gpus")
    raise_for_error(out)
    return inventory_from(target, out, held_by=owners(target))
