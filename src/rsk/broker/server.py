"""The broker: one resident rsk per human that owns RSK_HOME, the SSH keys and warm connections, and
runs agents' commands for them over a Unix socket (docs/broker.md).

This module is the broker's core: the socket (in a private directory, checked before use), the lock that
lets one broker run, who may ask for what (from the socket's peer credentials, never from the message),
the wire format, and the idle exit. Running a command is the CLI's business: `serve` takes a `Runner`
(rsk.cli.broker_cmd gives it the CLI's own main), so outputs and exit codes are the CLI's in both modes.
"""

from __future__ import annotations

import contextlib
import fcntl
import io
import json
import os
import pwd
import shutil
import socket
import stat
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal, TextIO, cast

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from rsk import __version__
from rsk.broker.wanted import Reader, Wanted
from rsk.broker_client import default_socket, peer_uid
from rsk.codelist import MAX_BYTES, MAX_FILES, travels
from rsk.commands import BROKERED, HUMAN_ACTS, audience
from rsk.errors import ConnectError, StateError
from rsk.local.caller import Caller, ProjectFound, Rights, Upload, passed_env
from rsk.wire import safejson

WIRE_VERSION = 4  # rsk.broker_client.WIRE_VERSION
MAX_REQUEST = 1 << 20  # the request line: argv, env and the working directory, at most 1 MiB (and a client's answer)
MAX_UPLOAD = 40 << 20  # the line with the --script and --tasks files the broker asked for (16 MiB each at most)
MAX_DEPTH = 8  # every JSON the broker reads is a flat object of strings and lists: no deep nesting
REQUEST_DEADLINE = 10.0  # seconds for the whole request line: a client that drips it is cut off
UPLOAD_DEADLINE = 120.0  # seconds for the files the broker asked for (the client reads and lists them first)
ANSWER_DEADLINE = 120.0  # seconds for the client's answer to a step of a fetch it writes (rsk.local.handover)
DRAIN_LIMIT = 900.0  # seconds a stopping broker lets commands in flight run on (`logs --follow` waits 600 s)
BUSY_ANSWERS = 4  # connections per user told "busy" at once; beyond them a connection is closed unread

Runner = Callable[[list[str], Caller], int]  # runs argv for the caller (its output goes to the caller's streams)


def _nothing(argv: list[str], resolve: Callable[[str], Path]) -> Wanted:
    return Wanted()


__all__ = ["Broker", "BrokerInfo", "Config", "Request", "default_socket", "parse_allow", "refusal"]


class CodeUpload(BaseModel):
    """--code through the broker: the files its client read, listed as [name, size, executable]; their bytes
    follow the line, one file after another in this order. Never an archive: nothing but regular files of names
    rsk's rule allows can be said (ADR 0064). `error`: the client could not send them (the command says why)."""

    model_config = ConfigDict(extra="forbid")

    path: str  # the directory the broker asked for
    files: list[tuple[str, int, bool]] = Field(default=[], max_length=MAX_FILES)
    error: str = Field(default="", max_length=2000)
    hint: str = Field(default="", max_length=2000)


class SentProject(BaseModel):
    """The project file the client found from its working directory, as it read it (text None: it could not)."""

    model_config = ConfigDict(extra="forbid")

    path: str = Field(max_length=4096)
    text: str | None = Field(default=None, max_length=1 << 16)
    error: str = Field(default="", max_length=500)


class Request(BaseModel):
    """One request on the socket: a JSON line."""

    model_config = ConfigDict(extra="forbid")

    v: Literal[4]
    op: Literal["run", "ping", "stop"]
    argv: list[str] = []
    cwd: str = "/"
    env: dict[str, str] = {}
    # run: the nearest project file at or above cwd as the client found it (null: none), always said, never
    # looked for here (rsk.local.project.find)
    project_file: SentProject | None = None
    tty: bool = False
    columns: int = Field(default=200, ge=20, le=1000)
    ppid: int = 0


