"""The human's page against the lab, in Chromium: an agent's launch files a card that appears on the open
page without a reload; Approve lets the agent's `rsk wait CARD` submit, and the board shows the job running,
then succeeded, and its output on click; Deny with a reason makes the agent's wait exit 3 with that reason;
a grant's charge shows on Budgets; GPUs shows the lab's nodes. And the page refuses the connections of
another OS user holding the human's cookie. Each test saves screenshots ($RSK_UI_SHOTS, /tmp/rsk-ui-shots)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import pytest

from rsk.errors import Exit
from tests.conftest import ROOT, RSK, Lab
from tests.integration.helpers import grant, launch, launched
from tests.ui_serve import Server, chromium, serving, shot, sign_in

pytestmark = pytest.mark.browser


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    with chromium() as b:
        yield b


@pytest.fixture
def page_on_lab(lab: Lab, browser: Any) -> Iterator[tuple[Server, Any]]:
    with serving(targets=["lab"], board_every=1.0, gpus_every=2.0) as server:
        yield server, sign_in(browser, server)


def _agent_waits(card: str) -> subprocess.Popen[str]:
    """The agent's `rsk wait CARD` (which submits the launch once the card is approved), running meanwhile."""
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    argv = [*RSK, "wait", card, "--json", "--timeout", "180"]
    return subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)


def test_approve_in_the_page_runs_the_agents_job_and_the_board_follows_it(
    page_on_lab: tuple[Server, Any], project: str
) -> None:
    server, page = page_on_lab
    page.goto(f"{server.base}/")
    job_argv = ("sh", "-c", "sleep 8; echo done")
    pending = launch(project, "-r", "ui-run", "--gpus", "1", "--partition", "gpu", command=job_argv)
    assert pending.rc == Exit.PENDING, pending.err
    card = json.loads(pending.out)["card_id"]
    article = page.locator(f"#card-{card}")
    article.wait_for(timeout=8000)  # no reload: the page's own refresh brought it
    assert "sleep 8; echo done" in article.inner_text() and "GPU-h" in article.inner_text()
    shot(page, "lab-card-pending")
    waiting = _agent_waits(card)
    article.get_by_role("button", name="Approve").click()
    page.locator(".notice").wait_for()
    page.goto(f"{server.base}/board")
    page.locator("tr.running").first.wait_for(timeout=150_000)  # the lab may be busy with others' jobs
    shot(page, "lab-board-running")
    out, err = waiting.communicate(timeout=200)
    assert waiting.returncode == 0, err
    job = json.loads(out)["jobs"][0]["job_id"]
    row = page.locator("tr.succeeded", has_text=job)
    row.wait_for(timeout=30_000)
    assert "ui-run" in page.locator("details.batch", has=row).inner_text()
    shot(page, "lab-board-succeeded")
    row.get_by_role("link").click()  # the job's last lines, on click
    assert page.locator("pre.log").inner_text().strip() == "done"
    shot(page, "lab-job-output")
    page.goto(f"{server.base}/gpus")
    page.locator(".gpu").first.wait_for(timeout=30_000)
    assert page.locator(".gpu").count() >= 8  # two nodes of four fake GPUs
    shot(page, "lab-gpus")


def test_a_chain_and_a_workflow_show_their_shape_on_the_card_and_their_progress_on_the_board(
    page_on_lab: tuple[Server, Any], project: str, tmp_path: Any
) -> None:
    server, page = page_on_lab
    page.goto(f"{server.base}/")
    chain = launch(project, "-r", "ui-chain", "--budget", "3", "--time", "1", "--signal-before", "0:30", "--mem",
                   "100M", command=("sh", "-c", 'echo "link $RSK_LINK"; exit 0'))  # fmt: skip
    assert chain.rc == Exit.PENDING, chain.err
    tasks = tmp_path / "wf.jsonl"
    tasks.write_text('{"key": "prep", "argv": ["echo", "prep"]}\n'
                     '{"key": "train", "argv": ["echo", "train"], "needs": ["prep"]}\n')  # fmt: skip
    flow = launch(project, "-r", "ui-flow", "--mem", "100M", "--time", "1", "--tasks", str(tasks), command=())
    assert flow.rc == Exit.PENDING, flow.err
    cards = [json.loads(r.out)["card_id"] for r in (chain, flow)]
    chain_card, flow_card = (page.locator(f"#card-{c}") for c in cards)
    chain_card.wait_for(timeout=8000)
    flow_card.wait_for(timeout=8000)
    text = chain_card.inner_text()
    assert "chain: up to 3 links of 1 min (the last 1), at most 3 min of run time" in text, text
    assert chain_card.locator("ol.links li").count() == 3
    assert "workflow, 2 tasks in 2 levels" in flow_card.inner_text()
    assert [li.inner_text() for li in flow_card.locator("ol.levels li").all()] == ["prep", "train"]
    shot(page, "lab-cards-chain-and-workflow")
    for card in cards:
        waiting = _agent_waits(card)
        page.locator(f"#card-{card}").get_by_role("button", name="Approve").click()
        page.locator(".notice").wait_for()
        _, err = waiting.communicate(timeout=200)
        assert waiting.returncode == 0, err
    for rid in ("ui-chain", "ui-flow"):  # the agent waits for the work itself
        r = subprocess.run([*RSK, "wait", "--request-id", rid, "--target", "lab", "--project", project, "--timeout",
                            "240", "--json"], capture_output=True, text=True, check=False,
                           env={**os.environ, "PYTHONPATH": str(ROOT / "src")})  # fmt: skip
        assert r.returncode == 0, r.stdout + r.stderr
    page.goto(f"{server.base}/board")
    kinds = page.locator("table.kinds")
    kinds.locator("tr.chain", has_text="3 job(s)").wait_for(timeout=30_000)
    assert "1 succeeded" in kinds.locator("tr.chain").inner_text()
    assert "2 skipped" in kinds.locator("tr.chain").inner_text()
    assert "2 succeeded" in kinds.locator("tr.workflow").inner_text()
    chain_view = page.locator("details.batch", has_text="ui-chain")
    assert "link 1/3, run time" in chain_view.locator("summary").inner_text()
    flow_view = page.locator("details.batch", has_text="ui-flow")
    assert [li.inner_text() for li in flow_view.locator("ul.levels li").all()] == [
        "level 0: 1 task(s), 1 succeeded",
        "level 1: 1 task(s), 1 succeeded",
    ]
    shot(page, "lab-board-chain-and-workflow")


