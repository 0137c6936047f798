"""The broker's client: standard library only, so a command the broker runs costs a Python start and one
socket, not importing typer, pydantic and paramiko and opening an SSH connection.

`try_broker(argv)` hands an agent command to a reachable broker and returns its exit code, or None when
the command runs here (no broker, a command that never goes through one, RSK_BROKER=off). The broker
is trusted only when the kernel says it runs as the expected user: this user for the default socket, or
the owner of the socket's directory for an RSK_BROKER that another user's broker serves.

Warm by default (ADR 0034): with RSK_BROKER unset, a command that finds no broker on the default socket
nor on this environment's automatic one starts the automatic broker in the background (one per user and
environment, a lock makes it one when commands start at once, it exits after RSK_BROKER_IDLE seconds
without a request) and runs here itself; the next commands use it.
"""

from __future__ import annotations

import os
import sys

from rsk.commands import PASSED_ENV, PASSED_PREFIXES

TYPE_CHECKING = False  # typing itself takes ~10 ms to import; mypy reads this as typing.TYPE_CHECKING
if TYPE_CHECKING:
    from pathlib import Path  # the fast path uses strings
    from typing import Any

try:  # CPython's C parts of `socket` and `json`: the Python modules above them import re, enum and
    # selectors, which take longer to load (~25 ms) than the rest of a brokered command's client
    import _socket as socket
    from _json import encode_basestring_ascii as _quote
    from _json import make_scanner
except ImportError:  # another Python: the public modules
    import socket  # type: ignore[no-redef]
    from json.decoder import JSONDecoder
    from json.encoder import encode_basestring_ascii as _quote

    _scan: Any = JSONDecoder().scan_once  # type: ignore[attr-defined]
else:

    def _no_constant(name: str) -> object:
        raise ValueError(f"a broker frame with {name}, which is not JSON")

    class _Plain:  # what the C scanner reads from a decoder: JSON as the json module decodes it
        strict = True
        object_hook = object_pairs_hook = None
        parse_constant = staticmethod(_no_constant)  # Infinity, NaN (an older broker's idle 0): a bad frame
        parse_float = float
        parse_int = int

    _scan = make_scanner(_Plain())  # type: ignore[arg-type]

WIRE_VERSION = 4  # rsk.broker.server.Request
PROJECT_FILE = ".rsk.toml"  # rsk.local.project.NAME
MAX_PROJECT_FILE = 1 << 16
MAX_CONTENT = 16 << 20  # larger files are not sent (the command says so)
EXIT_CONNECT = 75
EXIT_CONFIG = 78
AUTO_IDLE_S = 600.0  # the automatic broker's idle exit (RSK_BROKER_IDLE), as a ControlPersist of 10 minutes
# what a broker's answers depend on beyond the request: an automatic broker serves only the same values
AUTO_KEYS = ("RSK_HOME", "RSK_TARGETS_PATH", "XDG_CONFIG_HOME", "XDG_STATE_HOME", "HOME", "SSH_AUTH_SOCK", "PATH",
             "PYTHONPATH")  # fmt: skip


def off() -> bool:
    """RSK_BROKER=off (or the older RSK_NO_BROKER): every command runs in its own process."""
    return os.environ.get("RSK_BROKER") == "off" or bool(os.environ.get("RSK_NO_BROKER"))


def explicit() -> bool:
    """RSK_BROKER names a socket: that broker or none, and nothing is started automatically."""
    return bool(os.environ.get("RSK_BROKER")) and not off()


def socket_path() -> str:
    """$RSK_BROKER, else $XDG_RUNTIME_DIR/rsk/broker.sock, else /tmp/rsk-UID/broker.sock."""
    return os.environ["RSK_BROKER"] if explicit() else _default_path()


def auto_socket() -> str:
    """The automatic broker's socket for this environment: beside the default one, named for a digest of this
    rsk, this Python and the settings its answers depend on (AUTO_KEYS), so a command never reaches a broker
    that would read another RSK_HOME, other targets or another rsk."""
    try:
        from _sha256 import sha256  # type: ignore[import-not-found]  # CPython 3.11's C module: no hashlib import
    except ImportError:
        from hashlib import sha256
    here = os.path.dirname(os.path.realpath(__file__))
    parts = [here, os.path.realpath(sys.executable)]
    parts += [f"{k}={_absolute(os.environ.get(k, ''))}" for k in AUTO_KEYS]
    digest = sha256("\0".join(parts).encode()).hexdigest()[:16]
    return os.path.join(os.path.dirname(_default_path()), f"auto-{digest}.sock")


