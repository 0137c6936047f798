"""The page's parts (pure): each takes what rsk.ui.feeds read and returns escaped HTML (rsk.ui.html). A card
shows everything its plan binds, as `rsk approvals show` prints it; every string an agent wrote goes through
`agent()` (inert, then escaped)."""

from __future__ import annotations

import hashlib
import time
from datetime import datetime
from typing import TYPE_CHECKING
from urllib.parse import urlencode

from rsk.local.inert import inert
from rsk.ops.board import BatchView, batches, chain_so_far, duration, extension_terms, with_attempts
from rsk.ui.html import Markup, agent, el, join
from rsk.wire.states import FINAL

if TYPE_CHECKING:  # names only: the parts are pure and stand low in the import tree
    from rsk.ledger.cards import ChainRun
    from rsk.ledger.grants import GrantView
    from rsk.ledger.models import Card, CardTask, DenyRule
    from rsk.ledger.taskkinds import TaskKinds
    from rsk.ops.gpus import GpuInventory
    from rsk.ops.logs import LogTail
    from rsk.ops.watcher import Snapshot
    from rsk.ui.feeds import ApprovedView, BudgetView, CardsView

FOLD_FILES = 50  # a card's code files shown before a <details> folds the rest (every one is in the page)
FOLD_TASKS = 20  # a batch of more tasks shows them on a click (every one the card lists is in the page)
FOLD_KINDS = 12  # a batch's distinct commands shown before a <details> folds the rest (every one is in the page)
TASKS_PAGE = 200  # /tasks: every task of a batch, this many a page


def _when(at: datetime | None) -> str:
    return at.strftime("%Y-%m-%d %H:%M:%S UTC") if at else "-"


def _argv(words: list[str]) -> Markup:
    """An argv as its words, each in a box of its own: a space inside a word cannot pass for a split."""
    if not words:
        return el("span", {"class": "muted"}, "(none)")
    return el("span", {"class": "argv"}, [el("code", {"class": "word"}, agent(w)) for w in words])


def _code(text: str) -> Markup:
    """An agent's or the cluster's value as code, or a visible "(none)" for an empty one."""
    return el("code", {}, agent(text)) if text else el("span", {"class": "muted"}, "(none)")


def _row(label: str, *value: object) -> Markup:
    return join([el("dt", {}, label), el("dd", {}, *value)])


def tasks_table(tasks: list[CardTask], needs: bool) -> Markup:
    """A batch's tasks as rows: key, shape, command (word by word), env and (a workflow's) needs."""
    heads = ("task", "resources", "command", "env", *(("needs",) if needs else ()))
    head = el("tr", {}, [el("th", {}, h) for h in heads])
    body = [
        el(
            "tr",
            {},
            el("td", {}, el("code", {}, agent(t.key))),
            el("td", {}, f"{t.nodes}n {t.cpus}c {t.mem_mb}MB {t.gpus}g {t.time_min}min"),
            el("td", {}, _argv(t.argv)),
            el("td", {}, [el("div", {}, el("code", {}, agent(e))) for e in t.env]),
            el(
                "td",
                {},
                [
                    el(
                        "div",
                        {},
                        el("code", {}, agent(n.rpartition(":")[0])),
                        " (ended)" if n.endswith(":any") else None,
                    )
                    for n in t.needs
                ],
            )
            if needs
            else None,
        )
        for t in tasks
    ]
    return el("div", {"class": "scroll"}, el("table", {"class": "tasks"}, head, body))


def kinds_rows(kinds: TaskKinds | str) -> list[Markup]:
    """A batch's distinct commands and env entries, digits folded to #, the fewest tasks first (ADR 0066): a task
    unlike the others is a row of its own, wherever it is in the batch. Each with its count and first task."""
    if isinstance(kinds, str):
        return [_row("commands", el("strong", {}, "its tasks cannot be read, so they cannot be shown: "), agent(kinds))]
    rows = []
    for label, one, many, found in (
        ("commands", "command", "commands", kinds.commands),
        ("task env", "env entry", "env entries", kinds.env),
    ):
        if not found:
            continue
        items = [el("li", {}, el("span", {"class": "count"}, f"{f.tasks} x "), el("code", {}, agent(f.text)),
                    el("span", {"class": "muted"}, " (first: task ", agent(f.first), ")")) for f in found]  # fmt: skip
        folded = el("ul", {"class": "kinds"}, items[:FOLD_KINDS])
        if len(items) > FOLD_KINDS:
            folded = join([folded, el("details", {}, el("summary", {}, f"{len(items) - FOLD_KINDS} more distinct"),
                                      el("ul", {"class": "kinds"}, items[FOLD_KINDS:]))])  # fmt: skip
        rows.append(_row(label, f"{len(found)} distinct {one if len(found) == 1 else many} (digits as #) in "
                                f"{kinds.tasks} tasks", folded))  # fmt: skip
    return rows


