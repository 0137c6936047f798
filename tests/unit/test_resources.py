"""The one resource shape and its arithmetic: worst cases, a plan's tasks, what a job used and may still use."""

from __future__ import annotations

import pytest

from rsk.ledger.guard import used
from rsk.ledger.models import JobCost
from rsk.ops.status import JobState
from rsk.wire.protocol import TaskPlan
from rsk.wire.resources import Hours, Resources, largest, worst

TWO_NODES = Resources(nodes=2, cpus=4, mem_mb=1000, gpus=3, time_min=90)


def test_worst_case_is_every_gpu_and_cpu_of_every_node_for_the_whole_limit() -> None:
    assert TWO_NODES.total_gpus == 6 and TWO_NODES.total_cpus == 8
    assert TWO_NODES.gpu_hours == pytest.approx(9.0)  # 2 nodes x 3 GPUs x 1.5 h
    assert TWO_NODES.cpu_hours == pytest.approx(12.0)


def test_a_minute_is_kept_exactly_not_rounded_to_hours() -> None:
    one = Resources(nodes=1, cpus=1, mem_mb=1, gpus=1, time_min=1)
    assert one.gpu_hours == pytest.approx(1 / 60)
    assert one.gpu_hours_over(1) == pytest.approx(1 / 3600)


def test_a_time_below_nothing_counts_nothing() -> None:
    assert TWO_NODES.gpu_hours_over(-30) == 0.0 and TWO_NODES.cpu_hours_over(-30) == 0.0


def test_an_array_of_equal_tasks_is_count_times_one() -> None:
    four = TWO_NODES.times(4)
    assert (four.gpu, four.cpu) == pytest.approx((36.0, 48.0))
    assert TWO_NODES.times(0) == Hours()


def test_a_batch_sums_its_tasks_and_compares_its_largest() -> None:
    small = TaskPlan(key="a", nodes=1, cpus=8, mem_mb=4000, gpus=0, time_min=30, argv=["a"])
    big = TaskPlan(key="b", nodes=2, cpus=1, mem_mb=500, gpus=2, time_min=60, argv=["b"])
    total = worst([small, big])
    assert total.gpu == pytest.approx(4.0)  # 0 + 2 x 2 x 1 h
    assert total.cpu == pytest.approx(4.0 + 2.0)  # 8 x 0.5 h + 2 x 1 x 1 h
    assert largest([small, big]) == Resources(nodes=2, cpus=8, mem_mb=4000, gpus=2, time_min=60)
    with pytest.raises(ValueError):
        largest([])


def _job(
    state: str, elapsed_s: int | None, limit_s: int | None, nodes: int | None = 2, gpus: int | None = 3
) -> JobState:
    return JobState(request_id="r", task=None, job_id="1", state=state, exit_code=None, signal=None,  # type: ignore[arg-type]
                    elapsed_s=elapsed_s, limit_s=limit_s, where="", submitted="", nodes=nodes, gpus=gpus)  # fmt: skip


def test_a_job_state_counts_through_the_same_shape() -> None:
    running = _job("running", elapsed_s=1800, limit_s=5400)
    assert running.resources.total_gpus == 6
    assert running.gpu_hours_used == pytest.approx(3.0)  # 6 GPUs x 0.5 h
    assert running.gpu_hours_reserved == pytest.approx(6.0)  # 6 GPUs x the hour left
    assert _job("succeeded", elapsed_s=1800, limit_s=5400).gpu_hours_reserved == 0.0
    over = _job("running", elapsed_s=6000, limit_s=5400)
    assert over.gpu_hours_reserved == 0.0  # past its limit: nothing more, never less than nothing
    unknown = _job("pending", elapsed_s=None, limit_s=None, nodes=None, gpus=None)
    assert unknown.gpu_hours_used == 0.0 and unknown.gpu_hours_reserved == 0.0


def test_an_ended_job_counts_its_share_of_the_worst_case() -> None:
    cost = JobCost(gpu_hours_worst=TWO_NODES.gpu_hours, cpu_hours_worst=TWO_NODES.cpu_hours)
    assert used(cost, (2700, 5400)) == pytest.approx((4.5, 6.0))  # half its limit
    assert used(cost, (9000, 5400)) == pytest.approx((9.0, 12.0))  # never more than the worst case
    assert used(cost, None) == pytest.approx((9.0, 12.0))  # Slurm forgot it: the whole worst case
