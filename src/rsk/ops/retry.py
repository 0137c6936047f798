"""rsk retry: a new attempt of a batch's or a workflow's tasks that did not succeed, decided like any launch.

A launch with tasks keeps its request (rsk.ledger.kept), so a retry can plan the same
tasks again without the agent resending them. An attempt is a request of its own, `B.a2`, `B.a3`, ...: its own
plan, its own decision (a card unless a grant covers it) and its own journal lines; `rsk status --batch B`
shows each task's latest attempt and, in JSON, the ones before. Tasks that succeeded satisfy the needs of the
tasks retried and do not run again.
"""

from __future__ import annotations

from rsk.errors import PendingApproval, UsageError
from rsk.ledger.kept import asked, kept
from rsk.ops.launch import LaunchResult, Progress, launch
from rsk.ops.status import JobState, attempt_of, outcome, ran, status
from rsk.request.chain import MAX_LINKS, link_minutes
from rsk.request.code import CodeSnapshot
from rsk.wire.protocol import Need, Request, TaskSpec
from rsk.wire.states import FINAL

RETRIED = frozenset({"failed", "timed-out", "cancelled", "skipped"})  # what --failed takes (lost: only by name)


def choose(base: Request, latest: dict[str, JobState], named: list[str], failed: bool) -> list[TaskSpec]:
    """The tasks of the next attempt, in the batch's order: the named ones (or, with `failed`, every failed,
    timed-out, cancelled or skipped one) and the skipped tasks that need them; each keeps the needs it has
    among them (a task that succeeded is a need met)."""
    by_key = {t.key: t for t in base.tasks}
    unknown = [k for k in named if k not in by_key]
    if unknown:
        raise UsageError(
            f"batch {base.request_id} has no task {', '.join(unknown)}",
            f"`rsk status --batch {base.request_id}` lists them",
        )
    state = {k: (latest[k].state if k in latest else "lost") for k in by_key}
    if named:
        wrong = [k for k in named if state[k] not in RETRIED | {"lost"}]
        if wrong:
            raise UsageError(
                "only a task that ended without success is retried: " + ", ".join(f"{k} is {state[k]}" for k in wrong),
                f"wait for running tasks to end (`rsk wait --batch {base.request_id}`); a task that succeeded is not "
                "run again",
            )
        chosen = set(named)
    elif failed:
        chosen = {k for k, s in state.items() if s in RETRIED}
    else:
        raise UsageError("say what to retry: --task KEY (repeatable) or --failed")
    for t in base.tasks:  # in dependency order: a skipped task that needs a chosen one comes along
        if state[t.key] == "skipped" and any(n.task in chosen for n in t.needs):
            chosen.add(t.key)
    if not chosen:
        raise UsageError(f"nothing of batch {base.request_id} failed: no task to retry")
    tasks: list[TaskSpec] = []
    for t in base.tasks:
        if t.key not in chosen:
            continue
        for n in t.needs:
            if n.task in chosen or state[n.task] == "succeeded" or (n.on == "ended" and state[n.task] in FINAL):
                continue
            raise UsageError(
                f"task {t.key} needs {n.task}, which is {state[n.task]}: retry it too (--task {n.task}) or use --failed"
            )
        tasks.append(t.model_copy(update={"needs": [n for n in t.needs if n.task in chosen]}))
    return tasks


def next_attempt(base: str, seen: list[str]) -> str:
    n = max((attempt_of(r)[1] for r in seen if attempt_of(r)[0] == base), default=1)
    return f"{base}.a{n + 1}"


def plan_retry(
    project: str, batch: str, jobs: list[JobState], named: list[str], failed: bool, request_id: str | None,
    requester: str,
) -> Request:  # fmt: skip
    """The next attempt's request, from the kept request and the jobs of every attempt so far."""
    base = kept(project, attempt_of(batch)[0])
    if base.budget_min is not None:
        raise UsageError(f"{batch} is a chain: its links go on by themselves while they stop short of success",
                         "a chain is not retried: launch a new one with a new --request-id (it gets a new, empty "
                         "RSK_WORK_DIR)")  # fmt: skip
    mine = sorted((j for j in jobs if attempt_of(j.request_id)[0] == base.request_id),
                  key=lambda j: attempt_of(j.request_id)[1])  # fmt: skip
    latest = {j.task: j for j in mine if j.task}
    tasks = choose(base, latest, named, failed)
    rid = request_id or next_attempt(base.request_id, [j.request_id for j in mine])
    if attempt_of(rid)[0] != base.request_id or attempt_of(rid)[1] < 2:
        raise UsageError(f"an attempt of {base.request_id} is named {base.request_id}.aN (N from 2), not {rid}")
    return base.model_copy(update={"request_id": rid, "tasks": tasks, "requester": requester,
                                   "attempt_of": base.request_id})  # fmt: skip


