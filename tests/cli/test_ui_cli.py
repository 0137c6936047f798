"""`rsk ui` as a human runs it: a process serving 127.0.0.1, whose link signs in once, whose form approves a
card through a real socket (the peer's-user check on), which stops on Ctrl-C and leaves no launch file; and
which refuses to start for a caller without a terminal."""

from __future__ import annotations

import http.cookiejar
import json
import os
import re
import signal
import subprocess
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

from rsk.errors import Exit
from rsk.ledger.store import Store
from tests.conftest import ROOT, RSK, rsk
from tests.ui_cards import file_card


def test_without_a_terminal_or_yes_the_page_does_not_start(rsk_env: Path, project: str) -> None:
    r = rsk("ui", "--no-open", stdin="")
    assert r.rc == Exit.HUMAN and "needs a human at a terminal" in r.err
    assert not (rsk_env / "ui").exists()


def test_a_served_page_signs_in_once_approves_and_stops_on_ctrl_c(rsk_env: Path, project: str) -> None:
    card = file_card(project)
    proc = subprocess.Popen([*RSK, "ui", "--no-open", "--yes", "--json"], stdout=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONPATH": str(ROOT / "src")})  # fmt: skip
    try:
        assert proc.stdout is not None
        lines = []
        while not lines or lines[-1] != "}":
            lines.append(proc.stdout.readline().rstrip("\n"))
        started = json.loads("\n".join(lines))
        launch, base = started["url"], started["address"].rstrip("/")
        assert launch.startswith("http://127.0.0.1:") and Path(started["launch_file"]).stat().st_mode & 0o777 == 0o600
        assert launch in Path(started["launch_file"]).read_text()
        jar = http.cookiejar.CookieJar()
        browser = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(jar))
        assert 'url=/"' in browser.open(launch, timeout=10).read().decode()  # signed in; the page moves on to /
        page = browser.open(base + "/", timeout=10).read().decode()
        assert card.id in page and not Path(started["launch_file"]).exists()
        try:
            urllib.request.urlopen(launch, timeout=10)
            raise AssertionError("a spent link signed in again")
        except urllib.error.HTTPError as exc:
            assert exc.code == 403
        csrf = re.search(r'name="csrf" value="([^"]+)"', page)
        assert csrf
        form = urllib.parse.urlencode({"csrf": csrf.group(1), "project": project, "plan_hash": card.plan_hash,
                                       "uses": "1"}).encode()  # fmt: skip
        act = urllib.request.Request(f"{base}/cards/{card.id}/approve", data=form, headers={"Origin": base})
        assert "Approved card" in browser.open(act, timeout=10).read().decode()
        assert Store(project).load().cards[0].status == "approved"
        # the audit names the session and the process that sent the act: this test's, through its socket
        assert "(via ui, session " in Store(project).read_audit()[-1].by
        assert f", from {os.getpid()} " in Store(project).read_audit()[-1].by
        # while it serves, a notification carries the card's address on the page
        from rsk.ledger.notify import summary

        assert summary(card, project)["page"] == f"{base}/#card-{card.id}"
    finally:
        proc.send_signal(signal.SIGINT)
        rc = proc.wait(timeout=20)
    assert rc == 0
    assert not list((rsk_env / "ui").glob("launch-*.html")) and not (rsk_env / "ui" / "page.json").exists()
