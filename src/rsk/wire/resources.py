"""What a job asks of Slurm, and what that costs: the one place that turns a shape and a time into
GPU-hours and CPU-hours.

A task plan is one (`rsk.wire.protocol.TaskPlan`); the ledger's decision facts, a job's state and the
budgets read theirs through it. Worst case: every GPU and CPU of every node for the whole time.
"""

from __future__ import annotations

from collections.abc import Iterable

from pydantic import BaseModel, ConfigDict

SECONDS_PER_HOUR = 3600


class Resources(BaseModel):
    """One job's shape: nodes, and per node CPUs, memory and GPUs, for a time limit in minutes."""

    model_config = ConfigDict(extra="forbid")

    nodes: int
    cpus: int  # per node
    mem_mb: int  # per node
    gpus: int  # per node
    time_min: int

    @property
    def total_gpus(self) -> int:
        return self.gpus * self.nodes

    @property
    def total_cpus(self) -> int:
        return self.cpus * self.nodes

    def gpu_hours_over(self, seconds: float) -> float:
        """Every GPU of every node for `seconds` (never less than nothing)."""
        return self.total_gpus * max(seconds, 0) / SECONDS_PER_HOUR

    def cpu_hours_over(self, seconds: float) -> float:
        return self.total_cpus * max(seconds, 0) / SECONDS_PER_HOUR

    @property
    def gpu_hours(self) -> float:
        """Worst case: every GPU on every node for the whole time limit."""
        return self.gpu_hours_over(self.time_min * 60)

    @property
    def cpu_hours(self) -> float:
        return self.cpu_hours_over(self.time_min * 60)

    def times(self, count: int) -> Hours:
        """The worst case of `count` jobs of this shape (an array, a batch of equal tasks)."""
        return Hours(gpu=self.gpu_hours * max(count, 0), cpu=self.cpu_hours * max(count, 0))


class Hours(BaseModel):
    """GPU-hours and CPU-hours together (a worst case, a use, a budget's share)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    gpu: float = 0.0
    cpu: float = 0.0


def worst(jobs: Iterable[Resources]) -> Hours:
    """The worst case of several jobs (a plan's tasks): the sum of each one's."""
    shapes = list(jobs)
    return Hours(gpu=sum(j.gpu_hours for j in shapes), cpu=sum(j.cpu_hours for j in shapes))


def largest(jobs: Iterable[Resources]) -> Resources:
    """Each field's largest value over the jobs: what a rule or a grant's per-job cap compares with."""
    shapes = list(jobs)
    if not shapes:
        raise ValueError("no job to take the largest of")
    return Resources(
        nodes=max(j.nodes for j in shapes),
        cpus=max(j.cpus for j in shapes),
        mem_mb=max(j.mem_mb for j in shapes),
        gpus=max(j.gpus for j in shapes),
        time_min=max(j.time_min for j in shapes),
    )
