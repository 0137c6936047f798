"""Results down: files of a job's directory brought back, bounded and resumable (one remote call a chunk)."""

from __future__ import annotations

import re
from contextlib import nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from pydantic import BaseModel, ConfigDict

from rsk.cluster.remote import Remote, remote_for
from rsk.codelist import RESULTS_DIR
from rsk.errors import StateError, UsageError, not_ours
from rsk.local import caller
from rsk.wire import answers
from rsk.wire.protocol import raise_for_error
from rsk.wire.states import first

if TYPE_CHECKING:
    from rsk.local.handover import Dest

BLOCK = 65536  # the cluster side reads and resumes in whole blocks of this size
FETCH_CHUNK = 64 * BLOCK  # per remote call
# a batch's results: how many jobs one call lists, the largest file that comes with those of its name from other jobs
# (larger ones: a call of their own), and what one such call may bring back (its whole answer is at most 16 MiB)
EACH = 200
INLINE = 16 * BLOCK
PER_CALL = 128 * BLOCK
_FETCH_PATH = re.compile(r"[A-Za-z0-9._+@:,-]+(/[A-Za-z0-9._+@:,-]+)*")


def default_dest(name: str) -> Path:
    """Where fetched files go when no destination is named: rsk-results/NAME (a job id or a batch), relative to
    the caller's directory. rsk's snapshots leave rsk-results out (rsk.codelist), so fetching into the code
    directory never changes the next launch's plan."""
    from rsk.local.paths import check_token

    return Path(RESULTS_DIR) / check_token("job id", name)


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
    to: str = ""  # the local directory the files went into
    files: list[FetchedFile]
    file_count: int = 0  # len(files), as `rsk fetch --result` has it
    skipped: list[str] = []  # files under a directory asked for whose names rsk does not fetch (NAME_RULE)
    bytes: int


def _dest(where: Path) -> Dest:
    """Where a fetch writes, `where` (absolute: the caller's path): this process's own directory without a broker;
    in the broker, the caller's client writes it, as the caller (ADR 0065). A caller without a client that can
    (an MCP session in the broker) gets nothing written."""
    from rsk.local.handover import Handed, Place

    if caller.opens_paths():
        return Place(where)
    client = caller.client()
    if client is None:
        raise UsageError(
            f"cannot write {where}: the broker writes no file for its callers, and this one has no client that "
            "writes it (an MCP session served by the broker)",
            "run `rsk fetch` in a shell (its client writes the files), or this MCP server with RSK_BROKER=off",
        )
    return Handed(client, where)


