"""Leases, the pure parts: their plans and requests on the wire, step ids, the ledger's record and how a
step is decided."""

from __future__ import annotations

from datetime import timedelta

import pytest

from rsk.errors import ProtocolError
from rsk.ledger.archive import Record
from rsk.ledger.guard import card_plan, decide_step
from rsk.ledger.models import LEDGER_SCHEMA, Card, DenyRule, Lease, Ledger, migrate, now
from rsk.ops.leases import LeaseSpec, open_request
from rsk.wire import answers
from rsk.wire.protocol import Placement, Plan, Request, b64, is_job_id
from tests.unit.test_protocol import FIELDS, parse_framed, plan_output


def with_lines(kind: str, extra: list[tuple[str, str]]) -> Plan:
    lines = [(k, b64(kind) if k == "kind" else v) for k, v in FIELDS if kind != "lease" or k != "arg"]
    return answers.plan(parse_framed(plan_output(lines + extra)))


def test_a_lease_plan_says_what_it_holds_and_runs_only_the_controller() -> None:
    plan = with_lines("lease", [("lease_open", "=dev"), ("drain_min", "=5"), ("overrun", "=clip")])
    assert plan.kind == "lease" and plan.lease_open == "dev" and plan.drain_min == 5 and plan.overrun == "clip"
    assert plan.placement == Placement(kind="slurm") and not plan.is_step  # the lease's own job runs on Slurm
    # charged at worst case for the whole allocation: 2 nodes x 2 GPUs x 90 min
    assert plan.gpu_hours == 6.0
    assert plan.commands() == ["rsk lease dev"]  # what a deny rule's command glob sees
    assert "lease dev" in plan.command


def test_a_step_plan_is_bound_to_its_lease_job() -> None:
    plan = with_lines("argv", [("lease", "=dev"), ("lease_job", "=7706")])
    assert plan.placement == Placement(kind="lease", lease="dev", job="7706") and plan.is_step
    assert plan.lease_open == "" and plan.commands() == ["python '' --lr"]


def test_a_plan_names_its_lease_and_job_together_or_neither() -> None:
    for extra in ([("lease", "=dev")], [("lease_job", "=7706")], [("lease", "=dev"), ("lease_job", "=77s06")]):
        with pytest.raises(ProtocolError, match="lease placement"):
            with_lines("argv", extra)


def test_requests_carry_the_lease_keys_only_when_set() -> None:
    plain = Request(project="p", argv=["true"]).encode().decode()
    assert "lease" not in plain and "drain_min" not in plain
    step = Request(project="p", argv=["true"], lease="dev").encode().decode()
    assert "\nlease =dev\n" in step
    opened = open_request(LeaseSpec(name="dev", nodes=2, gpus=4, time="1:00:00", drain_min=3, overrun="clip"), "p",
                          "me").encode().decode()  # fmt: skip
    for line in ("lease_open =dev", "drain_min =3", "overrun =clip", "time_min =60", "gpus =4", "nodes =2"):
        assert f"\n{line}\n" in opened
    assert "\narg " not in opened


def test_step_ids_are_job_ids() -> None:
    for good in ("123", "123_4", "7706s12"):
        assert is_job_id(good)
    for bad in ("", "s1", "12s", "1_2s3", "1s2s3", "12_", "1;2", "1 2", "0x1"):
        assert not is_job_id(bad), bad


def test_an_older_ledger_gains_an_empty_list_of_leases() -> None:
    assert migrate({"schema_version": 2, "project": "p"}) == {"schema_version": LEDGER_SCHEMA, "project": "p",
                                                              "leases": []}  # fmt: skip
    assert migrate({"schema_version": 1, "project": "p"})["schema_version"] == LEDGER_SCHEMA
    assert Ledger.model_validate(migrate({"schema_version": 2, "project": "p"})).leases == []


def lease(**kw: object) -> Lease:
    base: dict[str, object] = {"name": "dev", "target": "lab", "job_id": "7706", "request_id": "r", "plan_hash": "h",
                               "allowed_by": "grant g-1",
                               "resources": {"nodes": 2, "gpus": 4, "cpus": 4, "mem_mb": 1000,
                                             "time_min": 60}}  # fmt: skip
    return Lease.model_validate({**base, **kw})


