"""The human's side: approval cards, approvals, denials, grants and deny rules."""

from typing import TYPE_CHECKING, Annotated

import typer

from rsk.cli.common import (
    JsonOpt,
    ProjectOpt,
    TargetOpt,
    YesOpt,
    err,
    out,
    print_json,
    require_human,
    resolve_target,
)
from rsk.commands import help_for

if TYPE_CHECKING:
    from rsk.ledger.cards import ChainRun
    from rsk.ledger.grants import GrantView
    from rsk.ledger.models import Card
    from rsk.ledger.store import Store
    from rsk.ledger.taskkinds import TaskKinds

grant_app = typer.Typer(help=help_for("grant"), no_args_is_help=True)
rule_app = typer.Typer(help=help_for("deny-rule"), no_args_is_help=True)


def register(app: typer.Typer) -> None:
    app.command("approvals", help=help_for("approvals"))(approvals)
    app.command("approve", help=help_for("approve"))(approve)
    app.command("deny", help=help_for("deny"))(deny)
    app.command("withdraw", help=help_for("withdraw"))(withdraw)
    app.add_typer(grant_app, name="grant")
    app.add_typer(rule_app, name="deny-rule")


def _store(project: str | None) -> "Store":
    from rsk.ledger.store import Store
    from rsk.local.project import resolve_project

    return Store(resolve_project(project))


FOLD_TASKS = 20  # a card shows this many tasks of a batch (a batch of more: its distinct commands too, ADR 0066)
FOLD_SCRIPT = 40  # and this many lines of a script
FOLD_KINDS = 12  # and this many of a batch's distinct commands and env entries (`rsk approvals show CARD --all`: all)


def kinds_of(project: str, card: "Card") -> "TaskKinds | str | None":
    """A batch's distinct commands for its card (a batch of more than FOLD_TASKS tasks), or why they cannot be read."""
    from rsk.errors import StateError
    from rsk.ledger.cards import card_kinds
    from rsk.ledger.store import Store

    if card.plan.jobs <= FOLD_TASKS and not card.tasks_file:
        return None
    try:
        return card_kinds(Store(project), card)
    except StateError as exc:
        return exc.message


def render_kinds(kinds: "TaskKinds | str", card_id: str, every: bool = False) -> list[str]:
    """A batch's distinct commands and env entries, digits folded to #, the fewest tasks first (ADR 0066): a task
    unlike the others is a line of its own, wherever it is in the batch."""
    from rsk.local.inert import inert

    if isinstance(kinds, str):
        return [f"  commands      its tasks cannot be read, so they cannot be shown: {inert(kinds)}"]
    lines: list[str] = []
    for label, one, many, found in (
        ("commands", "command", "commands", kinds.commands),
        ("task env", "env entry", "env entries", kinds.env),
    ):
        if not found:
            continue
        shown = found if every else found[:FOLD_KINDS]
        lines.append(f"  {label:<13} {len(found)} distinct {one if len(found) == 1 else many} "
                     f"(digits as #) in {kinds.tasks} tasks:")  # fmt: skip
        lines += [f"    {f.tasks:>7} x {inert(f.text)}   (first: task {inert(f.first)})" for f in shown]
        if len(shown) < len(found):
            lines.append(f"  !             {len(found) - len(shown)} more distinct {many} not shown: read them "
                         f"all before you approve: rsk approvals show {card_id} --all")  # fmt: skip
    return lines


