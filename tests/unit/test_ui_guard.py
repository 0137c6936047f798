"""The page's guards over HTTP, in process (Starlette's TestClient): the launch token spent once, the session
cookie, the exact Host, a POST's Origin and CSRF token, the plan hash the page showed, and every answer's
security headers. The browser's side is tests/browser/test_ui_browser.py."""

from __future__ import annotations

import re
import socket
from pathlib import Path

import pytest
from starlette.testclient import TestClient

from rsk.ledger.store import Store
from rsk.ui.guard import Guard, peer_uid
from rsk.ui.server import Config, Ui, launch_file, write_launch_file
from tests.ui_cards import XSS, file_card

PORT = 48123
BASE = f"http://127.0.0.1:{PORT}"
ORIGIN = {"origin": BASE}


def _page(read_only: bool = False) -> tuple[Ui, TestClient]:
    ui = Ui(Guard(port=PORT), Config(targets=[], read_only=read_only, uid=None))
    return ui, TestClient(ui.app(), base_url=BASE, follow_redirects=False)


def _signed_in(read_only: bool = False) -> tuple[Ui, TestClient]:
    ui, client = _page(read_only)
    r = client.get(f"/launch?token={ui.guard.token}")
    assert r.status_code == 200 and 'content="0;url=/"' in r.text  # moves on to / (a navigation of this site)
    return ui, client


def _csrf(client: TestClient) -> str:
    m = re.search(r'name="csrf" value="([^"]+)"', client.get("/").text)
    assert m, "no form on the page"
    return m.group(1)


def test_the_launch_token_signs_in_once_with_a_strict_httponly_cookie(project: str) -> None:
    ui, client = _page()
    write_launch_file(ui.guard)
    assert launch_file(PORT).stat().st_mode & 0o777 == 0o600
    assert launch_file(PORT).parent.stat().st_mode & 0o777 == 0o700
    assert client.get("/").status_code == 403  # no cookie yet
    r = client.get(f"/launch?token={ui.guard.token}")
    assert r.status_code == 200
    cookie = r.headers["set-cookie"].lower()
    assert cookie.startswith(f"rsk_ui_{PORT}=") and "httponly" in cookie and "samesite=strict" in cookie
    assert "path=/" in cookie and "max-age" not in cookie and "expires" not in cookie  # gone with the browser
    assert not launch_file(PORT).exists()  # spent: the file that held it is removed
    assert client.get("/").status_code == 200
    # the same token again, from another client (an agent that read it late): refused, says what it means
    other = TestClient(ui.app(), base_url=BASE, follow_redirects=False)
    r = other.get(f"/launch?token={ui.guard.token}")
    assert r.status_code == 403 and "someone else did" in r.text
    assert "rsk_ui" not in r.headers.get("set-cookie", "")
    assert other.get("/").status_code == 403
    # a wrong token and a forged cookie are refused too
    assert _page()[1].get("/launch?token=nope").status_code == 403
    forged = TestClient(ui.app(), base_url=BASE, cookies={f"rsk_ui_{PORT}": "guess"})
    assert forged.get("/").status_code == 403


def test_a_foreign_host_is_421_even_another_port_of_127_0_0_1(project: str) -> None:
    ui, client = _signed_in()
    for host in ("127.0.0.1", f"127.0.0.1:{PORT + 1}", f"evil.example:{PORT}", "attacker.test", f"0.0.0.0:{PORT}"):
        assert client.get("/", headers={"host": host}).status_code == 421, host
        assert client.get(f"/launch?token={ui.guard.token}", headers={"host": host}).status_code == 421
    assert client.get("/", headers={"host": f"localhost:{PORT}"}).status_code == 200


def test_every_answer_forbids_framing_and_inline_script(project: str) -> None:
    _, client = _signed_in()
    for path in ("/", "/budgets", "/static/ui.css", "/nope"):
        r = client.get(path)
        csp = r.headers["content-security-policy"]
        assert "script-src 'self'" in csp and "frame-ancestors 'none'" in csp and "unsafe-inline" not in csp
        assert r.headers["x-frame-options"] == "DENY" and r.headers["x-content-type-options"] == "nosniff"
    assert client.get("/", headers={"host": "x"}).headers["x-frame-options"] == "DENY"  # refusals too
    assert "<script>" not in client.get("/").text.replace('<script src="/static/ui.js', "")