def card_facts(card: Card, run: ChainRun | None = None, kinds: TaskKinds | str | None = None,
               project: str = "") -> Markup:  # fmt: skip
    """Every fact the plan binds, in the order `rsk approvals show` prints them; for an extension of a chain, what
    the chain ran so far (`run`, rsk.ledger.cards.chain_run) and its total if the extension is spent in full; for a
    batch, its distinct commands (`kinds`, ADR 0066) and a link to every task (`project`: its ledger's)."""
    p = card.plan
    rows = [
        _row("project", agent(str(card.request.get("project", "?")))),
        _row("target", p.target, " (", agent(p.cluster), ", as ", agent(p.user), ")"),
        _row(
            "requested by",
            agent(card.requester) if card.requester else "(nobody said)",
            el("span", {"class": "muted"}, " the agent's own claim, unverified"),
            *(["; filed by OS user ", el("code", {}, agent(card.filed_by))] if card.filed_by else []),
        ),
        _row("requested at", _when(card.created), ", request id ", agent(card.request_id)),
        _row(
            "kind",
            p.kind + (f", {p.jobs} tasks" if p.kind == "batch" else ""),
            *([" ", el("code", {}, agent(p.lease_open)), f": {p.lease_terms()}"] if p.lease_terms() else []),
            el("strong", {}, f", at most {p.max_running} running at once") if p.max_running else None,
        ),
    ]
    graph = {t.key: [n.rpartition(":")[0] for n in t.needs] for t in p.tasks} if any(t.needs for t in p.tasks) else {}
    chain = p.tasks if p.budget_min is not None and p.tasks else []  # a chain: its tasks are its links
    env = chain[0].env if chain else p.env  # a chain's links carry the environment
    if chain:
        limits = sum(t.time_min for t in chain)  # the links' own limits: the cluster checked they fit the budget
        rows[-1] = _row(
            "kind",
            f"chain: up to {p.jobs} links of {chain[0].time_min} min (the last {chain[-1].time_min}), at most "
            f"{limits} min of run time in all; a link goes on when the command exits 75 or is signalled "
            + (f"(SIGUSR1, {p.signal_s} s before its limit)" if p.signal_s else "before its limit"),
        )
        if p.chain_of:
            rows.append(_row("extends", "chain ", el("code", {}, agent(p.chain_of)),
                             extension_terms(p)))  # fmt: skip
            if run is not None:
                so_far, total = chain_so_far(run, p)
                rows.append(_row("so far", so_far, el("span", {"class": "muted"}, " (the books, on Slurm's word)")))
                rows.append(_row("in all", "if this extension is spent in full: ", el("strong", {}, total)))
        rows.append(_row("command", _argv(chain[0].argv)))
        rows.append(_row("links", el("ol", {"class": "links"}, [el("li", {}, f"{t.time_min} min") for t in chain])))
        graph = {}
    if graph:  # a workflow: its graph by levels, each level waiting for the ones above
        from rsk.request.dag import levels

        tiers = levels(graph)
        rows[-1] = _row(
            "kind",
            f"workflow, {p.jobs} tasks in {len(tiers)} levels (each waits for its needs)"
            if len(p.tasks) == p.jobs
            else f"workflow, {p.jobs} tasks (each waits for its needs); the levels of the first {len(p.tasks)}:",
            el("strong", {}, f", at most {p.max_running} running at once") if p.max_running else None,
        )
        rows.append(
            _row("levels", el("ol", {"class": "levels", "start": "0"}, [el("li", {}, _argv(keys)) for keys in tiers]))
        )
    if len(p.shapes) > 1 or p.jobs > FOLD_TASKS:  # a big batch at a glance: its tasks by shape
        rows.append(_row("shapes", el("ul", {"class": "env"}, [
            el("li", {}, f"{s.tasks} x {s.nodes}n {s.cpus}c {s.mem_mb}MB {s.gpus}g {s.time_min}min") for s in p.shapes
        ])))  # fmt: skip
    if p.attempt_of:
        rows.append(_row("retries", "batch ", el("code", {}, agent(p.attempt_of)),
                         ": these tasks run again, in its work directory"))  # fmt: skip
    if p.kind == "argv":
        rows.append(_row("command", _argv(p.argv)))
    rows.append(_row("workdir", _code(p.workdir)))
    if p.code:
        rows.append(_row("code", "snapshot ", el("code", {}, p.code), " (the job runs a copy checked against it)"))
    if p.code_files:
        shown = [el("li", {}, el("code", {}, agent(f))) for f in p.code_files]
        more = p.code_count - len(p.code_files)
        files = el("ul", {"class": "files"}, shown[:FOLD_FILES])
        if len(shown) > FOLD_FILES:
            files = join(
                [
                    files,
                    el(
                        "details",
                        {},
                        el("summary", {}, f"{len(shown) - FOLD_FILES} more listed"),
                        el("ul", {"class": "files"}, shown[FOLD_FILES:]),
                    ),
                ]
            )
        rows.append(
            _row(
                "code files",
                f"{p.code_count} file{'s' if p.code_count != 1 else ''}, {p.code_bytes} bytes",
                files,
                el("p", {"class": "muted"}, f"... and {more} more") if more > 0 else None,
            )
        )
    rows += [
        _row("PATH", _code(p.path)),
        _row(
            "partition",
            agent(p.partition),
            [" account ", agent(p.account)] if p.account else None,
            [" qos ", agent(p.qos)] if p.qos else None,
        ),
        _row(
            "per job",
            f"{p.nodes} node(s), {p.cpus} CPU/node, {p.mem_mb} MB/node, GPUs {p.gpus}/node x "
            f"{p.nodes} node(s) = {p.resources.total_gpus}, limit {p.time_min} min",
        ),
        _row(
            "worst case",
            el("strong", {}, f"{p.gpu_hours:.2f} GPU-h, {p.cpu_hours:.2f} CPU-h"),
            f" for {p.jobs} jobs (every task for its whole limit; 'per job' is the largest)" if p.jobs > 1 else None,
        ),
        _row(
            "env",
            el("ul", {"class": "env"}, [el("li", {}, el("code", {}, agent(e))) for e in env]) if env else "(none)",
        ),
    ]
    if p.kind == "script" and p.script is not None:
        lines = p.script.split("\n")
        rows.append(
            _row(
                "script",
                f"{len(lines)} line(s)",
                [", arguments ", _argv(p.argv)] if p.argv else None,
                el("pre", {"class": "script"}, Markup("\n".join(agent(line) for line in lines))),
            )
        )
    if kinds is not None and (
        p.jobs > FOLD_TASKS or card.tasks_file
    ):  # what a batch's tasks run, every one of them, digits folded (ADR 0066)
        rows += kinds_rows(kinds)
    if (p.tasks or card.tasks_file) and not chain:
        # every task the card lists is in the page (a batch of more than CARD_TASKS: its first); a long list opens
        # on a click; every task of any batch, a page at a time, at /tasks
        more = p.jobs - len(p.tasks)
        link = "/tasks?" + urlencode({"project": project, "card": card.id}) if project else ""
        rows.append(_row("tasks", el("details", {"id": f"t-{card.id}", "open": len(p.tasks) <= FOLD_TASKS},
                                     el("summary", {}, f"{p.jobs} task(s)" + (f", the first {len(p.tasks)} listed"
                                                                                if more > 0 else "")),
                                     tasks_table(p.tasks, bool(graph))),
                         el("p", {"class": "muted"}, f"... and {more} more (sha256 of all {p.tasks_digest[:16]}...). ")
                         if more > 0 else None,
                         el("p", {}, el("a", {"href": link, "class": "all-tasks"}, f"Every task, {TASKS_PAGE} a page"))
                         if link and (p.jobs > FOLD_TASKS or card.tasks_file) else None))  # fmt: skip
    rows += [
        _row("start (est.)", agent(p.estimate_start)),
        _row("policy", p.policy_verdict, [": ", agent("; ".join(p.policy_reasons))] if p.policy_reasons else None),
        _row(
            "closest grant",
            card.closest_grant or "(none)",
            [": ", agent("; ".join(card.closest_why))] if card.closest_why else None,
        ),
        _row("cluster side", "root ", _code(p.root), ", host key ", _code(p.hostkey)),
        _row("plan hash", el("code", {"class": "hash"}, card.plan_hash)),
    ]
    if card.status != "pending":
        rows.append(
            _row(
                "decided",
                f"{card.status} by ",
                agent(card.decided_by or ""),
                f" at {_when(card.decided_at)}",
                [": ", agent(card.reason)] if card.reason else None,
            )
        )
    return el("dl", {"class": "facts"}, rows)


