"""The page in a real browser: Debian's Chromium driven by Playwright's Python package (never a browser
Playwright downloads), one browser and one signed-in page per module, against a real rsk ui server."""

from __future__ import annotations

import os
import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

CHROMIUM = Path(os.environ.get("RSK_TEST_CHROMIUM", "/usr/bin/chromium"))
SHOTS = Path(os.environ.get("RSK_UI_SHOTS", "/tmp/rsk-ui-shots"))


@dataclass
class Served:
    base: str
    port: int
    ui: Any
    browser: Any
    context: Any
    page: Any

    def shot(self, name: str) -> Path:
        SHOTS.mkdir(parents=True, exist_ok=True)
        path = SHOTS / f"{name}.png"
        self.page.screenshot(path=str(path), full_page=True)
        return path


def _need_browser() -> Any:
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        if os.environ.get("CI"):
            pytest.fail("playwright is not installed (sh tests/setup.sh installs it)")
        pytest.skip("playwright is not installed (sh tests/setup.sh installs it)")
    if not CHROMIUM.exists():
        if os.environ.get("CI"):
            pytest.fail(f"{CHROMIUM} is missing (sh tests/setup.sh installs Debian's chromium)")
        pytest.skip(f"{CHROMIUM} is missing (sh tests/setup.sh installs Debian's chromium)")
    return sync_playwright


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    sync_playwright = _need_browser()
    import uvicorn

    from rsk.ui.guard import Guard
    from rsk.ui.server import Config, Ui, bind

    sock = bind(0)
    port = sock.getsockname()[1]
    ui = Ui(Guard(port=port), Config(targets=[]))
    server = uvicorn.Server(uvicorn.Config(ui.app(), log_level="warning", access_log=False, lifespan="off"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started and time.monotonic() < deadline:
        time.sleep(0.02)
    assert server.started
    with sync_playwright() as p:
        # evil.test reaches the page too, as a rebinding DNS name would: its Host must be refused
        browser = p.chromium.launch(executable_path=str(CHROMIUM),
                                    args=["--host-resolver-rules=MAP evil.test 127.0.0.1"])  # fmt: skip
        context = browser.new_context(viewport={"width": 1280, "height": 800})
        page = context.new_page()
        base = f"http://127.0.0.1:{port}"
        page.goto(f"{base}/launch?token={ui.guard.token}")
        assert page.url == f"{base}/"
        yield Served(base, port, ui, browser, context, page)
        browser.close()
    server.should_exit = True
    thread.join(10)
    ui.close()


@pytest.fixture
def other_site() -> Iterator[tuple[str, Path]]:
    """Another page on 127.0.0.1 (another port: the same site to a browser, another origin), serving files
    from a directory the test writes."""
    import functools
    import http.server

    root = Path(os.environ.get("TMPDIR", "/tmp")) / f"rsk-ui-other-{os.getpid()}"
    root.mkdir(exist_ok=True)
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(root))
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    httpd.RequestHandlerClass.log_message = lambda *a: None  # type: ignore[method-assign]
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}", root
    httpd.shutdown()
    for f in root.iterdir():
        f.unlink()
    root.rmdir()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])
