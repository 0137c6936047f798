"""The page's web server: a Starlette app behind the gate (rsk.ui.guard), served by uvicorn on 127.0.0.1 only.

No GET changes anything. The only acts are POST /cards/CARD/approve and /cards/CARD/deny, which call the
ledger's own approve and deny (rsk.ledger.cards, as `rsk approve` and `rsk deny` do), bound to the plan hash
the page showed and audited as the human's, "via ui" with the session's public id."""

from __future__ import annotations

import contextlib
import getpass
import hashlib
import os
import re
import socket
import time
from collections.abc import Awaitable, Callable, MutableMapping
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response
from starlette.routing import Route

from rsk import __version__
from rsk.errors import ConflictError, RskError, StateError, UsageError
from rsk.ledger import cards as ledger_cards
from rsk.ledger.notify import PageFile, page_file
from rsk.ledger.store import Store
from rsk.local.atomic import write_atomic
from rsk.local.paths import check_token, private_dir, rsk_home
from rsk.ops.gpus import GpuInventory, inventory
from rsk.ops.watcher import Snapshot, Watcher
from rsk.request.units import parse_expiry
from rsk.ui import feeds, pages
from rsk.ui.guard import SECURITY_HEADERS, Guard, Session, peer_socket, socket_owner
from rsk.ui.html import Markup, document, el, esc, join
from rsk.wire.stamp import roots, stamp

if TYPE_CHECKING:
    import uvicorn

    from rsk.ledger.models import Card
    from rsk.ledger.taskkinds import TaskKinds

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

OUTDATED = (
    "rsk was updated on disk since this page started; this page runs the old code, which may misread the ledger "
    "the new one writes, and acts no more. Stop it (Ctrl-C where `rsk ui` runs) and run `rsk ui` again; nothing "
    "was decided."
)
POLL_MS = 2000  # the page asks for its live part at most this often (and not while hidden)
CARD_ID = re.compile(r"c-[0-9a-f]{1,32}")
USES, MAX_USES = re.compile(r"[0-9]{1,4}"), 1000  # ASCII digits only: str.isdigit takes "²", which int() refuses
DONE = {
    "approved": "Approved card {card}: the agent's `rsk wait {card}` continues.",
    "denied": "Denied card {card}: the agent is told your reason.",
}


@dataclass
class Config:
    """What one `rsk ui` serves."""

    targets: list[str]
    read_only: bool = False
    board_every: float = 5.0  # seconds between the board's remote calls, however often the page asks
    gpus_every: float = 10.0
    uid: int | None = field(default_factory=os.getuid)  # the only OS user served; None: no check (in process)
    sources: list[Path] | None = None  # the code whose change on disk outdates this page (rsk.wire.stamp); None: rsk's


def _static() -> dict[str, tuple[bytes, str]]:
    root = resources.files("rsk.ui") / "static"
    return {
        "ui.css": ((root / "ui.css").read_bytes(), "text/css; charset=utf-8"),
        "ui.js": ((root / "ui.js").read_bytes(), "text/javascript; charset=utf-8"),
        "icon.svg": ((root / "icon.svg").read_bytes(), "image/svg+xml"),
    }


def _page(body: Markup, status: int = 200, headers: dict[str, str] | None = None) -> HTMLResponse:
    return HTMLResponse(str(body), status_code=status, headers=headers)


def _refusal(status: int, title: str, text: str) -> HTMLResponse:
    return _page(
        document(
            title, el("section", {"class": "refused"}, el("h1", {}, title), el("p", {}, text)), version=__version__
        ),
        status,
    )


PAGES = frozenset({"/", "/budgets", "/board", "/gpus", "/logs"})  # what a link from elsewhere may open


def _from_elsewhere(request: Request) -> bool:
    """A GET navigation that another site started (a link in a chat, the notification's address) to one of the
    pages: the browser left the SameSite=Strict cookie out, and sends it on a navigation this page starts."""
    h = request.headers
    return (
        request.method == "GET"
        and request.url.path in PAGES
        and h.get("sec-fetch-mode") == "navigate"
        and h.get("sec-fetch-site") in ("cross-site", "same-site")
    )