def test_a_step_is_allowed_by_an_open_lease_of_the_same_job_only() -> None:
    plan = with_lines("argv", [("lease", "=dev"), ("lease_job", "=7706")])
    open_one = lease()
    ledger = Ledger(project="p", leases=[open_one])
    assert decide_step(ledger, "lab", plan, "r1") == ("lease", open_one.id, "")
    for other in (lease(job_id="7707"), lease(target="hpc"), lease(name="dev2"), lease(closed=now())):
        kind, rule, why = decide_step(Ledger(project="p", leases=[other]), "lab", plan, "r1")
        assert kind == "closed" and rule is None and "not open" in why
    assert decide_step(Ledger(project="p"), "lab", plan, "r1")[0] == "closed"


def test_deny_rules_win_inside_a_lease() -> None:
    plan = with_lines("argv", [("lease", "=dev"), ("lease_job", "=7706")])
    rule = DenyRule(reason="no python", command="python*")
    ledger = Ledger(project="p", leases=[lease()], deny_rules=[rule])
    assert decide_step(ledger, "lab", plan, "r1") == ("deny", rule.id, "no python")
    expired = DenyRule(reason="old", command="python*", expires=now() - timedelta(minutes=1))
    assert decide_step(Ledger(project="p", leases=[lease()], deny_rules=[expired]), "lab", plan, "r1")[0] == "lease"


def test_watch_shows_a_lease_and_its_steps_as_one_batch_paid_once() -> None:
    from rsk.ops.board import batches
    from rsk.ops.status import JobState, Status

    def job(job_id: str, rid: str, lease: str | None, gpus: int) -> JobState:
        return JobState(request_id=rid, task=None, job_id=job_id, state="succeeded", exit_code=0, signal=None,
                        elapsed_s=3600, limit_s=3600, where="", submitted="", nodes=1, cpus=1, mem_mb=1, gpus=gpus,
                        lease=lease)  # fmt: skip

    st = Status(target="lab", project="p", slurm="up", at="", jobs=[
        job("7706", "open-dev", "dev", 4), job("7706s1", "a", "dev", 1), job("7706s2", "b", "dev", 2),
        job("7800", "plain", None, 1),
    ])  # fmt: skip
    views = batches([st])
    assert [v.request_id for v in views] == ["lease dev", "plain"]
    assert [j.job_id for j in views[0].jobs] == ["7706", "7706s1", "7706s2"]
    assert views[0].gpu_hours_used == 4.0  # the lease's allocation, not its steps again


def test_a_step_is_undecided_unless_the_ledger_allowed_its_id_and_request_once() -> None:
    from rsk.ledger.guard import StepBooks
    from rsk.ledger.models import LeaseStep

    def undecided_step(ledger: Ledger, target: str, lease: str, job_id: str, request_id: str, starts: int) -> str:
        return StepBooks(ledger, target).undecided(lease, job_id, request_id, starts)

    allowed = LeaseStep(job_id="7706s3", request_id="r1", plan_hash="h")
    ledger = Ledger(project="p", leases=[lease(steps=[allowed.model_dump()]), lease(job_id="7800", steps=[])])
    assert undecided_step(ledger, "lab", "dev", "7706s3", "r1", 1) == ""
    assert undecided_step(ledger, "lab", "dev", "7706s3", "r1", 0) == ""  # queued, not started yet
    assert undecided_step(ledger, "lab", "dev", "7706", "r", 0) == ""  # the lease's own job
    assert "started 2 times" in undecided_step(ledger, "lab", "dev", "7706s3", "r1", 2)
    for job, rid, where in (("7706s9", "r1", "lab"), ("7706s3", "evil", "lab"), ("7800s1", "r1", "lab")):
        assert "no step the ledger allowed" in undecided_step(ledger, where, "dev", job, rid, 1), (job, rid)
    assert "no step" in undecided_step(ledger, "hpc", "dev", "7706s3", "r1", 1)  # another target's lease
    # a lease opened before the ledger recorded steps cannot tell: nothing is flagged
    flat = {k: v for k, v in lease().model_dump(mode="json", exclude={"steps"}).items() if k != "resources"}
    old = Ledger.model_validate(migrate({"schema_version": 4, "project": "p",
                                         "leases": [{**flat, **lease().resources.model_dump()}]}))  # fmt: skip
    assert old.leases[0].steps is None
    assert undecided_step(old, "lab", "dev", "7706s9", "evil", 1) == ""


