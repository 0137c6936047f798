"""Typed errors and the one table of exit codes (README keeps the same table).

An error's JSON document (`--json`, and MCP's tool errors) follows one rule: `error` is the most specific
reason rsk knows, a stable kebab-case name (`not-found`, `card-withdrawn`, `request-conflict`,
`approval-pending`, or the class's own name such as `usage` when there is none more specific); `exit_code`
is its class, the exit-code table's row. There is no second key for the reason."""

from __future__ import annotations

from enum import IntEnum


class Exit(IntEnum):
    OK = 0
    INTERNAL = 1
    USAGE = 2  # bad option or bad input
    DENIED = 3  # deny rule, a human's denial, or the cluster policy
    PENDING = 4  # an approval card waits for a human
    CONFLICT = 5  # the plan changed, or a request id was reused for another plan
    STATE = 6  # a ledger or target file is invalid, or written by a newer rsk
    CAP = 7  # the project's active-jobs cap on the cluster is reached, or a user's pending cards (ADR 0067)
    REJECTED = 8  # Slurm refuses the request as asked (sbatch --test-only or sbatch)
    CHECKS = 9  # rsk doctor: at least one check failed
    RUNNING = 10  # rsk wait: the jobs still run at the timeout; call again
    UNSUCCESSFUL = 11  # rsk wait: every job ended, not all of them succeeded
    BLOCKED = 12  # rsk wait: a job can never start as asked (Slurm's pending reason); nothing else can run
    UNAVAILABLE = 69  # the Slurm controller does not answer
    REMOTE_ROOT = 73  # the remote root is not writable (full disk, permissions)
    CONNECT = 75  # the cluster cannot be reached now (refused, timeout), or the project's lock stays held: try again
    HUMAN = 77  # the action needs a human at a terminal (or --yes)
    CONFIG = 78  # target, host key or authentication needs fixing
    INTERRUPTED = 130


# what an agent does with a denial (the skill's exit-3 row says the same)
DENIED_HINT = (
    "if the human's reason asks for a specific change, make exactly that change under a new request id (it is "
    "decided again); otherwise tell the human and ask what to do instead. Never try to get around a denial"
)


class RskError(Exception):
    """An error the user can act on: a message, a hint and an exit code."""

    exit_code: Exit = Exit.INTERNAL
    code: str = "error"

    def __init__(
        self, message: str, hint: str | None = None, *, details: dict[str, object] | None = None,
        code: str | None = None,
    ) -> None:  # fmt: skip
        super().__init__(message)
        self.message = message
        self.hint = hint
        self.details = details or {}
        if code is not None:  # the specific reason, where the class's name says only the exit code's row
            self.code = code

    retry_after: float | None = None  # seconds: the same call may succeed then (None: do not retry as is)

    def to_json(self) -> dict[str, object]:
        """The error document: the rule in this module's docstring; details never override its keys."""
        return {
            **self.details,
            "schema_version": 1,
            "error": self.code,
            "exit_code": int(self.exit_code),
            "message": self.message,
            "hint": self.hint,
            "retryable": self.retry_after is not None,
            "retry_after": self.retry_after,
        }


class UsageError(RskError):
    exit_code = Exit.USAGE
    code = "usage"


NOT_OURS_HINT = (
    "`rsk status` lists this project's jobs (a launch still waiting for a human has a card id, not a job; "
    "another project's jobs are its own agent's)"
)


def not_ours(job: str, project: str, target: str = "") -> UsageError:
    """The one answer for a job id that is not one of the project's rsk jobs (another project's, another user's,
    or none at all), whichever command was given it: `not-ours`, exit 2, one message and one hint."""
    on = f" on {target}" if target else ""
    return UsageError(f"job {job} was not launched through rsk in project {project}{on}", NOT_OURS_HINT,
                      code="not-ours")  # fmt: skip


class DeniedError(RskError):
    exit_code = Exit.DENIED
    code = "denied"


class PendingApproval(RskError):
    exit_code = Exit.PENDING
    code = "approval-pending"


class ConflictError(RskError):
    exit_code = Exit.CONFLICT
    code = "conflict"


class StateError(RskError):
    exit_code = Exit.STATE
    code = "invalid-state"


class NewerLedger(StateError):
    """A ledger (or a line of its archive) written by a newer rsk: refused whole and left as it is, so that
    nothing the newer rsk recorded is lost or read past (docs/adr/0044)."""

    code = "ledger-newer"

    @classmethod
    def of(cls, path: str, version: int, understood: int) -> NewerLedger:
        return cls(
            f"the ledger {path} was written by a newer rsk (schema_version {version}; this rsk reads {understood} "
            "and older); it was left as it is",
            "upgrade rsk here (pip install -U rsk), and on every machine and broker that shares this project: an "
            "older rsk never reads past what a newer one recorded, and never writes over it",
            details={"schema_version": version, "understood": understood, "path": path},
        )


class CapReached(RskError):
    exit_code = Exit.CAP
    code = "active-cap"


class RejectedError(RskError):
    exit_code = Exit.REJECTED
    code = "rejected"


class UnavailableError(RskError):
    exit_code = Exit.UNAVAILABLE
    code = "slurm-unavailable"
    retry_after = 60.0


class RemoteRootError(RskError):
    exit_code = Exit.REMOTE_ROOT
    code = "remote-root"


class ConnectError(RskError):
    exit_code = Exit.CONNECT
    code = "connect"
    retry_after = 30.0


class NeedsHuman(RskError):
    exit_code = Exit.HUMAN
    code = "needs-human"


class ConfigError(RskError):
    exit_code = Exit.CONFIG
    code = "config"


class ProtocolError(RskError):
    """The cluster answered something rsk cannot read (truncated, too large, wrong version)."""

    exit_code = Exit.CONNECT
    code = "protocol"
    retry_after = 30.0


_BY_EXIT = {c.exit_code: c for c in (UsageError, DeniedError, PendingApproval, ConflictError, StateError, CapReached,
                                     RejectedError, UnavailableError, RemoteRootError, ConnectError, NeedsHuman,
                                     ConfigError)}  # fmt: skip
_KEYS = ("schema_version", "error", "exit_code", "message", "hint", "retryable", "retry_after")


def from_json(doc: dict[str, object]) -> RskError:
    """The error an error document (RskError.to_json) describes, of the class its exit code names: an error raised
    in another process (a brokered command's client, ADR 0065) said here as that process would have said it."""
    code = doc.get("exit_code")
    cls = _BY_EXIT.get(Exit(code), RskError) if isinstance(code, int) and code in set(Exit) else RskError
    hint = doc.get("hint")
    details = {k: v for k, v in doc.items() if k not in _KEYS}
    return cls(str(doc.get("message", "")), hint if isinstance(hint, str) else None, details=details,
               code=str(doc.get("error", cls.code)))  # fmt: skip