def _default_path() -> str:
    runtime = os.environ.get("XDG_RUNTIME_DIR")
    if runtime and os.path.isdir(runtime):
        return os.path.join(runtime, "rsk", "broker.sock")
    return f"/tmp/rsk-{os.getuid()}/broker.sock"


def _absolute(value: str) -> str:
    """A path list made absolute, as the broker reads it from `/` (rsk.local.child)."""
    return os.pathsep.join(os.path.abspath(p) for p in value.split(os.pathsep) if p)


def auto_idle() -> float:
    """RSK_BROKER_IDLE: seconds an automatic broker waits for a request before it exits (0: never)."""
    raw = os.environ.get("RSK_BROKER_IDLE", "")
    if not raw:
        return AUTO_IDLE_S
    try:
        value = float(raw)
    except ValueError:
        value = -1.0
    if not 0 <= value < float("inf"):
        raise ValueError(f"RSK_BROKER_IDLE={raw!r} is not a number of seconds (0 or more)")
    return value


def default_socket() -> Path:
    from pathlib import Path

    return Path(socket_path())


def expected_uid(path: str) -> int | None:
    """Whose broker may answer on this socket: ours for the default path; for RSK_BROKER, the owner of its
    directory, provided no one else can write there. None: do not use this socket."""
    if not explicit():
        return os.getuid()
    try:
        st = os.lstat(os.path.dirname(os.path.abspath(path)))
    except OSError:
        return None
    if st.st_mode & 0o170000 != 0o040000 or st.st_mode & 0o022:  # a directory (stat.S_ISDIR) no one else writes
        return None
    return st.st_uid


def _read_into(files: dict[str, str], unread: dict[str, object], path: str) -> None:
    """The file's text as this process may read it, reached from `/` without following a link (as a direct run
    reads it: rsk.local.nolink); else why not, for the command to say: the first byte that is not UTF-8 (an int,
    as a direct run reports it), rsk's own error (a link on the way: `link-refused`), or the reason."""
    from pathlib import Path

    from rsk.errors import RskError
    from rsk.local.nolink import Dir, LinkRefused

    try:
        with Dir.open(Path(path).parent) as where, where.open_to_read(Path(path).name) as f:
            data = f.read(MAX_CONTENT + 1)
    except LinkRefused as exc:
        unread[path] = exc.to_json()
        return
    except RskError as exc:  # the walk could not open it: the system's reason, as a direct run says it
        cause = exc.__context__
        unread[path] = (cause.strerror if isinstance(cause, OSError) and cause.strerror else None) or exc.message
        return
    except OSError as exc:
        unread[path] = exc.strerror or "it cannot be read"
        return
    if len(data) > MAX_CONTENT:
        unread[path] = f"larger than {MAX_CONTENT >> 20} MiB"
        return
    try:
        files[path] = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        unread[path] = exc.start


def project_file(cwd: str) -> dict[str, str | None] | None:
    """The nearest project file at or above `cwd`, as this user reads it, for the broker: the project is the
    caller's, so the caller finds it (the broker never walks a caller's directory). None: there is none; a
    file that cannot be read travels with its error, and the command says so."""
    here = cwd
    while True:
        path = os.path.join(here, PROJECT_FILE)
        try:  # non-blocking: a FIFO of that name must not hold the command
            fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
        except OSError as exc:
            if exc.errno not in (2, 20, 21, 40):  # ENOENT, ENOTDIR, EISDIR, ELOOP: none here (Path.is_file)
                return {"path": path, "text": None, "error": exc.strerror or str(exc)}
        else:
            try:
                if os.fstat(fd).st_mode & 0o170000 == 0o100000:  # a regular file (stat.S_ISREG), as is_file asks
                    return _project_text(path, os.read(fd, MAX_PROJECT_FILE + 1))
            except OSError as exc:
                return {"path": path, "text": None, "error": exc.strerror or str(exc)}
            finally:
                os.close(fd)
        parent = os.path.dirname(here)
        if parent == here:
            return None
        here = parent


def _project_text(path: str, data: bytes) -> dict[str, str | None]:
    if len(data) > MAX_PROJECT_FILE:
        return {"path": path, "text": None, "error": f"larger than {MAX_PROJECT_FILE} bytes"}
    try:
        return {"path": path, "text": data.decode("utf-8"), "error": ""}
    except UnicodeDecodeError:
        return {"path": path, "text": None, "error": "not UTF-8"}


