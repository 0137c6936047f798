"""rsk broker start|stop|status, and the runner that executes the CLI's own commands inside the broker."""

from __future__ import annotations

import io
import os
import subprocess
import sys
import time
import traceback
from pathlib import Path
from typing import Annotated, Any

import typer

from rsk.cli.common import JsonOpt, err, out, print_json
from rsk.commands import help_for

broker_app = typer.Typer(
    help=help_for(
        "broker",
        "A resident rsk for this user: it owns RSK_HOME and the SSH keys, keeps one warm connection per target, "
        "and runs agent commands (launch, status, wait, ...) sent over a Unix socket; every such command uses "
        "it when it is reachable, and runs directly when not. With --allow, agents running as other users (or "
        "in a sandbox that cannot read the keys or write the ledger) may use it too, and nothing else: the "
        "human's acts never go through it. See docs/broker.md.",
    ),
    no_args_is_help=True,
)
SocketOpt = Annotated[
    Path | None,
    typer.Option(
        "--socket",
        help="The socket (default: $RSK_BROKER, else $XDG_RUNTIME_DIR/rsk/broker.sock; for status and stop, "
        "this environment's automatic broker when none answers there).",
    ),
]


def register(app: typer.Typer) -> None:
    app.add_typer(broker_app, name="broker")


# the CLI's output goes to the caller that asked ----------------------------------------------------------
class _Router(io.TextIOBase):
    """sys.stdout / sys.stderr in the broker, installed once when it starts: what Click and Typer write there
    themselves (help, usage errors, prompts) goes to the stream of the caller the thread acts for; rsk's own
    output goes there directly (rsk.local.caller.stdout). Writes of no caller (the broker's own) go to its log.
    The one process-wide piece of broker mode, and it switches nothing: ADR 0037."""

    encoding = "utf-8"  # what Click checks before it writes to a stream as it is
    errors = "strict"

    def __init__(self, base: io.TextIOBase, stream: str) -> None:
        self.base = base
        self.stream = stream

    def _target(self) -> Any:
        from rsk.local import caller

        c = caller.current()
        mine = None if c is None else c.out if self.stream == "o" else c.err
        return mine if mine is not None else self.base

    def write(self, text: str) -> int:
        return int(self._target().write(text))

    def flush(self) -> None:
        self._target().flush()

    def isatty(self) -> bool:
        from rsk.local import caller

        c = caller.current()
        return c.tty if c is not None else self.base.isatty()


def install_router() -> None:
    """Once, as the broker starts (before any thread serves a caller)."""
    if not isinstance(sys.stdout, _Router):
        sys.stdout = _Router(sys.stdout, "o")  # type: ignore[arg-type]
        sys.stderr = _Router(sys.stderr, "e")  # type: ignore[arg-type]


def cli_runner(argv: list[str], who: object) -> int:
    """Run one rsk command in this process for a caller: the CLI's own main, acting for `who`, whose streams
    take its output."""
    from rsk.cli.app import main
    from rsk.local.caller import Caller, acting_for

    assert isinstance(who, Caller)
    with acting_for(who):
        try:
            main(argv)
            return 0
        except SystemExit as exc:
            return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        except BrokenPipeError:
            raise
        except Exception:  # a bug: the broker's log gets the traceback, the caller a typed error; the broker goes on
            _log(f"rsk broker: `rsk {argv[0] if argv else ''}` for {who.user} failed:\n{traceback.format_exc()}")
            if who.err is not None:
                who.err.write(
                    "error: rsk failed on this command (an internal error; the broker's log has the details)\n"
                    "hint: the human sees it with `rsk broker status` and the log it names\n"
                )
            return 1


def _log(text: str) -> None:
    """The broker's own stderr (its log), not the caller's: a traceback never crosses the socket."""
    base = sys.stderr.base if isinstance(sys.stderr, _Router) else sys.stderr
    base.write(text)
    base.flush()


