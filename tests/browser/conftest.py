"""The page in a real browser: Debian's Chromium driven by Playwright's Python package (never a browser
Playwright downloads), one browser and one signed-in page per module, against a real rsk ui server."""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.ui_serve import chromium, serving, shot, sign_in


@dataclass
class Served:
    base: str
    port: int
    ui: Any
    page: Any

    def shot(self, name: str) -> Path:
        return shot(self.page, name)


@pytest.fixture(scope="module")
def served() -> Iterator[Served]:
    with chromium() as browser, serving() as server:
        yield Served(server.base, server.port, server.ui, sign_in(browser, server))


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
