"""Ledger decisions (pure): precedence, scope, ceilings, budgets, expiry."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

from rsk.ledger.decide import Facts, decide, usage_by_grant
from rsk.ledger.models import Approval, Card, CardPlan, Charge, DenyRule, Grant, JobCost, Ledger, Use
from rsk.wire.resources import Resources

AT = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)
F = Facts(
    target="lab", plan_hash="h1", request_id="r1", partition="gpu", account="", qos="",
    resources=Resources(nodes=1, cpus=4, mem_mb=1024, gpus=2, time_min=60),
    commands=("python train.py",), active=0, gpu_hours=2.0, cpu_hours=4.0,
)  # fmt: skip


def ledger(**kw: object) -> Ledger:
    return Ledger(project="p", **kw)  # type: ignore[arg-type]


def test_nothing_means_ask() -> None:
    assert decide(ledger(), F, AT).kind == "ask"


def test_deny_beats_approval_and_grant() -> None:
    lg = ledger(
        deny_rules=[DenyRule(reason="no GPUs today", gpus_at_least=1)],
        approvals=[Approval(plan_hash="h1", decided_by="me")],
        grants=[Grant()],
    )
    d = decide(lg, F, AT)
    assert d.kind == "deny" and d.reason == "no GPUs today"


def test_approval_beats_grant_and_is_bound_to_the_hash() -> None:
    lg = ledger(approvals=[Approval(plan_hash="h1", decided_by="me")], grants=[Grant()])
    assert decide(lg, F, AT).kind == "approval"
    assert decide(lg, replace(F, plan_hash="h2"), AT).kind == "grant"


def test_used_up_or_expired_approval_does_not_allow() -> None:
    used = ledger(approvals=[Approval(plan_hash="h1", decided_by="me", uses_left=0)])
    expired = ledger(approvals=[Approval(plan_hash="h1", decided_by="me", expires=AT - timedelta(seconds=1))])
    assert decide(used, F, AT).kind == "ask"
    assert "is used up" in decide(used, F, AT).reason
    assert decide(expired, F, AT).kind == "ask"
    assert "expired at" in decide(expired, F, AT).reason


def test_deny_rule_conditions_all_must_match_and_expire() -> None:
    rule = DenyRule(reason="r", partition="gpu", command="*rm -rf*")
    assert decide(ledger(deny_rules=[rule]), F, AT).kind == "ask"
    assert decide(ledger(deny_rules=[rule]), replace(F, commands=("sh -c 'rm -rf /'",)), AT).kind == "deny"
    old = DenyRule(reason="r", expires=AT - timedelta(hours=1))
    assert decide(ledger(deny_rules=[old]), F, AT).kind == "ask"


def test_a_denied_card_denies_the_same_plan_again() -> None:
    plan = CardPlan(
        target="lab", cluster="c", user="u", command="x", argv=["x"], kind="argv", workdir="/", partition="gpu",
        account="", qos="", nodes=1, cpus=1, mem_mb=1, gpus=0, time_min=1, gpu_hours=0,
        cpu_hours=0, estimate_start="", policy_verdict="allow", policy_reasons=[],
    )  # fmt: skip
    card = Card(plan_hash="h1", request_id="r", requester="a", status="denied", reason="too big", target="lab",
                request={}, plan=plan)  # fmt: skip
    d = decide(ledger(cards=[card], grants=[Grant()]), F, AT)
    assert d.kind == "deny" and d.reason == "too big"


def test_grant_scope_and_ceilings_explain_why_not() -> None:
    g = Grant(targets=["other"], partitions=["cpu"], max_gpus=1, max_time_min=30)
    d = decide(ledger(grants=[g]), F, AT)
    assert d.kind == "ask" and d.closest_grant == g.id
    text = " | ".join(d.closest_why)
    assert "target lab not in other" in text
    assert "partition gpu not in cpu" in text
    assert "GPUs 2 > ceiling 1" in text
    assert "time min 60 > ceiling 30" in text


def test_budgets_count_spent_and_reserved_but_not_released() -> None:
    g = Grant(gpu_hours=5.0, jobs=3)
    charges = [
        Charge(grant_id=g.id, plan_hash="x", request_id="a", target="lab", gpu_hours=2, cpu_hours=4,
               state="submitted", job_costs={"7": JobCost(gpu_hours_worst=2, cpu_hours_worst=4)}),
        Charge(grant_id=g.id, plan_hash="y", request_id="b", target="lab", gpu_hours=2, cpu_hours=4),
        Charge(grant_id=g.id, plan_hash="z", request_id="c", target="lab", gpu_hours=9, cpu_hours=9, state="released"),
    ]  # fmt: skip
    u = usage_by_grant(charges)[g.id]
    assert u.gpu_hours == 4 and u.jobs == 2
    d = decide(ledger(grants=[g], charges=charges), F, AT)  # needs 2 GPU-h, 1 left
    assert d.kind == "ask"
    assert any("needs 2.00 GPU-h, 1.00 left" in w for w in d.closest_why)
    no_gpu = replace(F, resources=F.resources.model_copy(update={"gpus": 0}), gpu_hours=0)
    assert decide(ledger(grants=[g], charges=charges), no_gpu, AT).kind == "grant"


def test_job_budget_and_active_limit() -> None:
    g = Grant(jobs=1, max_active=2)
    spent = [Charge(grant_id=g.id, plan_hash="x", request_id="a", target="lab", gpu_hours=0, cpu_hours=0)]
    assert decide(ledger(grants=[g], charges=spent), F, AT).kind == "ask"
    assert decide(ledger(grants=[g]), replace(F, active=2), AT).kind == "ask"
    assert decide(ledger(grants=[g]), replace(F, active=1), AT).kind == "grant"
    # what to do differs: wait for the active jobs, or ask for a grant that lets the request's jobs queue together
    assert decide(ledger(grants=[g]), replace(F, active=2), AT).closest_why == ["2 jobs active, at most 2"]
    chain = decide(ledger(grants=[Grant(max_active=2)]), replace(F, jobs=3), AT)
    assert chain.kind == "ask" and chain.closest_why == ["queues 3 jobs at once (every task or link is queued "
                                                         "together, unless --max-running holds them back), at most "
                                                         "2 active"]  # fmt: skip
    # a batch whose max running keeps it within the grant's active limit: only what can run at once counts
    sweep = replace(F, jobs=10_000, at_once=2)
    assert decide(ledger(grants=[Grant(max_active=2)]), sweep, AT).kind == "grant"
    assert decide(ledger(grants=[Grant(max_active=2)]), replace(sweep, active=1), AT).closest_why == [
        "1 jobs active, at most 2"
    ]
    # a reservation the decision replaces or shares is not counted twice; any other one counts, even the
    # same request id's (a live launch of another plan still holds it)
    replaced = frozenset({spent[0].id})
    assert (
        decide(ledger(grants=[g], charges=spent), replace(F, request_id="a", replaceable=replaced), AT).kind == "grant"
    )
    assert decide(ledger(grants=[g], charges=spent), replace(F, request_id="a"), AT).kind == "ask"


def test_expired_and_revoked_grants_do_not_cover() -> None:
    expired = Grant(expires=AT - timedelta(minutes=1))
    revoked = Grant(revoked=AT - timedelta(minutes=1))
    assert decide(ledger(grants=[expired]), F, AT).closest_why[0].startswith("expired")
    assert decide(ledger(grants=[revoked]), F, AT).closest_why[0].startswith("revoked")
    assert decide(ledger(grants=[expired, revoked, Grant()]), F, AT).kind == "grant"


def test_deny_rules_see_every_task_and_the_script_text() -> None:
    rule = DenyRule(reason="no deletes", command="*rm -rf*")
    batch = replace(F, commands=("echo a", "echo b", "sh -c 'rm -rf ~'"))
    assert decide(ledger(deny_rules=[rule], grants=[Grant()]), batch, AT).kind == "deny"
    script = replace(F, commands=("#!/bin/sh\necho start\nrm -rf /data\n",))
    assert decide(ledger(deny_rules=[rule], grants=[Grant()]), script, AT).kind == "deny"


def test_qos_is_scoped_by_grants_and_matched_by_deny_rules() -> None:
    g = Grant(qos=["normal"])
    assert decide(ledger(grants=[g]), replace(F, qos="high"), AT).kind == "ask"
    assert decide(ledger(grants=[g]), replace(F, qos="normal"), AT).kind == "grant"
    rule = DenyRule(reason="no high", qos="high")
    assert decide(ledger(deny_rules=[rule], grants=[Grant()]), replace(F, qos="high"), AT).kind == "deny"


def test_a_held_use_counts_only_while_the_approval_lives() -> None:
    held = Approval(plan_hash="h1", decided_by="me", uses_left=0, uses=[Use(request_id="r1", target="lab")])
    assert decide(ledger(approvals=[held]), F, AT).kind == "approval"  # r1 holds the one use
    assert decide(ledger(approvals=[held]), replace(F, request_id="r2"), AT).kind == "ask"  # r2 does not
    expired = held.model_copy(update={"expires": AT - timedelta(seconds=1)})
    assert decide(ledger(approvals=[expired]), F, AT).kind == "ask"
    submitted = held.model_copy(update={"uses": [Use(request_id="r1", target="lab", state="submitted")]})
    assert decide(ledger(approvals=[submitted]), F, AT).kind == "ask"  # a used use allows nothing more


def test_ended_jobs_count_what_they_used_and_running_ones_their_worst_case() -> None:
    g = Grant(gpu_hours=10)
    ch = Charge(grant_id=g.id, plan_hash="x", request_id="a", target="lab", gpu_hours=8, cpu_hours=8, jobs=2,
                state="submitted", job_costs={
                    "1": JobCost(gpu_hours_worst=4, cpu_hours_worst=4, gpu_hours_used=0.5, cpu_hours_used=0.5),
                    "2": JobCost(gpu_hours_worst=4, cpu_hours_worst=4)})  # fmt: skip
    u = usage_by_grant([ch])[g.id]
    assert (u.gpu_hours_spent, u.gpu_hours_reserved, u.jobs_spent, u.jobs_reserved) == (0.5, 4, 2, 0)


def test_a_jobs_cost_is_spent_once_it_ended_and_reserved_until_then() -> None:
    from rsk.ledger.models import JobCost, tally

    t = tally([
        JobCost(gpu_hours_worst=2.0, cpu_hours_worst=4.0),  # still running: its worst case stays reserved
        JobCost(gpu_hours_worst=2.0, cpu_hours_worst=4.0, gpu_hours_used=0.5, cpu_hours_used=1.0),
        JobCost(gpu_hours_worst=1.0, cpu_hours_worst=1.0, gpu_hours_used=1.0, cpu_hours_used=1.0, at_worst=True),
    ])  # fmt: skip
    assert t == (1.5, 2.0, 2.0, 4.0, 1)