def test_a_schema_6_ledger_loads_and_keeps_its_numbers() -> None:
    """Schema 7 nests a lease's shape in `resources`; a card keeps the plan it showed, numbers and all."""
    card_plan = {"target": "lab", "cluster": "c", "user": "u", "command": "true", "argv": ["true"], "kind": "argv",
                 "workdir": "/", "partition": "gpu", "account": "", "qos": "", "nodes": 2, "cpus": 3, "mem_mb": 500,
                 "gpus": 4, "time_min": 90, "gpu_hours": 12.0, "cpu_hours": 9.0, "estimate_start": "now",
                 "policy_verdict": "allow", "policy_reasons": []}  # fmt: skip
    old_lease = {"id": "l-1", "name": "dev", "target": "lab", "job_id": "7706", "request_id": "r", "plan_hash": "h",
                 "allowed_by": "grant g-1", "nodes": 2, "gpus": 4, "cpus": 3, "mem_mb": 500, "time_min": 90,
                 "steps": []}  # fmt: skip
    raw = {"schema_version": 6, "project": "p", "leases": [old_lease],
           "cards": [{"id": "c-1", "plan_hash": "h", "request_id": "r", "requester": "me", "target": "lab",
                      "request": {}, "plan": card_plan}]}  # fmt: skip
    ledger = Ledger.model_validate(migrate(raw))
    assert ledger.schema_version == LEDGER_SCHEMA
    shape = ledger.leases[0].resources
    assert (shape.nodes, shape.gpus, shape.cpus, shape.mem_mb, shape.time_min) == (2, 4, 3, 500, 90)
    assert shape.gpu_hours == 12.0  # 2 nodes x 4 GPUs x 1.5 h
    card = ledger.cards[0].plan
    assert (card.gpu_hours, card.cpu_hours) == (12.0, 9.0)
    assert card.resources == shape
    assert migrate(raw) == migrate(migrate(raw))  # once is enough


def test_a_lease_card_filed_before_0_5_names_the_lease_it_opens() -> None:
    """Cards' plans of schema < 10 named the lease a lease card opens `lease`: they load, as `lease_open`, from the
    ledger and from the archive."""
    plan = {"target": "lab", "cluster": "c", "user": "u", "command": "lease dev", "argv": [], "kind": "lease",
            "workdir": "/", "partition": "gpu", "account": "", "qos": "", "nodes": 2, "cpus": 3, "mem_mb": 500,
            "gpus": 4, "time_min": 90, "gpu_hours": 12.0, "cpu_hours": 9.0, "estimate_start": "now",
            "policy_verdict": "allow", "policy_reasons": [], "lease": "dev", "drain_min": 5,
            "overrun": "clip"}  # fmt: skip
    old_card = {"id": "c-1", "plan_hash": "h", "request_id": "r", "requester": "me", "target": "lab", "request": {},
                "plan": plan}  # fmt: skip
    ledger = Ledger.model_validate(migrate({"schema_version": 9, "project": "p", "cards": [old_card]}))
    card = ledger.cards[0].plan
    assert ledger.schema_version >= 10 and card.lease_open == "dev"
    archived = Record(kind="card", ledger_schema=9, entry=old_card).current()
    assert Card.model_validate(archived).plan.lease_open == "dev"
    assert card.lease_terms() == "its steps share it; none starts in its last 5 min; a longer step is clipped to " \
        "what is left"  # fmt: skip
    written = ledger.model_dump(mode="json")["cards"][0]["plan"]
    assert written["lease_open"] == "dev" and "lease" not in written
    opened = with_lines("lease", [("lease_open", "=dev"), ("drain_min", "=5"), ("overrun", "=clip")])
    assert card_plan("lab", opened).lease_open == "dev"