def try_broker(argv: list[str]) -> int | None:
    from rsk.commands import BROKERED  # who may run what: the one table, read before anything heavy loads

    if not argv or argv[0] not in BROKERED or off():
        return None
    head = argv[: argv.index("--")] if "--" in argv else argv
    if "--help" in head:
        return None
    if explicit():
        return _through(socket_path(), argv)
    if argv[0] == "mcp":  # a session of the user's own: its process holds its connections warm, and opens the
        return None  # paths its tools name as that user (code, fetch); a broker opens none (ADR 0064)
    for path in (socket_path(), auto_socket()):  # one started by hand, else this environment's automatic one
        rc = _through(path, argv)
        if rc is not None:
            return rc
    try:
        idle = auto_idle()
    except ValueError as exc:
        sys.stderr.write(f"error: {exc}\nhint: unset it (10 minutes), or set RSK_BROKER=off to start no broker\n")
        return EXIT_CONFIG
    start_auto(auto_socket(), idle)
    return None  # this command runs here; the next ones use the broker it started


def start_auto(path: str, idle: float) -> bool:
    """Start this environment's automatic broker in the background, unless one runs or is starting (its lock,
    held for the broker's life, says so). False: none started (held, or the directory is not ours)."""
    import fcntl

    directory = os.path.dirname(path)
    try:
        os.mkdir(directory, 0o700)
    except FileExistsError:
        pass
    except OSError:
        return False
    try:
        st = os.lstat(directory)
    except OSError:
        return False
    if st.st_mode & 0o170000 != 0o040000 or st.st_uid != os.getuid() or st.st_mode & 0o077:
        return False  # not a private directory of this user: start nothing (rsk.broker.server says why on start)
    try:
        fd = os.open(path[: -len(".sock")] + ".start", os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        return False  # another command started it: it runs, or is starting
    try:
        _spawn(path, idle, fd)
    finally:
        os.close(fd)  # the broker holds its own copy of the lock until it exits
    return True


def _spawn(path: str, idle: float, lock_fd: int) -> None:
    """`python -P -m rsk broker start --foreground` in a new session, in `/`, its output to a log beside the
    socket, holding the start lock; detached twice, so no one waits for it."""
    here = os.path.dirname(os.path.dirname(os.path.realpath(__file__)))  # the directory that holds rsk/
    env = dict(os.environ)
    rest = [os.path.abspath(p) for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
    env["PYTHONPATH"] = os.pathsep.join(dict.fromkeys([here, *rest]))  # (rsk's settings pass as they are)
    args = [sys.executable, "-P", "-m", "rsk", "broker", "start", "--foreground", "--idle", repr(idle), "--socket",
            path]  # fmt: skip
    log = path[: -len(".sock")] + ".log"
    pid = os.fork()
    if pid:
        os.waitpid(pid, 0)
        return
    try:  # the first child: a new session, then the broker as its child, which init inherits
        os.setsid()
        if os.fork():
            os._exit(0)
        os.chdir("/")
        null = os.open(os.devnull, os.O_RDONLY)
        out = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW, 0o600)
        os.dup2(null, 0)
        os.dup2(out, 1)
        os.dup2(out, 2)
        os.set_inheritable(lock_fd, True)
        os.execve(args[0], args, env)
    finally:
        os._exit(127)


def _through(path: str, argv: list[str]) -> int | None:
    """The command run by the broker on this socket, its exit code; None: no broker answers there."""
    want = expected_uid(path)
    if want is None:
        return None
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.settimeout(2.0)
        sock.connect(path)
    except OSError:
        sock.close()
        return None  # no broker: the command runs here
    try:
        uid = peer_uid(sock)
        if uid != want:
            sys.stderr.write(f"error: the broker socket {path} is served by uid {uid}, not uid {want}: not using it\n"
                             "hint: remove the socket, or set RSK_BROKER to your own broker's\n")  # fmt: skip
            return EXIT_CONFIG
        try:
            cols = os.get_terminal_size(1).columns
        except OSError:
            cols = 200
        env = {k: v for k, v in os.environ.items() if k in PASSED_ENV or k.startswith(PASSED_PREFIXES)}
        try:
            cwd = os.getcwd()
        except OSError as exc:
            sys.stderr.write(f"error: the working directory cannot be read ({exc.strerror}); nothing was done\n"
                             "hint: cd to a directory that exists, and run the command again\n")  # fmt: skip
            return 2
        # argv goes as it is: the broker reads it with the CLI's own parser, relative to cwd, and asks for
        # the files it names when it may not open them itself (another user's broker); the project file
        # is the one found here, from the caller's own view of its directory
        req = {"v": WIRE_VERSION, "op": "run", "argv": argv, "cwd": cwd, "env": env, "project_file":
               project_file(cwd), "tty": os.isatty(1), "columns": max(20, min(cols, 1000)),
               "ppid": os.getppid()}  # fmt: skip
        sock.settimeout(None)
        try:
            sock.sendall((dumps(req) + "\n").encode())
            if argv[0] == "mcp":  # it speaks on stdin and stdout: what comes after the request is its input
                _forward_stdin(sock)
            return _pump(sock)
        except _NotSent as exc:
            sys.stderr.write(f"{exc}\n")
            return 2
        except _Older as exc:  # a broker of an older rsk that refused this client's request: nothing ran
            if path == auto_socket() and exc.version is not None:  # this install's own, from before its files changed
                request("stop", path, 2.0, exc.version)
            elif explicit():
                sys.stderr.write(f"rsk: the broker on {path} runs another rsk (wire version {exc.version}); this "
                                 "command runs here (`rsk broker stop`, then start, updates it)\n")  # fmt: skip
            return None
        except _Stale:
            if explicit():
                sys.stderr.write(f"rsk: the broker on {path} ran an older rsk and has stopped; this command runs "
                                 "here (`rsk broker start` starts it again with the rsk installed now)\n")  # fmt: skip
            return None
        except (OSError, ValueError):  # gone, or a frame that is not the broker's JSON
            pass
    finally:
        sock.close()
    sys.stderr.write(
        "error: the broker went away during the command; its outcome is unknown\n"
        "hint: run it again (a launch with the same --request-id never submits twice); `rsk broker status`\n"
    )
    return EXIT_CONNECT


class _NotSent(Exception):
    """What the broker asked for could not be read here: the command is not run."""


def _send_wanted(sock: Any, want: dict[str, Any]) -> None:
    """The files the broker asked for, read as this user (the broker opens no path a caller names, ADR 0064):
    --script and --tasks as text, then --code's files listed as [name, size, executable] and their bytes after
    the line, one after another; never an archive. What keeps --code from being sent goes as its `error`."""
    files: dict[str, str] = {}
    unread: dict[str, object] = {}
    for path in want.get("files") or []:
        _read_into(files, unread, str(path))
    sent: dict[str, object] = {"files": files}
    if unread:
        sent["unread"] = unread
    code = None
    if (root := want.get("code")) is not None:
        from rsk.errors import RskError
        from rsk.local.handover import CodeFiles

        code = CodeFiles(str(root), [str(e) for e in want.get("exclude") or []])
        try:
            sent["code"] = {"path": root, "files": code.listing()}
        except RskError as exc:
            code.close()
            code = None
            sent["code"] = {"path": root, "error": f"--code {root}: cannot send it to the broker: {exc.message}",
                            "hint": exc.hint or ""}  # fmt: skip
    sock.sendall((dumps(sent) + "\n").encode())
    if code is not None:
        try:
            code.send(sock.sendall)
        except Exception as exc:  # the broker has the listing: it stops reading at the first file cut short
            raise _NotSent(f"error: --code {root}: {exc}\nhint: nothing was done; run it again") from None
        finally:
            code.close()


def _serve_put(reader: _Reader, sock: Any, put: dict[str, Any], places: dict[str, Any]) -> None:
    """One step of a fetch the broker asked this client to write (rsk.local.handover.serve): the step's bytes
    follow its frame; the answer goes back as one line. The file is written by this process, as this user."""
    from rsk.local.handover import serve

    size = put.get("size")
    data = reader.exact(size if isinstance(size, int) and size >= 0 else 0)
    sock.sendall((dumps(serve(put, data, places)) + "\n").encode())


def _forward_stdin(sock: Any) -> None:
    """Copy stdin to the broker as it comes, in a thread; at its end, say so (shut the socket for writing)."""
    import _thread

    def copy() -> None:
        try:
            while data := os.read(0, 65536):
                sock.sendall(data)
            sock.shutdown(socket.SHUT_WR)
        except OSError:
            pass

    _thread.start_new_thread(copy, ())


def peer_uid(sock: Any) -> int:
    """The uid of the process at the other end of a Unix socket, from the kernel (struct ucred)."""
    raw = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, 12)
    return int.from_bytes(raw[4:8], sys.byteorder, signed=True)