def test_approve_needs_the_origin_and_the_csrf_token_and_no_get_acts(project: str) -> None:
    card = file_card(project)
    _, client = _signed_in()
    token = _csrf(client)
    form = {"csrf": token, "project": project, "plan_hash": card.plan_hash, "uses": "2", "expires": "8h"}
    url = f"/cards/{card.id}/approve"
    assert client.get(url).status_code == 405  # no GET changes anything
    assert client.post(url, data=form).status_code == 403  # no Origin (a request not made by a browser page)
    assert client.post(url, data=form, headers={"origin": "http://evil.example"}).status_code == 403
    assert client.post(url, data=form, headers={"origin": f"http://127.0.0.1:{PORT + 1}"}).status_code == 403
    assert client.post(url, data=form, headers={**ORIGIN, "sec-fetch-site": "same-site"}).status_code == 403
    assert client.post(url, data={**form, "csrf": "x"}, headers=ORIGIN).status_code == 403
    assert client.post(url, data={k: v for k, v in form.items() if k != "csrf"}, headers=ORIGIN).status_code == 403
    assert client.put(url, data=form, headers=ORIGIN).status_code == 405
    assert Store(project).load().cards[0].status == "pending" and Store(project).load().approvals == []
    r = client.post(url, data=form, headers=ORIGIN)
    assert r.status_code == 303 and r.headers["location"].startswith(f"/?done=approved&card={card.id}")
    ledger = Store(project).load()
    assert ledger.cards[0].status == "approved" and ledger.approvals[0].uses_left == 2
    assert ledger.approvals[0].expires is not None
    entry = Store(project).read_audit()[-1]
    assert entry.event == "approve" and "(via ui, session " in entry.by and entry.plan_hash == card.plan_hash
    assert client.post(url, data=form, headers=ORIGIN).status_code == 400  # already approved: said, not done twice
    assert len(Store(project).load().approvals) == 1


def test_a_card_whose_plan_changed_is_refused_409(project: str) -> None:
    card = file_card(project)
    _, client = _signed_in()
    token = _csrf(client)
    with Store(project).transaction() as ledger:  # the card now binds another plan than the page showed
        ledger.cards[0].plan_hash = "e" * 64
    for verb, extra in (("approve", {}), ("deny", {"reason": "no"})):
        r = client.post(f"/cards/{card.id}/{verb}", headers=ORIGIN,
                        data={"csrf": token, "project": project, "plan_hash": card.plan_hash, **extra})  # fmt: skip
        assert r.status_code == 409, r.text
    ledger = Store(project).load()
    assert ledger.cards[0].status == "pending" and ledger.approvals == []


def test_deny_needs_a_reason_and_tells_it(project: str) -> None:
    card = file_card(project)
    _, client = _signed_in()
    form = {"csrf": _csrf(client), "project": project, "plan_hash": card.plan_hash}
    assert client.post(f"/cards/{card.id}/deny", data={**form, "reason": "  "}, headers=ORIGIN).status_code == 400
    r = client.post(f"/cards/{card.id}/deny", data={**form, "reason": "use the cpu partition"}, headers=ORIGIN)
    assert r.status_code == 303
    c = Store(project).load().cards[0]
    assert c.status == "denied" and c.reason == "use the cpu partition" and "via ui" in (c.decided_by or "")


def test_read_only_shows_everything_and_offers_no_acts(project: str) -> None:
    from rsk.ledger.grants import add_grant, add_rule
    from rsk.ledger.models import DenyRule, Grant

    card = file_card(project)
    add_grant(Store(project), Grant(targets=["lab"], gpu_hours=10, note="the sweep"))
    add_rule(Store(project), DenyRule(reason="no rm -rf", command="*rm -rf*"), "me")
    ui, client = _signed_in(read_only=True)
    page = client.get("/").text
    assert card.id in page and card.plan_hash in page and "Read-only" in page
    assert "<form" not in page and "<button" not in page and 'name="csrf"' not in page
    budgets = client.get("/budgets").text
    assert "the sweep" in budgets and "no rm -rf" in budgets and "<form" not in budgets
    for path in ("/board", "/gpus", "/?part=1", "/budgets?part=1"):
        r = client.get(path)
        assert r.status_code == 200 and "<form" not in r.text, path
    # the session's own CSRF token, from the page's own origin: still no act (read-only is not a missing form)
    (session,) = ui.guard.sessions.values()
    for verb, extra in (("approve", {"uses": "1"}), ("deny", {"reason": "no"})):
        form = {"csrf": session.csrf, "project": project, "plan_hash": card.plan_hash, **extra}
        r = client.post(f"/cards/{card.id}/{verb}", headers=ORIGIN, data=form)
        assert r.status_code == 403 and "Read-only" in r.text, r.text
    ledger = Store(project).load()
    assert ledger.cards[0].status == "pending" and ledger.approvals == []
    assert [e.event for e in Store(project).read_audit()].count("approve") == 0


