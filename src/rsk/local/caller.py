"""Who runs a command, and from where: this process, or, inside the broker, the client that asked.

Commands read the few things that belong to the caller (RSK_PROJECT, RSK_TARGET, RSK_REQUESTER, the
agent's own markers, the working directory, the terminal, the output streams) and use what the caller's
commands share (the broker's warm connections) through here, never from os.environ, the process's cwd or
sys.stdout directly, and never through a module-level switch: in the broker, one process serves many
callers at once, each in a thread with its own Caller, which the broker builds (ADR 0019, ADR 0037).
Everything else (RSK_HOME, targets, keys) is the process's own, which in the broker is the human's.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from io import TextIOBase
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

if TYPE_CHECKING:
    from rsk.cluster.transport import Pool
    from rsk.local.handover import Client

from rsk.commands import PASSED_ENV, PASSED_PREFIXES  # what a client may pass on to the broker


def passed_env(environ: Mapping[str, str]) -> dict[str, str]:
    return {k: v for k, v in environ.items() if k in PASSED_ENV or k.startswith(PASSED_PREFIXES)}


@dataclass(frozen=True)
class Rights:
    """What a caller may do: set by the broker from the socket's peer credentials and its --allow list, never
    from anything the client said, and checked where a project, a card or a local path is used."""

    uid: int
    user: str
    owner: bool = True  # the broker's own user (another user is only what --allow let in)
    projects: frozenset[str] | None = None  # the projects another user may use (None: any)

    def allows(self, project: str) -> bool:
        return self.owner or self.projects is None or project in self.projects


@dataclass(frozen=True)
class Upload:
    """--code through the broker: the directory as the client named it (absolute), and where the files its client
    sent landed (a private directory of the broker's); or, when the client could not send them, why not."""

    path: str
    local: Path | None
    error: str = ""
    hint: str = ""


@dataclass(frozen=True)
class ProjectFound:
    """The project file the caller's client found by walking up from its working directory, as it read it
    (rsk.broker_client.project_file): path None when there is none; text None when it could not be read."""

    path: str | None
    text: str | None = None
    error: str = ""


@dataclass(frozen=True)
class Caller:
    env: Mapping[str, str]
    cwd: Path
    rights: Rights
    ppid: int  # the client's claim: its parent's pid
    tty: bool = False  # the client's stdout is a terminal
    columns: int = 200
    files: Mapping[str, str] = field(default_factory=dict)  # --script and --tasks files, as the client read them
    # why the client could not: a byte not UTF-8, rsk's error (a link on the way), or the reason
    unread: Mapping[str, int | str | dict[str, object]] = field(default_factory=dict)
    upload: Upload | None = None  # --code's files, as the client read them
    client: Client | None = None  # the caller's client, which writes where a fetch writes (rsk.local.handover)
    stdio: tuple[TextIOBase, TextIOBase] | None = None  # rsk mcp's input and output: the client's, over the socket
    out: TextIO | None = None  # the caller's standard output and error: in the broker, frames to its client
    err: TextIO | None = None
    pool: Pool | None = None  # the connections the caller's commands share (the broker's warm ones); None: new ones
    project: ProjectFound | None = None  # the client's project file (a broker request's); None: read from cwd

    @property
    def owner(self) -> bool:
        return self.rights.owner

    @property
    def user(self) -> str:
        return self.rights.user


_current: ContextVar[Caller | None] = ContextVar("rsk_caller", default=None)


@contextmanager
def acting_for(caller: Caller) -> Iterator[None]:
    token = _current.set(caller)
    try:
        yield
    finally:
        _current.reset(token)


def current() -> Caller | None:
    return _current.get()


def getenv(name: str) -> str | None:
    c = _current.get()
    return c.env.get(name) if c is not None else os.environ.get(name)


def env_names() -> list[str]:
    c = _current.get()
    return list(c.env) if c is not None else list(os.environ)


def stdout() -> TextIO:
    """Where the caller's command prints: its client's output in the broker, else this process's."""
    c = _current.get()
    return c.out if c is not None and c.out is not None else sys.stdout


def stderr() -> TextIO:
    c = _current.get()
    return c.err if c is not None and c.err is not None else sys.stderr


def at_terminal() -> bool:
    """A human may be typing: this process reads a terminal. Never in the broker (its caller is a socket)."""
    return _current.get() is None and sys.stdin.isatty()


def pool() -> Pool | None:
    """The connections the caller's commands share (the broker's), or None: each command opens its own."""
    c = _current.get()
    return c.pool if c is not None else None


def cwd() -> Path:
    c = _current.get()
    return c.cwd if c is not None else Path.cwd()


def path(name: str) -> Path:
    """A path the caller gave, relative to the caller's working directory (not the broker's)."""
    p = Path(name)
    return p if p.is_absolute() else cwd() / p


def is_owner() -> bool:
    """This process's own user (no broker, or the broker's own user asking)."""
    c = _current.get()
    return c is None or c.owner


def opens_paths() -> bool:
    """Whether this process may open the paths its caller names: only when it is the caller's own process (no
    broker). The broker opens none, for any caller (ADR 0064): what a command reads came from the client, and
    where it writes, the client writes (`place`)."""
    return _current.get() is None


def user() -> str:
    c = _current.get()
    if c is not None:
        return c.user
    import getpass

    return getpass.getuser()


def ppid() -> int:
    c = _current.get()
    return c.ppid if c is not None else os.getppid()


def rights() -> Rights | None:
    """The rights of the caller the broker acts for; None outside the broker (this process's own user)."""
    c = _current.get()
    return c.rights if c is not None else None


def check_project(project: str) -> str:
    """The project, when the caller may use it; a usage error (exit 2) when the broker acts for another user
    that --allow did not give it. Called wherever a project is resolved or its state opened."""
    r = rights()
    if r is not None and not r.allows(project):
        from rsk.errors import UsageError

        allowed = ", ".join(sorted(r.projects or ()))
        raise UsageError(
            f"project {project} is not one this user may use (allowed: {allowed})",
            "name one of your own projects with --project; docs/broker.md says who may do what",
            code="not-allowed",
        )
    return project


def sent_text(name: Path | str) -> str | None:
    """A file the caller named (--script, --tasks), relative to its working directory, as its client read and
    sent it: in the broker, for every caller, the broker never opens a path a caller names (why the client
    could not send it is raised as it would be read here). None: no broker, the command reads the file from
    disk itself (rsk.local.nolink.read_file)."""
    p = path(str(name))
    c = _current.get()
    if c is None:
        return None
    if str(p) in c.files:
        return c.files[str(p)]
    if (why := c.unread.get(str(p))) is not None:  # what the client found reading it
        if isinstance(why, int):
            raise UnicodeDecodeError("utf-8", b"", why, why + 1, "not UTF-8")
        if isinstance(why, dict):  # rsk's own error, as the client's read raised it (a link on the way)
            from rsk.errors import from_json

            raise from_json(why)
        raise OSError(why)
    raise PermissionError("its content did not come with the request; the broker opens no file a caller names")


def local_dir(name: Path | str) -> Path:
    """A directory the caller named (--code), relative to its working directory: in the broker, for every caller,
    the copy of the files its client sent, never the path itself."""
    from rsk.errors import UsageError

    p = path(str(name))
    c = _current.get()
    if c is None:
        return p
    if c.upload is not None and c.upload.path == str(p):
        if c.upload.local is None:
            raise UsageError(c.upload.error or f"--code {name}: its files did not come", c.upload.hint or None)
        return c.upload.local
    raise UsageError(
        f"--code {name}: its files did not come with the request; the broker opens no directory a caller names",
        "run the command with rsk's own client, which sends the files it names",
    )


def client() -> Client | None:
    """In the broker, the caller's client, which writes where a fetch writes (rsk.local.handover.Handed)."""
    c = _current.get()
    return c.client if c is not None else None