class Want(BaseModel):
    """The broker's answer to a request that names local paths: send these (as the caller), for any caller."""

    model_config = ConfigDict(extra="forbid")

    files: list[str] = []  # absolute paths of --script and --tasks
    code: str | None = None  # the absolute path of --code's directory
    exclude: list[str] = []  # --exclude's globs, for the tar of that directory


class Sent(BaseModel):
    """The client's line after a `want` frame: the files' text, and --code's list of files, whose bytes follow."""

    model_config = ConfigDict(extra="forbid")

    files: dict[str, str] = {}
    # the files the client could not send, and why: the first byte that is not UTF-8, or the reason
    unread: dict[str, int | str | dict[str, object]] = {}  # (a dict: rsk's error, e.g. link-refused)
    code: CodeUpload | None = None


class BrokerInfo(BaseModel):
    model_config = ConfigDict(extra="forbid")

    schema_version: int = 1
    pid: int
    uid: int
    socket: str
    started: float
    idle_exit_s: float  # 0: it never exits for want of requests
    requests: int
    running: int
    connections: dict[str, bool]  # target -> its warm connection is up
    allowed: dict[str, list[str]]  # other users allowed in, with their projects ("*": any)
    version: str = ""  # the rsk it runs
    build: str = ""  # rsk.wire.stamp of its files when it started: it stops once they change


def prepare_directory(directory: Path, shared: bool) -> None:
    """The socket's directory: ours, a real directory (not a symlink), closed to others (0700), or only
    traversable by them (0711) when other users may connect. Anything else is refused, never reused."""
    with contextlib.suppress(FileExistsError):
        directory.mkdir(mode=0o700)
    st = os.lstat(directory)
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.getuid():
        raise StateError(
            f"{directory} is not a directory of this user (a symlink, or someone else's)",
            "remove it, or point RSK_BROKER at a socket in a directory of your own",
        )
    directory.chmod(0o711 if shared else 0o700)


@dataclass
class Config:
    socket: Path
    idle_exit_s: float = 3600.0  # 0: never
    allowed: dict[int, frozenset[str] | None] = field(default_factory=dict)  # uid -> projects (None: any)
    max_running: int = 32  # the broker's own user's connections served at once; beyond, retry (exit 75)
    max_running_other: int = 8  # at once per other user, so one agent cannot take every slot
    max_running_others: int = 16  # at once for all other users together: the own user's slots are apart


def parse_allow(specs: list[str]) -> dict[int, frozenset[str] | None]:
    """USER[:PROJECT,...] -> uid -> projects. A user must exist; no projects means any project."""
    out: dict[int, frozenset[str] | None] = {}
    for spec in specs:
        name, _, projects = spec.partition(":")
        try:
            uid = pwd.getpwnam(name).pw_uid
        except KeyError:
            raise StateError(f"--allow {spec}: no user {name!r} on this machine") from None
        if uid == os.getuid():
            raise StateError(f"--allow {spec}: the broker's own user needs no allowance")
        out[uid] = frozenset(p for p in projects.split(",") if p) or None
    return out


def rights_of(uid: int, config: Config) -> Rights | None:
    """What the user at the other end of the socket may do; None: it may not use this broker at all."""
    if uid == os.getuid():
        return Rights(uid=uid, user=_user_name(uid), owner=True)
    if uid not in config.allowed:
        return None
    return Rights(uid=uid, user=_user_name(uid), owner=False, projects=config.allowed[uid])


