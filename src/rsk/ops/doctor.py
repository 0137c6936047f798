"""rsk doctor: checks from the local target file to a --test-only of a small job on the cluster."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict

from rsk.cluster.targets import find_target
from rsk.errors import RskError
from rsk.wire import answers, bundle


class Check(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str
    result: Literal["pass", "fail", "warn", "unavailable"]  # warn: works, with a risk the human should know
    message: str
    hint: str = ""


class Report(BaseModel):
    model_config = ConfigDict(extra="forbid")

    schema_version: int = 1
    target: str
    ok: bool
    checks: list[Check]


def broker_mode() -> Check:
    """Which broker this user's agent commands use (docs/broker.md): off, the one RSK_BROKER names, or
    automatic (a hand-started one on the default socket, else this environment's automatic one)."""
    import os
    from pathlib import Path

    from rsk import broker_client as bc
    from rsk.local import caller

    if caller.current() is not None:
        return Check(name="broker", result="pass", message=f"this command ran in a broker (pid {os.getpid()})")
    if bc.off():
        return Check(
            name="broker", result="pass", message="off (RSK_BROKER=off): every command runs in its own process"
        )

    def state(path: str) -> str:
        info = bc.request("ping", Path(path), timeout=2.0)
        return f"up (pid {info['pid']})" if info is not None and "pid" in info else "not running"

    if bc.explicit():
        path = bc.socket_path()
        return Check(name="broker", result="pass",
                     message=f"RSK_BROKER={path}: {state(path)}; none is started automatically")  # fmt: skip
    try:
        idle = bc.auto_idle()
    except ValueError as exc:
        return Check(name="broker", result="fail", message=str(exc), hint="unset RSK_BROKER_IDLE (10 minutes)")
    if (default := state(bc.socket_path())) != "not running":
        return Check(name="broker", result="pass", message=f"automatic; the broker on {bc.socket_path()} is {default}")
    auto = bc.auto_socket()
    return Check(name="broker", result="pass",
                 message=f"automatic: {auto} {state(auto)} (the first agent command starts it; idle exit after "
                 f"{idle:g} s)", hint="RSK_BROKER=off turns it off")  # fmt: skip


def state_home() -> Check:
    """RSK_HOME is this user's and closed to others (0700): rsk makes it so, and tightens a looser one at the
    next write of a ledger; until then this says so."""
    import os
    import stat

    from rsk.local.paths import rsk_home

    home = rsk_home()
    try:
        st = home.stat()
    except FileNotFoundError:
        return Check(name="state", result="pass", message=f"{home} does not exist yet (rsk makes it 0700)")
    except OSError as exc:
        return Check(name="state", result="fail", message=f"{home}: {exc.strerror}", hint="set RSK_HOME")
    mode = stat.S_IMODE(st.st_mode)
    if st.st_uid != os.geteuid():
        return Check(name="state", result="fail", message=f"{home} belongs to uid {st.st_uid}, not this user",
                     hint="set RSK_HOME to a directory of your own")  # fmt: skip
    if mode & 0o077:
        said = f"{home} is {mode:04o}: other users may reach the ledger and take its lock"
        return Check(name="state", result="warn", message=said, hint=f"chmod 700 {home} (rsk does at the next write)")
    return Check(name="state", result="pass", message=f"{home} ({mode:04o}, this user's)")


def doctor(target_name: str) -> Report:
    checks: list[Check] = [broker_mode(), state_home()]

    def report() -> Report:
        return Report(target=target_name, ok=all(c.result != "fail" for c in checks), checks=checks)

    try:
        target = find_target(target_name)
    except RskError as exc:
        checks.append(Check(name="target", result="fail", message=exc.message, hint=exc.hint or ""))
        return report()
    checks.append(Check(name="target", result="pass", message=f"{target.source}"))
    from rsk.cluster.remote import Remote
    from rsk.cluster.transport import Connection

    try:
        conn = Connection(target)
    except RskError as exc:
        checks.append(Check(name="ssh", result="fail", message=exc.message, hint=exc.hint or ""))
        return report()
    with conn:
        checks.append(Check(name="ssh", result="pass", message=f"connected; host key verified ({target.host})"))
        remote = Remote(conn)
        try:
            found = answers.doctor(remote.call("doctor"))
        except RskError as exc:
            checks.append(Check(name="scripts", result="fail", message=exc.message, hint=exc.hint or ""))
            return report()
        checks.append(
            Check(name="scripts", result="pass", message=f"scripts {bundle.digest()[:16]} ran (shipped with each call)")
        )
        checks += [Check(name=c.name, result=c.result, message=c.message, hint=c.hint) for c in found]
    return report()