def outdated_notice() -> Markup:
    """Said on every page once rsk's files changed on disk since the page started (fixed in place: it moves
    nothing under the pointer)."""
    return el(
        "div",
        {"class": "outdated", "role": "alert"},
        el("strong", {}, "This page is older than rsk. "),
        "rsk was updated since `rsk ui` started: this page may misread the ledger and acts no more. Stop it "
        "(Ctrl-C) and run `rsk ui` again.",
    )


def _hidden(csrf: str, project: str, card: Card) -> Markup:
    return join(
        [
            el("input", {"type": "hidden", "name": "csrf", "value": csrf}),
            el("input", {"type": "hidden", "name": "project", "value": project}),
            el("input", {"type": "hidden", "name": "plan_hash", "value": card.plan_hash}),
        ]
    )


def card_acts(project: str, card: Card, csrf: str) -> Markup:
    """Approve (uses, expiry, a note) and Deny (a reason), each a plain form bound to the plan hash shown."""
    approve = el(
        "form",
        {"method": "post", "action": f"/cards/{card.id}/approve", "class": "act approve"},
        _hidden(csrf, project, card),
        el(
            "label",
            {"title": "1: this card's request runs. N: it, and N-1 more launches of this plan under other request ids"},
            "uses ",
            el("input", {"type": "number", "name": "uses", "value": "1", "min": "1", "max": "1000", "required": True}),
        ),
        el(
            "label",
            {},
            "expires ",
            el(
                "input",
                {"type": "text", "name": "expires", "placeholder": "8h, 7d or never", "size": "10", "maxlength": "40"},
            ),
        ),
        el("label", {"class": "grow"}, "note ", el("input", {"type": "text", "name": "note", "maxlength": "500"})),
        el("button", {"type": "submit", "class": "approve"}, "Approve"),
    )
    deny = el(
        "form",
        {"method": "post", "action": f"/cards/{card.id}/deny", "class": "act deny"},
        _hidden(csrf, project, card),
        el(
            "label",
            {"class": "grow"},
            "reason ",
            el(
                "input",
                {
                    "type": "text",
                    "name": "reason",
                    "required": True,
                    "maxlength": "1000",
                    "placeholder": "the agent is told this",
                },
            ),
        ),
        el("button", {"type": "submit", "class": "deny"}, "Deny"),
    )
    return el("div", {"class": "acts"}, approve, deny)


