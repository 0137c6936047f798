"""Long work as a chain of links (pure): one command under a run-time budget, split into links that each fit a
time limit, queued up front as tasks of one plan (docs/long-work.md, ADR 0033).

Link k needs every earlier link to have *stopped* (Slurm's afternotok): a link that yields (exit 75) or is
signalled at its limit lets the next one start; a link that succeeds or fails ends the chain, and Slurm
removes the later links before they allocate anything (--kill-on-invalid-dep). Each link needs all the links
before it, not only the last: a link Slurm removed counts as ended not-ok, and would start the one after it.
"""

from __future__ import annotations

from rsk.errors import UsageError
from rsk.wire.protocol import Need, TaskSpec

MAX_LINKS = 100  # a chain's links, whatever --max-links says


def link_minutes(budget_min: int, time_min: int, max_links: int) -> list[int]:
    """Full links of `time_min`, then one shorter link with the rest: never more than the budget in all."""
    if time_min < 1 or budget_min < 1:
        raise UsageError("a chain's budget and link time are at least one minute")
    full, rest = divmod(budget_min, time_min)
    links = [time_min] * full + ([rest] if rest else [])
    limit = min(max_links, MAX_LINKS)
    if len(links) > limit:
        more = "" if limit == MAX_LINKS else ", or raise --max-links"
        raise UsageError(
            f"a budget of {budget_min} min in links of {time_min} min is {len(links)} links; at most {limit}",
            f"ask for longer links (--time) or a smaller budget{more}",
        )
    return links


def _m_s(seconds: int) -> str:
    return f"{seconds // 60}:{seconds % 60:02d}"


def default_signal_s(time_min: int) -> int:
    """SIGUSR1 ten minutes before a link's limit, or half a link for links of under twenty minutes."""
    return min(600, time_min * 30)


def chain_tasks(argv: list[str], env: list[str], budget_min: int, time_min: int, signal_s: int,
                max_links: int) -> list[TaskSpec]:  # fmt: skip
    """The links as tasks `link1` .. `linkK` of one plan, each the same command."""
    if signal_s < 1 or signal_s >= time_min * 60:
        raise UsageError(
            f"the signal margin of {signal_s} s does not fit in a link of {time_min} min",
            f"give --signal-before shorter than --time, in Slurm's form (0:30 is 30 s, a bare 30 is 30 min), e.g. "
            f"--signal-before {_m_s(default_signal_s(time_min))} for links of {time_min} min",
        )
    minutes = link_minutes(budget_min, time_min, max_links)
    if signal_s >= minutes[-1] * 60:  # the last, shorter link must still be told before its limit
        minutes = minutes[:-1] or minutes
    if len(minutes) < 2:  # rsk reads a chain by its links' order: one link is a job with a time limit
        raise UsageError(
            f"a budget of {budget_min} min in links of {time_min} min is one link: that is a job, not a chain",
            f"launch it with --time {time_min} alone, or give a budget of at least two links "
            f"(--budget {2 * time_min}); rsk extend adds links to a chain later",
        )
    keys = [f"link{k + 1}" for k in range(len(minutes))]
    tasks = []
    for k, (key, m) in enumerate(zip(keys, minutes, strict=True)):
        needs = [Need(task=before, on="stopped") for before in keys[:k]]
        tasks.append(TaskSpec(key=key, argv=list(argv), env=list(env), time_min=m, needs=needs))
    return tasks


_SHELLS = frozenset({"sh", "bash", "dash", "zsh", "ksh", "ash"})


def shell_swallows_signal(argv: list[str]) -> bool:
    """A chain's command run by a shell (`sh -c '...'`) whose text never `exec`s: SIGUSR1 reaches the shell,
    which dies of it, and the program that would save a checkpoint is never told."""
    if len(argv) < 3 or argv[0].rsplit("/", 1)[-1] not in _SHELLS or not argv[1].startswith("-") or "c" not in argv[1]:
        return False
    return "exec " not in argv[2]


def shell_warning(argv: list[str]) -> str | None:
    if not shell_swallows_signal(argv):
        return None
    return (
        f"this chain runs its command through {argv[0].rsplit('/', 1)[-1]} -c without exec: SIGUSR1 before each "
        "link's limit goes to the shell, which dies of it, and your program never yields (exit 75); write "
        "`sh -c 'cd x && exec python train.py'`, or run the program directly"
    )
