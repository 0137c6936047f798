"""Steps share their lease's nodes: how many run side by side, the warning when memory or CPUs leave GPUs idle,
and what a queued step waits for."""

from __future__ import annotations

from rsk.ops.stepfit import Shape, fit_warning, side_by_side, waits_for

NODE = Shape(cpus=2, mem_mb=1024, gpus=2)


def test_the_scarcest_resource_bounds_how_many_steps_run_at_once() -> None:
    assert side_by_side(NODE, Shape(1, 1024, 1)) == (1, "memory")
    assert side_by_side(NODE, Shape(2, 100, 1)) == (1, "CPUs")
    assert side_by_side(NODE, Shape(1, 400, 1)) == (2, "GPUs")
    assert side_by_side(NODE, Shape(0, 0, 0)) == (0, "")


def test_a_step_whose_memory_leaves_gpus_idle_is_warned_with_a_shape_that_does_not() -> None:
    said = fit_warning("dev", NODE, 1, Shape(1, 1024, 1))
    assert said is not None
    assert "at most 1 such step(s) run at once (bounded by its memory)" in said
    assert "1 GPU(s) sit idle" in said and "--cpus 1 --mem 512M" in said
    assert fit_warning("dev", NODE, 2, Shape(1, 1024, 1)) is not None  # per node, on every node
    assert fit_warning("dev", NODE, 1, Shape(1, 512, 1)) is None
    assert fit_warning("dev", NODE, 1, Shape(2, 1024, 2)) is None  # it takes every GPU anyway
    assert fit_warning("dev", NODE, 1, Shape(1, 1024, 0)) is None  # no GPU to leave idle


def test_a_queued_step_says_what_the_running_steps_hold() -> None:
    full = {"n1": Shape(1, 1024, 1)}
    assert waits_for(Shape(1, 1024, 1), NODE, 1, full) == (
        "it asks 1024 MB of memory (0 of 1024 free) while the lease's other steps run"
    )
    assert waits_for(Shape(1, 512, 1), NODE, 1, {"n1": Shape(1, 512, 1)}) == ""  # it fits: it starts next
    assert waits_for(Shape(1, 1024, 1), NODE, 2, full) == ""  # the lease's other node runs nothing
    assert "2 GPUs (1 of 2 free)" in waits_for(Shape(1, 10, 2), NODE, 1, {"n1": Shape(1, 10, 1)})
