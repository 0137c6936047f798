"""A real rsk ui server in a thread of the test (uvicorn on a real socket, so the peer's-user check runs),
and Debian's Chromium through Playwright: for the browser tests (tests/browser) and the lab's (tests/integration)."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

CHROMIUM = Path(os.environ.get("RSK_TEST_CHROMIUM", "/usr/bin/chromium"))
SHOTS = Path(os.environ.get("RSK_UI_SHOTS", "/tmp/rsk-ui-shots"))


@dataclass
class Server:
    base: str
    port: int
    ui: Any


@contextmanager
def serving(**config: Any) -> Iterator[Server]:
    import uvicorn

    from rsk.ui.guard import Guard
    from rsk.ui.server import Config, Ui, bind, server_config

    sock = bind(0)
    port = sock.getsockname()[1]
    ui = Ui(Guard(port=port), Config(**{"targets": [], **config}))
    server = uvicorn.Server(server_config(ui))  # as `rsk ui` serves
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started and time.monotonic() < deadline:
        time.sleep(0.02)
    assert server.started
    try:
        yield Server(f"http://127.0.0.1:{port}", port, ui)
    finally:
        server.should_exit = True
        thread.join(10)
        ui.close()


def sync_playwright() -> Any:
    """Playwright's entry, or a skip where it or Chromium is missing (a failure in CI, which installs both)."""
    try:
        from playwright.sync_api import sync_playwright as found
    except ImportError:
        (pytest.fail if os.environ.get("CI") else pytest.skip)("playwright is missing (sh tests/setup.sh installs it)")
    if not CHROMIUM.exists():
        (pytest.fail if os.environ.get("CI") else pytest.skip)(f"{CHROMIUM} is missing (sh tests/setup.sh installs it)")
    return found


@contextmanager
def chromium() -> Iterator[Any]:
    """One Chromium (Debian's; Playwright never downloads one); evil.test resolves to 127.0.0.1 in it, as a
    rebinding DNS name would."""
    with sync_playwright()() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM),
                                    args=["--host-resolver-rules=MAP evil.test 127.0.0.1"])  # fmt: skip
        try:
            yield browser
        finally:
            browser.close()


def sign_in(browser: Any, server: Server, width: int = 1280, height: int = 800) -> Any:
    """A new browser context signed in with the server's launch link: its page."""
    page = browser.new_context(viewport={"width": width, "height": height}).new_page()
    page.goto(f"{server.base}/launch?token={server.ui.guard.token}")
    page.wait_for_url(f"{server.base}/")
    return page


def shot(page: Any, name: str) -> Path:
    SHOTS.mkdir(parents=True, exist_ok=True)
    path = SHOTS / f"{name}.png"
    page.screenshot(path=str(path), full_page=True)
    return path