def card_block(
    project: str, card: Card, csrf: str | None, run: ChainRun | None = None, kinds: TaskKinds | str | None = None
) -> Markup:
    p = card.plan
    title = el(
        "h3",
        {},
        el("code", {}, card.id),
        " ",
        el("span", {"class": f"badge {card.status}"}, card.status),
        el("span", {"class": "cost"}, f" {p.gpu_hours:.2f} GPU-h, {p.cpu_hours:.2f} CPU-h at worst"),
    )
    acts = card_acts(project, card, csrf) if csrf is not None and card.status == "pending" else None
    return el(
        "article",
        {"class": f"card {card.status}", "id": f"card-{card.id}", "data-plan-hash": card.plan_hash},
        title,
        card_facts(card, run, kinds, project),
        acts,
    )


def cards_section(view: CardsView, csrf: str | None) -> Markup:
    """Pending first (the oldest on top), then recent decisions; csrf None: read-only, no forms."""
    # data-pending: the tab's title counts what waits (ui.js), so a card that arrives shows in a background tab
    # a ledger that cannot be read comes first: its cards are not below, and "no card waits" would be untrue
    parts: list[object] = [
        el("section", {"class": "broken", "role": "alert"},
           el("h2", {}, f"The ledger of project {project} cannot be read"),
           el("p", {}, why),
           el("p", {}, "Its cards may wait for you but cannot be shown or answered here; nothing was changed. If "
                       "`rsk status -p ", project, "` reads it, this page is older than the rsk that wrote it: stop "
                       "it (Ctrl-C) and run `rsk ui` again. If not, `rsk status` says what to do."))
        for project, why in view.broken.items()
    ]  # fmt: skip
    parts.append(el("h2", {"data-pending": str(len(view.pending))}, f"Waiting for you ({len(view.pending)})"))
    none = "No card waits" + (" in the ledgers that could be read." if view.broken else ".")
    shown = [card_block(pr, c, csrf, view.runs.get(c.id), view.kinds.get(c.id)) for pr, c in view.pending]
    parts += shown or [el("p", {"class": "empty"}, none)]
    if view.decided:
        parts.append(el("h2", {}, "Recent decisions"))
        parts += [
            el(
                "details",
                {"class": "decided", "id": f"d-{c.id}"},
                el(
                    "summary",
                    {},
                    el("code", {}, c.id),
                    " ",
                    el("span", {"class": f"badge {c.status}"}, c.status),
                    " by ",
                    agent(c.decided_by or ""),
                    f" at {_when(c.decided_at)}",
                    [": ", agent(c.reason)] if c.reason else None,
                ),
                card_block(pr, c, None, view.runs.get(c.id), view.kinds.get(c.id)),
            )
            for pr, c in view.decided
        ]
    return join(parts)