def dumps(value: object) -> str:
    """JSON text of a request (str, int, bool, None, lists and str-keyed dicts), as json.dumps writes it."""
    if isinstance(value, str):
        return str(_quote(value))
    if value is None or isinstance(value, bool):
        return {None: "null", True: "true", False: "false"}[value]
    if isinstance(value, int):
        return int.__repr__(value)
    if isinstance(value, dict):
        return "{" + ", ".join(f"{_quote(str(k))}: {dumps(v)}" for k, v in value.items()) + "}"
    if isinstance(value, list | tuple):
        return "[" + ", ".join(dumps(v) for v in value) + "]"
    raise TypeError(f"not sent to the broker: {type(value).__name__}")


def loads(line: bytes) -> Any:
    """One JSON frame (a line the broker wrote)."""
    text = line.decode("utf-8").strip()
    try:
        value, end = _scan(text, 0)
    except StopIteration:  # what the scanner raises where no JSON value starts
        raise ValueError("a broker frame that is not JSON") from None
    if end != len(text):
        raise ValueError("extra data after a broker frame")
    return value


class _Reader:
    """The broker's frames, one per line, as they arrive; and the bytes that follow a `put` frame."""

    def __init__(self, sock: Any) -> None:
        self.sock = sock
        self.buf = b""

    def frame(self) -> Any:
        """The next frame, or None at the end of the connection. A frame of megabytes (a status of 10,000 jobs)
        arrives in many chunks: each is looked into once, and they are joined once."""
        end = self.buf.find(b"\n")
        if end < 0:
            chunks = [self.buf]
            while end < 0:
                chunk = self.sock.recv(1 << 20)
                if not chunk:
                    self.buf = b"".join(chunks)
                    return None
                chunks.append(chunk)
                end = chunk.find(b"\n")
            end += sum(len(c) for c in chunks[:-1])
            self.buf = b"".join(chunks)
        line, self.buf = self.buf[:end], self.buf[end + 1 :]
        return loads(line)

    def exact(self, size: int) -> bytes:
        while len(self.buf) < size:
            chunk = self.sock.recv(max(65536, size - len(self.buf)))
            if not chunk:
                raise OSError("the broker closed the socket inside a step's bytes")
            self.buf += chunk
        data, self.buf = self.buf[:size], self.buf[size:]
        return data