def test_agent_text_is_escaped_and_made_inert(project: str) -> None:
    file_card(project, argv=["sh", "-c", XSS], requester="</script><b>boss</b>", env=["A=\u202eevil"],
              script="echo <b>\n</script>")  # fmt: skip
    _, client = _signed_in()
    page = client.get("/").text
    assert "<script>document" not in page and "<img" not in page and "<b>" not in page
    assert "&lt;script&gt;document.title" in page and "&lt;img src=x onerror=" in page
    assert "\u202e" not in page and "\\u202e" in page  # a bidi override shows as an escape
    assert "&lt;/script&gt;&lt;b&gt;boss" in page


def test_the_live_part_and_its_digest(project: str) -> None:
    _, client = _signed_in()
    first = client.get("/?part=1")
    assert first.status_code == 200 and "<html" not in first.text and "No card waits" in first.text
    file_card(project)
    second = client.get("/?part=1")
    assert second.headers["x-rsk-digest"] != first.headers["x-rsk-digest"] and "c-0123456789ab" in second.text


def test_peer_uid_names_the_user_of_the_other_end(tmp_path: Path) -> None:
    import os

    from rsk.ui.guard import peer_socket, socket_owner

    server = socket.create_server(("127.0.0.1", 0))
    client = socket.create_connection(server.getsockname())
    conn, addr = server.accept()
    try:
        assert peer_uid(addr, server.getsockname()) == os.getuid()
        assert peer_uid(("127.0.0.1", 1), server.getsockname()) == -1  # no such connection: refused as a stranger
        assert peer_uid(addr, server.getsockname(), proc=tmp_path) is None  # no /proc/net: not Linux
        found = peer_socket(addr, server.getsockname())
        assert found is not None and socket_owner(found[1]).startswith(f"{os.getpid()} ")  # this process holds it
        assert socket_owner(0) == ""
    finally:
        for s in (conn, client, server):
            s.close()


def test_the_gate_refuses_another_users_connection(project: str) -> None:
    ui = Ui(Guard(port=PORT), Config(targets=[], uid=4242424))  # the page's user is someone else
    client = TestClient(ui.app(), base_url=BASE)
    assert client.get("/static/ui.css").status_code == 403


@pytest.mark.parametrize("verb", ["approve", "deny", "withdraw"])
def test_only_approve_and_deny_are_acts(project: str, verb: str) -> None:
    card = file_card(project)
    _, client = _signed_in()
    form = {"csrf": _csrf(client), "project": project, "plan_hash": card.plan_hash, "reason": "x"}
    r = client.post(f"/cards/{card.id}/{verb}", data=form, headers=ORIGIN)
    assert r.status_code == (404 if verb == "withdraw" else 303)


def test_logs_are_read_only_for_a_target_the_page_watches(project: str) -> None:
    _, client = _signed_in()  # a page watching no target
    r = client.get("/logs", params={"project": project, "target": "elsewhere", "job": "1"})
    assert r.status_code == 200 and "does not watch target" in r.text
    r = client.get("/logs", params={"project": "../x", "target": "lab", "job": "1"})
    assert "is not valid" in r.text


def test_the_page_says_a_card_was_decided_only_when_the_ledger_says_so(project: str) -> None:
    card = file_card(project)
    _, client = _signed_in()
    # a link from elsewhere (another port of 127.0.0.1 sends the cookie along) claiming an act
    assert "Approved card" not in client.get(f"/?done=approved&card={card.id}").text
    form = {"csrf": _csrf(client), "project": project, "plan_hash": card.plan_hash, "reason": "no"}
    assert client.post(f"/cards/{card.id}/deny", data=form, headers=ORIGIN).status_code == 303
    assert "Approved card" not in client.get(f"/?done=approved&card={card.id}").text
    assert f"Denied card {card.id}" in client.get(f"/?done=denied&card={card.id}").text


def test_a_request_naming_a_proxy_is_refused_and_uvicorn_trusts_no_forwarded_address(project: str) -> None:
    """uvicorn would take X-Forwarded-For from 127.0.0.1 as the client's address and port: another user could
    name the human's own connection to the page and pass the peer's-user check."""
    from rsk.ui.server import server_config

    ui, client = _signed_in()
    assert client.get("/").status_code == 200
    for header in ("X-Forwarded-For", "Forwarded", "X-Real-IP"):
        assert client.get("/", headers={header: "127.0.0.1:40000"}).status_code == 403
    config = server_config(ui)
    assert config.proxy_headers is False and config.access_log is False