def refusal(req: Request, rights: Rights | None) -> str | None:
    """Why the broker turns the request away before running anything (pure); None: the command runs, and
    checks its caller's rights itself where it uses a project, a card or a path. An early refusal only:
    the command's audience (rsk.commands) by its name, as the CLI checks it again."""
    if rights is None:
        return "this user is not allowed to use this broker (the human starts it with --allow USER)"
    if req.op == "stop":
        return None if rights.owner else "only the broker's own user stops it"
    if req.op == "ping":
        return None
    command = req.argv[0] if req.argv else ""
    if command in HUMAN_ACTS:
        return f"`rsk {command}` is a human's act: it never runs through the broker (run it in your own terminal)"
    if command not in BROKERED:
        return f"`rsk {command}` does not run through the broker"
    if audience(command) == "owner" and not rights.owner:
        return f"`rsk {command}` runs only for the broker's own user"
    if not req.cwd.startswith("/"):
        return "the working directory must be absolute"
    return None


class Broker:
    """The listening socket and its threads."""

    def __init__(
        self, config: Config, runner: Runner, reader: Reader = _nothing, sources: list[Path] | None = None
    ) -> None:
        from rsk.cluster.transport import Pool
        from rsk.wire.stamp import roots, stamp

        self.sources = roots() if sources is None else sources
        self.build = stamp(self.sources)  # the code this broker runs (rsk.wire.stamp)
        self.checked = time.monotonic()
        self.reader = reader
        self.config = config
        self.runner = runner
        self.pool = Pool()  # the warm connections: every Caller this broker makes holds it
        self.started = time.time()
        self.last = time.monotonic()
        self.requests = 0
        self.running = 0
        self.serving: dict[int, int] = {}  # uid -> connections being served
        self.answering: dict[int, int] = {}  # uid -> connections being told the broker is busy
        self.sessions: set[socket.socket] = set()  # the connections of MCP sessions: streams of new commands
        self.lock = threading.Lock()
        self.stopping = threading.Event()
        self.listener: socket.socket | None = None
        self._lock_fd: int | None = None

    # start -------------------------------------------------------------------------------------
    def bind(self) -> None:
        """Take the broker lock (one broker per socket), clear a stale socket, listen."""
        path = self.config.socket
        prepare_directory(path.parent, shared=bool(self.config.allowed))
        # one lock per socket (broker.sock: broker.lock), so a directory holds the default and automatic ones
        fd = os.open(path.with_name(path.stem + ".lock"), os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            other = os.read(fd, 32).decode(errors="replace").strip()
            os.close(fd)
            raise StateError(
                f"a broker already runs on {path}" + (f" (pid {other})" if other else ""),
                "`rsk broker status` shows it; `rsk broker stop` stops it",
            ) from None
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()}\n".encode())
        self._lock_fd = fd
        with contextlib.suppress(FileNotFoundError):
            st = os.lstat(path)
            if not stat.S_ISSOCK(st.st_mode):
                raise StateError(f"{path} exists and is not a socket", "remove it, or choose another RSK_BROKER")
            path.unlink()  # stale: the lock is ours, so no broker listens on it
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        old = os.umask(0o077)
        try:
            listener.bind(str(path))
        finally:
            os.umask(old)
        path.chmod(0o666 if self.config.allowed else 0o600)
        listener.listen(64)
        listener.settimeout(1.0)
        self.listener = listener

    # serve -------------------------------------------------------------------------------------
    def serve(self) -> None:
        """Accept connections until stopped. The accept loop reads nothing: each connection is read, with a
        deadline, in its own thread, and whatever goes wrong there stays there."""
        listener = self.listener
        assert listener is not None
        threading.Thread(target=self._idle_watch, daemon=True).start()
        from rsk.broker import books

        books.start(self.stopping, self.own())  # charges settle on Slurm's word while their jobs run
        try:
            while not self.stopping.is_set():
                try:
                    conn, _ = listener.accept()
                except TimeoutError:
                    continue
                except OSError:
                    if self.stopping.is_set():
                        break
                    time.sleep(0.1)  # out of file descriptors, say: the connections in flight free them
                    continue
                self._dispatch(conn)
        finally:
            self.close()  # no new command: the socket is gone (and a new broker may start beside this one)
            self.end_sessions()
            self.drain()

    def end_sessions(self) -> None:
        """An MCP session is no bounded command but a stream of new ones: a stopping broker reads no more of it
        (its server sees the end of its input and ends; the tool call in flight finishes), so `rsk broker stop` cuts
        an agent's open session off, and the agent's host starts it again under whatever broker runs now."""
        with self.lock:
            sessions = list(self.sessions)
        for conn in sessions:
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RD)

    def drain(self, limit_s: float = DRAIN_LIMIT) -> bool:
        """Let the commands in flight end (each is bounded: a wait, a follow, a launch) before the connections
        close under them; False when some still ran after limit_s."""
        deadline = time.monotonic() + limit_s
        while time.monotonic() < deadline:
            with self.lock:
                if self.running == 0:
                    return True
            time.sleep(0.1)
        return False

    def _dispatch(self, conn: socket.socket) -> None:
        """A thread for the connection: one that serves it, or, past the caps, one that says to retry; past
        BUSY_ANSWERS of those for the same user, the connection is closed unread."""
        try:
            uid = peer_uid(conn)
        except OSError:
            conn.close()
            return
        owner = uid == os.getuid()
        with self.lock:
            if owner:
                busy = self.serving.get(uid, 0) >= self.config.max_running
            else:  # other users share their own slots: the broker's own user keeps all of its own
                others = sum(n for u, n in self.serving.items() if u != os.getuid())
                busy = self.serving.get(uid, 0) >= self.config.max_running_other or (
                    others >= self.config.max_running_others
                )
            if not busy:
                self.serving[uid] = self.serving.get(uid, 0) + 1
            elif self.answering.get(uid, 0) < BUSY_ANSWERS:
                self.answering[uid] = self.answering.get(uid, 0) + 1
            else:
                conn.close()
                return
        work = self._serve_one if not busy else self._answer_busy
        threading.Thread(target=work, args=(conn, uid), daemon=True).start()

    def _answer_busy(self, conn: socket.socket, uid: int) -> None:
        try:
            with conn, contextlib.suppress(OSError, ValueError, ValidationError):
                _read_line(conn, MAX_REQUEST, REQUEST_DEADLINE)  # first: closing on unread data resets it
                send = _sender(conn)
                send(
                    {
                        "e": "error: the broker is busy with other commands; nothing was done\n"
                        "hint: try again in a moment (a launch with the same --request-id never submits twice)\n"
                    }
                )
                send({"rc": 75})
        finally:
            with self.lock:
                self.answering[uid] -= 1

    def _serve_one(self, conn: socket.socket, uid: int) -> None:
        try:
            with conn:
                send = _sender(conn)
                try:
                    self._handle(conn, uid, send)
                except (BrokenPipeError, ConnectionError):
                    pass  # the client went away
                except Exception:  # a bug: the broker's log has it, the caller a typed error, the broker goes on
                    import traceback

                    sys.stderr.write(f"rsk broker: a request of uid {uid} failed:\n{traceback.format_exc()}")
                    with contextlib.suppress(OSError):
                        send({"e": "error: the broker failed on this request (its log says why); nothing more "
                                   "was done\nhint: `rsk broker status`; run the command again\n"})  # fmt: skip
                        send({"rc": 1})
                _linger(conn)
        finally:
            with self.lock:
                self.serving[uid] -= 1

    def own(self) -> Caller:
        """The broker's own user as a caller (its background work): no client, the broker's connections."""
        me = os.getuid()
        rights = Rights(uid=me, user=_user_name(me))
        return Caller(env={}, cwd=Path("/"), rights=rights, ppid=os.getpid(), pool=self.pool)

    def close(self) -> None:
        """Stop listening, remove the socket, let go of the lock (once, whichever thread asks first; a second
        caller returns only when the first is done, so neither sees the socket still there after close)."""
        self.stopping.set()
        with self.lock:
            listener, self.listener = self.listener, None
            lock_fd, self._lock_fd = self._lock_fd, None
            if listener is not None:
                listener.close()
                with contextlib.suppress(FileNotFoundError):
                    self.config.socket.unlink()
            if lock_fd is not None:
                os.close(lock_fd)

    def stale(self, force: bool = False) -> bool:
        """Whether the package's or the cluster programs' files changed on disk since this broker started
        (read at most once a second, unless forced)."""
        from rsk.wire.stamp import stamp

        now = time.monotonic()
        if now - self.checked < 1.0 and not force:
            return False
        self.checked = now
        return stamp(self.sources) != self.build

    def _idle_watch(self) -> None:
        while not self.stopping.wait(1.0):
            with self.lock:
                idle = (self.config.idle_exit_s > 0 and self.running == 0
                        and time.monotonic() - self.last > self.config.idle_exit_s)  # fmt: skip
            if idle:
                self.stopping.set()

    def info(self) -> BrokerInfo:
        allowed = {pwd.getpwuid(uid).pw_name: sorted(p) if p is not None else ["*"]
                   for uid, p in self.config.allowed.items()}  # fmt: skip
        return BrokerInfo(pid=os.getpid(), uid=os.getuid(), socket=str(self.config.socket), started=self.started,
                          idle_exit_s=self.config.idle_exit_s, requests=self.requests, running=self.running,
                          connections=self.pool.status(), allowed=allowed, version=__version__,
                          build=self.build[:12])  # fmt: skip

    def _handle(self, conn: socket.socket, uid: int, send: _Send) -> None:
        rights = rights_of(uid, self.config)
        try:
            raw = _read_json(conn, MAX_REQUEST, REQUEST_DEADLINE)
            if isinstance(raw, dict) and raw.get("v") != WIRE_VERSION:
                if rights is not None and self.stale(force=True):  # a client of the rsk installed now: it runs it
                    self._stop_stale(send)
                    return
                send(
                    {
                        "e": f"error: this broker speaks wire version {WIRE_VERSION} and the client "
                        f"{raw.get('v')!r} (another rsk); nothing was done\nhint: run the command again with "
                        "the rsk installed now; `rsk broker stop` and start stops a broker of another rsk\n"
                    }
                )
                send({"rc": 75})
                return
            req = Request.model_validate(raw)
            if req.op == "run" and isinstance(raw, dict) and "project_file" not in raw:
                raise ValueError("a run request says which project file its client found (project_file)")
        except (ValueError, ValidationError) as exc:
            send({"e": f"error: malformed broker request: {_short(exc)}\nhint: use rsk's own client\n"})
            send({"rc": 2})
            return
        why = refusal(req, rights)
        if why is not None or rights is None:
            send({"e": f"error: {why}\nhint: docs/broker.md says who may do what through the broker\n"})
            send({"rc": 77 if (req.argv[:1] and req.argv[0] in HUMAN_ACTS) else 2})
            return
        if req.op == "ping":
            send({"info": self.info().model_dump()})
            send({"rc": 0})
            return
        if req.op == "stop":
            send({"rc": 0})
            self.stopping.set()
            return
        if self.stale():
            self._stop_stale(send)
            return
        with self.lock:
            self.requests += 1
            self.running += 1
            self.last = time.monotonic()
        # the client's own view of its directory (os.getcwd: no link, no `..`), never looked up here
        cwd = Path(os.path.normpath(req.cwd))
        upload: Upload | None = None
        try:
            # a caller's paths are never opened here, whoever it is (ADR 0064): ask its client for what the argv
            # names (as Click reads it), and let the command take only that (rsk.local.caller.sent_text, local_dir)
            got = self._ask(conn, send, req.argv, cwd)
            if got is None:
                return
            files, unread, upload = got
            mcp = req.argv[:1] == ["mcp"]
            if mcp:
                with self.lock:
                    if self.stopping.is_set():  # (stopped since the request came: take no session)
                        send({"e": "error: the broker is stopping\nhint: run the command again\n"})
                        send({"rc": 75})
                        return
                    self.sessions.add(conn)
            stdio = _stdio(conn, send) if mcp else None
            client = None if mcp else _Client(conn, send)  # what its client writes for it (rsk.local.caller.place)
            sent = req.project_file
            found = ProjectFound(path=None) if sent is None else ProjectFound(sent.path, sent.text, sent.error)
            who = Caller(env=passed_env(req.env), cwd=cwd, rights=rights, ppid=req.ppid, tty=req.tty, project=found,
                         columns=req.columns, files=files, unread=unread, upload=upload, stdio=stdio, client=client,
                         out=_frames(send, "o"), err=_frames(send, "e"), pool=self.pool)  # fmt: skip
            rc = self.runner(req.argv, who)
            send({"rc": rc})
        finally:
            if upload is not None and upload.local is not None:
                shutil.rmtree(upload.local, ignore_errors=True)
            with self.lock:
                self.sessions.discard(conn)
                self.running -= 1
                self.last = time.monotonic()

    def _stop_stale(self, send: Callable[[dict[str, object]], None]) -> None:
        """The client runs the command itself, with the code installed now; this broker ends."""
        self.stopping.set()
        send({"stale": self.build})
        send({"e": "error: this broker runs an older rsk than the one installed now, and has stopped\n"
                   "hint: run the command again\n"})  # fmt: skip
        send({"rc": 75})

    def _ask(
        self, conn: socket.socket, send: Callable[[dict[str, object]], None], argv: list[str], cwd: Path
    ) -> tuple[dict[str, str], dict[str, int | str | dict[str, object]], Upload | None] | None:
        """The files and the directory argv names, as the client sends them, and why a file did not come; None:
        the request ended here."""
        want = self.reader(argv, lambda name: cwd / name)
        if want.empty:
            return {}, {}, None
        send({"want": Want(files=want.files, code=want.code, exclude=want.exclude).model_dump()})
        try:
            sent = Sent.model_validate(_read_json(conn, MAX_UPLOAD, UPLOAD_DEADLINE))
        except (OSError, ValueError, ValidationError) as exc:  # rsk's client says why itself, and goes away
            with contextlib.suppress(OSError):
                send({"e": f"error: the files this command names did not come: {_short(exc)}\nhint: nothing was "
                           "done; run it with rsk's own client, which sends them\n"})  # fmt: skip
                send({"rc": 2})
            return None
        files = {p: text for p, text in sent.files.items() if p in want.files}
        unread = {p: why for p, why in sent.unread.items() if p in want.files and p not in files}
        code = sent.code
        if code is None or code.path != want.code:
            return files, unread, None
        if code.error:
            return files, unread, Upload(path=code.path, local=None, error=code.error, hint=code.hint)
        try:
            local = receive_code(conn, code)
        except ValueError as exc:
            send({"e": f"error: --code {code.path}: {exc}\nhint: send it again; nothing was done\n"})
            send({"rc": 2})
            return None
        return files, unread, Upload(path=code.path, local=local)


