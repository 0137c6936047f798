"""A sweep of 10,000 tasks is one card whose worst case is the whole sweep's, and the ledger stays small: the card
lists the first tasks, their shapes and a digest of all, and keeps every task in a file beside the ledger, which is
checked before it is shown or launched (docs/adr/0060). The guard on a real ledger file; no cluster."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest

from rsk.errors import PendingApproval, StateError
from rsk.ledger.cards import approve, card_request, find_card, whole
from rsk.ledger.guard import authorize_in
from rsk.ledger.models import CARD_TASKS, FILE, JobCost
from rsk.ledger.store import Store
from rsk.wire.protocol import Plan, Request, TaskPlan, TaskSpec

PROJECT = "sweep"
AT = datetime(2026, 12, 7, tzinfo=UTC)
N = 10_000


def _sweep(n: int = N, gpus: int = 1) -> tuple[Request, Plan]:
    keys = [f"lr{i:05d}" for i in range(n)]
    request = Request(
        project=PROJECT,
        request_id="sweep-1",
        requester="agent",
        max_running=50,
        gpus=gpus,
        time_min=30,
        tasks=[TaskSpec(key=k, argv=["python", "train.py", f"--seed={i}"]) for i, k in enumerate(keys)],
    )
    tasks = [TaskPlan(key=k, nodes=1, cpus=1, mem_mb=1000, gpus=gpus, time_min=30 if i % 10 else 60,
                      argv=["python", "train.py", f"--seed={i}"]) for i, k in enumerate(keys)]  # fmt: skip
    plan = Plan(hash="h" * 64, cluster="c", user="u", root="/r", hostkey="k", scripts="s", policy="p", project=PROJECT,
                name="job", kind="batch", workdir="/w", path="", partition="gpu", account="", qos="", nodes=1, cpus=1,
                mem_mb=1000, gpus=gpus, time_min=60, env=[], argv=[], tasks=tasks, max_running=50,
                at_once=50)  # fmt: skip
    return request, plan


def _file(request: Request, plan: Plan) -> str:
    store = Store(PROJECT)
    with store.transaction() as ledger:
        verdict = authorize_in(store, ledger, "lab", plan, request, AT)
    assert isinstance(verdict, PendingApproval), verdict
    return str(verdict.details["card_id"])


def test_ten_thousand_tasks_are_one_card_whose_worst_case_is_the_whole_sweep() -> None:
    request, plan = _sweep()
    card_id = _file(request, plan)
    store = Store(PROJECT)
    ledger = store.load()
    assert [c.id for c in ledger.cards] == [card_id]  # one card for the sweep
    card = find_card(ledger, card_id)
    p = card.plan
    # the worst case is every task's, for its whole limit: 9,000 of 30 min and 1,000 of 60 min, a GPU each
    assert p.jobs == N and p.gpu_hours == pytest.approx(9000 * 0.5 + 1000 * 1.0) == plan.gpu_hours
    assert p.max_running == 50 and p.gpus == 1 and p.time_min == 60
    assert [(s.time_min, s.tasks) for s in p.shapes] == [(30, 9000), (60, 1000)]
    # the card lists the first tasks; the file beside the ledger holds them all, as asked and as planned
    assert len(p.tasks) == CARD_TASKS and [t.key for t in p.tasks[:2]] == ["lr00000", "lr00001"]
    assert card.tasks_file and "tasks" not in card.request and p.tasks_digest
    assert store.path.stat().st_size < 200_000  # kilobytes, not the megabytes of 10,000 tasks
    assert len(card_request(store, card).tasks) == N
    shown = whole(store, card)
    assert len(shown.plan.tasks) == N and shown.plan.tasks[-1].key == "lr09999"
    # the approval names the whole plan's hash: it lets that launch run, every task of it
    approve(store, card_id, "human")
    assert find_card(store.load(), card_id).status == "approved"


def test_a_tasks_file_changed_beside_the_ledger_is_refused_never_shown_or_launched() -> None:
    request, plan = _sweep(n=CARD_TASKS + 1)
    card_id = _file(request, plan)
    store = Store(PROJECT)
    card = find_card(store.load(), card_id)
    path = store.dir / "cards" / f"{card.tasks_file}.json"
    doc = json.loads(path.read_text())
    doc["request_tasks"][-1]["argv"] = ["rm", "-rf", "/"]  # not what the human is shown the digest of
    path.write_text(json.dumps(doc))
    with pytest.raises(StateError, match="changed"):
        card_request(store, card)
    with pytest.raises(StateError, match="changed"):
        whole(store, card)
    path.unlink()
    with pytest.raises(StateError, match="cannot be read"):
        card_request(store, card)


def test_a_small_batch_keeps_every_task_on_its_card_as_before() -> None:
    request, plan = _sweep(n=CARD_TASKS)
    card_id = _file(request, plan)
    card = find_card(Store(PROJECT).load(), card_id)
    assert not card.tasks_file and len(card.plan.tasks) == CARD_TASKS and len(card.request["tasks"]) == CARD_TASKS  # type: ignore[arg-type]


def test_a_jobs_cost_in_the_ledgers_file_holds_only_what_is_not_its_default() -> None:
    cost = JobCost(gpu_hours_worst=0.5, cpu_hours_worst=0.5)
    assert json.loads(cost.model_dump_json(context=FILE)) == {"gpu_hours_worst": 0.5, "cpu_hours_worst": 0.5}
    assert JobCost.model_validate_json(cost.model_dump_json(context=FILE)) == cost
    ended = cost.model_copy(update={"gpu_hours_used": 0.0, "cpu_hours_used": 0.25, "run_s": 900, "never_ran": True})
    assert JobCost.model_validate_json(ended.model_dump_json(context=FILE)) == ended
    assert set(json.loads(cost.model_dump_json())) == set(JobCost.model_fields)  # answers keep every key