def _fetch_one(remote: Remote, project: str, job: str, path: str, size: int, to: Dest, budget: list[int],
               under: str = "") -> FetchedFile:  # fmt: skip
    """One file into `to` (at `under`/PATH), through PATH.rsk-part: a cut transfer resumes from the whole blocks
    already there, and the file appears by one rename. `to` is written without following a link, by this process
    or, in the broker, by the caller's client (rsk.local.handover)."""
    rel = f"{under}/{path}" if under else path
    offset = resumed = to.resume(rel) // BLOCK * BLOCK
    while offset < size:
        chunk = min(FETCH_CHUNK, budget[0] // BLOCK * BLOCK)  # the bound holds: whole blocks, none past it
        if chunk <= 0:
            raise UsageError(f"fetch stopped at its byte limit ({offset} of {size} bytes of {path} are here)",
                             "pass a larger --max-bytes; run the same command again to resume",
                             code="byte-limit")  # fmt: skip
        out = remote.call("fetch", project, job, path, str(offset), str(chunk))
        raise_for_error(out)
        block = answers.fetch(out)
        data = block.data
        size = block.size if block.size is not None else size  # a file that still grows
        if not data:
            break
        to.append(rel, offset, data)
        offset += len(data)
        budget[0] -= len(data)
    to.finish(rel, offset)
    return FetchedFile(path=path, size=offset, to=str(to.path / rel), resumed_from=resumed)


def _check(paths: list[str]) -> None:
    for p in paths:
        if not _FETCH_PATH.fullmatch(p) or ".." in p.split("/"):
            raise UsageError(
                f"cannot fetch {p!r}", "give paths relative to the job's directory: A-Z a-z 0-9 . _ + @ : , - /"
            )


NAME_RULE = "names of A-Z a-z 0-9 . _ + @ : , - and / only"


def _fetch_paths(
    remote: Remote, project: str, job: str, paths: list[str], to: Dest, budget: list[int], missing: list[str] | None,
    skipped: list[str] | None = None,
) -> list[FetchedFile]:  # fmt: skip
    """Each path (a file, or a directory's files) into `to`; with `missing`, a path the job's directory lacks is
    listed there instead of failing the call; a directory's files whose names rsk does not fetch go to `skipped`."""
    files: list[FetchedFile] = []
    for p in paths:
        out = remote.call("fetch", project, job, p, "0", "0")
        try:
            raise_for_error(out)
        except UsageError as exc:
            if missing is None or exc.code != "not-found":
                raise
            missing.append(p)
            continue
        found = answers.fetch(out)
        if found.size is not None:
            files.append(_fetch_one(remote, project, job, p, found.size, to, budget))
            continue
        if skipped is not None:
            skipped += [f"{p.rstrip('/')}/{name}" for name in found.skipped][:100]
        for e in found.entries:
            sub = f"{p.rstrip('/')}/{e.path}"
            if _FETCH_PATH.fullmatch(sub) and ".." not in sub.split("/"):
                files.append(_fetch_one(remote, project, job, sub, e.size, to, budget))
            elif skipped is not None:
                skipped.append(sub)
    return files


def fetch(target_name: str, project: str, job: str, paths: list[str], to: Path,
          max_bytes: int = 1024**3) -> FetchReport:  # fmt: skip
    """Files from a job's run directory (its work copy, where it wrote), whole files or directories."""
    _check(paths)
    skipped: list[str] = []
    with remote_for(target_name) as remote, _dest(to) as into:
        files = _fetch_paths(remote, project, job, paths, into, [max_bytes], None, skipped)
    return FetchReport(target=target_name, project=project, job_id=job, to=str(to), files=files, file_count=len(files),
                       bytes=sum(f.size for f in files), skipped=skipped)  # fmt: skip


class TaskFetch(BaseModel):
    model_config = ConfigDict(extra="forbid")

    task: str
    job_id: str
    state: str
    files: list[FetchedFile]
    missing: list[str]  # paths this task's directory does not have
    skipped: list[str] = []  # files whose names rsk does not fetch (NAME_RULE)


class BatchFetchReport(BaseModel):
    model_config = ConfigDict(extra="forbid")

    schema_version: int = 1
    target: str
    project: str
    batch: str
    tasks: list[TaskFetch]
    tasks_omitted: int = 0  # a brief report lists the tasks that lack a path or left files out first
    incomplete: int = 0  # the tasks that lack a path or left files out, listed or not
    bytes: int

    def brief(self, most: int) -> BatchFetchReport:
        """Every task that lacks a path or left files out, then the first others, `most` in all, and how many more:
        an answer of a 10,000-task batch stays small (`--all` lists every task)."""
        kept, left = first(self.tasks, most, lambda t: 0 if t.missing or t.skipped else 1)
        return self.model_copy(update={"tasks": kept, "tasks_omitted": left}) if left else self


def fetch_batch(target_name: str, project: str, batch: str, paths: list[str], to: Path,
                max_bytes: int = 1024**3) -> BatchFetchReport:  # fmt: skip
    """Each task's files of a batch into to/KEY/..., over one connection; what a task lacks is reported, not an
    error (a failed task may have written nothing)."""
    from rsk.local.paths import check_token
    from rsk.ops.status import of_request, status_call

    _check(paths)
    check_token("batch", batch)
    budget = [max_bytes]
    tasks: list[TaskFetch] = []
    with remote_for(target_name) as remote:
        st, _ = status_call(remote, target_name, project)
        members = [j for j in of_request(st.jobs, batch) if j.task]  # each task's latest attempt (rsk retry)
        if not members:
            raise UsageError(f"no batch {batch!r} with tasks in project {project} on {target_name}",
                             "`rsk status` lists the project's jobs", code="not-found")  # fmt: skip
        for j in members:
            assert j.task is not None
            missing: list[str] = []
            skipped: list[str] = []
            with _dest(to / check_token("task", j.task)) as into:
                got = _fetch_paths(remote, project, j.job_id, paths, into, budget, missing, skipped)
            tasks.append(TaskFetch(task=j.task, job_id=j.job_id, state=j.state, files=got, missing=missing,
                                   skipped=skipped))  # fmt: skip
    total = sum(f.size for t in tasks for f in t.files)
    return BatchFetchReport(
        target=target_name,
        project=project,
        batch=batch,
        tasks=tasks,
        bytes=total,
        incomplete=sum(1 for t in tasks if t.missing or t.skipped),
    )


# results: absent or complete ------------------------------------------------------------------------
class ResultReport(BaseModel):
    """`rsk fetch JOB --result`: a job's published result, checked against its manifest, in DIR whole."""

    model_config = ConfigDict(extra="forbid")

    schema_version: int = 2  # 2: `files` is the list of files (it was their count, now `file_count`)
    target: str
    project: str
    job_id: str
    to: str
    files: list[FetchedFile]  # each file as it is in `to` (a list, as `rsk fetch JOB PATH` has it)
    file_count: int
    bytes: int
    partial: bool = False  # --partial: the stage of a job that did not succeed, not a result
    already: bool = False  # DIR already held this very result: nothing was fetched
    skipped: list[str] = []  # --partial: files the job left whose names rsk does not fetch (NAME_RULE)


def _manifest(text: str) -> dict[str, tuple[str, int]]:
    """`SHA256 SIZE PATH` lines (the wrapper's rsk_publish) as path -> (sha256, size)."""
    files: dict[str, tuple[str, int]] = {}
    for line in text.splitlines():
        digest, _, rest = line.partition(" ")
        size, _, path = rest.partition(" ")
        if not re.fullmatch(r"[0-9a-f]{64}", digest) or not size.isdigit() or not _FETCH_PATH.fullmatch(path):
            raise StateError(f"the result's manifest has a line rsk cannot read: {line[:120]!r}")
        files[path] = (digest, int(size))
    return files


def result_job(target_name: str, project: str, request_id: str) -> str:
    """The job whose result a request's work is: its one job, or a chain's last link that ran (a chain's
    extensions included); a batch of several tasks names no one job."""
    from rsk.local.paths import check_token
    from rsk.ops.status import of_request, outcome, status

    check_token("request id", request_id)
    ends = outcome(of_request(status(target_name, project).jobs, request_id))
    if not ends:
        raise UsageError(f"no request {request_id!r} with jobs in project {project} on {target_name}",
                         "`rsk status` lists the project's jobs", code="not-found")  # fmt: skip
    if len(ends) > 1:
        published = [f"{j.task or j.job_id}: {j.job_id}" for j in ends if j.result]
        raise UsageError(
            f"request {request_id} has {len(ends)} jobs: fetch a result by its job id, or every task's at once",
            f"`rsk fetch --batch {request_id} --result` brings each task's into DIR/KEY; "
            + (("published results: " + ", ".join(published[:10])) if published else "none of them published a result"),
            code="several-jobs",
            details={"results": {j.task or j.job_id: j.job_id for j in ends if j.result}},  # as data: task -> job
        )
    return ends[0].job_id


def _no_result(job: str, what: str) -> UsageError:
    return UsageError(
        f"job {job} {what}",
        "a result is published only when the command exits 0 after writing under $RSK_OUT (at most 1000 files, "
        f"names of A-Z a-z 0-9 . _ + @ : , -, which is also all rsk fetches): `rsk logs {job} --stream stderr` "
        f"says why it was not; `rsk fetch {job} --result --partial` brings back what a job that did not succeed left",
        code="no-result",
    )


def _succeeded(remote: Remote, target_name: str, project: str, job: str) -> None:
    """A result is a succeeded job's, on rsk's reading of Slurm's word: a job that failed may have written a
    result/ of its own making (its files are the account's), and it is never handed back as a result."""
    from rsk.ops.status import status_call

    found = [j for j in status_call(remote, target_name, project)[0].jobs if j.job_id == job]
    if not found:
        raise not_ours(job, project, target_name)
    if found[0].state != "succeeded":
        raise _no_result(job, f"is {found[0].state}: it has no result")


@dataclass
class Prefetched:
    """A job's published result as one call of many listed it, and the files of it calls of many brought (path ->
    bytes, the manifest's too): `fetch_result` asks the cluster only for the rest."""

    listing: answers.FetchAnswer
    files: dict[str, bytes] = field(default_factory=dict)


def fetch_result(target_name: str, project: str, job: str, to: Path, *, partial: bool = False,
                 max_bytes: int = 1024**3, via: Remote | None = None, succeeded: bool = False,
                 prefetched: Prefetched | None = None) -> ResultReport:  # fmt: skip
    """A job's published result into DIR (which must not exist yet), every file checked against the manifest,
    made to appear with one rename; with `partial`, the stage of a job that did not succeed, labelled so. DIR's
    parent, the work directory beside it and everything below are reached without following a link
    (rsk.local.nolink)."""
    from rsk.local.handover import JOB_LABEL

    root = ".rsk-partial" if partial else ".rsk-result"
    work_name = f".{to.name}.rsk-fetch-{job}"  # the same name on a second try: a cut fetch resumes
    stage = f"{work_name}/{root}"
    with _dest(to.parent) as parent:
        with nullcontext(via) if via is not None else remote_for(target_name) as remote:
            if not partial and not succeeded:  # `succeeded`: the caller read that state of this job just now
                _succeeded(remote, target_name, project, job)
            if prefetched is not None:
                found = prefetched.listing
            else:
                out = remote.call("fetch", project, job, root, "0", "0")
                try:
                    raise_for_error(out)
                except UsageError as exc:
                    if exc.code != "not-found":
                        raise
                    raise _no_result(job, "left no partial stage" if partial else "has no published result") from None
                found = answers.fetch(out)
            brought = prefetched.files if prefetched is not None else {}
            listed = {e.path: e.size for e in found.entries}
            skipped = found.skipped[:100] if partial else []
            if partial:  # the label is rsk's: what the job left under that name (or a manifest's) does not come back
                listed = {p: n for p, n in listed.items() if p.split("/")[0] not in (".rsk-partial", ".rsk-manifest")}
            manifest: dict[str, tuple[str, int]] = {}
            text = ""
            if not partial:
                manifest_bytes = brought.get(".rsk-manifest")
                text = (manifest_bytes.decode("utf-8", "replace") if manifest_bytes is not None
                        else _read_small(remote, project, job, f"{root}/.rsk-manifest"))  # fmt: skip
                manifest = _manifest(text)
                listed.pop(".rsk-manifest", None)
                if len(manifest) > len(listed) >= 999:  # the cluster lists at most 1,000 files (the manifest one)
                    raise StateError(f"job {job}'s result has {len(manifest)} files, more than rsk lists (1000); "
                                     f"nothing was fetched", f"fetch the files you need by path: rsk fetch {job} "
                                     ".rsk-result/PATH (a job of this rsk keeps such a result partial)")  # fmt: skip
                if set(listed) != set(manifest) or any(listed[p] != manifest[p][1] for p in listed):
                    raise StateError(f"job {job}'s result does not match its manifest: files changed after it was "
                                     "published; nothing was fetched")  # fmt: skip
            if parent.there(to.name, None if partial else text):  # a link there, or anything else, is refused
                there = [FetchedFile(path=p, size=size, to=str(to / p)) for p, (_, size) in sorted(manifest.items())]
                return ResultReport(target=target_name, project=project, job_id=job, to=str(to), files=there,
                                    file_count=len(there), bytes=0, already=True)  # fmt: skip
            budget = [max_bytes]
            got = [
                _place(f"{stage}/{p}", parent, brought[p], budget)
                if p in brought and len(brought[p]) == size
                else _fetch_one(remote, project, job, f"{root}/{p}", size, parent, budget, work_name)
                for p, size in sorted(listed.items())
            ]
        for path, (digest, size) in manifest.items():
            if parent.digest(f"{stage}/{path}") != (digest, size):
                parent.remove(work_name)
                raise StateError(f"{path} of job {job}'s result does not match its manifest: refused, nothing kept")
        if partial:
            said = f"job {job} did not succeed: this is what it left, not a result\n"
            parent.put(f"{stage}/.rsk-partial", said.encode())
        else:
            parent.put(f"{stage}/.rsk-manifest", text.encode())
            parent.put(f"{stage}/{JOB_LABEL}", f"{job}\n".encode())  # whose result: a later batch fetch asks nothing
        parent.promote(stage, to.name)  # the whole result appears at once
        parent.remove(work_name)
    files = [FetchedFile(path=p, size=size, to=str(to / p)) for p, size in sorted(listed.items())]
    return ResultReport(target=target_name, project=project, job_id=job, to=str(to), files=files,
                        file_count=len(files), bytes=sum(f.size for f in got), partial=partial,
                        skipped=skipped)  # fmt: skip


def _place(rel: str, to: Dest, data: bytes, budget: list[int]) -> FetchedFile:
    """A file a call of many brought, written into the stage (checked against the manifest there, as the rest)."""
    if len(data) > budget[0]:
        raise UsageError(f"fetch stopped at its byte limit ({rel} would pass it)",
                         "pass a larger --max-bytes; run the same command again to resume",
                         code="byte-limit")  # fmt: skip
    to.put(rel, data)
    budget[0] -= len(data)
    return FetchedFile(path=rel, size=len(data), to=str(to.path / rel))


def _each(remote: Remote, project: str, jobs: list[str], path: str, max_bytes: int) -> dict[str, answers.FetchAnswer]:
    """PATH of each job, in one call (`fetch PROJECT - ...`, the jobs on stdin): the jobs that gave it. One that could
    not (it has no such path, a symlink is on the way, the journal does not know it) is left out: its own call says
    why."""
    out = remote.call("fetch", project, "-", path, "0", str(max_bytes), stdin=f"jobs {','.join(jobs)}\n".encode())
    raise_for_error(out)
    return {job: got for job, got in answers.fetch_each(out).items() if isinstance(got, answers.FetchAnswer)}


def prefetch_results(remote: Remote, project: str, jobs: list[str], fresh: set[str],
                     max_bytes: int) -> dict[str, Prefetched]:  # fmt: skip
    """The published results of many jobs in a few calls: their listings, EACH jobs a call; then, for each name,
    that file from every job whose result holds it at most INLINE large, as many jobs a call as PER_CALL bytes allow
    (of a job not in `fresh`, whose directory is there already, only its manifest: it is compared, not fetched).
    Files beyond the byte limit, larger files and a job that gave nothing are left to its own calls."""
    known: dict[str, Prefetched] = {}
    for k in range(0, len(jobs), EACH):
        for job, listing in _each(remote, project, jobs[k : k + EACH], ".rsk-result", 0).items():
            if listing.size is None:  # a directory, as a published result is
                known[job] = Prefetched(listing)
    wanted: dict[str, list[tuple[str, int]]] = {}
    left = max_bytes
    for job, p in known.items():
        for e in p.listing.entries:
            manifest = e.path == ".rsk-manifest"
            if e.size <= INLINE and _FETCH_PATH.fullmatch(e.path) and (manifest or (job in fresh and e.size <= left)):
                wanted.setdefault(e.path, []).append((job, e.size))
                left -= 0 if manifest else e.size
    for path, holders in wanted.items():
        block = max(-(-max(size for _, size in holders) // BLOCK), 1) * BLOCK
        per = max(PER_CALL // block, 1)
        for k in range(0, len(holders), per):
            got = _each(remote, project, [job for job, _ in holders[k : k + per]], f".rsk-result/{path}", block)
            for job, one in got.items():
                if one.size is not None:
                    known[job].files[path] = one.data
    return known


def _read_small(remote: Remote, project: str, job: str, path: str) -> str:
    out = remote.call("fetch", project, job, path, "0", str(FETCH_CHUNK))
    raise_for_error(out)
    return answers.fetch(out).data.decode("utf-8", "replace")


class TaskResult(BaseModel):
    model_config = ConfigDict(extra="forbid")

    task: str
    job_id: str
    state: str
    result: ResultReport | None  # None: this task's latest job published no result (`why` says)
    why: str = ""


class BatchResultReport(BaseModel):
    """`rsk fetch --batch B --result`: each task's published result in DIR/KEY, each checked by its manifest."""

    model_config = ConfigDict(extra="forbid")

    schema_version: int = 1
    target: str
    project: str
    batch: str
    to: str
    tasks: list[TaskResult]
    tasks_omitted: int = 0  # a brief report lists tasks without a result, then those fetched now, then the rest
    fetched: int  # tasks whose result is in DIR/KEY now (fetched by this call or already there)
    already: int = 0  # of those, the tasks whose result was there before this call (nothing fetched for them)
    without: list[str]  # tasks with no published result: their keys
    bytes: int

    def brief(self, most: int) -> BatchResultReport:
        """The tasks without a result, then those fetched now, then those already there, `most` in all, and how
        many more (`without` names every task without one): an answer of a 10,000-task batch stays small."""
        kept, left = first(self.tasks, most, lambda t: 0 if t.result is None else 2 if t.result.already else 1)
        return self.model_copy(update={"tasks": kept, "tasks_omitted": left}) if left else self


def fetch_batch_results(target_name: str, project: str, batch: str, to: Path,
                        max_bytes: int = 1024**3) -> BatchResultReport:  # fmt: skip
    """Each task's published result (its latest attempt's) into to/KEY, over one connection. A task without a
    result is reported, not an error; a KEY directory that already holds that result is left as it is, so the
    same call after a cut one fetches only what is missing."""
    from rsk.local.paths import check_token
    from rsk.ops.status import of_request, status_call

    check_token("batch", batch)
    budget = max_bytes
    tasks: list[TaskResult] = []
    with remote_for(target_name) as remote:
        st, _ = status_call(remote, target_name, project)
        members = [j for j in of_request(st.jobs, batch) if j.task]
        if not members:
            raise UsageError(f"no batch {batch!r} with tasks in project {project} on {target_name}",
                             "`rsk status` lists the project's jobs", code="not-found")  # fmt: skip
        published = [j for j in members if j.state == "succeeded" and j.result]
        names = {j.job_id: check_token("task", j.task or "") for j in published}
        with _dest(to) as into:  # what an earlier call fetched already is asked nothing of the cluster
            held = into.fetched({names[j]: j for j in names})
            there = set(into.present(list(names.values())))
        before = {
            j: [
                FetchedFile(path=p, size=size, to=str(to / n / p))
                for p, (_, size) in sorted(_manifest(held[n]).items())
            ]
            for j, n in names.items()
            if n in held
        }
        # a few calls list every other result and bring its files; what they did not bring, each task's own calls do
        fresh = {j for j, n in names.items() if n not in there}
        wanted = [j.job_id for j in published if j.job_id not in before]
        known = prefetch_results(remote, project, wanted, fresh, max_bytes) if wanted else {}
        for j in members:
            assert j.task is not None
            if j.state != "succeeded" or not j.result:
                why = f"{j.state}: no result" if j.state != "succeeded" else "succeeded without writing under $RSK_OUT"
                tasks.append(TaskResult(task=j.task, job_id=j.job_id, state=j.state, result=None, why=why))
                continue
            if (files := before.get(j.job_id)) is not None:
                rep = ResultReport(target=target_name, project=project, job_id=j.job_id, to=str(to / j.task),
                                   files=files, file_count=len(files), bytes=0, already=True)  # fmt: skip
                tasks.append(TaskResult(task=j.task, job_id=j.job_id, state=j.state, result=rep))
                continue
            rep = fetch_result(target_name, project, j.job_id, to / check_token("task", j.task), max_bytes=budget,
                               via=remote, succeeded=True, prefetched=known.get(j.job_id))  # fmt: skip
            budget = max(1, budget - rep.bytes)
            tasks.append(TaskResult(task=j.task, job_id=j.job_id, state=j.state, result=rep))
    got = [t for t in tasks if t.result is not None]
    return BatchResultReport(target=target_name, project=project, batch=batch, to=str(to), tasks=tasks,
                             fetched=len(got), without=[t.task for t in tasks if t.result is None],
                             already=sum(1 for t in got if t.result is not None and t.result.already),
                             bytes=sum(t.result.bytes for t in got if t.result is not None))  # fmt: skip
