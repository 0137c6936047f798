"""rsk gpus: every GPU of a target, free or held, and by which job, from the cluster's own GRES view."""

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
    project: str | None = None  # for rsk's jobs (named rsk:PROJECT:RID)
    request_id: str | None = None
    job_name: str | None = None  # for other jobs: the name Slurm shows
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


def inventory_from(target: str, out: Output, types: dict[str, str] | None = None) -> GpuInventory:
    """The inventory from a `gpus` call's records (pure). `types`: a node's GPU type where the records do not say
    it (a lease's view, from the cluster's)."""
    answer = answers.gpus(out)
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
            parts = held.name.split(":")
            ours = len(parts) == 3 and parts[0] == "rsk"
            gpus.append(Gpu(index=idx, type=kind, state="held", job_id=held.job, since=held.start,
                            project=parts[1] if ours else None, request_id=parts[2] if ours else None,
                            job_name=None if ours else held.name))  # fmt: skip
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
    return inventory_from(target, out)