def _linger(conn: socket.socket, limit_s: float = 1.0, most: int = 8 << 20) -> None:
    """The answer is sent: say so (end of file), then read what the client still sends, a second and 8 MiB at most,
    so that closing on unread bytes (a refused upload's rest) does not reset the connection under the frames the
    client has not read yet."""
    with contextlib.suppress(OSError):
        conn.shutdown(socket.SHUT_WR)
        deadline = time.monotonic() + limit_s
        while most > 0 and (left := deadline - time.monotonic()) > 0:
            conn.settimeout(left)
            chunk = conn.recv(min(most, 1 << 20))
            if not chunk:
                return
            most -= len(chunk)


def _short(exc: Exception) -> str:
    """A parse error's first line, without pydantic's links and input echo."""
    text = str(exc).splitlines()
    return (" ".join(text[:2]) if isinstance(exc, ValidationError) else (text[0] if text else ""))[:200]


def _user_name(uid: int) -> str:
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return f"uid {uid}"


def _read_line(conn: socket.socket, limit: int, deadline_s: float) -> bytes:
    """One line, and not a byte more (what follows it is a tar, or rsk mcp's standard input), of at most
    `limit` bytes, all of it within `deadline_s` seconds: a client that drips it is cut off."""
    deadline = time.monotonic() + deadline_s
    buf = bytearray()
    try:
        while not buf.endswith(b"\n"):
            left = deadline - time.monotonic()
            if left <= 0:
                raise ValueError(f"the line did not arrive within {deadline_s:g} s")
            conn.settimeout(left)
            try:
                seen = conn.recv(65536, socket.MSG_PEEK)
            except TimeoutError:
                raise ValueError(f"the line did not arrive within {deadline_s:g} s") from None
            if not seen:
                raise ValueError("the connection ended inside the line")
            end = seen.find(b"\n")
            buf += conn.recv(end + 1 if end >= 0 else len(seen))
            if len(buf) > limit:
                raise ValueError(f"a line longer than {limit} bytes")
    finally:
        with contextlib.suppress(OSError):
            conn.settimeout(None)
    return bytes(buf)