def render_card(
    card: "Card",
    full: bool = False,
    run: "ChainRun | None" = None,
    kinds: "TaskKinds | str | None" = None,
    every: bool = False,
) -> str:
    """Everything the plan binds, with every agent-controlled text made inert (rsk.local.inert); for an extension
    of a chain, what the chain ran so far (`run`, rsk.ledger.cards.chain_run) and its total if spent in full; for a
    batch, its distinct commands (`kinds`, ADR 0066). `full`: the whole script and every task the card lists;
    `every`: every distinct command (and the card has every task: rsk.ledger.cards.whole)."""
    import shlex

    from rsk.local.inert import inert, inert_lines

    def argv(words: list[str]) -> str:
        return " ".join(shlex.quote(inert(w)) for w in words)

    p = card.plan
    gpus = f"{p.gpus}/node x {p.nodes} node(s) = {p.gpus * p.nodes}"
    lines = [
        f"card {card.id}  [{card.status}]  project {inert(str(card.request.get('project', '?')))}  "
        f"target {p.target} ({inert(p.cluster)}, as {inert(p.user)})",
        f"  requested by  {inert(card.requester) or '(nobody said)'}  (the agent's own claim, unverified)"
        + (f"; filed by OS user {inert(card.filed_by)}" if card.filed_by else ""),
        f"  requested at  {card.created:%Y-%m-%d %H:%M:%S} UTC, request id {card.request_id}",
        f"  kind          {p.kind}"
        + (f", {p.jobs} tasks" if p.kind == "batch" else "")
        + (f", at most {p.max_running} running at once" if p.max_running else "")
        + (f" {inert(p.lease_open)}: {p.lease_terms()}" if p.lease_terms() else ""),
    ]
    graph = {t.key: [n.rpartition(":")[0] for n in t.needs] for t in p.tasks} if any(t.needs for t in p.tasks) else {}
    if p.budget_min is not None and p.tasks:
        t0 = p.tasks[0]
        limits = sum(t.time_min for t in p.tasks)  # the links' own limits: the cluster checked they fit the budget
        lines[-1] = (
            f"  kind          chain: up to {p.jobs} links of {t0.time_min} min (the last {p.tasks[-1].time_min}), "
            f"at most {limits} min of run time in all; a link goes on when the command exits 75 or is "
            + (f"signalled (SIGUSR1, {p.signal_s} s before its limit)" if p.signal_s else "signalled before its limit")
        )
        if p.chain_of:
            from rsk.ops.board import extension_terms

            lines.append(f"  extends       chain {inert(p.chain_of)}{extension_terms(p)}")
            if run is not None:
                from rsk.ops.board import chain_so_far

                so_far, total = chain_so_far(run, p)
                lines.append(f"  so far        {so_far} (the books, on Slurm's word)")
                lines.append(f"  in all        if this extension is spent in full: {total}")
        lines.append(f"  command       {argv(t0.argv)}")
        lines += [f"  env           {inert(e)}" for e in t0.env] or ["  env           (none)"]
        graph = {}
    if graph:
        from rsk.request.dag import levels

        tiers = levels(graph)
        lines[-1] = (f"  kind          workflow, {p.jobs} tasks in {len(tiers)} levels (each waits for its needs)"
                     if len(p.tasks) == p.jobs else f"  kind          workflow, {p.jobs} tasks (each waits for its "
                     f"needs); the levels of the first {len(p.tasks)}:")  # fmt: skip
        if p.max_running:
            lines[-1] += f", at most {p.max_running} running at once"
        for i, keys in enumerate(tiers if full else tiers[:FOLD_TASKS]):
            shown = keys if full else keys[:FOLD_TASKS]
            more = f" ... and {len(keys) - len(shown)} more" if len(shown) < len(keys) else ""
            lines.append(f"  level {i:<7} {', '.join(inert(k) for k in shown)}{more}")
    if len(p.shapes) > 1 or p.jobs > FOLD_TASKS:  # a big batch at a glance: its tasks by shape
        lines.append("  shapes        " + "; ".join(f"{s.tasks} x {s.nodes}n {s.cpus}c {s.mem_mb}MB {s.gpus}g "
                                                    f"{s.time_min}min" for s in p.shapes))  # fmt: skip
    if kinds is not None:  # and what differs between its tasks
        lines += render_kinds(kinds, card.id, every)
    if p.attempt_of:
        lines.append(f"  retries       batch {inert(p.attempt_of)}: these tasks run again, in its work directory")
    if p.kind == "argv":
        lines.append(f"  command       {argv(p.argv)}")
    lines += [
        f"  workdir       {inert(p.workdir)}",
        *([f"  code          snapshot {p.code} (the job runs in a copy checked against it)"] if p.code else []),
        *(
            [f"  code files    {p.code_count} file{'s' if p.code_count != 1 else ''}, {p.code_bytes} bytes:"]
            + [f"                {inert(f)}" for f in p.code_files]
            + (
                [f"                ... and {p.code_count - len(p.code_files)} more"]
                if p.code_count > len(p.code_files)
                else []
            )
            if p.code_files
            else []
        ),
        f"  PATH          {inert(p.path)}",
        f"  partition     {inert(p.partition)}"
        + (f"  account {inert(p.account)}" if p.account else "")
        + (f"  qos {inert(p.qos)}" if p.qos else ""),
        f"  per job       {p.nodes} node(s), {p.cpus} CPU/node, {p.mem_mb} MB/node, GPUs {gpus}, "
        f"limit {p.time_min} min",
        f"  worst case    {p.gpu_hours:.2f} GPU-h, {p.cpu_hours:.2f} CPU-h"
        + (f" for {p.jobs} jobs (every task for its whole limit; 'per job' is the largest)" if p.jobs > 1 else ""),
    ]
    if p.budget_min is None:  # a chain's links carry the environment, shown with its command
        lines += [f"  env           {inert(e)}" for e in p.env] or ["  env           (none)"]
    if p.kind == "script" and p.script is not None:
        body = inert_lines(p.script)
        shown = body if full else body[:FOLD_SCRIPT]
        lines.append(f"  script        {len(body)} line(s)" + (f", arguments {argv(p.argv)}" if p.argv else ""))
        lines += [f"    | {line}" for line in shown]
        if len(shown) < len(body):
            lines.append(f"    ... {len(body) - len(shown)} more line(s): rsk approvals show {card.id}")
    if (p.tasks or card.tasks_file) and p.budget_min is None:
        shown_tasks = p.tasks if full else p.tasks[:FOLD_TASKS]
        for t in shown_tasks:
            res = f"{t.nodes}n {t.cpus}c {t.mem_mb}MB {t.gpus}g {t.time_min}min"
            lines.append(f"  task {inert(t.key):<12} {res}  {argv(t.argv)}")
            lines += [f"      env {inert(e)}" for e in t.env]
            if t.needs:
                wanted = [inert(n.rpartition(":")[0]) + (" (ended)" if n.endswith(":any") else "") for n in t.needs]
                lines.append("      needs " + ", ".join(wanted))
        if len(shown_tasks) < p.jobs:
            lines.append(
                f"  ... {p.jobs - len(shown_tasks)} more task(s): rsk approvals show {card.id}"
                + (" --all" if full or card.tasks_file else "")
                + (f" (all {p.jobs}: sha256 {p.tasks_digest[:16]}...)" if p.tasks_digest else "")
            )
    lines += [
        f"  start (est.)  {inert(p.estimate_start)}",
        f"  policy        {p.policy_verdict}" + (f": {inert('; '.join(p.policy_reasons))}" if p.policy_reasons else ""),
        f"  closest grant {card.closest_grant or '(none)'}"
        + (f": {inert('; '.join(card.closest_why))}" if card.closest_why else ""),
        f"  cluster side  root {inert(p.root)}, host key {inert(p.hostkey)}",
        f"  plan hash     {card.plan_hash}",
    ]
    if card.status != "pending":
        lines.append(
            f"  decided       {card.status} by {inert(card.decided_by or '')}"
            + (f": {inert(card.reason)}" if card.reason else "")
        )
    return "\n".join(lines)


