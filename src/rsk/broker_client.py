"""The broker's client: standard library only, so a command the broker runs costs a Python start and one
socket, not importing typer, pydantic and paramiko and opening an SSH connection.

`try_broker(argv)` hands an agent command to a reachable broker and returns its exit code, or None when
the command runs here (no broker, a command that never goes through one, RSK_NO_BROKER set). The broker
is trusted only when the kernel says it runs as the expected user: this user for the default socket, or
the owner of the socket's directory for an RSK_BROKER that another user's broker serves.
"""

from __future__ import annotations

import json
import os
import socket
import stat
import struct
import sys
from pathlib import Path

# the commands a broker runs; everything else (human acts, init, watch, mcp, broker) always runs here
BROKERED = frozenset({"plan", "launch", "wait", "status", "events", "logs", "cancel", "reconcile", "journal",
                      "targets", "info", "gpus", "approvals", "withdraw", "lease", "doctor", "fetch"})  # fmt: skip
PATH_OPTIONS = frozenset({"--tasks", "--script", "--code", "--to"})  # read or written by the broker: made absolute
PASSED_ENV = ("RSK_PROJECT", "RSK_TARGET", "RSK_REQUESTER", "NO_COLOR", "CLAUDECODE", "CLAUDE_CODE_ENTRYPOINT")
PASSED_PREFIXES = ("CODEX_", "PI_CODING_AGENT")
EXIT_CONNECT = 75
EXIT_CONFIG = 78


def default_socket() -> Path:
    """$RSK_BROKER, else $XDG_RUNTIME_DIR/rsk/broker.sock, else /tmp/rsk-UID/broker.sock."""
    if explicit := os.environ.get("RSK_BROKER"):
        return Path(explicit)
    runtime = os.environ.get("XDG_RUNTIME_DIR")
    if runtime and Path(runtime).is_dir():
        return Path(runtime) / "rsk" / "broker.sock"
    return Path(f"/tmp/rsk-{os.getuid()}") / "broker.sock"


def expected_uid(path: Path) -> int | None:
    """Whose broker may answer on this socket: ours for the default path; for RSK_BROKER, the owner of its
    directory, provided no one else can write there. None: do not use this socket."""
    if not os.environ.get("RSK_BROKER"):
        return os.getuid()
    try:
        st = os.lstat(path.parent)
    except OSError:
        return None
    if not stat.S_ISDIR(st.st_mode) or st.st_mode & 0o022:
        return None
    return st.st_uid


def _absolute(argv: list[str]) -> list[str]:
    out: list[str] = []
    take = False
    for i, w in enumerate(argv):
        if w == "--":
            return out + argv[i:]
        if take:
            out.append(str(Path(w).absolute()))
            take = False
            continue
        name, eq, value = w.partition("=")
        if name in PATH_OPTIONS and eq:
            out.append(f"{name}={Path(value).absolute()}")
            continue
        take = w in PATH_OPTIONS
        out.append(w)
    return out


def try_broker(argv: list[str]) -> int | None:
    if not argv or argv[0] not in BROKERED or os.environ.get("RSK_NO_BROKER"):
        return None
    head = argv[: argv.index("--")] if "--" in argv else argv
    if "--help" in head:
        return None
    path = default_socket()
    want = expected_uid(path)
    if want is None:
        return None
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.settimeout(2.0)
        sock.connect(str(path))
    except OSError:
        sock.close()
        return None  # no broker: the command runs here
    with sock:
        _pid, uid, _gid = struct.unpack("3i", sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED,
                                                              struct.calcsize("3i")))  # fmt: skip
        if uid != want:
            sys.stderr.write(f"error: the broker socket {path} is served by uid {uid}, not uid {want}: not using it\n"
                             "hint: remove the socket, or set RSK_BROKER to your own broker's\n")  # fmt: skip
            return EXIT_CONFIG
        try:
            cols = os.get_terminal_size(1).columns
        except OSError:
            cols = 200
        env = {k: v for k, v in os.environ.items() if k in PASSED_ENV or k.startswith(PASSED_PREFIXES)}
        req = {"v": 1, "op": "run", "argv": _absolute(argv), "cwd": str(Path.cwd()), "env": env,
               "tty": os.isatty(1), "columns": max(20, min(cols, 1000)), "ppid": os.getppid()}  # fmt: skip
        sock.settimeout(None)
        try:
            sock.sendall((json.dumps(req) + "\n").encode())
            return _pump(sock)
        except OSError:
            pass
    sys.stderr.write(
        "error: the broker went away during the command; its outcome is unknown\n"
        "hint: run it again (a launch with the same --request-id never submits twice); `rsk broker status`\n"
    )
    return EXIT_CONNECT


def _pump(sock: socket.socket) -> int:
    """Copy the broker's frames to stdout and stderr as they come; the last frame is the exit code."""
    reader = sock.makefile("rb")
    for raw in reader:
        frame = json.loads(raw)
        if "o" in frame:
            sys.stdout.write(frame["o"])
            sys.stdout.flush()
        elif "e" in frame:
            sys.stderr.write(frame["e"])
            sys.stderr.flush()
        elif "info" in frame:
            sys.stdout.write(json.dumps(frame["info"]) + "\n")
        elif "rc" in frame:
            return int(frame["rc"])
    raise OSError("the broker closed the socket without an exit code")


def request(op: str, path: Path | None = None, timeout: float = 5.0) -> dict[str, object] | None:
    """A control request (ping, stop) to the broker: its info frame ({} for stop), or None: no broker."""
    path = path or default_socket()
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.settimeout(timeout)
        sock.connect(str(path))
        sock.sendall((json.dumps({"v": 1, "op": op}) + "\n").encode())
        info: dict[str, object] = {}
        for raw in sock.makefile("rb"):
            frame = json.loads(raw)
            if "info" in frame:
                info = dict(frame["info"])
            if "e" in frame:
                info["error"] = frame["e"]
            if "rc" in frame:
                return info
        return None
    except OSError:
        return None
    finally:
        sock.close()