def _frames(sock: Any) -> Any:
    """The broker's frames, one per line, as they arrive."""
    reader = _Reader(sock)
    while (frame := reader.frame()) is not None:
        yield frame


OLDER = "error: malformed broker request: wire version "  # what a broker of wire version 2 answers a newer client


def _pump(sock: Any) -> int:
    """Copy the broker's frames to stdout and stderr as they come; the last frame is the exit code."""
    reader = _Reader(sock)
    places: dict[str, Any] = {}  # where this command's fetch writes, each opened once (rsk.local.handover.Place)
    try:
        return _pump_frames(sock, reader, places)
    finally:
        for place in places.values():
            place.close()


def _pump_frames(sock: Any, reader: _Reader, places: dict[str, Any]) -> int:
    first = True
    while (frame := reader.frame()) is not None:
        if first and str(frame.get("e", "")).startswith(OLDER):  # nothing ran: the command runs here
            raise _Older(frame["e"])
        first = False
        if "o" in frame:
            sys.stdout.write(frame["o"])
            sys.stdout.flush()
        elif "e" in frame:
            sys.stderr.write(frame["e"])
            sys.stderr.flush()
        elif "info" in frame:
            import json

            sys.stdout.write(json.dumps(frame["info"]) + "\n")
        elif "want" in frame:
            _send_wanted(sock, frame["want"])
        elif "put" in frame:
            _serve_put(reader, sock, frame["put"], places)
        elif "stale" in frame:
            raise _Stale
        elif "rc" in frame:
            return int(frame["rc"])
    raise OSError("the broker closed the socket without an exit code")


class _Older(Exception):
    """A broker of an older wire version refused the request (nothing ran); `version` is the one it speaks."""

    def __init__(self, text: str) -> None:
        super().__init__(text)
        _, _, tail = text.partition("this broker speaks ")
        digits = tail[: len(tail) - len(tail.lstrip("0123456789"))]
        self.version = int(digits) if digits else None


class _Stale(Exception):
    """The broker runs older code than is installed now: it has stopped, and the command runs here."""


def request(
    op: str, path: Path | str | None = None, timeout: float = 5.0, version: int = WIRE_VERSION
) -> dict[str, object] | None:
    """A control request (ping, stop) to the broker: its info frame ({} for stop), or None: no broker."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.settimeout(timeout)
        sock.connect(str(path or socket_path()))
        sock.sendall((dumps({"v": version, "op": op}) + "\n").encode())
        info: dict[str, object] = {}
        for frame in _frames(sock):
            if "info" in frame:
                info = dict(frame["info"])
            if "e" in frame:
                info["error"] = frame["e"]
            if "rc" in frame:
                return info
        return None
    except (OSError, ValueError):
        return None
    finally:
        sock.close()
