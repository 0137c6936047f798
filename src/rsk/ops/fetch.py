"""Results down: files of a job's directory brought back, bounded and resumable (one remote call a chunk)."""

from __future__ import annotations

import re
from pathlib import Path

from pydantic import BaseModel, ConfigDict

from rsk.cluster.remote import Remote, remote_for
from rsk.errors import UsageError
from rsk.wire import answers
from rsk.wire.protocol import raise_for_error

FETCH_CHUNK = 4 * 1024 * 1024  # per remote call; a multiple of 65536, as the cluster side requires
_FETCH_PATH = re.compile(r"[A-Za-z0-9._+@:,-]+(/[A-Za-z0-9._+@:,-]+)*")


class FetchedFile(BaseModel):
    model_config = ConfigDict(extra="forbid")

    path: str
    size: int
    to: str
    resumed_from: int = 0


class FetchReport(BaseModel):
    model_config = ConfigDict(extra="forbid")

    schema_version: int = 1
    target: str
    project: str
    job_id: str
    files: list[FetchedFile]
    bytes: int


def _fetch_one(
    remote: Remote, project: str, job: str, path: str, size: int, to: Path, budget: list[int]
) -> FetchedFile:
    dest = to / path
    part = dest.with_name(dest.name + ".rsk-part")
    dest.parent.mkdir(parents=True, exist_ok=True)
    offset = 0
    if part.exists():  # a cut transfer: resume from the whole blocks already here
        offset = part.stat().st_size // 65536 * 65536
    resumed = offset
    with part.open("r+b" if part.exists() else "wb") as fh:
        fh.truncate(offset)
        fh.seek(offset)
        while offset < size:
            if budget[0] <= 0:
                raise UsageError(f"fetch stopped at its byte limit before {path} was whole",
                                 "pass a larger --max-bytes; run the same command again to resume")  # fmt: skip
            out = remote.call("fetch", project, job, path, str(offset), str(FETCH_CHUNK))
            raise_for_error(out)
            block = answers.fetch(out)
            data = block.data
            size = block.size if block.size is not None else size  # a file that still grows
            if not data:
                break
            fh.write(data)
            offset += len(data)
            budget[0] -= len(data)
    part.replace(dest)
    return FetchedFile(path=path, size=offset, to=str(dest), resumed_from=resumed)


def fetch(target_name: str, project: str, job: str, paths: list[str], to: Path,
          max_bytes: int = 1024**3) -> FetchReport:  # fmt: skip
    """Files from a job's run directory (its work copy, where it wrote), whole files or directories."""
    for p in paths:
        if not _FETCH_PATH.fullmatch(p) or ".." in p.split("/"):
            raise UsageError(
                f"cannot fetch {p!r}", "give paths relative to the job's directory: A-Z a-z 0-9 . _ + @ : , - /"
            )
    files: list[FetchedFile] = []
    budget = [max_bytes]
    with remote_for(target_name) as remote:
        for p in paths:
            out = remote.call("fetch", project, job, p, "0", "0")
            raise_for_error(out)
            found = answers.fetch(out)
            if found.size is not None:
                files.append(_fetch_one(remote, project, job, p, found.size, to, budget))
                continue
            for e in found.entries:
                sub = f"{p.rstrip('/')}/{e.path}"
                if _FETCH_PATH.fullmatch(sub) and ".." not in sub.split("/"):
                    files.append(_fetch_one(remote, project, job, sub, e.size, to, budget))
    return FetchReport(target=target_name, project=project, job_id=job, files=files, bytes=sum(f.size for f in files))
