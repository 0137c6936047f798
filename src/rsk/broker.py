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
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from rsk.broker_client import BROKERED, CONTENT_OPTIONS, PATH_OPTIONS, default_socket, peer_uid
from rsk.caller import Caller, passed_env
from rsk.codelist import MAX_BYTES
from rsk.errors import StateError

WIRE_VERSION = 1
MAX_REQUEST = 32 << 20  # one request line, at most 32 MiB (with the --script or --tasks file it carries)

# commands the broker runs (for its own user and for allowed users), and what only a human does;
# default_socket is re-exported for the CLI
AGENT_COMMANDS = BROKERED
HUMAN_ACTS = frozenset({"approve", "deny", "grant", "deny-rule"})
OWNER_ONLY = frozenset({"fetch", "doctor"})  # fetch writes files as the broker's user; doctor shows the setup

Out = Callable[[str, str], None]  # (stream "o" | "e", text)
Runner = Callable[[list[str], Caller, Out], int]
__all__ = ["Broker", "BrokerInfo", "Config", "Request", "default_socket", "parse_allow", "refusal"]


class CodeUpload(BaseModel):
    """--code from another user: the files its client read, as a tar of `size` bytes after the request line."""

    model_config = ConfigDict(extra="forbid")

    path: str  # the directory as argv names it
    size: int = Field(ge=0, le=2 * MAX_BYTES)  # the files, at most the snapshot cap, and tar's headers


class Request(BaseModel):
    """One request on the socket: a JSON line."""

    model_config = ConfigDict(extra="forbid")

    v: Literal[1]
    op: Literal["run", "ping", "stop"]
    argv: list[str] = []
    cwd: str = "/"
    env: dict[str, str] = {}
    tty: bool = False
    columns: int = Field(default=200, ge=20, le=1000)
    ppid: int = 0
    files: dict[str, str] = {}  # path (as in argv) -> the content the client read, for --script and --tasks
    code: CodeUpload | None = None


class BrokerInfo(BaseModel):
    model_config = ConfigDict(extra="forbid")

    schema_version: int = 1
    pid: int
    uid: int
    socket: str
    started: float
    idle_exit_s: float
    requests: int
    running: int
    connections: dict[str, bool]  # target -> its warm connection is up
    allowed: dict[str, list[str]]  # other users allowed in, with their projects ("*": any)


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
    idle_exit_s: float = 3600.0
    allowed: dict[int, frozenset[str] | None] = field(default_factory=dict)  # uid -> projects (None: any)
    max_running: int = 32  # connections served at once; beyond it a caller is told to retry (exit 75)
    max_running_other: int = 8  # at once per other user, so one agent cannot take every slot


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


def named_projects(argv: list[str]) -> list[str]:
    """Every project argv names with --project/-p (before --)."""
    named: list[str] = []
    words = argv[: argv.index("--")] if "--" in argv else argv
    i = 0
    while i < len(words):
        w = words[i]
        if w in ("--project", "-p") and i + 1 < len(words):
            named.append(words[i + 1])
            i += 2
            continue
        if w.startswith("--project="):
            named.append(w.split("=", 1)[1])
        elif w.startswith("-p") and len(w) > 2 and not w.startswith("--"):
            named.append(w[2:])
        i += 1
    return named


def project_of(argv: list[str], env: dict[str, str], cwd: Path) -> str | None:
    """The project a command will use, resolved as the CLI does: --project/-p, else RSK_PROJECT, else the
    project file above cwd. None when argv names it more than once (refused for other users)."""
    named = named_projects(argv)
    if len(named) > 1:
        return None
    if named:
        return named[0]
    if env.get("RSK_PROJECT"):
        return env["RSK_PROJECT"]
    from rsk.paths import DEFAULT_PROJECT
    from rsk.projectfile import _find

    found = _find.__wrapped__(str(cwd))
    return found[1].project if found else DEFAULT_PROJECT


def code_values(argv: list[str], replace: str | None = None) -> list[str]:
    """Every directory argv names with --code (before --); with `replace`, argv with each of them replaced."""
    cut = argv.index("--") if "--" in argv else len(argv)
    found, out = [], list(argv)
    for i in range(cut):
        if argv[i].startswith("--code="):
            found.append(argv[i].split("=", 1)[1])
            out[i] = f"--code={replace}"
        elif argv[i] == "--code" and i + 1 < cut:
            found.append(argv[i + 1])
            out[i + 1] = str(replace)
    return out if replace is not None else found