def _bounce(path: str) -> HTMLResponse:
    """A page with nothing on it that navigates to `path` again, now from this site (ui.js, which keeps the
    #card-ID; a browser without script follows the meta refresh). No data and no act: a GET only reads. Only a
    page's own address: `/\\host` is `//host` to a browser, another site."""
    target = path if path.partition("?")[0] in PAGES else "/"
    return HTMLResponse(
        '<!doctype html><html lang="en"><head><meta charset="utf-8">'
        f'<noscript><meta http-equiv="refresh" content="0;url={esc(target)}"></noscript><title>rsk</title>'
        '<script src="/static/ui.js" defer></script></head><body data-bounce="1"><p>Opening the page...</p>'
        "</body></html>"
    )


class Gate:
    """Every request passes here first: the peer's OS user, the exact Host, the session (but for the launch
    URL and the static files), the method, and for a POST its Origin; the security headers go on every answer."""

    def __init__(self, app: ASGIApp, guard: Guard, uid: int | None) -> None:
        self.app, self.guard, self.uid = app, guard, uid

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return  # lifespan is off; nothing else is served
        request = Request(scope)

        async def secured(message: Message) -> None:
            if message["type"] == "http.response.start":
                raw = [(k, v) for k, v in message.get("headers", []) if k.decode().lower() not in SECURITY_HEADERS]
                message["headers"] = raw + [(k.encode(), v.encode()) for k, v in SECURITY_HEADERS.items()]
            await send(message)

        refusal = self.check(scope, request)
        if refusal is not None:
            await refusal(scope, receive, secured)
            return
        await self.app(scope, receive, secured)

    def check(self, scope: Scope, request: Request) -> Response | None:
        if any(k in request.headers for k in ("x-forwarded-for", "forwarded", "x-real-ip")):
            # nothing stands between a browser and this page: a request that says otherwise is forged
            return _refusal(403, "Not yours", "This page is reached directly, never through a proxy.")
        if self.uid is not None:
            client, server = scope.get("client"), scope.get("server")
            found = peer_socket((client[0], client[1]), (server[0], server[1])) if client and server else (-1, 0)
            if found is not None and found[0] != self.uid:
                return _refusal(403, "Not yours", "This page serves only its own OS user's processes.")
            scope.setdefault("state", {})["peer_inode"] = found[1] if found is not None else 0
        if not self.guard.host_ok(request.headers.get("host")):
            return _refusal(421, "Wrong address", f"Open this page at {self.guard.url()} (the Host did not match).")
        path = scope.get("path", "")
        if request.method not in ("GET", "HEAD", "POST"):
            return _refusal(405, "Not allowed", "This page only reads (GET) and acts through its own forms (POST).")
        if path.startswith("/static/") or path == "/launch":
            return None if request.method in ("GET", "HEAD") else _refusal(405, "Not allowed", "Nothing to post.")
        session = self.guard.session(request.cookies.get(self.guard.cookie))
        if session is None and _from_elsewhere(request):
            query = scope.get("query_string", b"").decode("latin-1")
            return _bounce(path + (f"?{query}" if query else ""))
        if session is None:
            return _refusal(
                403,
                "Not signed in",
                "Open the link `rsk ui` printed in your terminal; it works once. Run `rsk ui` again for a new one.",
            )
        scope.setdefault("state", {})["session"] = session
        # a POST's Origin here; its form's CSRF token once the form is read (Ui.act)
        origin, site = request.headers.get("origin"), request.headers.get("sec-fetch-site")
        if request.method == "POST" and (why := self.guard.refuse_origin(origin, site)):
            return _refusal(403, "Refused", why)
        return None


