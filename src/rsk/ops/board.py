"""Grouping job states into batches with summaries, for status and watch, and a chain's run so far in words for
an extension's card (pure)."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from rsk.local.paths import attempt_of as attempt_of  # its one reading, with the request ids named there
from rsk.wire.states import FINAL

if TYPE_CHECKING:  # names only: the page (rsk.ui) groups jobs without loading status's imports
    from rsk.ledger.cards import ChainRun
    from rsk.ledger.models import CardPlan
    from rsk.ops.status import JobState, Status


@dataclass(frozen=True)
class ChainFacts:
    """How far a chain got: the last link that ran (K) of all its links (N), and run time used of its budget."""

    link: int
    links: int
    run_time_s: int
    budget_s: int
    left_s: int = 0  # what the links not ended may still run (0 once every link ended)
    unused_s: int = 0  # the limits of links that never started (not needed, cancelled first): not in budget_s


@dataclass
class BatchView:
    target: str
    request_id: str
    jobs: list[JobState] = field(default_factory=list)
    attempts: list[str] = field(default_factory=list)  # with_attempts: the later attempts shown with it

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
    def chain_facts(self) -> ChainFacts | None:
        """A chain's progress in numbers (None for anything else): the last link that ran of how many, and its
        run time of its budget, in seconds."""
        links = [j for j in self.jobs if j.link]
        if not links:
            return None
        # a link ran unless it was skipped, still waits, or was cancelled before it started
        ran = [j for j in links if j.state not in ("skipped", "pending") and (j.elapsed_s or j.state != "cancelled")]
        at = max(ran or links[:1], key=lambda j: int(j.link.split("/")[0]))
        used = sum(j.elapsed_s or 0 for j in links)
        # the budget counts, as `rsk extend` does, each link that started and each that still may start at its
        # whole limit (Slurm may not say a link's limit: a full link's); a link skipped or cancelled before it
        # started, nothing. What is left is what the links not ended may still run: nothing once all ended.
        full = max((j.limit_s or 0 for j in links), default=0)
        live = [j for j in links if j.state not in FINAL]
        budget = sum(j.limit_s or full for j in links if j in live or j in ran)
        left = sum(max((j.limit_s or full) - (j.elapsed_s or 0), 0) for j in live if j.state != "ending")  # it ran
        unused = sum(j.limit_s or full for j in links if j not in live and j not in ran)
        link, total = (int(x) for x in at.link.split("/"))
        return ChainFacts(link=link, links=total, run_time_s=used, budget_s=budget, left_s=left, unused_s=unused)

    @property
    def chain(self) -> str:
        """A chain's progress as the table says it: "link K/N, run time T / BUDGET"; "" otherwise."""
        c = self.chain_facts
        if c is None:
            return ""
        text = f"link {c.link}/{c.links}, run time {duration(c.run_time_s)} / {duration(c.budget_s)}"
        return text + (f" ({duration(c.unused_s)} of links never started, given back)" if c.unused_s else "")

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

    @property
    def cpu_hours_used(self) -> float:
        return sum(j.cpu_hours_used for j in self.paid)

    @property
    def cpu_hours_reserved(self) -> float:
        return sum(j.cpu_hours_reserved for j in self.paid)


def batches(statuses: list[Status]) -> list[BatchView]:
    """One view per request (a single job is a batch of one), in submission order; a lease's job and all
    its steps are one view, "lease NAME"."""
    views: dict[tuple[str, str], BatchView] = {}
    for st in statuses:
        for j in st.jobs:
            key = f"lease {j.lease}" if j.lease else j.request_id
            views.setdefault((st.target, key), BatchView(st.target, key)).jobs.append(j)
    return list(views.values())


def with_attempts(views: list[BatchView]) -> list[BatchView]:
    """Each request together with its later attempts (`rsk retry`'s B.a2, `rsk extend`'s further links), as one
    view named for the first, in the order of the first: a chain's progress then counts every link. A lease's
    view stays as it is."""
    out: dict[tuple[str, str], BatchView] = {}
    for v in views:
        base = v.request_id if v.request_id.startswith("lease ") else attempt_of(v.request_id)[0]
        merged = out.setdefault((v.target, base), BatchView(v.target, base))
        merged.jobs.extend(v.jobs)
        if v.request_id != base:
            merged.attempts.append(v.request_id)
    return list(out.values())


def duration(seconds: int | None) -> str:
    if seconds is None:
        return "-"
    d, rest = divmod(seconds, 86400)
    h, rest = divmod(rest, 3600)
    m, s = divmod(rest, 60)
    return (f"{d}-" if d else "") + f"{h:d}:{m:02d}:{s:02d}"


def extension_terms(plan: CardPlan) -> str:
    """An extension's links in words after "extends chain C" (the CLI's card and the page say the same): where
    they go on, and what they add to the chain's budget as `rsk extend --budget` counted it."""
    before = "last" if plan.link0 is None else f"{plan.link0} links"
    added = sum(t.time_min for t in plan.tasks)
    return (f": these links go on after its {before}, in its work directory; they add {added} min to its budget "
            "(the new total asked, less each link that started counted at its whole limit; a link that never "
            "started counts nothing)")  # fmt: skip


def chain_so_far(run: ChainRun, plan: CardPlan) -> tuple[str, str]:
    """An extension's card in words (the CLI's card and the page say the same): what its chain ran before it, on
    the books, and the chain's total if the extension is spent in full (every new link for its whole limit)."""

    def hours(gpu: float, cpu: float) -> str:
        return f"{gpu:.2f} GPU-h, {cpu:.2f} CPU-h"

    unknown = f" (and {run.run_unknown} link(s) whose run time Slurm did not report)" if run.run_unknown else ""
    still = (f"; {hours(run.gpu_hours_open, run.cpu_hours_open)} still reserved by links not settled"
             if run.gpu_hours_open or run.cpu_hours_open else "")  # fmt: skip
    so_far = (f"{run.links} link(s) ran (of {run.queued} queued), run time {duration(run.run_s)}{unknown}, "
              f"{hours(run.gpu_hours, run.cpu_hours)}{still}")  # fmt: skip
    more_s = sum(t.time_min for t in plan.tasks) * 60
    total = (f"{run.links + plan.jobs} links, run time {duration(run.run_s + more_s)}, "
             + hours(run.gpu_hours + run.gpu_hours_open + plan.gpu_hours, run.cpu_hours + run.cpu_hours_open
                     + plan.cpu_hours))  # fmt: skip
    return so_far, total
