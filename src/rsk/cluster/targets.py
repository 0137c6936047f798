"""Target files: which cluster, how to reach it, where rsk lives there."""

from __future__ import annotations

import os
import tomllib
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from rsk.errors import ConfigError, StateError, UsageError
from rsk.local.paths import check_token, config_dir, search_dirs

TARGET_SCHEMA = 1


class Target(BaseModel):
    """A cluster as rsk reaches it. `host` may be an alias from ~/.ssh/config."""

    model_config = ConfigDict(extra="forbid")

    schema_version: int = TARGET_SCHEMA
    name: str = ""
    host: str = Field(min_length=1)
    port: int | None = Field(default=None, ge=1, le=65535)
    user: str | None = None
    identity_file: str | None = None
    known_hosts: str | None = None
    proxy_jump: str | None = None
    ssh_config: str | None = None
    remote_root: str = Field(default="~/.rsk", min_length=1)
    connect_timeout: float = Field(default=10.0, gt=0)
    command_timeout: float = Field(default=300.0, gt=0)
    # directories put first on the cluster's PATH for rsk's programs (a site whose Slurm is not on a
    # non-interactive session's PATH, e.g. /opt/slurm/bin). The programs still refuse a Slurm command
    # that resolves into a directory the account can write (`untrusted-command`).
    path: list[str] = Field(default_factory=list)
    description: str = ""

    @field_validator("path")
    @classmethod
    def _absolute_dirs(cls, value: list[str]) -> list[str]:
        for d in value:
            if not d.startswith("/") or any(c in d for c in ":\n\r\0"):
                raise ValueError(f"{d!r} is not an absolute directory without ':' or a line break")
        return value

    source: str = ""


class TargetList(BaseModel):
    """`rsk targets --json` and MCP's targets: every target rsk knows, and the one commands use by default."""

    model_config = ConfigDict(extra="forbid")

    schema_version: int = 1
    pinned: str | None  # the target used when none is named (MCP: the server's); None when none is chosen
    targets: list[Target]


def _in_tree(name: str) -> Path | None:
    """A target file of this name in the working directory's `targets/`, which rsk never reads (ADR 0054)."""
    from rsk.local import caller

    path = caller.cwd() / "targets" / f"{name}.toml"
    return path if os.path.lexists(path) else None


def load_target_file(path: Path) -> Target:
    try:
        raw = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"cannot read target file {path}: {exc}") from exc
    except tomllib.TOMLDecodeError as exc:
        raise StateError(f"target file {path} is not valid TOML: {exc}", "fix the file; see INSTALL.md") from exc
    version = raw.get("schema_version", TARGET_SCHEMA)
    if isinstance(version, int) and version > TARGET_SCHEMA:
        raise StateError(
            f"target file {path} has schema_version {version}; this rsk reads {TARGET_SCHEMA}",
            "upgrade rsk (pip install -U rsk) to read it",
        )
    raw.setdefault("name", path.stem)
    raw["source"] = str(path)
    try:
        return Target.model_validate(raw)
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors())
        raise StateError(f"target file {path} is invalid: {problems}", "fix the file; see INSTALL.md") from exc


def find_target(name: str) -> Target:
    check_token("target", name)
    for directory in search_dirs():
        path = directory / f"{name}.toml"
        if path.is_file():
            return load_target_file(path)
    known = ", ".join(t.name for t in list_targets()) or "none"
    looked = ", ".join(str(d) for d in search_dirs())
    if (planted := _in_tree(name)) is not None:
        raise ConfigError(
            f"no target named {name!r} where rsk reads targets ({looked}); {planted} is not read: target files come "
            "only from your configuration, never from the directory rsk runs in",
            f"if that file is yours, move it to {config_dir() / 'targets'} (or a directory in RSK_TARGETS_PATH) and "
            "check what it names; a target file there that you did not write may be an agent's: do not copy it",
            code="target-in-tree",
        )
    raise UsageError(
        f"no target named {name!r} (known: {known}; looked in {looked})",
        f"create {config_dir() / 'targets' / (name + '.toml')}; `rsk targets` lists what is found",
    )


def list_targets() -> list[Target]:
    seen: dict[str, Target] = {}
    for directory in search_dirs():
        if not directory.is_dir():
            continue
        for path in sorted(directory.glob("*.toml")):
            if path.stem not in seen:
                try:
                    seen[path.stem] = load_target_file(path)
                except (ConfigError, StateError):
                    continue
    return list(seen.values())
