"""Where rsk keeps its state, the tokens that name things, and new request ids."""

from __future__ import annotations

import os
import re
import secrets
import stat
import time
from pathlib import Path

from rsk.errors import ConfigError, StateError, UsageError

TOKEN = re.compile(r"[A-Za-z0-9_][A-Za-z0-9._-]{0,63}")  # used with fullmatch: a whole string, never a prefix


def rsk_home() -> Path:
    """RSK_HOME, else $XDG_STATE_HOME/rsk, else ~/.local/state/rsk. A relative RSK_HOME is refused: it would put
    the ledger in whatever directory rsk runs in (an agent's tree); a relative XDG_STATE_HOME is ignored, as
    the XDG spec says."""
    if home := os.environ.get("RSK_HOME"):
        if not Path(home).is_absolute():
            raise ConfigError(f"RSK_HOME={home!r} is a relative path: rsk would keep the ledger wherever it runs",
                              "set RSK_HOME to an absolute path (or unset it: ~/.local/state/rsk)")  # fmt: skip
        return Path(home)
    return _xdg("XDG_STATE_HOME", ".local/state") / "rsk"


def config_dir() -> Path:
    """The user's rsk configuration: $XDG_CONFIG_HOME/rsk (targets/ lives there); a relative XDG_CONFIG_HOME is
    ignored, as the XDG spec says."""
    return _xdg("XDG_CONFIG_HOME", ".config") / "rsk"


def search_dirs() -> list[Path]:
    """RSK_TARGETS_PATH (colon separated, absolute directories), then the user's config directory: the human's
    own, never the working directory (ADR 0054). A target file names the host, user, key and ssh_config to
    connect with, and an ssh_config can name a command to run (ProxyCommand): one read from the tree rsk runs
    in would let whoever writes that tree (an agent) run commands as the human."""
    dirs = []
    for p in os.environ.get("RSK_TARGETS_PATH", "").split(":"):
        if p and not Path(p).is_absolute():
            raise ConfigError(f"RSK_TARGETS_PATH names {p!r}, a relative directory: rsk reads target files from no "
                              "working directory", "name absolute directories in RSK_TARGETS_PATH")  # fmt: skip
        if p:
            dirs.append(Path(p))
    dirs.append(config_dir() / "targets")
    return dirs


def ssh_dir() -> Path:
    """The user's ssh directory (keys, config, authorized_keys): a fetch never writes there (ADR 0065)."""
    return Path.home() / ".ssh"


def _xdg(name: str, default: str) -> Path:
    value = Path(os.environ.get(name, ""))
    return value if value.is_absolute() else Path.home() / default


def private_dir(path: Path) -> Path:
    """`path`, RSK_HOME or a directory below it, ready for rsk's state: RSK_HOME and each directory down to
    `path` made 0700 when missing, tightened to 0700 when looser (an RSK_HOME made by hand, or by an rsk that
    made it 0755), and refused when it is another user's. Another user then can neither read the ledger nor take
    its lock (docs/security.md)."""
    home = rsk_home()
    parts = path.relative_to(home).parts
    try:
        home.parent.mkdir(parents=True, exist_ok=True)
        for i in range(len(parts) + 1):
            d = home.joinpath(*parts[:i])
            d.mkdir(mode=0o700, exist_ok=True)
            st = d.stat()
            if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.geteuid():
                raise StateError(
                    f"{d} is not a directory of this user (uid {st.st_uid}): rsk keeps its state only in its own",
                    "set RSK_HOME to a directory of your own (docs/security.md)",
                )
            if st.st_mode & 0o077:
                d.chmod(stat.S_IMODE(st.st_mode) & 0o700)
    except OSError as exc:
        raise StateError(f"cannot make rsk's state directory {path}: {exc.strerror or exc}",
                         "set RSK_HOME to a directory this user may write") from exc  # fmt: skip
    return path


_ATTEMPT = re.compile(r"(?P<base>.+)\.a(?P<n>[0-9]{1,4})")


def attempt_of(request_id: str) -> tuple[str, int]:
    """The batch a request id is an attempt of (`rsk retry` and `rsk extend` name attempts B.a2, B.a3, ...), and
    its number."""
    m = _ATTEMPT.fullmatch(request_id)
    return (m["base"], int(m["n"])) if m else (request_id, 1)


def check_token(what: str, value: str) -> str:
    if not TOKEN.fullmatch(value):
        raise UsageError(
            f"{what} {value!r} is not valid",
            f"use 1-64 characters of A-Z a-z 0-9 . _ - (not starting with . or -) for the {what}",
        )
    return value


def new_request_id() -> str:
    return f"r{time.strftime('%Y%m%d-%H%M%S')}-{secrets.token_hex(3)}"
