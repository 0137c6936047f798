"""Waiting for work: a card's decision and launch, then jobs until every one has ended (or a timeout).

`rsk wait` answers in one of three ways, told apart by its status and exit code: `done` (every job
ended, each with its final state and exit code: 0 when every one succeeded, 11 when not, with
`all_succeeded` saying the same), `blocked` (12; a job can never start as asked, by Slurm's pending
reason, and every other one has ended or is blocked too: waiting changes nothing), `running` (10; call
again), `pending` (4; the card still waits for a human). The default timeout (100 s) stays below Claude
Code's 2-minute Bash limit.
"""

from __future__ import annotations

import time
from typing import Literal

from pydantic import BaseModel, ConfigDict

from rsk.cluster.remote import remote_for
from rsk.errors import PendingApproval, UsageError, not_ours
from rsk.ops.launch import LaunchResult
from rsk.ops.status import (
    ChainProgress,
    JobState,
    attempt_of,
    chains_of,
    check_states,
    count,
    of_request,
    outcome,
    rows,
    status_call,
    summarise,
)
from rsk.ops.voice import CLI, Voice
from rsk.wire.states import FINAL, SUMMARY_ROWS

DEFAULT_TIMEOUT = 100.0


class WaitResult(BaseModel):
    model_config = ConfigDict(extra="forbid")

    schema_version: int = 1
    status: Literal["done", "blocked", "running", "pending", "open"]  # open: a lease the card opened runs
    target: str | None
    project: str
    card_id: str | None = None
    request_id: str | None = None
    launch: LaunchResult | None = None  # a card that was approved while waiting: its launch
    jobs: list[JobState] = []  # with a summary (a big batch's default), only those that need attention
    counts: dict[str, int] = {}  # jobs per state: every job waited for, listed or not
    omitted: int = 0  # jobs waited for that `jobs` does not list (a summary, a state filter)
    summary: bool = False  # `jobs` lists only the jobs that need attention (not succeeded, running or pending)
    all_succeeded: bool | None = None  # done: whether every job succeeded (exit 11 when not); else None
    chain: ChainProgress | None = None  # a chain's: links done of all, run time used of its budget (rsk extend)
    waited_s: float = 0.0
    hint: str = ""
    # pending, as a launch that waits answers it: what happened, the sentence for the human, the agent's next step
    message: str = ""
    tell_human: str = ""
    next: str = ""


def _hint(jobs: list[JobState], done: bool, voice: Voice = CLI) -> str:
    stuck = [j for j in jobs if j.state == "blocked"]
    if stuck:
        first = stuck[0]
        return (
            f"job {first.job_id} can never start as asked: Slurm says {first.where}; cancel it "
            f"({voice.cancel(first.job_id)}) and launch within the limits {voice.info()} shows"
        )
    if not done:
        return f"still running: {voice.again()}"
    ends = outcome(jobs)  # a chain is judged by its last link that ran
    bad = [j for j in ends if j.state != "succeeded"]
    if not bad:
        return ""
    first = bad[0]
    if first.link:
        chain = attempt_of(first.request_id)[0]
        more = f"{voice.extend(chain)} (D: a new total run time) goes on from there"
        mine = [j for j in jobs if j.link and attempt_of(j.request_id)[0] == chain]
        if first.state == "stopped" and not any(j.exit_code == 75 for j in mine):
            return (
                f"the chain stopped at link {first.link} ({first.where.strip('()')}) and no link yielded (exit 75): "
                "each was stopped at its limit; before extending, make the program save a checkpoint in "
                f"RSK_WORK_DIR and exit 75 on SIGUSR1 ({voice.logs(first.job_id)} shows its last output); if the "
                "command runs through a shell (sh -c '...'), `exec` the program, or the shell dies of the signal"
            )
        if first.state == "stopped":
            return (
                f"the chain stopped at link {first.link} ({first.where.strip('()')}) without finishing; its "
                f"checkpoints are in its RSK_WORK_DIR; {voice.logs(first.job_id)} shows its last output; {more}"
            )
        if first.state == "cancelled":
            return f"the chain was cancelled at link {first.link}; its checkpoints are in its RSK_WORK_DIR; {more}"
        return (
            f"the chain ended {first.state} at link {first.link}; see {voice.logs(first.job_id, 'stderr')}; a "
            "chain is not retried: once fixed, launch a new one (a new request id starts a new, empty RSK_WORK_DIR)"
        )
    retry = ""
    if any(
        j.task and not j.link for j in ends
    ):  # a batch or a workflow: what failed is retried, what succeeded is kept
        retry = (
            f"; once fixed, {voice.retry(attempt_of(first.request_id)[0])} runs them again "
            f"(add {voice.code_option()} to run your changed files)"
        )
    if all(j.state == "cancelled" for j in bad):  # a cancel (rsk cancel, or in Slurm): nothing to fix
        again = f"; if you still need them, {voice.retry(attempt_of(first.request_id)[0])} runs them again" \
            if retry else ""  # fmt: skip
        return f"{len(bad)} of {len(ends)} were cancelled before they ended (none failed){again}"
    return (
        f"{len(bad)} of {len(ends)} did not succeed; see {voice.logs(first.job_id, 'stderr')} "
        f"(and {voice.status()} for every state){retry}"
    )


def _select(jobs: list[JobState], job: str | None, request_id: str | None) -> list[JobState]:
    if job is not None:
        return [j for j in jobs if j.job_id == job]
    return of_request(jobs, request_id or "")