def repeated(project: str, base_id: str, jobs: list[JobState], request_id: str | None) -> Request | None:
    """The attempt (or extension) that a repeated `rsk retry` (`rsk extend`) answers, as a repeated launch answers
    its jobs (an answer lost, the command run again): the one `request_id` names, else the batch's (chain's)
    latest, when it was launched from here (its kept request, as it was asked: a launch of it replays its jobs)."""
    if request_id is None:
        mine = [j.request_id for j in jobs if attempt_of(j.request_id)[0] == base_id]
        request_id = max(mine, key=lambda r: attempt_of(r)[1], default=base_id)
    prior = asked(project, request_id)
    if prior is None or base_id not in (prior.request.attempt_of, prior.request.chain_of):
        return None
    return prior.request


def again_hint(pending: PendingApproval, request: Request, again: str) -> None:
    """A pending attempt's hint names the command that repeats it (the same retry or extend finds the same card)."""
    hint = pending.hint or ""
    at = hint.find(f"launch again with --request-id {request.request_id}")
    if at >= 0:
        end = hint.find(")", at)
        pending.hint = hint[:at] + f"run `{again}` again" + (hint[end:] if end >= 0 else "")


def retry(
    target: str, project: str, batch: str, *, named: list[str], failed: bool, request_id: str | None,
    requester: str, wait: float | None = None, progress: Progress | None = None, code: CodeSnapshot | None = None,
    again: str = "",
) -> LaunchResult:  # fmt: skip
    """Plan the next attempt from the cluster's word on every attempt so far, then launch it like any launch:
    on the batch's own code snapshot, or on `code` (a fix) when given. The same retry again answers the attempt
    it made (`again`: the command, for a pending attempt's hint)."""
    request, replay = attempt_request(project, batch, status(target, project).jobs, named, failed, request_id,
                                      requester)  # fmt: skip
    try:
        return launch(target, request, wait=wait, progress=progress, code=None if replay else code)
    except PendingApproval as pending:  # the same retry again files nothing new: it finds the same card
        again_hint(pending, request, again or f"rsk retry --batch {batch}" + (" --failed" if failed else ""))
        raise


def attempt_request(
    project: str, batch: str, jobs: list[JobState], named: list[str], failed: bool, request_id: str | None,
    requester: str,
) -> tuple[Request, bool]:  # fmt: skip
    """The attempt a retry launches, and whether it is one made already: a retry repeated once its attempt was
    submitted finds nothing left to retry (the tasks it chose run, or ended, in that attempt), or names that
    attempt (-r), and answers it; else the next attempt (plan_retry)."""
    base_id = attempt_of(batch)[0]
    latest: dict[str, JobState] = {}
    for j in sorted((j for j in jobs if attempt_of(j.request_id)[0] == base_id),
                    key=lambda j: attempt_of(j.request_id)[1]):  # fmt: skip
        if j.task:
            latest[j.task] = j
    left = named or ([k for k, j in latest.items() if j.state in RETRIED] if failed else [])
    more = any(k not in latest or latest[k].state in RETRIED | {"lost"} for k in left)
    named_attempt = request_id is not None and any(j.request_id == request_id for j in jobs)
    if (named_attempt or not more) and (named or failed):
        prior = repeated(project, base_id, jobs, request_id)
        keys = {t.key for t in prior.tasks} if prior is not None else set()
        if prior is not None and attempt_of(prior.request_id)[1] > 1 and (named_attempt or set(named) <= keys):
            return prior, True
    return plan_retry(project, batch, jobs, named, failed, request_id, requester), False


def _planned(links: list[JobState]) -> int:
    """The minutes a chain's links count against a new total: each that started or may still start, at its whole
    limit (a link cancelled before it ran, or not needed: nothing)."""
    return sum((j.limit_s or 0) for j in links if ran(j)) // 60


