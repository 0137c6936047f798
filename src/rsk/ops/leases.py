"""Leases: one held allocation that rsk's controller on the cluster divides among steps (docs/leases.md).

Opening a lease is a launch (planned on the cluster, decided by the ledger, charged at worst case for the
whole allocation); a step is a launch with `lease` set (rsk.ops.launch). This module holds what is only a
lease's: the request that opens one, and status, drain, resume, close and the GPU view, each one call.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Literal, TypeVar, cast, get_args

from pydantic import BaseModel, ConfigDict, StrictInt

from rsk.cluster.remote import Remote, remote_for
from rsk.errors import RskError, UsageError
from rsk.ledger.guard import close_lease
from rsk.ledger.models import Lease, Ledger, now
from rsk.ledger.store import Store
from rsk.local.paths import check_token, new_request_id
from rsk.ops.gpus import GpuInventory, inventory_from, node_types, owners
from rsk.ops.status import RequestCost
from rsk.request.units import parse_mem, parse_time
from rsk.wire import answers
from rsk.wire.answers import LeaseLine
from rsk.wire.protocol import Output, Request, raise_for_error

LeaseState = Literal["pending", "starting", "running", "draining", "drained", "closed", "ended"]
_STATES = frozenset(get_args(LeaseState))


T = TypeVar("T")


class LeaseSpec(BaseModel):
    """What opening a lease asks for, as the human or agent gives it."""

    model_config = ConfigDict(extra="forbid")

    name: str
    nodes: StrictInt | None = None  # numbers as numbers: true is not 1
    gpus: StrictInt | None = None  # per node
    cpus: StrictInt | None = None  # per node
    mem: str | None = None  # per node
    time: str | None = None
    partition: str | None = None
    account: str | None = None
    qos: str | None = None
    drain_min: StrictInt | None = None
    overrun: Literal["refuse", "clip"] | None = None
    request_id: str | None = None


def open_request(spec: LeaseSpec, project: str, requester: str, target: str | None = None) -> Request:
    """The request that opens a lease: no command of its own (its job runs rsk's controller). Without a request
    id, opening the same lease again (on `target`) is the same request: the one of the lease the ledger holds
    open, or of a card still waiting to open it (`earlier_request`), so repeating it never opens a second one."""
    name = check_token("lease name", spec.name)
    rid = check_token("request id", spec.request_id) if spec.request_id else None
    if rid is None and target is not None:
        rid = earlier_request(Store(project).view(), target, name)
    return Request(
        project=project,
        request_id=rid or new_request_id(),
        name=f"lease-{name}"[:64],
        partition=spec.partition or "",
        account=spec.account or "",
        qos=spec.qos or "",
        nodes=spec.nodes,
        cpus=spec.cpus,
        gpus=spec.gpus,
        mem_mb=parse_mem(spec.mem) if spec.mem else None,
        time_min=parse_time(spec.time) if spec.time else None,
        lease_open=name,
        drain_min=spec.drain_min,
        overrun=spec.overrun or "",
        requester=requester,
    )


def earlier_request(ledger: Ledger, target: str, name: str, at: datetime | None = None) -> str | None:
    """The request id an earlier `lease open NAME` used while that lease may still be live: the ledger's lease
    of that name (not closed, its time not yet over since it was allowed), else a card opening it that waits for
    a human, or was approved and has not opened it yet."""
    when = at or now()
    live = [
        x for x in ledger.leases if x.target == target and x.name == name and x.closed is None
        and x.opened + timedelta(minutes=x.resources.time_min) > when
    ]  # fmt: skip
    if live:
        return max(live, key=lambda x: x.opened).request_id
    opened = {x.request_id for x in ledger.leases}
    cards = [
        c for c in ledger.cards if c.target == target and c.plan.lease_open == name
        and (c.status == "pending" or (c.status == "approved" and c.request_id not in opened))
    ]  # fmt: skip
    return max(cards, key=lambda c: c.created).request_id if cards else None


def open_lease(spec: LeaseSpec, request: Request, launch: Callable[[Request], T]) -> T:
    """`launch(request)`, the request that opens a lease. Opening it again without a request id took the earlier
    open's (`earlier_request`, on the ledger's word); when Slurm says that lease has ended (`lease-ended`) it is
    opened anew under a new id. An agent's own request id is never replaced."""
    try:
        return launch(request)
    except RskError as exc:
        if spec.request_id or exc.code != "lease-ended":
            raise
    return launch(request.model_copy(update={"request_id": new_request_id()}))