def _bar(spent: float, reserved: float, budget: float | None) -> Markup:
    """A budget as a bar: spent, reserved, left; the numbers beside it."""
    if budget is None or budget <= 0:
        return el("span", {"class": "muted"}, "no budget")
    s = min(spent / budget, 1.0) * 100
    r = min(reserved / budget, 1.0 - s / 100) * 100
    return el(
        "div",
        {"class": "bar", "role": "img", "aria-label": f"{spent:g} spent, {reserved:g} reserved of {budget:g}"},
        el("span", {"class": f"spent w{round(s)}"}),
        el("span", {"class": f"reserved w{round(r)}"}),
    )


def _budget_row(label: str, spent: float, reserved: float, left: float | None, budget: float | None) -> Markup:
    def fmt(v: float) -> str:
        return f"{v:.2f}" if isinstance(spent, float) else str(v)

    return el(
        "tr",
        {},
        el("th", {}, label),
        el("td", {}, fmt(spent)),
        el("td", {}, fmt(reserved)),
        el("td", {}, "unlimited" if left is None else fmt(left)),
        el("td", {"class": "barcell"}, _bar(float(spent), float(reserved), None if budget is None else float(budget))),
    )


def grant_block(v: GrantView) -> Markup:
    g = v.grant
    from rsk.ledger.grants import ceilings_text, scope_text

    scope, ceilings = scope_text(g), ceilings_text(g)
    table = el(
        "table",
        {"class": "budget"},
        el("tr", {}, [el("th", {}, h) for h in ("", "spent", "reserved", "left", "")]),
        _budget_row("jobs", v.jobs_spent, v.jobs_reserved, v.jobs_left, g.jobs),
        _budget_row("GPU-hours", v.gpu_hours_spent, v.gpu_hours_reserved, v.gpu_hours_left, g.gpu_hours),
        _budget_row("CPU-hours", v.cpu_hours_spent, v.cpu_hours_reserved, v.cpu_hours_left, g.cpu_hours),
    )
    return el(
        "article",
        {"class": "grant", "id": f"grant-{g.id}"},
        el("h3", {}, el("code", {}, g.id), " ", el("span", {"class": f"badge {v.status}"}, v.status), " ", scope),
        el("div", {"class": "scroll"}, table),
        el(
            "p",
            {},
            f"per-job ceilings: {ceilings}; at most {g.max_active or 'unlimited'} active; expires ",
            _when(g.expires) if g.expires else "never",
            [". note: ", g.note] if g.note else None,
        ),
        el("p", {"class": "muted"}, v.note) if v.note else None,
    )


def _rule(r: DenyRule) -> Markup:
    conds = {k: v for k, v in r.model_dump(exclude={"id", "reason", "created"}).items() if v is not None}
    return el(
        "li",
        {},
        el("code", {}, r.id),
        " ",
        ", ".join(f"{k}={v}" for k, v in conds.items()) or "everything",
        ": ",
        r.reason,
    )