@dataclass
class Ui:
    """The page's state: its guard, its config, the feeds of cluster facts."""

    guard: Guard
    config: Config
    static: dict[str, tuple[bytes, str]] = field(default_factory=_static)
    board: feeds.Fresh[list[tuple[str, Snapshot]]] | None = None
    gpus: feeds.Fresh[tuple[list[GpuInventory], str]] | None = None
    watchers: dict[str, Watcher] = field(default_factory=dict)
    clock: Callable[[], float] = time.monotonic
    sources: list[Path] = field(default_factory=list)
    build: str = ""  # rsk.wire.stamp of the code this page runs, when it started
    _checked: float | None = None
    _outdated: bool = False
    _kinds: dict[str, TaskKinds] = field(default_factory=dict)  # a big batch's distinct commands, by its file's sha

    def __post_init__(self) -> None:
        self.board = feeds.Fresh(self._poll_board, every=self.config.board_every)
        self.gpus = feeds.Fresh(self._poll_gpus, every=self.config.gpus_every)
        self.sources = self.config.sources if self.config.sources is not None else roots()
        self.build = stamp(self.sources)

    def outdated(self) -> bool:
        """Whether rsk's files changed on disk since this page started (an upgrade, a checkout): its code may no
        longer read the ledger the CLI writes, and it must not act on it (looked at most once a second)."""
        now = self.clock()
        if not self._outdated and (self._checked is None or now - self._checked >= 1.0):
            self._checked = now
            self._outdated = stamp(self.sources) != self.build
        return self._outdated

    def _poll_board(self) -> list[tuple[str, Snapshot]]:
        out = []
        for project in ledger_cards.projects():
            w = self.watchers.setdefault(project, Watcher(self.config.targets, project))
            out.append((project, w.poll()))
        return out

    def _poll_gpus(self) -> tuple[list[GpuInventory], str]:
        invs, errors = [], []
        for target in self.config.targets:
            try:
                invs.append(inventory(target))
            except RskError as exc:
                errors.append(f"{target}: {exc.message}")
        return invs, "; ".join(errors)

    def close(self) -> None:
        for w in self.watchers.values():
            w.close()

    # --- the parts a page polls -------------------------------------------------------------------------

    def part(self, name: str, session: Session) -> Markup:
        notice = pages.outdated_notice() if self.outdated() else None
        return join([notice, self._part(name, session)])

    def _part(self, name: str, session: Session) -> Markup:
        csrf = None if self.config.read_only else session.csrf
        if name == "cards":
            return pages.cards_section(feeds.cards(ledger_cards.projects(), self._kinds), csrf)
        if name == "budgets":
            return pages.budgets_section(feeds.budgets(ledger_cards.projects()))
        if name == "board":
            assert self.board is not None
            return pages.board_section(*self.board.read())
        assert self.gpus is not None
        value, error, _ = self.gpus.read()
        invs, errs = value if value is not None else (None, "")
        return pages.gpus_section(invs, "; ".join(e for e in (error, errs) if e))

    def view(self, name: str, title: str, request: Request) -> Response:
        session: Session = request.state.session
        live = self.part(name, session)
        digest = hashlib.sha256(live.encode()).hexdigest()[:16]
        if request.query_params.get("part") == "1":
            return _page(live, headers={"x-rsk-digest": digest})
        notice = None
        done, card = request.query_params.get("done", ""), request.query_params.get("card", "")
        # said only when the ledger says so: a link from elsewhere cannot make the page claim an act
        if done in DONE and CARD_ID.fullmatch(card) and self._decided(card) == done:
            notice = el("p", {"class": "notice", "role": "status"}, DONE[done].format(card=card))
        banner = (
            el("p", {"class": "readonly"}, "Read-only: this page shows everything and offers no acts.")
            if self.config.read_only
            else None
        )
        body = el(
            "div",
            {},
            banner,
            notice,
            el("h1", {}, title),
            el(
                "div",
                {
                    "id": "live",
                    "data-src": f"{request.url.path}?part=1",
                    "data-every": str(POLL_MS),
                    "data-digest": digest,
                    "aria-live": "polite",
                },
                live,
            ),
        )
        return _page(document(title, body, nav=name, version=__version__))

    def _decided(self, card_id: str) -> str:
        for _, card in feeds.cards(ledger_cards.projects()).decided:
            if card.id == card_id:
                return card.status
        return ""

    # --- the acts ---------------------------------------------------------------------------------------

    async def act(self, request: Request) -> Response:
        session: Session = request.state.session
        form = await request.form()
        fields = {k: v for k, v in form.items() if isinstance(v, str)}
        why = self.guard.refuse_post(
            session, request.headers.get("origin"), request.headers.get("sec-fetch-site"), fields.get("csrf")
        )
        if why:
            return _refusal(403, "Refused", why)
        if self.config.read_only:
            return _refusal(403, "Read-only", "This page was started with --read-only: it offers no acts.")
        if self.outdated():
            return _refusal(503, "This page is older than rsk", OUTDATED)
        card_id, verb = request.path_params["card"], request.path_params["verb"]
        try:
            if not CARD_ID.fullmatch(card_id):
                raise UsageError(f"no card {card_id!r}")
            project = check_token("project", fields.get("project", ""))
            plan_hash = fields.get("plan_hash", "")
            if not plan_hash:
                raise UsageError("the form names no plan hash", "reload the page")
            store = Store(project)
            # who sent it, for a later look: the session, and the process that holds the connection's other end
            sender = socket_owner(getattr(request.state, "peer_inode", 0))
            by = f"{getpass.getuser()} (via ui, session {session.public}" + (f", from {sender})" if sender else ")")
            if verb == "approve":
                uses = fields.get("uses", "1").strip() or "1"
                if not USES.fullmatch(uses) or not 1 <= int(uses) <= MAX_USES:
                    raise UsageError(
                        f"uses {uses[:20]!r} is not a whole number from 1 to {MAX_USES}",
                        "give the number of launches this approval allows (`rsk approve --uses N` takes more)",
                    )
                expires = fields.get("expires", "").strip()
                ledger_cards.approve(
                    store,
                    card_id,
                    by,
                    uses=int(uses),
                    expires=parse_expiry(expires) if expires and expires != "never" else None,
                    note=fields.get("note", "").strip(),
                    plan_hash=plan_hash,
                )
                done = "approved"
            else:
                ledger_cards.deny(store, card_id, by, fields.get("reason", ""), plan_hash=plan_hash)
                done = "denied"
        except ConflictError as exc:
            return _refusal(409, "The card changed", f"{exc.message}. {exc.hint or ''}")
        except StateError as exc:
            return _refusal(503, "The ledger cannot be read", f"{exc.message}. {exc.hint or ''}")
        except RskError as exc:
            return _refusal(400, "Not done", f"{exc.message}. {exc.hint or ''}")
        return RedirectResponse(f"/?done={done}&card={card_id}#card-{card_id}", status_code=303)

    # --- the rest ---------------------------------------------------------------------------------------

    def logs(self, request: Request) -> Response:
        """A job's last lines, read from the cluster when the human asks (a click on the board)."""
        from rsk.ops.logs import LogTail, logs

        q = request.query_params
        stream = "stderr" if q.get("stream") == "stderr" else "stdout"
        tail: LogTail | None = None
        try:
            project, target = check_token("project", q.get("project", "")), check_token("target", q.get("target", ""))
            job = check_token("job", q.get("job", ""))
            if target not in self.config.targets:
                raise UsageError(f"this page does not watch target {target!r}")
            tail, error = logs(target, project, job, stream=stream, lines=pages.LOG_LINES, max_bytes=64 * 1024), ""
        except RskError as exc:
            project, target, job, error = q.get("project", "?"), q.get("target", "?"), q.get("job", "?"), exc.message
        body = el("div", {}, el("h1", {}, "Job output"), pages.logs_section(project, target, job, stream, tail, error))
        return _page(document("Job output", body, nav="board", version=__version__))

    def tasks(self, request: Request) -> Response:
        """Every task of a batch's card, a page at a time (ADR 0066), read when the human asks."""
        q = request.query_params
        card: Card | None = None
        tasks, error, project = None, "", q.get("project", "?")
        page = int(q["page"]) if q.get("page", "").isdigit() and len(q["page"]) < 9 else 1
        try:
            project, card_id = check_token("project", project), q.get("card", "")
            if not CARD_ID.fullmatch(card_id):
                raise UsageError(f"no card {card_id[:40]!r}")
            store = Store(project)
            card = ledger_cards.find_card(store.load(), card_id, store.archive)
            tasks = ledger_cards.batch_tasks(store, card)
        except RskError as exc:
            error = exc.message
        body = el("div", {}, el("h1", {}, "Tasks"), pages.tasks_section(project, card, tasks, page, error))
        return _page(document("Tasks", body, nav="cards", version=__version__))

    def launch(self, request: Request) -> Response:
        session = self.guard.spend(request.query_params.get("token"))
        if session is None:
            return _refusal(
                403,
                "This link was used already",
                "A launch link works once. If you did not open it before, someone else did: stop "
                "`rsk ui` (Ctrl-C) and look at what runs as you. Run `rsk ui` again for a new link.",
            )
        launch_file(self.guard.port).unlink(missing_ok=True)
        # a page of its own that moves on to /, not a redirect: a browser sends a SameSite=Strict cookie only
        # along a navigation this site started, and the link may have come from elsewhere (the launch file, a
        # chat), which makes a redirect chain cross-site and the first page signed out
        answer = HTMLResponse(
            '<!doctype html><html lang="en"><head><meta charset="utf-8"><meta http-equiv="refresh" content="0;url=/">'
            '<title>rsk: signed in</title></head><body><p>Signed in. <a href="/">Open the page</a>.</p></body></html>'
        )
        answer.set_cookie(self.guard.cookie, session.secret, httponly=True, samesite="strict", path="/")
        return answer

    def asset(self, request: Request) -> Response:
        found = self.static.get(request.path_params["name"])
        if found is None:
            return _refusal(404, "Not found", "No such file.")
        return Response(found[0], media_type=found[1])

    def app(self) -> ASGIApp:
        def page(name: str, title: str) -> Callable[[Request], Response]:
            return lambda request: self.view(name, title, request)

        routes = [
            Route("/", page("cards", "Cards"), methods=["GET", "HEAD"]),
            Route("/budgets", page("budgets", "Budgets"), methods=["GET", "HEAD"]),
            Route("/board", page("board", "Board"), methods=["GET", "HEAD"]),
            Route("/gpus", page("gpus", "GPUs"), methods=["GET", "HEAD"]),
            Route("/logs", self.logs, methods=["GET", "HEAD"]),
            Route("/tasks", self.tasks, methods=["GET", "HEAD"]),
            Route("/launch", self.launch, methods=["GET", "HEAD"]),
            Route("/static/{name}", self.asset, methods=["GET", "HEAD"]),
            Route("/cards/{card}/{verb:str}", self._act_route, methods=["POST"]),
        ]
        return Gate(Starlette(routes=routes), self.guard, self.config.uid)

    async def _act_route(self, request: Request) -> Response:
        if request.path_params["verb"] not in ("approve", "deny"):
            return _refusal(404, "Not found", "No such act.")
        return await self.act(request)