def _read_json(conn: socket.socket, limit: int, deadline_s: float) -> object:
    """A line of JSON, bounded in size and time here, and in nesting by rsk's one JSON reader (json's parser
    recurses: 200,000 `[` would exhaust the stack)."""
    line = _read_line(conn, limit, deadline_s)
    try:
        return safejson.loads(line, max_depth=MAX_DEPTH)
    except safejson.BadJson as exc:
        raise ValueError(str(exc)) from None


def check_upload(code: CodeUpload) -> None:
    """An upload is taken whole or not at all: at most MAX_FILES files and MAX_BYTES bytes, each a regular file
    (nothing else can be said) whose name is one rsk's rule allows (no absolute name, no empty, `.` or `..` part),
    none twice, and none both a file and a directory. ValueError says what is wrong."""
    total = 0
    names: set[str] = set()
    for rel, size, _ in code.files:
        if not travels(rel):
            raise ValueError(f"{rel[:200]!r} is not a name rsk takes")
        if rel in names:
            raise ValueError(f"{rel!r} comes twice")
        if size < 0:
            raise ValueError(f"{rel!r} has a negative size")
        names.add(rel)
        total += size
    if total > MAX_BYTES:
        raise ValueError(f"it holds more than the {MAX_BYTES >> 20} MiB cap")
    for rel in names:
        head = rel.rpartition("/")[0]
        while head:
            if head in names:
                raise ValueError(f"{head!r} is both a file and a directory")
            head = head.rpartition("/")[0]