def approved_block(views: list[ApprovedView]) -> Markup:
    """What cards approved one by one (no grant) let run: each approval's uses, spent and reserved, and the
    total, so that a human who approved ten cards sees what they allowed in all."""
    head = el("h3", {}, "Approved card by card")
    if not views:
        return join([head, el("p", {"class": "empty"}, "No approvals in the ledger's recent history.")])
    rows = []
    for v in views:
        a = v.approval
        rows.append(
            el(
                "tr",
                {},
                el("td", {}, el("code", {}, a.card_id or a.id)),
                el("td", {}, agent(v.card.request_id) if v.card else "-"),
                el("td", {}, f"{v.taken} used, {a.uses_left} left"),
                el("td", {}, _when(a.expires) if a.expires else "never"),
                el("td", {}, f"{v.gpu_spent:.2f} / {v.gpu_reserved:.2f}"),
                el("td", {}, f"{v.cpu_spent:.2f} / {v.cpu_reserved:.2f}"),
            )
        )
    total = el(
        "tr",
        {"class": "total"},
        el("th", {"colspan": "4"}, f"in all, {len(views)} approval(s)"),
        el("th", {}, f"{sum(v.gpu_spent for v in views):.2f} / {sum(v.gpu_reserved for v in views):.2f}"),
        el("th", {}, f"{sum(v.cpu_spent for v in views):.2f} / {sum(v.cpu_reserved for v in views):.2f}"),
    )
    heads = ("card", "request", "uses", "expires", "GPU-h spent / reserved", "CPU-h spent / reserved")
    table = el("table", {"class": "approved"}, el("tr", {}, [el("th", {}, h) for h in heads]), rows, total)
    note = el(
        "p",
        {"class": "muted"},
        "Spent: jobs that ended, for Slurm's run time; reserved: jobs still running, and uses that may still "
        "submit, at their worst case.",
    )
    return join([head, el("div", {"class": "scroll"}, table), note])


def budgets_section(views: list[BudgetView]) -> Markup:
    parts: list[object] = []
    for b in views:
        parts.append(el("h2", {}, f"Project {b.project}"))
        if b.error:
            parts.append(el("p", {"class": "error"}, b.error))
        parts += [grant_block(v) for v in b.grants] or [el("p", {"class": "empty"}, "No grants.")]
        parts.append(approved_block(b.approved))
        parts.append(el("h3", {}, "Deny rules"))
        parts.append(
            el("ul", {"class": "rules"}, [_rule(r) for r in b.rules])
            if b.rules
            else el("p", {"class": "empty"}, "No deny rules.")
        )
    return join(parts) if parts else el("p", {"class": "empty"}, "No project has a ledger here yet.")


def _batch(project: str, view: BatchView) -> Markup:
    total = len(view.jobs)
    done = sum(view.counts.get(s, 0) for s in FINAL)  # a chain's skipped links ended too
    counts = ", ".join(f"{n} {s}" for s, n in sorted(view.counts.items()))
    rows = [
        el(
            "tr",
            {"class": j.state},
            el("td", {}, agent(j.task or (j.request_id if j.lease else ""))),
            el(
                "td",
                {},
                el(
                    "a",
                    {
                        "href": "/logs?" + urlencode({"project": project, "target": view.target, "job": j.job_id}),
                        "title": "its last lines",
                    },
                    el("code", {}, agent(j.job_id)),
                ),
            ),
            el("td", {}, el("span", {"class": f"badge {j.state}"}, j.state + (" UNDECIDED" if j.undecided else ""))),
            el("td", {}, f"{duration(j.elapsed_s)}/{duration(j.limit_s)}"),
            el("td", {}, agent(j.where)),
            el(
                "td",
                {},
                "" if j.exit_code is None else str(j.exit_code),
                [" (", agent(j.signal), ")"] if j.signal else None,
            ),
        )
        for j in view.jobs
    ]
    pct = round(100 * done / total) if total else 0
    key = hashlib.sha256(f"{project}\0{view.target}\0{view.request_id}".encode()).hexdigest()[:12]
    return el(
        "details",
        {"class": "batch", "id": f"b-{key}", "open": total <= 10},
        el(
            "summary",
            {},
            el("span", {"class": "kind"}, view.kind),
            " ",
            el("code", {}, agent(view.request_id)),
            [" (with ", [[", " if i else None, el("code", {}, agent(a))] for i, a in enumerate(view.attempts)], ")"]
            if view.attempts
            else None,
            f" {project} on {view.target}: {total} job(s), ",
            counts,
            [", ", view.chain] if view.chain else None,
            el(
                "span",
                {"class": "bar small", "role": "img", "aria-label": f"{done} of {total} ended"},
                el("span", {"class": f"spent w{pct}"}),
            ),
            f" {view.gpu_hours_used:.2f} GPU-h used, {view.gpu_hours_reserved:.2f} reserved; "
            f"{view.cpu_hours_used:.2f} CPU-h used, {view.cpu_hours_reserved:.2f} reserved",
        ),
        el(  # a workflow: what each level has done
            "ul",
            {"class": "levels"},
            [
                el(
                    "li",
                    {},
                    f"level {i}: {sum(lv.values())} task(s), " + ", ".join(f"{n} {s}" for s, n in sorted(lv.items())),
                )
                for i, lv in enumerate(view.levels)
            ],
        )
        if view.levels and not view.chain
        else None,
        el(
            "div",
            {"class": "scroll"},
            el(
                "table",
                {"class": "jobs"},
                el(
                    "tr",
                    {},
                    [el("th", {}, h) for h in ("task", "job", "state", "elapsed/limit", "node/reason", "exit")],
                ),
                rows,
            ),
        ),
    )