def approvals(
    action: Annotated[
        str | None,
        typer.Argument(
            help="`show CARD`: one card in full (the whole script; a batch's distinct commands and the "
            "tasks the card lists; with --all, every task)."
        ),
    ] = None,
    card_id: Annotated[str | None, typer.Argument(metavar="CARD", help="The card to show.")] = None,
    project: ProjectOpt = None,
    all_cards: Annotated[
        bool,
        typer.Option("--all", help="Include decided cards; with `show CARD`, every task of its batch."),
    ] = False,
    all_projects: Annotated[
        bool,
        typer.Option(
            "--all-projects",
            help="Every project's cards, each naming its project (the human's view; through the broker, the "
            "projects you may use). Default: the project in force (--project, RSK_PROJECT, the project file).",
        ),
    ] = False,
    json_out: JsonOpt = False,
) -> None:
    from rsk.errors import UsageError
    from rsk.ledger.cards import (
        CardAnswer,
        CardList,
        card_kinds,
        cards_everywhere,
        find_card,
        list_cards,
        store_of_card,
        whole,
    )

    if action is not None:
        if action != "show":
            raise UsageError(f"unknown approvals action {action!r}", "use `rsk approvals show CARD`")
        if card_id is None:
            raise UsageError("`rsk approvals show` needs a CARD", "e.g. rsk approvals show c-1a2b3c4d5e6f")
        owner = store_of_card(card_id, project)
        found = find_card(owner.load(), card_id, owner.archive)
        shown = whole(owner, found) if all_cards else found  # every task: from its file beside the ledger, checked
        if json_out:
            print_json(CardAnswer(project=owner.project, card=shown, kinds=card_kinds(owner, found)))
        else:
            out().print(render_card(shown, full=True, run=_run(owner.project, found),
                                    kinds=kinds_of(owner.project, found), every=all_cards))  # fmt: skip
        return
    # the project in force by default (an agent sees its own cards); --all-projects, what waits in every project
    if all_projects and project:
        raise UsageError("--all-projects lists every project's cards: give it without --project")
    if all_projects:
        pairs = cards_everywhere(include_decided=all_cards)
    else:
        store = _store(project)
        pairs = [(store.project, c) for c in list_cards(store, include_decided=all_cards)]
    if json_out:
        print_json(CardList(project=None if all_projects else store.project, cards=[c for _, c in pairs]))
        return
    o = out()
    if not all_projects:
        _books_unread(store)
    if not pairs:
        where = "" if all_projects else f" in project {store.project}"
        o.print(f"no {'' if all_cards else 'pending '}approval cards{where}")
        elsewhere = [] if all_projects else _elsewhere(store.project)
        if elsewhere:
            o.print(f"{len(elsewhere)} card(s) wait in other projects: rsk approvals --all-projects")
        return
    for owner_project, card in pairs:
        o.print(render_card(card, run=_run(owner_project, card), kinds=kinds_of(owner_project, card)) + "\n")
    o.print("next: rsk approve CARD [--uses N] [--expires 8h]  or  rsk deny CARD --reason '...'")


