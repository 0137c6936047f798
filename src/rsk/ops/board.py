"""Grouping job states into batches with summaries, for status and watch (pure)."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # names only: the page (rsk.ui) groups jobs without loading status's imports
    from rsk.ops.status import JobState, Status


@dataclass
class BatchView:
    target: str
    request_id: str
    jobs: list[JobState] = field(default_factory=list)

    @property
    def kind(self) -> str:
        """What the request is: "lease" (its job and its steps), "chain", "workflow", "batch" or "job"."""
        if self.request_id.startswith("lease "):
            return "lease"
        if any(j.link for j in self.jobs):
            return "chain"
        if any(j.needs for j in self.jobs):
            return "workflow"
        return "batch" if len(self.jobs) > 1 or any(j.task for j in self.jobs) else "job"

    @property
    def counts(self) -> Counter[str]:
        return Counter(j.state for j in self.jobs)

    @property
    def levels(self) -> list[Counter[str]]:
        """A workflow's tasks by level (rsk.request.dag.levels), each level's count per state; [] for a batch."""
        if not any(j.needs for j in self.jobs):
            return []
        from rsk.request.dag import levels

        state = {j.task: j.state for j in self.jobs if j.task}
        tiers = levels({j.task: [k for k in j.needs if k in state] for j in self.jobs if j.task})
        return [Counter(state[k] for k in keys) for keys in tiers]

    @property
    def chain(self) -> str:
        """A chain's progress: the last link that ran of how many, and its run time of its budget; "" otherwise."""
        links = [j for j in self.jobs if j.link]
        if not links:
            return ""
        ran = [j for j in links if j.state != "skipped" and j.state != "pending"] or links[:1]
        at = max(ran, key=lambda j: int(j.link.split("/")[0]))
        used = sum(j.elapsed_s or 0 for j in links)
        budget = sum(j.limit_s or 0 for j in links)
        return f"link {at.link}, run time {duration(used)} / {duration(budget)}"

    @property
    def paid(self) -> list[JobState]:
        """The jobs that hold an allocation of their own: a lease's steps use the lease's."""
        return [j for j in self.jobs if j.placement.kind == "slurm"]

    @property
    def gpu_hours_used(self) -> float:
        return sum(j.gpu_hours_used for j in self.paid)

    @property
    def gpu_hours_reserved(self) -> float:
        return sum(j.gpu_hours_reserved for j in self.paid)


def batches(statuses: list[Status]) -> list[BatchView]:
    """One view per request (a single job is a batch of one), in submission order; a lease's job and all
    its steps are one view, "lease NAME"."""
    views: dict[tuple[str, str], BatchView] = {}
    for st in statuses:
        for j in st.jobs:
            key = f"lease {j.lease}" if j.lease else j.request_id
            views.setdefault((st.target, key), BatchView(st.target, key)).jobs.append(j)
    return list(views.values())


def duration(seconds: int | None) -> str:
    if seconds is None:
        return "-"
    d, rest = divmod(seconds, 86400)
    h, rest = divmod(rest, 3600)
    m, s = divmod(rest, 60)
    return (f"{d}-" if d else "") + f"{h:d}:{m:02d}:{s:02d}"