class LeaseInfo(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str
    job_id: str  # the lease's Slurm job
    request_id: str
    state: LeaseState
    nodes: int
    gpus: int  # per node
    cpus: int  # per node
    mem_mb: int  # per node
    time_min: int
    partition: str
    drain_min: int
    overrun: str
    hosts: list[str]  # the allocation's nodes, once the controller runs
    start: datetime | None  # once the controller runs (ISO 8601, UTC)
    end: datetime | None
    queued: int
    running: int
    ended: int
    drained: bool  # a human asked it to start no new steps (rsk lease drain)
    ledger: Literal["open", "closed", "unknown"]  # whether this project's ledger allows steps into it
    undecided: list[str] = []  # steps its controller started that the ledger never decided (rsk.ops.status)


class LeaseList(BaseModel):
    model_config = ConfigDict(extra="forbid")

    schema_version: int = 2  # 2: a lease's start and end are ISO 8601 times (they were epoch seconds)
    target: str
    project: str
    leases: list[LeaseInfo]
    warnings: list[str] = []  # one per undecided step, as rsk status says it


class CloseReport(BaseModel):
    model_config = ConfigDict(extra="forbid")

    schema_version: int = 1
    target: str
    project: str
    name: str
    job_id: str
    result: Literal["cancelled", "ended"]  # the allocation was ended now, or had ended already
    queued_cancelled: int
    settled: bool  # the lease's charge now counts what the allocation held, not its worst case
    # what the books charge the lease's request (`rsk status`'s costs): used once settled, else still reserved
    cost: RequestCost | None = None
    warnings: list[str] = []  # what the human must know: more than one open lease of the name was closed


def _info(r: LeaseLine, ledger: Ledger, target: str) -> LeaseInfo:
    known = [x for x in ledger.leases if x.target == target and x.job_id == r.job and x.name == r.name]
    return LeaseInfo(
        name=r.name,
        job_id=r.job,
        request_id=r.rid,
        state=cast(LeaseState, r.state if r.state in _STATES else "running"),
        nodes=max(r.nodes or 0, 0),
        gpus=max(r.gpus or 0, 0),
        cpus=max(r.cpus or 0, 0),
        mem_mb=max(r.mem or 0, 0),
        time_min=max(r.time or 0, 0),
        partition=r.partition,
        drain_min=max(r.drain or 0, 0),
        overrun=r.overrun,
        hosts=r.hosts,
        start=r.start,
        end=r.end,
        queued=r.queued,
        running=r.running,
        ended=r.ended,
        drained=r.drained,
        ledger="unknown" if not known else "closed" if known[0].closed else "open",
    )


def _call(remote: Remote, *args: str) -> Output:
    out = remote.call("lease", *args)
    raise_for_error(out)
    return out


def _open_leases(store: Store, target: str, name: str) -> list[Lease]:
    """The ledger's open leases of this name, oldest first: a job of the account can rewrite the lease's file on the
    cluster (its job, its request), the ledger it cannot."""
    return sorted((x for x in store.view().leases if x.target == target and x.name == name and x.closed is None),
                  key=lambda x: x.opened)  # fmt: skip


def _held(store: Store, target: str, name: str) -> list[str]:
    """The ledger's newest open lease of this name as the program's JOB RID arguments ([] when it holds none)."""
    held = _open_leases(store, target, name)
    return [held[-1].job_id, held[-1].request_id] if held else []


def status(target: str, project: str, name: str | None = None) -> LeaseList:
    if name is not None:
        check_token("lease name", name)
    from rsk.ops.status import status_call, undecided_warning

    store = Store(project)
    with remote_for(target) as remote:
        out = _call(remote, "status", project, *([name, *_held(store, target, name)] if name else []))
        jobs, _ = status_call(remote, target, project)  # which steps the ledger never decided
    ledger = store.load()  # once, for every lease the answer lists
    leases = [_info(r, ledger, target) for r in answers.leases(out)]
    names = {x.name for x in leases}
    for x in leases:
        x.undecided = [j.job_id for j in jobs.jobs if j.lease == x.name and j.undecided]
    warnings = [undecided_warning(j) for j in jobs.jobs if j.undecided and j.lease in names]
    return LeaseList(target=target, project=project, leases=leases, warnings=warnings)


def set_drain(target: str, project: str, name: str, drain: bool) -> LeaseInfo:
    """Drain: the controller starts no new step (running ones go on) until resume."""
    check_token("lease name", name)
    with remote_for(target) as remote:
        out = _call(remote, "drain" if drain else "resume", project, name)
    found = answers.leases(out)
    if not found:
        raise UsageError(f"the cluster did not report lease {name}")
    return _info(found[0], Store(project).load(), target)


def close(target: str, project: str, name: str, by: str, settle_wait: float = 20.0) -> CloseReport:
    """End the lease: its queued steps are cancelled, its allocation ends, the ledger stops allowing steps
    into it, and its charge is settled to what the allocation held (once Slurm says it ended)."""
    check_token("lease name", name)
    from rsk.ops.status import status_call

    cost: RequestCost | None = None
    store = Store(project)
    # the jobs to end, whatever the cluster's file says: every lease of the name the ledger holds open (a job that
    # rewrote the file could have let the name be opened twice), the newest last, as the answer names it
    held = _open_leases(store, target, name)
    warnings = [f"the ledger held {len(held)} open leases named {name} (jobs {', '.join(x.job_id for x in held)}): "
                "each was closed; a job of the account may have rewritten the lease's file (tell the human)"
                ] if len(held) > 1 else []  # fmt: skip
    with remote_for(target) as remote:
        said = [_call(remote, "close", project, name, x.job_id, x.request_id) for x in held[:-1]]
        out = _call(remote, "close", project, name, *([held[-1].job_id, held[-1].request_id] if held else []))
        if out.first("closed") is None:
            raise UsageError(f"the cluster did not report closing lease {name}")
        closed = answers.lease_closed(out)
        job = held[-1].job_id if held else closed.job  # (the program closed the ledger's, and says so)
        earlier = [answers.lease_closed(o) for o in said if o.first("closed") is not None]
        close_lease(store, target, name, by)
        settled = False
        deadline = time.monotonic() + settle_wait
        while True:
            st, _ = status_call(remote, target, project)
            mine = [j for j in st.jobs if j.job_id == job]
            cost = st.costs.get(mine[0].request_id) if mine else None
            if not mine or mine[0].state not in ("pending", "blocked", "running"):
                settled = bool(mine)
                break
            if time.monotonic() > deadline:
                break
            time.sleep(1.0)
    return CloseReport(
        target=target,
        project=project,
        name=name,
        job_id=job,
        result="cancelled" if "cancelled" in {c.result for c in (closed, *earlier)} else "ended",
        queued_cancelled=closed.queued + sum(c.queued for c in earlier),
        settled=settled,
        cost=cost,
        warnings=warnings,
    )


def gpus(target: str, project: str, name: str) -> GpuInventory:
    """The lease's GPUs from its controller: per node, each free or held by which step."""
    check_token("lease name", name)
    with remote_for(target) as remote:
        out = _call(remote, "gpus", project, name)
        cluster = remote.call("gpus")  # the nodes' GPU types, which the lease's own view does not know
    raise_for_error(cluster)
    return inventory_from(target, out, node_types(inventory_from(target, cluster)), owners(target))


def describe(info: LeaseInfo) -> str:
    """One line for humans."""
    left = ""
    if info.end and info.state in ("running", "draining", "drained"):
        mins = max(int((info.end - now()).total_seconds()), 0) // 60
        left = f", {mins} min left"
    where = ",".join(info.hosts) or "-"
    return (
        f"{info.name:<14} job {info.job_id:<8} {info.state:<9} {info.nodes}x{info.gpus} GPU on {where}{left}; "
        f"steps: {info.queued} queued, {info.running} running, {info.ended} ended"
        + ("" if info.ledger == "open" else f" (ledger: {info.ledger})")
        + (f"; UNDECIDED: {', '.join(info.undecided)}" if info.undecided else "")
    )