def _elsewhere(project: str) -> list[str]:
    """The projects of the cards that wait outside `project` (a hint only: a ledger that cannot be read is left out
    here; `rsk approvals --all-projects` says what is wrong with it)."""
    from rsk.ledger.cards import cards_everywhere

    return [p for p, _ in cards_everywhere(broken=[]) if p != project]


def approve(
    card: Annotated[str, typer.Argument(help="Card id (from rsk approvals); found in whichever project has it.")],
    project: ProjectOpt = None,
    uses: Annotated[
        int,
        typer.Option(
            min=1,
            help="How many launches of this exact plan it allows: the card's own request, and N-1 more under "
            "other request ids of the project (the card's request keeps its run whatever they do).",
        ),
    ] = 1,
    expires: Annotated[str | None, typer.Option(help="Expiry: 30m, 8h, 7d or an ISO date.")] = None,
    note: Annotated[str, typer.Option(help="A note kept with the approval.")] = "",
    yes: YesOpt = False,
    json_out: JsonOpt = False,
) -> None:
    from rsk.ledger.cards import Decision, find_card, store_of_card, who
    from rsk.ledger.cards import approve as do_approve
    from rsk.request.units import parse_expiry

    store = store_of_card(card, project)
    found = find_card(store.load(), card, store.archive)
    if not yes and not json_out:
        out().print(render_card(found, run=_run(store.project, found), kinds=kinds_of(store.project, found)))
    require_human(f"approve card {card}", yes)
    approval = do_approve(
        store,
        card,
        who(yes),
        uses=uses,
        expires=parse_expiry(expires) if expires else None,
        note=note,
        plan_hash=found.plan_hash,  # the plan just shown: a card that changed meanwhile is refused
    )
    if json_out:
        decided = find_card(store.load(), card, store.archive)
        print_json(Decision.of(store.project, decided, approval))
        return
    more = f", and {uses - 1} more launch(es) of the same plan under other request ids" if uses > 1 else ""
    out().print(f"approved card {card} as {approval.id}: request {approval.request_id} may run{more}")
    out().print(f"next: the agent continues with `rsk wait {card}`")