def test_deny_in_the_page_stops_the_agents_wait_with_the_reason_and_budgets_show_a_charge(
    page_on_lab: tuple[Server, Any], project: str
) -> None:
    server, page = page_on_lab
    pending = launch(project, "-r", "ui-deny", command=("echo", "no"))
    card = json.loads(pending.out)["card_id"]
    waiting = _agent_waits(card)
    page.goto(f"{server.base}/")
    article = page.locator(f"#card-{card}")
    article.locator("input[name=reason]").fill("use the debug partition")
    article.get_by_role("button", name="Deny").click()
    page.locator(".notice").wait_for()
    out, _ = waiting.communicate(timeout=60)
    assert waiting.returncode == Exit.DENIED and "use the debug partition" in out
    g = grant(project, "--jobs", "5", "--cpu-hours", "2")
    launched(launch(project, "-r", "ui-granted", command=("sleep", "5")))
    page.goto(f"{server.base}/budgets")
    jobs = page.locator(f"#grant-{g['grant']['id']} tr", has_text="jobs")
    cells = [jobs.locator("td").nth(i).inner_text() for i in range(3)]
    assert int(cells[0]) + int(cells[1]) == 1 and cells[2] == "4"  # spent + reserved, left
    shot(page, "lab-budgets")


def test_another_os_user_cannot_use_the_page_even_with_its_cookie(
    page_on_lab: tuple[Server, Any], project: str
) -> None:
    if os.geteuid() != 0:
        pytest.skip("needs root to act as the agent's OS user (tests/setup.sh creates rskagent)")
    import socket

    server, page = page_on_lab
    name = server.ui.guard.cookie
    cookie = name + "=" + next(c["value"] for c in page.context.cookies() if c["name"] == name)
    probe = (
        "import json, sys, urllib.request, urllib.error\n"
        "r = urllib.request.Request(sys.argv[1], headers=json.loads(sys.argv[2]))\n"
        "try:\n    print(urllib.request.urlopen(r, timeout=10).status)\n"
        "except urllib.error.HTTPError as e:\n    print(e.code, e.read().decode())\n"
    )

    def get(headers: dict[str, str], user: str | None) -> str:
        # the agent's account runs Debian's python3 with the standard library only, as the broker's tests do
        who = ["runuser", "-u", user, "--", "/usr/bin/python3"] if user else [sys.executable]
        argv = [*who, "-I", "-c", probe, f"{server.base}/", json.dumps(headers)]
        return subprocess.run(argv, capture_output=True, text=True, timeout=30, check=False).stdout

    assert get({"Cookie": cookie}, None).strip() == "200"  # the human's own process, with the cookie
    refused = get({"Cookie": cookie}, "rskagent")
    assert refused.startswith("403") and "only its own OS user" in refused, refused
    # nor by naming, in X-Forwarded-For, a connection the human holds open to the page (any user can read its
    # port in /proc/net/tcp): the page takes no address from a header
    with socket.create_connection(("127.0.0.1", server.port)) as held:
        forged = {"Cookie": cookie, "X-Forwarded-For": f"127.0.0.1:{held.getsockname()[1]}"}
        assert get(forged, "rskagent").startswith("403")
    page.goto(f"{server.base}/")  # and the human's own page still serves
    assert page.locator("h1").inner_text() == "Cards"
    shot(page, "lab-human-page-after-another-users-refusal")