def refusal(req: Request, uid: int, config: Config) -> str | None:
    """Why the broker will not run this request for this uid; None when it will (pure)."""
    owner = uid == os.getuid()
    if not owner and uid not in config.allowed:
        return f"uid {uid} is not allowed to use this broker (the human starts it with --allow USER)"
    if req.op == "stop":
        return None if owner else "only the broker's own user stops it"
    if req.op == "ping":
        return None
    command = req.argv[0] if req.argv else ""
    if command in HUMAN_ACTS:
        return f"`rsk {command}` is a human's act: it never runs through the broker (run it in your own terminal)"
    if command not in AGENT_COMMANDS:
        return f"`rsk {command}` does not run through the broker"
    if owner:
        return None
    if command in OWNER_ONLY:
        return f"`rsk {command}` runs only for the broker's own user"
    head = req.argv[: req.argv.index("--")] if "--" in req.argv else req.argv
    if "--yes" in head or any(w.startswith("--yes=") for w in head):
        return "--yes is a human's word: not taken from another user"
    # the broker would read or write these as its own user: another user could name the human's key or
    # ledger. --script and --tasks come as content the client read (rsk.caller.read_text); these do not.
    named = {w.split("=", 1)[0] for w in head} & (PATH_OPTIONS - CONTENT_OPTIONS)
    if req.code is not None and code_values(req.argv) == [req.code.path]:
        named.discard("--code")  # its files come with the request (and only those are used)
    if named:
        return f"{', '.join(sorted(named))}: the broker would read it as its own user, so only that user may name it"
    if command in ("approvals", "withdraw") and not named_projects(req.argv):
        # without --project these look in every project's ledger
        return f"`rsk {command}` from another user needs --project (one of its own)"
    projects = config.allowed[uid]
    project = project_of(req.argv, req.env, Path(req.cwd))
    if project is None:
        return "name the project once"
    if projects is not None and project not in projects:
        return f"project {project} is not one this user may use (allowed: {', '.join(sorted(projects))})"
    return None


class Broker:
    """The listening socket and its threads."""

    def __init__(self, config: Config, runner: Runner) -> None:
        self.config = config
        self.runner = runner
        self.started = time.time()
        self.last = time.monotonic()
        self.requests = 0
        self.running = 0
        self.serving: dict[int, int] = {}  # uid -> connections being served
        self.lock = threading.Lock()
        self.stopping = threading.Event()
        self.listener: socket.socket | None = None
        self._lock_fd: int | None = None

    # start -------------------------------------------------------------------------------------
    def bind(self) -> None:
        """Take the broker lock (one broker per socket), clear a stale socket, listen."""
        path = self.config.socket
        prepare_directory(path.parent, shared=bool(self.config.allowed))
        fd = os.open(path.parent / "broker.lock", os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600)
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
        listener = self.listener
        assert listener is not None
        threading.Thread(target=self._idle_watch, daemon=True).start()
        from rsk import books

        books.start(self.stopping)  # charges settle on Slurm's word while their jobs run
        try:
            while not self.stopping.is_set():
                try:
                    conn, _ = listener.accept()
                except TimeoutError:
                    continue
                except OSError:
                    if self.stopping.is_set():
                        break
                    raise
                self._dispatch(conn)
        finally:
            self.close()

    def _dispatch(self, conn: socket.socket) -> None:
        """A thread for the connection, or, past the caps, an answer that says to retry."""
        try:
            uid = peer_uid(conn)
        except OSError:
            conn.close()
            return
        cap = self.config.max_running if uid == os.getuid() else self.config.max_running_other
        with self.lock:
            busy = sum(self.serving.values()) >= self.config.max_running or self.serving.get(uid, 0) >= cap
            if not busy:
                self.serving[uid] = self.serving.get(uid, 0) + 1
        if busy:
            with conn, contextlib.suppress(OSError, ValueError, ValidationError):
                _read_request(conn)  # read it first: closing on unread data would reset the connection
                send = _sender(conn)
                send(
                    {
                        "e": "error: the broker is busy with other commands; nothing was done\n"
                        "hint: try again in a moment (a launch with the same --request-id never submits twice)\n"
                    }
                )
                send({"rc": 75})
            return
        threading.Thread(target=self._serve_one, args=(conn, uid), daemon=True).start()

    def _serve_one(self, conn: socket.socket, uid: int) -> None:
        try:
            self._handle(conn)
        finally:
            with self.lock:
                self.serving[uid] -= 1

    def close(self) -> None:
        """Stop listening, remove the socket, let go of the lock (once, whichever thread asks first)."""
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

    def _idle_watch(self) -> None:
        while not self.stopping.wait(1.0):
            with self.lock:
                idle = self.running == 0 and time.monotonic() - self.last > self.config.idle_exit_s
            if idle:
                self.stopping.set()

    def info(self) -> BrokerInfo:
        from rsk.transport import shared_status

        allowed = {pwd.getpwuid(uid).pw_name: sorted(p) if p is not None else ["*"]
                   for uid, p in self.config.allowed.items()}  # fmt: skip
        return BrokerInfo(pid=os.getpid(), uid=os.getuid(), socket=str(self.config.socket), started=self.started,
                          idle_exit_s=self.config.idle_exit_s, requests=self.requests, running=self.running,
                          connections=shared_status(), allowed=allowed)  # fmt: skip

    def _handle(self, conn: socket.socket) -> None:
        with conn:
            uid = peer_uid(conn)
            send = _sender(conn)
            try:
                req = _read_request(conn)
            except (ValueError, ValidationError) as exc:
                send({"e": f"error: malformed broker request: {str(exc)[:200]}\n"})
                send({"rc": 2})
                return
            why = refusal(req, uid, self.config)
            if why is not None:
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
            with self.lock:
                self.requests += 1
                self.running += 1
                self.last = time.monotonic()
            upload: Path | None = None
            argv = req.argv
            try:
                if req.code is not None:
                    try:
                        upload = receive_code(conn, req.code.size)
                    except ValueError as exc:
                        send({"e": f"error: --code {req.code.path}: {exc}\nhint: send it again; nothing was done\n"})
                        send({"rc": 2})
                        return
                    argv = code_values(argv, replace=str(upload))
                stdio = _stdio(conn, send) if req.argv[:1] == ["mcp"] else None
                who = Caller(env=passed_env(req.env), cwd=Path(req.cwd), uid=uid, user=_user_name(uid), ppid=req.ppid,
                             tty=req.tty, columns=req.columns, owner=uid == os.getuid(), files=req.files,
                             stdio=stdio)  # fmt: skip
                rc = self.runner(argv, who, lambda stream, text: send({stream: text}))
                send({"rc": rc})
            except BrokenPipeError:
                pass  # the client went away
            finally:
                if upload is not None:
                    shutil.rmtree(upload, ignore_errors=True)
                with self.lock:
                    self.running -= 1
                    self.last = time.monotonic()