def deny(
    card: Annotated[str, typer.Argument(help="Card id (from rsk approvals).")],
    reason: Annotated[str, typer.Option(help="Why; the agent is told this.")],
    project: ProjectOpt = None,
    yes: YesOpt = False,
    json_out: JsonOpt = False,
) -> None:
    from rsk.ledger.cards import Decision, store_of_card, who
    from rsk.ledger.cards import deny as do_deny

    store = store_of_card(card, project)
    require_human(f"deny card {card}", yes)
    decided = do_deny(store, card, who(yes), reason)
    if json_out:
        print_json(Decision.of(store.project, decided))
        return
    out().print(f"denied card {card}: {reason}")


def withdraw(
    card: Annotated[
        str,
        typer.Argument(
            help="Your own pending card (from a launch of this project that waits; another "
            "project's card is refused, not-ours)."
        ),
    ],
    project: ProjectOpt = None,
    json_out: JsonOpt = False,
) -> None:
    from rsk.errors import UsageError
    from rsk.ledger.cards import Decision, store_of_card
    from rsk.ledger.cards import withdraw as do_withdraw
    from rsk.local.project import resolve_project
    from rsk.ops.launch import requester

    mine = resolve_project(project)  # the project in force: an agent takes back its own project's cards only
    store = store_of_card(card, None)
    if store.project != mine:
        raise UsageError(f"card {card} is project {store.project}'s, not {mine}'s: it was not withdrawn",
                         f"withdraw only this project's cards (`rsk approvals -p {mine}` lists them); another "
                         "project's card is its agent's, or the human's, to answer", code="not-ours")  # fmt: skip
    withdrawn = do_withdraw(store, card, requester())
    if json_out:
        print_json(Decision.of(store.project, withdrawn))
        return
    out().print(f"withdrew card {card}: it no longer waits for a human")


def _fmt_left(left: float | int | None) -> str:
    return "unlimited" if left is None else (f"{left:.2f}" if isinstance(left, float) else str(left))


def render_grant(v: "GrantView") -> str:
    g = v.grant
    from rsk.ledger.grants import ceilings_text, scope_text

    scope, ceilings = scope_text(g), ceilings_text(g)
    return "\n".join(
        [
            f"grant {g.id}  [{v.status}]  {scope}",
            f"  per-job ceilings  {ceilings}",
            f"  jobs       spent {v.jobs_spent}  reserved {v.jobs_reserved}  left {_fmt_left(v.jobs_left)}",
            f"  GPU-hours  spent {v.gpu_hours_spent:.2f}  reserved {v.gpu_hours_reserved:.2f}  "
            f"left {_fmt_left(v.gpu_hours_left)}",
            f"  CPU-hours  spent {v.cpu_hours_spent:.2f}  reserved {v.cpu_hours_reserved:.2f}  "
            f"left {_fmt_left(v.cpu_hours_left)}",
            f"  active at most {_fmt_left(g.max_active)}; expires "
            f"{g.expires.strftime('%Y-%m-%d %H:%M UTC') if g.expires else 'never'}"
            + (f"; note: {g.note}" if g.note else ""),
            *([f"  {v.note}"] if v.note else []),
            *[
                f"  request {h.request_id} on {h.target}: {h.count} task(s) no job was found for since its answer was "
                f"lost, held at their worst case (`rsk grant release {h.request_id} -t {h.target}` if they never ran)"
                for h in v.stand_ins
            ],
        ]
    )