def receive_code(conn: socket.socket, code: CodeUpload) -> Path:
    """The files `code` lists, read from the connection into a new private directory (0700) of the broker's: each
    made new (O_CREAT|O_EXCL|O_NOFOLLOW) under its directory's descriptor (rsk.local.nolink), its bytes exactly
    the size listed. Nothing is unpacked: the broker never extracts an archive another process made (ADR 0064)."""
    import tempfile

    from rsk.errors import RskError
    from rsk.local.nolink import Dir

    check_upload(code)
    where = Path(tempfile.mkdtemp(prefix="rsk-code-"))
    try:
        deadline = time.monotonic() + UPLOAD_DEADLINE  # for all of it, not for each piece
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
        with Dir(os.open(where, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC), where) as top:
            for rel, size, executable in code.files:
                head, _, name = rel.rpartition("/")
                with top.sub(head, create=True) if head else contextlib.nullcontext(top) as into:
                    fd = os.open(name, flags, 0o700 if executable else 0o600, dir_fd=into.fd)
                    with os.fdopen(fd, "wb") as fh:
                        _copy(conn, fh, size, deadline)
        conn.settimeout(None)
    except (OSError, ValueError, RskError) as exc:
        shutil.rmtree(where, ignore_errors=True)
        raise ValueError(f"its files did not arrive whole: {exc}") from None
    return where


