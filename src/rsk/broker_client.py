"""The broker's client: standard library only, so a command the broker runs costs a Python start and one
socket, not importing typer, pydantic and paramiko and opening an SSH connection.

`try_broker(argv)` hands an agent command to a reachable broker and returns its exit code, or None when
the command runs here (no broker, a command that never goes through one, RSK_NO_BROKER set). The broker
is trusted only when the kernel says it runs as the expected user: this user for the default socket, or
the owner of the socket's directory for an RSK_BROKER that another user's broker serves.
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

    class _Plain:  # what the C scanner reads from a decoder: JSON as the json module decodes it
        strict = True
        object_hook = object_pairs_hook = parse_constant = None
        parse_float = float
        parse_int = int

    _scan = make_scanner(_Plain())  # type: ignore[arg-type]

WIRE_VERSION = 2  # rsk.broker.server.Request
MAX_CONTENT = 16 << 20  # larger files are not sent (the broker's own user's are read there)
EXIT_CONNECT = 75
EXIT_CONFIG = 78


def socket_path() -> str:
    """$RSK_BROKER, else $XDG_RUNTIME_DIR/rsk/broker.sock, else /tmp/rsk-UID/broker.sock."""
    if explicit := os.environ.get("RSK_BROKER"):
        return explicit
    runtime = os.environ.get("XDG_RUNTIME_DIR")
    if runtime and os.path.isdir(runtime):
        return os.path.join(runtime, "rsk", "broker.sock")
    return f"/tmp/rsk-{os.getuid()}/broker.sock"


def default_socket() -> Path:
    from pathlib import Path

    return Path(socket_path())


def expected_uid(path: str) -> int | None:
    """Whose broker may answer on this socket: ours for the default path; for RSK_BROKER, the owner of its
    directory, provided no one else can write there. None: do not use this socket."""
    if not os.environ.get("RSK_BROKER"):
        return os.getuid()
    try:
        st = os.lstat(os.path.dirname(os.path.abspath(path)))
    except OSError:
        return None
    if st.st_mode & 0o170000 != 0o040000 or st.st_mode & 0o022:  # a directory (stat.S_ISDIR) no one else writes
        return None
    return st.st_uid


def _read_into(files: dict[str, str], path: str) -> None:
    """The file's text as this process may read it; nothing when it cannot (the command says why)."""
    try:
        with open(path, "rb") as f:
            data = f.read(MAX_CONTENT + 1)
        if len(data) <= MAX_CONTENT:
            files[path] = data.decode("utf-8")
    except (OSError, UnicodeDecodeError):
        pass


def try_broker(argv: list[str]) -> int | None:
    from rsk.commands import BROKERED  # who may run what: the one table, read before anything heavy loads

    if not argv or argv[0] not in BROKERED or os.environ.get("RSK_NO_BROKER"):
        return None
    head = argv[: argv.index("--")] if "--" in argv else argv
    if "--help" in head:
        return None
    path = socket_path()
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
        # argv goes as it is: the broker reads it with the CLI's own parser, relative to cwd, and asks for
        # the files it names when it may not open them itself (another user's broker)
        req = {"v": WIRE_VERSION, "op": "run", "argv": argv, "cwd": os.getcwd(), "env": env,
               "tty": os.isatty(1), "columns": max(20, min(cols, 1000)), "ppid": os.getppid()}  # fmt: skip
        sock.settimeout(None)
        try:
            sock.sendall((dumps(req) + "\n").encode())
            if argv[0] == "mcp":  # it speaks on stdin and stdout: what comes after the request is its input
                _forward_stdin(sock)
            return _pump(sock)
        except _NotSent as exc:
            sys.stderr.write(f"{exc}\n")
            return 2
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
    """The files the broker asked for, read as this user: --script and --tasks as text, then --code's
    directory as a tar of its files (after the line that gives its size)."""
    files: dict[str, str] = {}
    for path in want.get("files") or []:
        _read_into(files, str(path))
    sent: dict[str, object] = {"files": files}
    upload = None
    if (code := want.get("code")) is not None:
        try:
            upload, size = _pack(str(code), [str(e) for e in want.get("exclude") or []])
        except (OSError, ValueError) as exc:
            raise _NotSent(f"error: --code {code}: cannot send it to the broker: {exc}\n"
                           "hint: fix what it says, or leave out --code") from None  # fmt: skip
        sent["code"] = {"path": code, "size": size}
    sock.sendall((dumps(sent) + "\n").encode())
    if upload is not None:
        while chunk := upload.read(1 << 20):
            sock.sendall(chunk)
        upload.close()


def _pack(root: str, excludes: list[str]) -> tuple[Any, int]:
    from rsk.codelist import pack

    if not os.path.isdir(root) or not os.access(root, os.R_OK | os.X_OK):
        raise ValueError("not a directory this user can read")
    return pack(root, excludes)


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


def _frames(sock: Any) -> Any:
    """The broker's frames, one per line, as they arrive."""
    buf = b""
    while True:
        chunk = sock.recv(65536)
        if not chunk:
            return
        buf += chunk
        *lines, buf = buf.split(b"\n")
        for line in lines:
            yield loads(line)


def _pump(sock: Any) -> int:
    """Copy the broker's frames to stdout and stderr as they come; the last frame is the exit code."""
    for frame in _frames(sock):
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
        elif "rc" in frame:
            return int(frame["rc"])
    raise OSError("the broker closed the socket without an exit code")


def request(op: str, path: Path | None = None, timeout: float = 5.0) -> dict[str, object] | None:
    """A control request (ping, stop) to the broker: its info frame ({} for stop), or None: no broker."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.settimeout(timeout)
        sock.connect(str(path or socket_path()))
        sock.sendall((dumps({"v": WIRE_VERSION, "op": op}) + "\n").encode())
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