@grant_app.command("add", help="Add a standing grant. Every launch it covers is allowed and charged at worst case.")
def grant_add(
    project: ProjectOpt = None,
    target: Annotated[list[str] | None, typer.Option("--target", "-t", help="Allowed target (repeatable).")] = None,
    partition: Annotated[list[str] | None, typer.Option(help="Allowed partition (repeatable).")] = None,
    account: Annotated[list[str] | None, typer.Option(help="Allowed account (repeatable).")] = None,
    qos: Annotated[list[str] | None, typer.Option("--qos", help="Allowed QOS (repeatable).")] = None,
    max_gpus: Annotated[int | None, typer.Option(min=0, help="Ceiling: total GPUs of one job.")] = None,
    max_cpus: Annotated[int | None, typer.Option(min=1, help="Ceiling: total CPUs of one job.")] = None,
    max_mem: Annotated[str | None, typer.Option(help="Ceiling: memory per node (16G).")] = None,
    max_nodes: Annotated[int | None, typer.Option(min=1, help="Ceiling: nodes of one job.")] = None,
    max_time: Annotated[str | None, typer.Option(help="Ceiling: time limit of one job (4:00:00).")] = None,
    gpu_hours: Annotated[float | None, typer.Option(min=0, help="Budget: GPU-hours in all.")] = None,
    cpu_hours: Annotated[float | None, typer.Option(min=0, help="Budget: CPU-hours in all.")] = None,
    jobs: Annotated[
        int | None,
        typer.Option(
            min=0,
            help="Budget: number of jobs submitted in all (each chain link and workflow task counts; one that "
            "Slurm says never started, a link a chain did not need or a task skipped, gives its count back when "
            "it settles).",
        ),
    ] = None,
    max_active: Annotated[int | None, typer.Option(min=1, help="At most this many active jobs at once.")] = None,
    expires: Annotated[str | None, typer.Option(help="Expiry: 8h, 7d or an ISO date (default: never).")] = None,
    note: Annotated[str, typer.Option(help="A note kept with the grant.")] = "",
    yes: YesOpt = False,
    json_out: JsonOpt = False,
) -> None:
    from rsk.ledger.cards import who
    from rsk.ledger.grants import add_grant, show_grant
    from rsk.ledger.models import Grant
    from rsk.request.units import parse_expiry, parse_mem, parse_time

    store = _store(project)
    require_human("add a grant", yes)
    grant = add_grant(
        store,
        Grant(
            targets=list(target or []),
            partitions=list(partition or []),
            accounts=list(account or []),
            qos=list(qos or []),
            max_gpus=max_gpus,
            max_cpus=max_cpus,
            max_mem_mb=parse_mem(max_mem) if max_mem else None,
            max_nodes=max_nodes,
            max_time_min=parse_time(max_time) if max_time else None,
            gpu_hours=gpu_hours,
            cpu_hours=cpu_hours,
            jobs=jobs,
            max_active=max_active,
            expires=parse_expiry(expires) if expires else None,
            created_by=who(yes),
            note=note,
        ),
    )
    v = show_grant(store, grant.id)
    if json_out:
        print_json(v)
        return
    out().print(render_grant(v))
    out().print(f"next: rsk grant list --project {store.project}")


@grant_app.command(
    "list",
    help="List grants with spent, reserved and left. Grants revoked or expired over a day ago, with nothing "
    "still running, live in the project's archive: --all lists them too.",
)
def grant_list(
    project: ProjectOpt = None,
    all_grants: Annotated[bool, typer.Option("--all", help="Include archived grants.")] = False,
    json_out: JsonOpt = False,
) -> None:
    from rsk.ledger.grants import GrantList, list_grants

    store = _store(project)
    views = list_grants(store, archived=all_grants)
    if json_out:
        print_json(GrantList(project=store.project, grants=views))
        return
    if not views:
        out().print("no grants")
    for v in views:
        out().print(render_grant(v) + "\n")
    _books_unread(store)