def _user_name(uid: int) -> str:
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return f"uid {uid}"


def _read_request(conn: socket.socket) -> Request:
    """The request line, and not a byte more: what follows it is the command's standard input (rsk mcp)."""
    conn.settimeout(10.0)
    buf = bytearray()
    while not buf.endswith(b"\n"):
        seen = conn.recv(65536, socket.MSG_PEEK)
        if not seen:
            break
        end = seen.find(b"\n")
        buf += conn.recv(end + 1 if end >= 0 else len(seen))
        if len(buf) > MAX_REQUEST:
            raise ValueError("request too large")
    conn.settimeout(None)
    return Request.model_validate(json.loads(bytes(buf).decode("utf-8")))


def receive_code(conn: socket.socket, size: int) -> Path:
    """Read the tar of `size` bytes that follows the request line and unpack it into a new private directory
    (tarfile's "data" filter: no absolute or outside paths, no links out, no devices, no set-id bits)."""
    import tarfile
    import tempfile

    where = Path(tempfile.mkdtemp(prefix="rsk-code-"))
    try:
        with tempfile.TemporaryFile() as spool:
            conn.settimeout(60.0)
            left = size
            while left:
                chunk = conn.recv(min(left, 1 << 20))
                if not chunk:
                    raise ValueError(f"the client sent {size - left} of {size} bytes")
                spool.write(chunk)
                left -= len(chunk)
            conn.settimeout(None)
            spool.seek(0)
            with tarfile.open(fileobj=spool, mode="r:") as tar:
                tar.extractall(where, filter="data")
    except (OSError, tarfile.TarError, ValueError) as exc:
        shutil.rmtree(where, ignore_errors=True)
        raise ValueError(f"its files did not arrive whole: {exc}") from None
    return where


class _FrameWriter(io.TextIOBase):
    """A command's own standard output as frames to its caller (for rsk mcp, which speaks on it)."""

    def __init__(self, send: Callable[[dict[str, object]], None]) -> None:
        self._send = send

    def writable(self) -> bool:
        return True

    def write(self, text: str) -> int:
        self._send({"o": text})
        return len(text)


def _stdio(conn: socket.socket, send: Callable[[dict[str, object]], None]) -> tuple[io.TextIOBase, io.TextIOBase]:
    """What the client sends after its request line, as text, and a writer whose text goes back as frames."""
    reader = io.TextIOWrapper(conn.makefile("rb"), encoding="utf-8", errors="replace")
    return reader, _FrameWriter(send)


def _sender(conn: socket.socket) -> Callable[[dict[str, object]], None]:
    lock = threading.Lock()

    def send(frame: dict[str, object]) -> None:
        data = (json.dumps(frame) + "\n").encode()
        with lock:
            conn.sendall(data)

    return send