def plan_extend(project: str, chain: str, jobs: list[JobState], budget_min: int, request_id: str | None,
                requester: str, max_links: int = MAX_LINKS, new_code: bool = False) -> Request:  # fmt: skip
    """More links for a chain that ended stopped short of success, up to a new total budget: the extra only is
    planned (and decided); the links go on numbering the chain and share its RSK_WORK_DIR. They run the code
    snapshot of the chain's last extension launched from here (else the chain's own); with `new_code`, the
    launch binds a new snapshot (a fix), in which the links run instead of any --workdir."""
    base_id = attempt_of(chain)[0]
    base = kept(project, base_id)
    if base.budget_min is None or not base.tasks:
        raise UsageError(f"{base_id} is not a chain", "`rsk extend` adds links to a chain launched with --budget")
    links = [j for j in jobs if attempt_of(j.request_id)[0] == base_id and j.link]
    if not links:
        raise UsageError(f"no link of chain {base_id} is on the cluster",
                         f"`rsk status --request-id {base_id}` lists its jobs")  # fmt: skip
    if any(j.state not in FINAL for j in links):
        raise UsageError(f"chain {base_id} has not ended", f"`rsk wait --request-id {base_id}`, then extend it")
    last = outcome(links)[0]
    if last.state not in ("stopped", "cancelled"):
        raise UsageError(f"chain {base_id} ended {last.state} at link {last.link}: only a chain that stopped short "
                         "of success (yielded, time limit, budget spent) or was cancelled goes on",
                         "a chain that succeeded is done; one that failed is fixed and launched anew (a new "
                         "--request-id starts a new, empty RSK_WORK_DIR)")  # fmt: skip
    planned = _planned(links)
    first = base.tasks[0]
    link = first.time_min or 1
    if budget_min <= planned:
        raise UsageError(f"chain {base_id} already has {planned} min of links; extend it to more than that",
                         f"e.g. rsk extend --request-id {base_id} --budget {planned + link}")  # fmt: skip
    minutes = link_minutes(budget_min - planned, link, max_links)
    if base.signal_s is not None and base.signal_s >= minutes[-1] * 60:  # a rest too short to be told: left out
        minutes = minutes[:-1] or minutes
    done = max(int(j.link.split("/")[0]) for j in links)
    keys = [f"link{done + k + 1}" for k in range(len(minutes))]
    tasks = [
        first.model_copy(update={"key": key, "time_min": m, "needs": [Need(task=b, on="stopped") for b in keys[:k]]})
        for k, (key, m) in enumerate(zip(keys, minutes, strict=True))
    ]
    rid = request_id or next_attempt(base_id, [j.request_id for j in links])
    update: dict[str, object] = {"request_id": rid, "tasks": tasks, "requester": requester,
                                 "budget_min": sum(minutes), "chain_of": base_id, "link0": done}  # fmt: skip
    # a later extension goes on with the code the last one ran (a fix sent with `--code` stays the chain's)
    latest = max(links, key=lambda j: (attempt_of(j.request_id)[1], int(j.link.split("/")[0])))
    if latest.request_id != base_id and (prior := asked(project, latest.request_id)) is not None:
        update |= {"code": prior.request.code, "workdir": prior.request.workdir}
    if new_code:
        update |= {"workdir": ""}
    return base.model_copy(update=update)


def extend(
    target: str, project: str, chain: str, *, budget_min: int, request_id: str | None, requester: str,
    max_links: int = MAX_LINKS, wait: float | None = None, progress: Progress | None = None,
    code: CodeSnapshot | None = None, again: str = "",
) -> LaunchResult:  # fmt: skip
    """Plan more links for a chain from the cluster's word on the links so far, then launch them like any launch:
    on the chain's code snapshot, or on `code` (a fix) when given, in the chain's RSK_WORK_DIR either way. The
    same extend again answers the extension it made (`again`: the command, for a pending extension's hint)."""
    request, replay = extension_request(project, chain, status(target, project).jobs, budget_min, request_id,
                                        requester, max_links, new_code=code is not None)  # fmt: skip
    try:
        return launch(target, request, wait=wait, progress=progress, code=None if replay else code)
    except PendingApproval as pending:  # the same extend again files nothing new: it finds the same card
        again_hint(pending, request, again or f"rsk extend --request-id {chain} --budget {budget_min}")
        raise


def extension_request(project: str, chain: str, jobs: list[JobState], budget_min: int, request_id: str | None,
                      requester: str, max_links: int = MAX_LINKS,
                      new_code: bool = False) -> tuple[Request, bool]:  # fmt: skip
    """The extension an extend launches, and whether it is one made already: an extend repeated once its links
    were submitted (they still run, or the chain has the budget asked already) answers the chain's latest
    extension; else new links (plan_extend)."""
    base_id = attempt_of(chain)[0]
    try:
        return plan_extend(project, chain, jobs, budget_min, request_id, requester, max_links, new_code), False
    except UsageError:
        prior = repeated(project, base_id, jobs, request_id)
        links = [j for j in jobs if attempt_of(j.request_id)[0] == base_id and j.link]
        if prior is None or not prior.chain_of or not any(j.request_id == prior.request_id for j in jobs):
            raise
        if budget_min < _planned(links):  # less than the chain has already: not the extend that made it
            raise
        return prior, True