def _books_unread(store: "Store") -> None:
    """The broker's books poll could not read the project's status: the human is told where they look."""
    from rsk.ledger.unread import warnings

    for w in warnings(store):
        err().print(f"warning: {w}")


@grant_app.command("show", help="Show one grant.")
def grant_show(
    grant_id: Annotated[str, typer.Argument(help="Grant id.")],
    project: ProjectOpt = None,
    json_out: JsonOpt = False,
) -> None:
    from rsk.ledger.grants import show_grant

    v = show_grant(_store(project), grant_id)
    if json_out:
        print_json(v)
    else:
        out().print(render_grant(v))


@grant_app.command("revoke", help="Revoke a grant: it allows nothing more (what it charged stays recorded).")
def grant_revoke(
    grant_id: Annotated[str, typer.Argument(help="Grant id.")],
    project: ProjectOpt = None,
    yes: YesOpt = False,
    json_out: JsonOpt = False,
) -> None:
    from rsk.ledger.cards import who
    from rsk.ledger.grants import revoke_grant, show_grant

    store = _store(project)
    require_human(f"revoke grant {grant_id}", yes)
    g = revoke_grant(store, grant_id, who(yes))
    if json_out:
        print_json(show_grant(store, g.id))
    else:
        out().print(f"revoked grant {g.id}")


@grant_app.command(
    "release",
    help="Release the stand-ins a lost answer left for request REQUEST_ID: the human's word that the tasks no job "
    "was found for never ran.\n\n"
    "When a launch's answer is lost and its request is adopted from the jobs the cluster shows, each task no job "
    "was found for keeps an `unfound:N` stand-in at its worst case: it holds the grant's budget, a job and a "
    "--max-active slot until a job is found for it. A task that was really never submitted (the submit was cut "
    "between two sbatch calls) is held so for good. This command first asks the cluster (reconcile, then status) "
    "and refuses when anything shows a job of the request may exist; otherwise the request's stand-ins (of its "
    "charge and of an approval's use) count nothing and no job from then on, the charge settles once its jobs have, "
    "and the audit names you and your reason. It never drops a job id. A job found later for the request is "
    "charged its worst case all the same. The cluster cannot show a task that ran and ended unseen (a pending or "
    "running one is found by its batch script): release only what you know never ran (ask the agent "
    "nothing: its jobs can write what it would tell you). Never through the broker, never an MCP tool.",
)
def grant_release(
    request_id: Annotated[str, typer.Argument(help="The request whose stand-ins are released.")],
    project: ProjectOpt = None,
    target: TargetOpt = None,
    reason: Annotated[str, typer.Option(help="Why you know the tasks never ran (kept in the audit).")] = "",
    yes: YesOpt = False,
    json_out: JsonOpt = False,
) -> None:
    from rsk.ledger.cards import who
    from rsk.ops.release import release

    store = _store(project)
    tgt = resolve_target(target)
    require_human(f"release the stand-ins of request {request_id} on {tgt} (their tasks never ran)", yes)
    done = release(tgt, store.project, request_id, who(yes), reason)
    if json_out:
        print_json(done)
        return
    for line in done.evidence:
        out().print(f"  {line}")
    for h in done.released:
        jobs = ", ".join(h.jobs) or "(none)"
        out().print(f"released {len(h.stand_ins)} stand-in(s) of {h.book} ({h.gpu_hours:.4f} GPU-h, "
                    f"{h.cpu_hours:.4f} CPU-h at worst); its jobs {jobs} stay charged")  # fmt: skip
    out().print(f"next: rsk grant list --project {store.project}")