def _copy(conn: socket.socket, out: io.BufferedWriter, size: int, deadline: float) -> None:
    """`size` bytes from the connection into `out`, all of them before `deadline`."""
    left = size
    while left:
        conn.settimeout(max(deadline - time.monotonic(), 0.001))
        try:
            chunk = conn.recv(min(left, 1 << 20))
        except TimeoutError:
            raise ValueError(f"the client did not send them within {UPLOAD_DEADLINE:g} s") from None
        if not chunk:
            raise ValueError("the client sent fewer bytes than it listed")
        out.write(chunk)
        left -= len(chunk)


class _Client:
    """The caller's client, as a command in the broker reaches it (rsk.local.handover.Client): one step of a fetch
    it writes, sent as a `put` frame and the step's bytes, and its answer read back, within ANSWER_DEADLINE."""

    def __init__(self, conn: socket.socket, send: _Send) -> None:
        self.conn = conn
        self.send = send

    def ask(self, put: dict[str, object], data: bytes = b"") -> object:
        from rsk.local.handover import answer

        self.send({"put": {**put, "size": len(data)}}, data)
        try:
            got = _read_json(self.conn, MAX_REQUEST, ANSWER_DEADLINE)
        except (OSError, ValueError) as exc:
            raise ConnectError(f"the client did not answer the broker: {exc}; what it wrote so far stays",
                               "run the same command again (a cut file resumes)") from None  # fmt: skip
        return answer(got)


