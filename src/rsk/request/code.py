"""Code up: a content-addressed snapshot of a directory (rsk.ops.code sends it over the launch's connection).

The snapshot lists every file (what git would track, when the directory is in a git work tree: its
.gitignore is respected; else every file), minus rsk's default excludes and the caller's, each with
its sha256 and whether it is executable. Its digest is bound into the plan, so the human approves
exactly that code. Only blobs the cluster does not have yet travel (docs/protocol.md, "Code").
"""

from __future__ import annotations

import hashlib
import os
import stat
from pathlib import Path

from pydantic import BaseModel, ConfigDict

from rsk.codelist import MAX_BYTES, selected
from rsk.errors import UsageError
from rsk.local.handover import check_bounds, code_entry
from rsk.local.nolink import Dir, Missing

DEFAULT_MAX_BYTES = MAX_BYTES


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
    root: Path, excludes: list[str] | None = None, max_bytes: int = DEFAULT_MAX_BYTES, git: bool = True,
    shown: Path | None = None,
) -> CodeSnapshot:  # fmt: skip
    """The files `--code root` takes. `git=False` for files a brokered command's client sent (`shown`: the
    directory it named, for messages): they are its selection already, and git is never run on a tree someone
    else wrote (rsk.codelist.listed). The client reads them with the same checks (rsk.local.handover.CodeFiles)."""
    # files a client sent sit in the broker's own new directory; a tree of the caller's is walked from `/`
    # without following a link (rsk.local.nolink): a link placed on the way would send the human's files
    root = root.resolve() if not git else Path(os.path.normpath(root.absolute()))
    said = Path(os.path.normpath(shown)) if shown is not None else root
    try:
        opened = Dir.open(root)
    except Missing:
        raise UsageError(f"--code {said} is not a directory") from None
    files: list[CodeFile] = []
    with opened as top:
        for rel in selected(str(root), excludes or [], git):
            if code_entry(top, rel) is None:
                continue  # a file git knows that was deleted
            data, mode = top.read_with_mode(rel)  # no link followed, even one put there since the look above
            files.append(CodeFile(path=rel, sha256=hashlib.sha256(data).hexdigest(), size=len(data),
                                  executable=bool(mode & stat.S_IXUSR)))  # fmt: skip
    if not files:
        raise UsageError(f"--code {said} has no files to send (after excludes)")
    check_bounds(said, {f.path: f.size for f in files}, max_bytes)
    total = sum(f.size for f in files)
    snap = CodeSnapshot(root=str(root), files=files, digest="", total_bytes=total)
    return snap.model_copy(update={"digest": hashlib.sha256(snap.manifest.encode()).hexdigest()})