def wait_jobs(
    target: str, project: str, *, job: str | None = None, request_id: str | None = None, timeout: float | None,
    poll: float = 2.0, started: float | None = None, voice: Voice = CLI, states: list[str] | None = None,
    summary: bool | None = None, lease: str = "",
) -> WaitResult:  # fmt: skip
    """Poll the project's status over one connection until the selected jobs have all ended (`lease`: until that
    lease's job runs, `open`, and steps can be queued into it). The answer lists the jobs in `states`, or with a
    summary (None: when more than SUMMARY_ROWS are waited for) those that need attention; its counts, hint and
    verdict are every job's."""
    states = check_states(states)
    if (job is None) == (request_id is None):
        raise UsageError("wait for one thing: a JOB id, a --request-id or a --batch")
    t0 = started if started is not None else time.monotonic()
    deadline = None if not timeout else t0 + timeout
    with remote_for(target) as remote:
        while True:
            st, _ = status_call(remote, target, project)
            chosen = _select(st.jobs, job, request_id)
            if not chosen:
                if job is not None:
                    raise not_ours(job, project, target)
                what = f"request {request_id}"
                raise UsageError(
                    f"no rsk {what} in project {project} on {target}",
                    "`rsk status` lists the project's jobs; a pending launch has a card id instead",
                    code="not-found",
                )
            done = all(j.state in FINAL for j in chosen)
            blocked = not done and all(j.state in FINAL or j.state == "blocked" for j in chosen)
            opened = bool(lease) and not done and not blocked and all(j.state == "running" for j in chosen)
            now = time.monotonic()
            if done or blocked or opened or (deadline is not None and now >= deadline):
                brief = summarise(summary, chosen)
                shown = rows(chosen, states=states, summary=brief)
                return WaitResult(
                    status="done" if done else "blocked" if blocked else "open" if opened else "running",
                    target=target,
                    project=project,
                    request_id=request_id,
                    jobs=shown,
                    counts=count(chosen),
                    omitted=len(chosen) - len(shown),
                    summary=brief,
                    all_succeeded=all(j.state == "succeeded" for j in outcome(chosen)) if done else None,
                    chain=next(iter(chains_of(target, chosen)), None),
                    waited_s=round(now - t0, 1),
                    hint=(
                        f"lease {lease} is open: queue steps with {voice.step(lease)}; {voice.close(lease)} ends it"
                        if opened
                        else _hint(chosen, done or blocked, voice)
                    ),
                )
            time.sleep(min(poll, max((deadline or now + poll) - now, 0.1)))
            poll = min(poll * 1.5, 10.0)


def wait_card(card_id: str, project: str | None, timeout: float | None, voice: Voice = CLI,
              states: list[str] | None = None, summary: bool | None = None) -> WaitResult:  # fmt: skip
    """Wait for a human's decision on a card; once approved, launch it, then wait for its jobs. While a card
    waits (still, or anew: approved, but its plan changed and a new card was filed), the answer is `pending`
    with the card that waits, the sentence for the human and the next step, as a launch that waits has them."""
    from rsk.ledger.cards import card_request, find_card, store_of_card, tell_human, wait_for_card
    from rsk.ops.launch import launch

    t0 = time.monotonic()
    store = store_of_card(card_id, project)

    def pending(waiting: str, message: str) -> WaitResult:
        filed = find_card(store.load(), waiting, store.archive)  # what the card binds: its target and request
        return WaitResult(
            status="pending", target=filed.target, project=store.project, card_id=waiting,
            request_id=filed.request_id, waited_s=round(time.monotonic() - t0, 1),
            hint=f"the card still waits for a human; {voice.wait(card=waiting)} again once they answer",
            message=message, tell_human=tell_human(waiting), next=voice.wait(card=waiting).strip("`"),
        )  # fmt: skip

    try:
        card = wait_for_card(store, card_id, timeout)
    except PendingApproval:
        return pending(card_id, f"card {card_id} is still pending")
    try:
        result = launch(card.target, card_request(store, card))
    except PendingApproval as again:  # approved, but the cluster now plans something else: say what changed
        new = str(again.details.get("card_id") or card_id)
        if new != card_id:
            other = find_card(store.load(), new)
            if other.plan_hash == card.plan_hash:  # the same plan: its approval was spent (or ran out) meanwhile
                again.message += f"; card {card_id} was approved, but its approval no longer allows this plan"
            else:
                changed = [k for k, v in card.plan.model_dump().items()
                           if k != "estimate_start" and getattr(other.plan, k) != v]  # fmt: skip
                what = ", ".join(changed) or "the cluster's policy or rsk's programs"
                again.message += (
                    f"; card {card_id} was approved, but the plan changed since ({what}): a human decides anew"
                )
        return pending(new, again.message)
    left = None if not timeout else max(timeout - (time.monotonic() - t0), 0.001)
    lease = card.plan.lease_open  # a lease is ready once it runs, not once it ends
    waited = wait_jobs(card.target, store.project, request_id=result.request_id, timeout=left, started=t0,
                       voice=voice, states=states, summary=summary, lease=lease)  # fmt: skip
    most = 0 if summary is False else SUMMARY_ROWS  # a big batch's first tasks' jobs, as its launch answers
    return waited.model_copy(update={"card_id": card_id, "launch": result.brief(most)})