# the commands ---------------------------------------------------------------------------------------
@broker_app.command(
    "start",
    help="Start the broker in the background (or in the foreground, e.g. under a systemd user unit). Only one runs "
    "per socket: a second start says which one runs.",
)
def start(
    foreground: Annotated[bool, typer.Option(help="Run here until stopped (for a service manager).")] = False,
    idle: Annotated[
        float, typer.Option(min=0, help="Exit after this many seconds without a request (0: never).")
    ] = 3600,
    allow: Annotated[
        list[str] | None,
        typer.Option(
            "--allow",
            metavar="USER[:PROJECT,...]",
            help="Also serve this local user (an agent's account), for these projects (default: any). Repeatable.",
        ),
    ] = None,
    socket_path: SocketOpt = None,
    json_out: JsonOpt = False,
) -> None:
    import math

    from rsk.broker.server import Config, default_socket, parse_allow
    from rsk.errors import UsageError

    if not math.isfinite(idle):
        raise UsageError(f"--idle {idle} is not a number of seconds", "give --idle 0 (never) or a number of seconds")
    path = (socket_path or default_socket()).absolute()
    config = Config(socket=path, idle_exit_s=idle, allowed=parse_allow(list(allow or [])))
    if foreground:
        _serve(config)
        return
    from rsk.broker_client import request
    from rsk.errors import StateError
    from rsk.local.paths import private_dir, rsk_home

    running = request("ping", path)
    if running is not None and "pid" in running:
        raise StateError(f"a broker already runs on {path} (pid {running['pid']})", "`rsk broker stop` stops it")
    log = private_dir(rsk_home()) / "broker.log"
    from rsk.local.child import python

    args, env = python("rsk", "broker", "start", "--foreground", "--idle", str(idle), "--socket", str(path))
    for spec in allow or []:
        args += ["--allow", spec]
    fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    with os.fdopen(fd, "ab") as fh:
        proc = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=fh, stderr=fh, start_new_session=True,
                                cwd="/", env=env)  # fmt: skip
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        info = request("ping", path, timeout=1.0)
        if info is not None and "pid" in info:
            break
        if proc.poll() is not None:
            tail = log.read_text(errors="replace").strip().splitlines()[-3:]
            raise StateError("the broker did not start: " + " / ".join(tail), f"see {log}")
        time.sleep(0.1)
    else:
        raise StateError(f"the broker did not answer on {path} within 15 s", f"see {log}")
    if json_out:
        print_json(info)
        return
    out().print(f"broker running: pid {info['pid']}, socket {path}, log {log}")


def _serve(config: object) -> None:
    import signal

    from rsk.broker.server import Broker, Config

    assert isinstance(config, Config)
    from rsk.cli.argv import wanted

    broker = Broker(config, cli_runner, wanted)
    broker.bind()
    from rsk.cli.app import command

    command()  # every command imported and built once: requests do not pay for it
    install_router()
    signal.signal(signal.SIGTERM, lambda *_: broker.stopping.set())
    err().print(f"rsk broker: pid {os.getpid()} listening on {config.socket}")
    try:
        broker.serve()
    finally:
        broker.pool.close()
        err().print("rsk broker: stopped")


def _current() -> Path:
    """The broker this user's commands use: RSK_BROKER's; else one started by hand on the default socket when it
    answers, else this environment's automatic one (docs/broker.md)."""
    from rsk import broker_client as bc
    from rsk.broker.server import default_socket

    path = default_socket()
    if bc.explicit() or bc.request("ping", path, timeout=2.0) is not None:
        return path
    return Path(bc.auto_socket())


@broker_app.command("stop", help="Stop the broker (commands in flight end first; new ones run directly).")
def stop(socket_path: SocketOpt = None, json_out: JsonOpt = False) -> None:
    from rsk.broker_client import request

    path = socket_path or _current()
    answer = request("stop", path)
    if answer is None:
        if json_out:
            print_json({"schema_version": 1, "stopped": False, "socket": str(path)})
        else:
            out().print(f"no broker answers on {path}")
        return
    deadline = time.monotonic() + 10
    while path.exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    if json_out:
        print_json({"schema_version": 1, "stopped": "error" not in answer, "socket": str(path), **answer})
        return
    out().print(answer.get("error", f"broker on {path} stopped"))


@broker_app.command("status", help="Whether a broker answers, and its pid, connections and allowed users.")
def status(socket_path: SocketOpt = None, json_out: JsonOpt = False) -> None:
    from rsk.broker_client import request
    from rsk.errors import Exit

    path = socket_path or _current()
    info = request("ping", path)
    if info is None or "pid" not in info:
        if json_out:
            print_json({"schema_version": 1, "up": False, "socket": str(path)})
        else:
            out().print(f"no broker on {path}: commands run directly")
        raise typer.Exit(int(Exit.CONNECT))
    if json_out:
        print_json({**info, "up": True})
        return
    up = ", ".join(f"{t} {'up' if ok else 'down'}" for t, ok in dict(info["connections"]).items()) or "none yet"  # type: ignore[call-overload]
    allowed = ", ".join(f"{u} ({','.join(p)})" for u, p in dict(info["allowed"]).items()) or "only its own user"  # type: ignore[call-overload]
    o = out()
    o.print(f"broker pid {info['pid']} on {info['socket']}: {info['requests']} request(s), {info['running']} running")
    o.print(f"  connections  {up}")
    o.print(f"  serves       {allowed}")
