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


def _check(paths: list[str]) -> None:
    for p in paths:
        if not _FETCH_PATH.fullmatch(p) or ".." in p.split("/"):
            raise UsageError(
                f"cannot fetch {p!r}", "give paths relative to the job's directory: A-Z a-z 0-9 . _ + @ : , - /"
            )


def _fetch_paths(
    remote: Remote, project: str, job: str, paths: list[str], to: Path, budget: list[int], missing: list[str] | None
) -> list[FetchedFile]:
    """Each path (a file, or a directory's files) into `to`; with `missing`, a path the job's directory lacks is
    listed there instead of failing the call."""
    files: list[FetchedFile] = []
    for p in paths:
        out = remote.call("fetch", project, job, p, "0", "0")
        try:
            raise_for_error(out)
        except UsageError as exc:
            if missing is None or exc.details.get("remote_code") != "not-found":
                raise
            missing.append(p)
            continue
        found = answers.fetch(out)
        if found.size is not None:
            files.append(_fetch_one(remote, project, job, p, found.size, to, budget))
            continue
        for e in found.entries:
            sub = f"{p.rstrip('/')}/{e.path}"
            if _FETCH_PATH.fullmatch(sub) and ".." not in sub.split("/"):
                files.append(_fetch_one(remote, project, job, sub, e.size, to, budget))
    return files


def fetch(target_name: str, project: str, job: str, paths: list[str], to: Path,
          max_bytes: int = 1024**3) -> FetchReport:  # fmt: skip
    """Files from a job's run directory (its work copy, where it wrote), whole files or directories."""
    _check(paths)
    with remote_for(target_name) as remote:
        files = _fetch_paths(remote, project, job, paths, to, [max_bytes], None)
    return FetchReport(target=target_name, project=project, job_id=job, files=files, bytes=sum(f.size for f in files))


class TaskFetch(BaseModel):
    model_config = ConfigDict(extra="forbid")

    task: str
    job_id: str
    state: str
    files: list[FetchedFile]
    missing: list[str]  # paths this task's directory does not have


class BatchFetchReport(BaseModel):
    model_config = ConfigDict(extra="forbid")

    schema_version: int = 1
    target: str
    project: str
    batch: str
    tasks: list[TaskFetch]
    bytes: int


def fetch_batch(target_name: str, project: str, batch: str, paths: list[str], to: Path,
                max_bytes: int = 1024**3) -> BatchFetchReport:  # fmt: skip
    """Each task's files of a batch into to/KEY/..., over one connection; what a task lacks is reported, not an
    error (a failed task may have written nothing)."""
    from rsk.local.paths import check_token
    from rsk.ops.status import status_call

    _check(paths)
    check_token("batch", batch)
    budget = [max_bytes]
    tasks: list[TaskFetch] = []
    with remote_for(target_name) as remote:
        st, _ = status_call(remote, target_name, project)
        members = [j for j in st.jobs if j.request_id == batch and j.task]
        if not members:
            raise UsageError(f"no batch {batch!r} with tasks in project {project} on {target_name}",
                             "`rsk status` lists the project's jobs", details={"code": "not-found"})  # fmt: skip
        for j in members:
            assert j.task is not None
            missing: list[str] = []
            got = _fetch_paths(remote, project, j.job_id, paths, to / check_token("task", j.task), budget, missing)
            tasks.append(TaskFetch(task=j.task, job_id=j.job_id, state=j.state, files=got, missing=missing))
    total = sum(f.size for t in tasks for f in t.files)
    return BatchFetchReport(target=target_name, project=project, batch=batch, tasks=tasks, bytes=total)