@rule_app.command("add", help="Add a deny rule; all the conditions given must match for it to deny.")
def rule_add(
    reason: Annotated[str, typer.Option(help="Why; the agent is told this.")],
    project: ProjectOpt = None,
    target: Annotated[str | None, typer.Option("--target", "-t", help="Only on this target.")] = None,
    partition: Annotated[str | None, typer.Option(help="Only in this partition.")] = None,
    account: Annotated[str | None, typer.Option(help="Only with this account.")] = None,
    qos: Annotated[str | None, typer.Option("--qos", help="Only with this QOS.")] = None,
    gpus_at_least: Annotated[int | None, typer.Option(min=0, help="Jobs with at least this many GPUs.")] = None,
    nodes_at_least: Annotated[int | None, typer.Option(min=1, help="Jobs with at least this many nodes.")] = None,
    time_at_least: Annotated[str | None, typer.Option(help="Jobs with at least this time limit.")] = None,
    gpu_hours_at_least: Annotated[float | None, typer.Option(min=0, help="Jobs of at least this many GPU-h.")] = None,
    command: Annotated[
        str | None,
        typer.Option(
            help="A glob matched against every task's command line (its argv joined by spaces) and a script's "
            "whole text: '*rm -rf*'. A plain text match, not a guard: the same act spelt otherwise ('rm -r -f', "
            "a script of its own, a file under --code, which is never matched) passes it; for a guard, deny by "
            "resources or leave the work to cards."
        ),
    ] = None,
    expires: Annotated[str | None, typer.Option(help="Expiry: 8h, 7d or an ISO date (default: never).")] = None,
    yes: YesOpt = False,
    json_out: JsonOpt = False,
) -> None:
    from rsk.ledger.cards import who
    from rsk.ledger.grants import RuleAnswer, add_rule
    from rsk.ledger.models import DenyRule
    from rsk.request.units import parse_expiry, parse_time

    store = _store(project)
    require_human("add a deny rule", yes)
    rule = add_rule(
        store,
        DenyRule(
            reason=reason,
            target=target,
            partition=partition,
            account=account,
            qos=qos,
            gpus_at_least=gpus_at_least,
            nodes_at_least=nodes_at_least,
            time_min_at_least=parse_time(time_at_least) if time_at_least else None,
            gpu_hours_at_least=gpu_hours_at_least,
            command=command,
            expires=parse_expiry(expires) if expires else None,
        ),
        who(yes),
    )
    if json_out:
        print_json(RuleAnswer(project=store.project, status="added", rule=rule))
    else:
        out().print(f"added deny rule {rule.id}: {rule.reason}")


@rule_app.command("list", help="List deny rules.")
def rule_list(project: ProjectOpt = None, json_out: JsonOpt = False) -> None:
    from rsk.ledger.grants import RuleList, list_rules

    store = _store(project)
    rules = list_rules(store)
    if json_out:
        print_json(RuleList(project=store.project, rules=rules))
        return
    if not rules:
        out().print("no deny rules")
    for r in rules:
        conds = {k: v for k, v in r.model_dump(exclude={"id", "reason", "created"}).items() if v is not None}
        cond_text = ", ".join(f"{k}={v}" for k, v in conds.items()) or "everything"
        out().print(f"{r.id}  {cond_text}  reason: {r.reason}")


@rule_app.command("remove", help="Remove a deny rule.")
def rule_remove(
    rule_id: Annotated[str, typer.Argument(help="Deny rule id.")],
    project: ProjectOpt = None,
    yes: YesOpt = False,
    json_out: JsonOpt = False,
) -> None:
    from rsk.ledger.cards import who
    from rsk.ledger.grants import RuleAnswer, remove_rule

    store = _store(project)
    require_human(f"remove deny rule {rule_id}", yes)
    r = remove_rule(store, rule_id, who(yes))
    if json_out:
        print_json(RuleAnswer(project=store.project, status="removed", rule=r))
    else:
        out().print(f"removed deny rule {r.id}")


def _run(project: str, card: "Card") -> "ChainRun | None":
    """What an extension's chain ran so far, on the project's books (None for any other card)."""
    if not card.plan.chain_of:
        return None
    from rsk.ledger.cards import chain_run
    from rsk.ledger.store import Store

    store = Store(project)
    return chain_run(store, store.load(), card)
