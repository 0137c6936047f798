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

# the commands a broker runs; everything else (human acts, init, watch, mcp, broker) always runs here
BROKERED = frozenset({"plan", "launch", "wait", "status", "events", "logs", "cancel", "reconcile", "journal",
                      "targets", "info", "gpus", "approvals", "withdraw", "lease", "doctor", "fetch",
                      "mcp"})  # fmt: skip
PATH_OPTIONS = frozenset({"--tasks", "--script", "--code", "--to"})  # read or written by the broker: made absolute
CONTENT_OPTIONS = frozenset({"--tasks", "--script"})  # files the client reads and sends: the broker opens none
MAX_CONTENT = 16 << 20  # larger files are not sent (the broker's own user's are read there)
PASSED_ENV = ("RSK_PROJECT", "RSK_TARGET", "RSK_REQUESTER", "NO_COLOR", "CLAUDECODE", "CLAUDE_CODE_ENTRYPOINT")
PASSED_PREFIXES = ("CODEX_", "PI_CODING_AGENT")
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


def _absolute(argv: list[str], files: dict[str, str] | None = None) -> list[str]:
    """argv with its path options made absolute; the files of --script and --tasks read into `files`."""
    out: list[str] = []
    take = ""
    for i, w in enumerate(argv):
        if w == "--":
            return out + argv[i:]
        name, eq, value = w.partition("=")
        if take or (name in PATH_OPTIONS and eq):
            path = _abspath(w if take else value)
            if files is not None and (take or name) in CONTENT_OPTIONS:
                _read_into(files, path)
            out.append(path if take else f"{name}={path}")
            take = ""
            continue
        take = w if w in PATH_OPTIONS else ""
        out.append(w)
    return out


def _read_into(files: dict[str, str], path: str) -> None:
    """The file's text as this process may read it; nothing when it cannot (the command says why)."""
    try:
        with open(path, "rb") as f:
            data = f.read(MAX_CONTENT + 1)
        if len(data) <= MAX_CONTENT:
            files[path] = data.decode("utf-8")
    except (OSError, UnicodeDecodeError):
        pass


def _abspath(p: str) -> str:
    """What pathlib's absolute() gives (no "." parts, ".." kept: symlinks decide what it means)."""
    full = p if p.startswith("/") else f"{os.getcwd()}/{p}"
    return "/" + "/".join(c for c in full.split("/") if c not in ("", "."))


def try_broker(argv: list[str]) -> int | None:
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
        files: dict[str, str] = {}
        absolute = _absolute(argv, files)
        req = {"v": 1, "op": "run", "argv": absolute, "cwd": os.getcwd(), "env": env,
               "tty": os.isatty(1), "columns": max(20, min(cols, 1000)), "ppid": os.getppid(),
               "files": files}  # fmt: skip
        upload = None
        if uid != os.getuid() and (code := _code_option(absolute)) is not None:
            # another user's broker opens no directory of ours: send the files --code takes, read as us
            try:
                upload, size = _pack(*code)
            except (OSError, ValueError) as exc:
                sys.stderr.write(f"error: --code {code[0]}: cannot send it to the broker: {exc}\n"
                                 "hint: fix what it says, or leave out --code\n")  # fmt: skip
                return 2
            req["code"] = {"path": code[0], "size": size}
        sock.settimeout(None)
        try:
            sock.sendall((dumps(req) + "\n").encode())
            if upload is not None:
                while chunk := upload.read(1 << 20):
                    sock.sendall(chunk)
                upload.close()
            if argv[0] == "mcp":  # it speaks on stdin and stdout: what comes after the request is its input
                _forward_stdin(sock)
            return _pump(sock)
        except (OSError, ValueError):  # gone, or a frame that is not the broker's JSON
            pass
    finally:
        sock.close()
    sys.stderr.write(
        "error: the broker went away during the command; its outcome is unknown\n"
        "hint: run it again (a launch with the same --request-id never submits twice); `rsk broker status`\n"
    )
    return EXIT_CONNECT


def _code_option(argv: list[str]) -> tuple[str, list[str]] | None:
    """(--code's directory, the --exclude globs) from an argv whose paths are absolute; None without --code."""
    head = argv[: argv.index("--")] if "--" in argv else argv
    code, excludes, i = None, [], 0
    while i < len(head):
        name, eq, value = head[i].partition("=")
        if name in ("--code", "--exclude"):
            if not eq:
                if i + 1 == len(head):
                    break
                i += 1
                value = head[i]
            if name == "--code":
                code = value
            else:
                excludes.append(value)
        i += 1
    return (code, excludes) if code is not None else None


def _pack(root: str, excludes: list[str]) -> tuple[Any, int]:
    from rsk.codelist import pack

    if not os.path.isdir(root):
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
        elif "rc" in frame:
            return int(frame["rc"])
    raise OSError("the broker closed the socket without an exit code")


def request(op: str, path: Path | None = None, timeout: float = 5.0) -> dict[str, object] | None:
    """A control request (ping, stop) to the broker: its info frame ({} for stop), or None: no broker."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.settimeout(timeout)
        sock.connect(str(path or socket_path()))
        sock.sendall((dumps({"v": 1, "op": op}) + "\n").encode())
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