def launch_file(port: int) -> Path:
    """The launch link for the browser, as a file only this user reads (0600): the browser is started on this
    file, never on the URL, so the token is never in a command line another user can list."""
    return rsk_home() / "ui" / f"launch-{port}.html"


def write_launch_file(guard: Guard) -> Path:
    path = launch_file(guard.port)
    private_dir(path.parent)
    url = guard.launch_url()
    text = (
        f'<!doctype html><meta charset="utf-8"><meta http-equiv="refresh" content="0;url={url}">'
        f'<title>rsk ui</title><p>Opening <a href="{url}">the rsk page</a>...</p>\n'
    )
    write_atomic(path, text.encode(), mode=0o600)
    return path


def write_page_file(guard: Guard) -> Path:
    """Where the page serves, for the notification hook (rsk.ledger.notify.page_address)."""
    path = page_file()
    private_dir(path.parent)
    page = PageFile(address=guard.url(), pid=os.getpid())
    write_atomic(path, page.model_dump_json().encode(), mode=0o600)
    return path


def bind(port: int) -> socket.socket:
    """A listening socket on 127.0.0.1 only (port 0: any free port)."""
    try:
        sock = socket.create_server(("127.0.0.1", port), family=socket.AF_INET, reuse_port=False)
    except OSError as exc:
        raise UsageError(f"cannot listen on 127.0.0.1:{port}: {exc.strerror}", "pick another --port, or 0") from exc
    return sock


def server_config(ui: Ui) -> uvicorn.Config:
    """uvicorn as the page needs it. proxy_headers off: uvicorn would otherwise take the client's address and
    port from an X-Forwarded-For header sent from 127.0.0.1, and any local process could name another's
    connection to pass the peer's-user check. No access log: the launch URL carries the token. No websockets."""
    import uvicorn

    return uvicorn.Config(ui.app(), log_level="warning", access_log=False, lifespan="off", server_header=False,
                          date_header=False, proxy_headers=False, ws="none")  # fmt: skip


def serve(sock: socket.socket, ui: Ui) -> None:
    """Serve until Ctrl-C (uvicorn handles the signal), then remove the launch file."""
    import uvicorn

    config = server_config(ui)
    write_page_file(ui.guard)
    try:
        uvicorn.Server(config).run(sockets=[sock])
    finally:
        launch_file(ui.guard.port).unlink(missing_ok=True)
        with contextlib.suppress(OSError, ValueError):  # another page may have started since: leave its file
            if PageFile.model_validate_json(page_file().read_bytes()).pid == os.getpid():
                page_file().unlink()
        ui.close()