class _FrameWriter(io.TextIOBase):
    """A command's standard output ("o") or error ("e") as frames to its caller."""

    encoding = "utf-8"  # what Click checks before it writes to a stream as it is
    errors = "strict"

    def __init__(self, send: Callable[[dict[str, object]], None], stream: str = "o") -> None:
        self._send = send
        self._stream = stream

    def writable(self) -> bool:
        return True

    def write(self, text: str) -> int:
        self._send({self._stream: text})
        return len(text)


def _frames(send: Callable[[dict[str, object]], None], stream: str) -> TextIO:
    return cast("TextIO", _FrameWriter(send, stream))  # written to as a text stream: write and flush


class _BoundedLines(io.TextIOBase):
    """rsk mcp's input from another process: lines of at most `limit` characters (a longer one ends the
    session), so a client cannot make the broker hold a line of gigabytes."""

    def __init__(self, inner: io.TextIOBase, limit: int) -> None:
        self._inner = inner
        self._limit = limit

    def readable(self) -> bool:
        return True

    def readline(self, size: int | None = -1) -> str:  # type: ignore[override]
        line = self._inner.readline(self._limit + 1)
        if len(line) > self._limit:
            raise ValueError(f"an MCP message longer than {self._limit} characters")
        return line


def _stdio(conn: socket.socket, send: Callable[[dict[str, object]], None]) -> tuple[io.TextIOBase, io.TextIOBase]:
    """What the client sends after its request line, as text, and a writer whose text goes back as frames."""
    reader = io.TextIOWrapper(conn.makefile("rb"), encoding="utf-8", errors="replace")
    return _BoundedLines(reader, MAX_UPLOAD), _FrameWriter(send)


class _Send:
    """Frames to one connection, whole (a lock: a command's threads may write at once); a `put` frame is followed
    by its bytes in the same write."""

    def __init__(self, conn: socket.socket) -> None:
        self.conn = conn
        self.lock = threading.Lock()

    def __call__(self, frame: dict[str, object], data: bytes = b"") -> None:
        line = (json.dumps(frame, allow_nan=False) + "\n").encode()  # JSON: no Infinity or NaN
        with self.lock:
            self.conn.sendall(line)
            if data:
                self.conn.sendall(data)


def _sender(conn: socket.socket) -> _Send:
    return _Send(conn)
