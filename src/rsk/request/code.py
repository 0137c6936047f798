"""Code up: a content-addressed snapshot of a directory (rsk.ops.code sends it over the launch's connection).

The snapshot lists every file (what git would track, when the directory is in a git work tree: its
.gitignore is respected; else every file), minus rsk's default excludes and the caller's, each with
its sha256 and whether it is executable. Its digest is bound into the plan, so the human approves
exactly that code. Only blobs the cluster does not have yet travel (docs/protocol.md, "Code").
"""

from __future__ import annotations

import hashlib
import os
import re
import stat
from pathlib import Path

from pydantic import BaseModel, ConfigDict

from rsk.codelist import MAX_BYTES, selected
from rsk.errors import UsageError
from rsk.local.nolink import Dir, Missing

DEFAULT_MAX_BYTES = MAX_BYTES
_SAFE = re.compile(r"[A-Za-z0-9._+@:,-]+(/[A-Za-z0-9._+@:,-]+)*")


class CodeFile(BaseModel):
    model_config = ConfigDict(extra="forbid")

    path: str
    sha256: str
    size: int
    executable: bool


class CodeSnapshot(BaseModel):
    model_config = ConfigDict(extra="forbid")

    root: str
    files: list[CodeFile]
    digest: str
    total_bytes: int

    @property
    def manifest(self) -> str:
        return "".join(f"{f.sha256} {755 if f.executable else 644} {f.path}\n" for f in self.files)


def snapshot(
    root: Path, excludes: list[str] | None = None, max_bytes: int = DEFAULT_MAX_BYTES, git: bool = True
) -> CodeSnapshot:
    """The files `--code root` takes. `git=False` for files another user's client sent: they are its
    selection already, and git is never run on a tree another user wrote (rsk.codelist.listed)."""
    # another user's files sit in the broker's own new directory; a tree of the caller's is walked from `/`
    # without following a link (rsk.local.nolink): a link placed on the way would send the human's files
    root = root.resolve() if not git else Path(os.path.normpath(root.absolute()))
    try:
        opened = Dir.open(root)
    except Missing:
        raise UsageError(f"--code {root} is not a directory") from None
    files: list[CodeFile] = []
    with opened as top:
        for rel in selected(str(root), excludes or [], git):
            found = top.lookup(rel)
            if found is not None and stat.S_ISLNK(found.st_mode):
                raise UsageError(f"--code: {rel} is a symlink", "rsk copies regular files only: exclude it (--exclude)")
            if found is None or not stat.S_ISREG(found.st_mode):
                continue  # a file git knows that was deleted
            if not _SAFE.fullmatch(rel) or any(c in (".", "..") for c in rel.split("/")) or rel.startswith("-"):
                raise UsageError(
                    f"--code: the file name {rel!r} cannot travel",
                    "names are A-Z a-z 0-9 . _ + @ : , - and /; rename the file or exclude it (--exclude)",
                )
            data, mode = top.read_with_mode(rel)  # no link followed, even one put there since the look above
            files.append(CodeFile(path=rel, sha256=hashlib.sha256(data).hexdigest(), size=len(data),
                                  executable=bool(mode & stat.S_IXUSR)))  # fmt: skip
    if not files:
        raise UsageError(f"--code {root} has no files to send (after excludes)")
    total = sum(f.size for f in files)
    if total > max_bytes:
        big = ", ".join(f"{f.path} ({f.size // 1024} KiB)" for f in sorted(files, key=lambda f: -f.size)[:5])
        raise UsageError(
            f"--code {root} holds {total // (1024 * 1024)} MiB, more than the {max_bytes // (1024 * 1024)} MiB cap",
            f"exclude data and build outputs (--exclude PATTERN); the largest: {big}",
        )
    snap = CodeSnapshot(root=str(root), files=files, digest="", total_bytes=total)
    return snap.model_copy(update={"digest": hashlib.sha256(snap.manifest.encode()).hexdigest()})