def test_a_navigation_from_another_site_without_the_cookie_reopens_itself_and_nothing_else(project: str) -> None:
    _, client = _page()
    nav = {"sec-fetch-mode": "navigate", "sec-fetch-site": "cross-site"}
    r = client.get("/logs?project=p&target=t&job=1", headers=nav)
    assert r.status_code == 200 and 'url=/logs?project=p&amp;target=t&amp;job=1"' in r.text and "<main" not in r.text
    assert client.get("/", headers={**nav, "sec-fetch-site": "same-origin"}).status_code == 403  # no loop
    assert client.get("/").status_code == 403
    assert client.post("/cards/c-1/approve", headers={**nav, **ORIGIN}).status_code == 403  # never an act


def test_a_navigation_from_elsewhere_reopens_only_the_pages_own_addresses(project: str) -> None:
    """`/\\evil.test` (sent as /%5Cevil.test) is `//evil.test` to a browser: a bounce to it would be an open
    redirect to another site (the meta refresh, in a browser without script)."""
    _, client = _page()
    nav = {"sec-fetch-mode": "navigate", "sec-fetch-site": "cross-site"}
    for path in ("/%5Cevil.test", "/%5C%5Cevil.test/x", "/nope", "/static/../x"):
        r = client.get(path, headers=nav)
        assert r.status_code == 403 and "url=" not in r.text and "evil.test" not in r.text, path
    for path in ("/", "/budgets", "/board", "/gpus", "/logs?project=p&target=t&job=1"):
        assert 'content="0;url=/' in client.get(path, headers=nav).text, path


@pytest.mark.parametrize("uses", ["\u00b2", "\u0663", "9" * 5000, "0", "-1", "1.5"])
def test_a_bad_number_of_uses_is_refused_with_a_reason_not_a_server_error(project: str, uses: str) -> None:
    card = file_card(project)
    _, client = _signed_in()
    form = {"csrf": _csrf(client), "project": project, "plan_hash": card.plan_hash, "uses": uses}
    r = client.post(f"/cards/{card.id}/approve", data=form, headers=ORIGIN)
    assert r.status_code == 400 and "uses" in r.text, r.text
    assert Store(project).load().cards[0].status == "pending"


def test_an_expiry_past_the_calendar_is_refused_with_a_reason_not_a_server_error(project: str) -> None:
    card = file_card(project)
    _, client = _signed_in()
    form = {"csrf": _csrf(client), "project": project, "plan_hash": card.plan_hash, "expires": "99999999999d"}
    r = client.post(f"/cards/{card.id}/approve", data=form, headers=ORIGIN)
    assert r.status_code == 400 and "neither a duration nor a date" in r.text
    assert Store(project).load().cards[0].status == "pending"


def test_a_page_older_than_rsk_on_disk_says_so_on_every_page_and_acts_no_more(project: str, tmp_path: Path) -> None:
    """`rsk ui` runs for days; an upgrade or a checkout changes rsk's files under it. Its old code may misread
    the ledger the new CLI writes (a card it cannot read: "No card waits" while one does)."""
    code = tmp_path / "code"
    code.mkdir()
    (code / "models.py").write_text("# the ledger's shape\n")
    now = [0.0]
    ui = Ui(Guard(port=PORT), Config(targets=[], uid=None, sources=[code]), clock=lambda: now[0])
    client = TestClient(ui.app(), base_url=BASE, follow_redirects=False)
    client.get(f"/launch?token={ui.guard.token}")
    card = file_card(project)
    assert "older than rsk" not in client.get("/").text
    (code / "models.py").write_text("# the ledger's shape, and a new field\n")  # the upgrade
    now[0] += 1.0
    for path in ("/", "/?part=1", "/budgets?part=1", "/board"):
        assert "This page is older than rsk" in client.get(path).text, path
    form = {"csrf": _csrf(client), "project": project, "plan_hash": card.plan_hash, "reason": "no"}
    for verb in ("approve", "deny"):
        r = client.post(f"/cards/{card.id}/{verb}", data=form, headers=ORIGIN)
        assert r.status_code == 503 and "run `rsk ui` again" in r.text
    assert Store(project).load().cards[0].status == "pending"
