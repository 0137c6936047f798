"""How often a launch touches the ledger (ADR 0036): the decision and the reservation of a granted launch are one
transaction (one lock, one read of the file, one write), and the record of what the cluster accepted is one
more. The ledger is parsed once for the whole launch. The cluster here is a stand-in that plans and accepts
(the real one is tested in tests/integration/test_guard.py and test_ledger_lab.py); the ledger is real."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from rsk.errors import PendingApproval
from rsk.ledger import store as store_mod
from rsk.ledger.models import Grant
from rsk.ledger.store import Store
from rsk.ops import launch as launch_mod
from rsk.wire.protocol import Accepted, Plan, Request, TaskPlan

PROJECT = "p"


def _plan(prior: list[dict[str, Any]] | None = None) -> Plan:
    task = TaskPlan(nodes=1, cpus=1, mem_mb=100, gpus=0, time_min=10, argv=["true"])
    return Plan(hash="h" * 16, cluster="c", user="u", root="/r", hostkey="k", scripts="s", policy="p",
                project=PROJECT, name="job", kind="argv", workdir="/w", path="", partition="debug", account="",
                qos="", nodes=1, cpus=1, mem_mb=100, gpus=0, time_min=10, env=[], argv=["true"], tasks=[task],
                prior=prior or [])  # fmt: skip


class _Cluster:
    """A cluster that plans `plan` and accepts job 101 on `go`; it remembers what it was sent."""

    def __init__(self, plan: Plan) -> None:
        self.plan = plan
        self.sent: list[tuple[str, ...]] = []

    def install(self, monkeypatch: pytest.MonkeyPatch) -> None:
        cluster = self

        class Conn:
            def close(self) -> None: ...

        class Talk:
            first = "planned"

            def reply(self, *words: str, mode: str = "") -> str:
                cluster.sent.append(words)
                return mode or "submitted"

            def close(self) -> None: ...

        class Remote:
            host_key = "k"

            def __init__(self, conn: object) -> None: ...

            def converse(self, *args: object, **kw: object) -> Talk:
                return Talk()

        monkeypatch.setattr("rsk.cluster.transport.connect", lambda target: Conn())
        monkeypatch.setattr(launch_mod, "Remote", Remote)
        monkeypatch.setattr(launch_mod, "find_target", lambda name: type("T", (), {"name": name})())
        monkeypatch.setattr(launch_mod, "raise_for_error", lambda out: None)
        monkeypatch.setattr(launch_mod, "keep", lambda request, code=None: None)
        monkeypatch.setattr(launch_mod.answers, "plan", lambda out: cluster.plan)
        monkeypatch.setattr(launch_mod.answers, "warnings", lambda out: [])
        monkeypatch.setattr(launch_mod.answers, "accepted", lambda out: [
            Accepted(job_id="101", request_id="r1", plan_hash=cluster.plan.hash, replay=out == "replay")])  # fmt: skip


def _count(monkeypatch: pytest.MonkeyPatch) -> Counter[str]:
    """Every lock of the ledger, read of its file, parse of it and write of it."""
    counts: Counter[str] = Counter()
    real_raw, real_parse, real_write = store_mod._raw, store_mod.parse_ledger, Store._write
    real_enter = type(Store(PROJECT).lock).__enter__

    def raw(path: Path) -> bytes | None:
        counts["read"] += 1
        return real_raw(path)

    def parse(*a: Any) -> Any:
        counts["parse"] += 1
        return real_parse(*a)

    def write(self: Store, *a: Any) -> None:
        counts["write"] += 1
        real_write(self, *a)

    def enter(self: Any) -> Any:
        counts["lock"] += 1
        return real_enter(self)

    monkeypatch.setattr(store_mod, "_raw", raw)
    monkeypatch.setattr(store_mod, "parse_ledger", parse)
    monkeypatch.setattr(Store, "_write", write)
    monkeypatch.setattr(type(Store(PROJECT).lock), "__enter__", enter)
    return counts


def _granted() -> Grant:
    g = Grant(jobs=3)
    with Store(PROJECT).transaction() as ledger:
        ledger.grants.append(g)
    return g


def test_a_granted_launch_decides_and_reserves_in_one_transaction_and_records_in_one_more(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    g = _granted()
    cluster = _Cluster(_plan())
    cluster.install(monkeypatch)
    counts = _count(monkeypatch)
    # the decision's transaction alone: one lock, one read, one write (and no parse: the view's reading is used)
    seen: list[Counter[str]] = []
    real_outcome = launch_mod.record_outcome
    monkeypatch.setattr(launch_mod, "record_outcome", lambda *a: (seen.append(counts.copy()), real_outcome(*a))[1])
    result = launch_mod.launch("lab", Request(project=PROJECT, request_id="r1", argv=["true"]))
    assert result.status == "submitted" and result.allowed_by.kind == "grant" and result.job_id == "101"
    assert cluster.sent == [("go", cluster.plan.hash)]  # submitted once, that very plan
    assert seen == [Counter(read=2, parse=1, lock=1, write=1)]  # the view before planning, then the decision
    assert counts == Counter(read=3, parse=1, lock=2, write=2)  # and the record of the job the cluster accepted
    ledger = Store(PROJECT).load()
    [charge] = ledger.charges
    assert (charge.grant_id, charge.state, list(charge.job_costs)) == (g.id, "submitted", ["101"])


def test_a_ledger_changed_while_the_cluster_planned_is_read_again_under_the_lock(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    _granted()
    cluster = _Cluster(_plan())
    cluster.install(monkeypatch)
    real_view = Store.view

    def view_then_revoke(self: Store) -> Any:  # a human revokes the grant after the view, before the decision
        seen = real_view(self)
        with Store(PROJECT).transaction() as ledger:
            ledger.grants[0].revoked = ledger.grants[0].created
        return seen

    monkeypatch.setattr(Store, "view", view_then_revoke)
    counts = _count(monkeypatch)
    with pytest.raises(PendingApproval):
        launch_mod.launch("lab", Request(project=PROJECT, request_id="r1", argv=["true"]))
    assert cluster.sent == []  # nothing submitted: the decision saw the revocation
    assert counts["parse"] == 3  # the view, the revocation, and the decision: the view was stale, read again
    assert Store(PROJECT).load().charges == []


def test_a_request_the_cluster_shows_submitted_is_replayed_without_a_write(monkeypatch: pytest.MonkeyPatch) -> None:
    _granted()
    cluster = _Cluster(_plan(prior=[{"idx": 0, "state": "done", "job_id": "101", "plan_hash": "h" * 16}]))
    cluster.install(monkeypatch)
    counts = _count(monkeypatch)
    result = launch_mod.launch("lab", Request(project=PROJECT, request_id="r1", argv=["true"]))
    assert result.allowed_by.kind == "replay"
    assert counts == Counter(read=2, parse=1, lock=1)  # decided in one transaction that changed nothing


def test_a_request_that_cannot_be_kept_is_still_recorded_in_the_ledger_and_says_so(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    g = _granted()
    _Cluster(_plan()).install(monkeypatch)

    def full(request: Request, code: object = None) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(launch_mod, "keep", full)
    result = launch_mod.launch("lab", Request(project=PROJECT, request_id="r1", argv=["true"]))
    assert result.status == "submitted" and result.job_id == "101"
    assert any("not kept here (No space left on device)" in w for w in result.warnings), result.warnings
    [charge] = Store(PROJECT).load().charges
    assert (charge.grant_id, charge.state, list(charge.job_costs)) == (g.id, "submitted", ["101"])