def board_section(snaps: list[tuple[str, Snapshot]] | None, error: str, wall: float | None) -> Markup:
    if snaps is None:
        return el("p", {"class": "muted"}, error or "Asking the clusters...")
    parts: list[object] = [
        el(
            "p",
            {"class": "muted stamp"},
            f"as of {time.strftime('%H:%M:%S', time.localtime(wall))}" if wall else "",
            [" (", error, ")"] if error else None,
        )
    ]
    counts: dict[str, int] = {}
    views: list[tuple[str, BatchView]] = []
    for project, snap in snaps:
        for st in snap.statuses:
            parts += [el("p", {"class": "error"}, f"{st.target}: WARNING: ", agent(w)) for w in st.warnings]
            if st.slurm == "down":
                parts.append(el("p", {"class": "warn"}, f"{st.target}: Slurm controller not answering"))
        parts += [el("p", {"class": "warn"}, f"{t}: STALE: ", why) for t, why in snap.stale.items()]
        views += [(project, v) for v in with_attempts(batches(snap.statuses))]
    for _, v in views:
        for s, n in v.counts.items():
            counts[s] = counts.get(s, 0) + n
    parts.insert(1, _kinds(views, counts) if views else None)
    parts += [_batch(pr, v) for pr, v in reversed(views)] or [el("p", {"class": "empty"}, "No rsk jobs yet.")]
    return join(parts)


KINDS = (("batch", "batch", "batches"), ("workflow", "workflow", "workflows"), ("chain", "chain", "chains"),
         ("lease", "lease", "leases"), ("job", "single job", "single jobs"))  # fmt: skip


def _states(counts: dict[str, int]) -> list[Markup]:
    return [el("span", {"class": f"badge {s}"}, f"{n} {s}") for s, n in sorted(counts.items())]


def _kinds(views: list[tuple[str, BatchView]], counts: dict[str, int]) -> Markup:
    """How many batches, workflows, chains, leases and single jobs there are, and their jobs' states."""
    rows = []
    for kind, one, many in KINDS:
        mine = [v for _, v in views if v.kind == kind]
        if not mine:
            continue
        states: dict[str, int] = {}
        for v in mine:
            for s, n in v.counts.items():
                states[s] = states.get(s, 0) + n
        jobs = sum(states.values())
        rows.append(el("tr", {"class": f"kind {kind}"}, el("th", {}, f"{len(mine)} {one if len(mine) == 1 else many}"),
                       el("td", {}, f"{jobs} job(s)"), el("td", {}, _states(states))))  # fmt: skip
    total = el("tr", {"class": "kind all"}, el("th", {}, "in all"), el("td", {}, f"{sum(counts.values())} job(s)"),
               el("td", {}, _states(counts)))  # fmt: skip
    return el("div", {"class": "scroll"}, el("table", {"class": "kinds"}, rows, total))


