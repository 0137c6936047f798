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


def doctor(target_name: str) -> Report:
    checks: list[Check] = []

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