def gpus_section(invs: list[GpuInventory] | None, error: str) -> Markup:
    if invs is None:
        return el("p", {"class": "muted"}, error or "Asking the clusters...")
    parts: list[object] = [el("p", {"class": "error"}, error) if error else None]
    for inv in invs:
        parts.append(
            el(
                "h2",
                {},
                f"{inv.target}: {inv.free} of {inv.total} GPUs free",
                el("span", {"class": "muted"}, f" at {inv.at}"),
            )
        )
        for node in inv.nodes:
            cells = []
            for g in node.gpus:
                who = inert(  # whose: a ledger's, by the job id; its own name is the job's words: inert, tooltip too
                    f"job {g.job_id}, project {g.project}, request {g.request_id}"
                    if g.project
                    else f"job {g.job_id}, someone else's ({g.job_name})"
                    if g.job_id
                    else g.state
                )
                cells.append(
                    el(
                        "div",
                        {"class": f"gpu {g.state}", "title": who},
                        el("b", {}, f"{g.index}"),
                        el("span", {}, agent(g.type or "")),
                        el("small", {}, who if g.state == "held" else g.state),
                    )
                )
            parts.append(
                el(
                    "section",
                    {"class": "node"},
                    el(
                        "h3",
                        {},
                        agent(node.name),
                        el(
                            "span",
                            {"class": "muted"},
                            " ",
                            agent(node.state),
                            f", {node.free}/{node.total} free, ",
                            agent(",".join(node.partitions)),
                        ),
                    ),
                    el("div", {"class": "gpus"}, cells),
                )
            )
    return join(parts) if any(parts) else el("p", {"class": "empty"}, "No targets.")


LOG_LINES = 50  # a job's last lines on the board


def logs_section(project: str, target: str, job: str, stream: str, tail: LogTail | None, error: str) -> Markup:
    """A job's last lines (what the job wrote: agent text, made inert line by line), with the other stream."""
    other = "stderr" if stream == "stdout" else "stdout"
    link = "/logs?" + urlencode({"project": project, "target": target, "job": job, "stream": other})
    parts: list[object] = [
        el("p", {}, f"project {project} on {target}, job ", el("code", {}, agent(job)), f", {stream}: the last ",
           f"{LOG_LINES} lines. ", el("a", {"href": link}, f"Show {other}"), " ", el("a", {"href": "/board"}, "Board")),
    ]  # fmt: skip
    if error:
        parts.append(el("p", {"class": "error"}, error))
    if tail is not None:
        state = "still running" if tail.started and tail.end is None else "ended" if tail.end else "not started"
        parts.append(el("p", {"class": "muted"}, f"{tail.size} bytes in all; the job has {state}.",
                        [" ", tail.note] if tail.note else None))  # fmt: skip
        lines = tail.text.rstrip("\n").split("\n") if tail.text else []
        parts.append(el("pre", {"class": "script log"}, Markup("\n".join(agent(line) for line in lines))))
    return join(parts)


def tasks_section(project: str, card: Card | None, tasks: list[CardTask] | None, page: int, error: str) -> Markup:
    """Every task of a batch's card, TASKS_PAGE a page (page counts from 1): what a card of thousands of tasks lists
    only the first of, read from the file beside the ledger and checked against the card (ADR 0060, 0066)."""
    parts: list[object] = [el("p", {}, el("a", {"href": "/"}, "Cards"))]
    if error or card is None or tasks is None:
        parts.append(el("p", {"class": "error"}, error or "this card is not a batch: it lists no tasks"))
        return join(parts)
    pages = max(1, -(-len(tasks) // TASKS_PAGE))
    page = min(max(page, 1), pages)
    first = (page - 1) * TASKS_PAGE

    def link(to: int, text: str) -> Markup:
        href = "/tasks?" + urlencode({"project": project, "card": card.id, "page": to})
        return el("a", {"href": href, "rel": "prev" if to < page else "next"}, text)

    nav = el("p", {"class": "pager"}, link(page - 1, "Previous") if page > 1 else None,
             f" tasks {first + 1}-{min(first + TASKS_PAGE, len(tasks))} of {len(tasks)} (page {page} of {pages}) ",
             link(page + 1, "Next") if page < pages else None)  # fmt: skip
    about = el("p", {}, f"project {project}, card ", el("code", {}, card.id), " ",
               el("span", {"class": f"badge {card.status}"}, card.status), f", {card.plan.jobs} tasks (sha256 of all ",
               el("code", {}, card.plan.tasks_digest[:16]), "...)")  # fmt: skip
    parts += [
        about,
        nav,
        tasks_table(tasks[first : first + TASKS_PAGE], any(t.needs for t in tasks)),
        nav,
    ]
    return join(parts)
