"""A job's logs: a bounded tail of its output, from a byte offset, followed while it runs (one remote call a read)."""

from __future__ import annotations

import time
from collections.abc import Callable

from pydantic import BaseModel, ConfigDict

from rsk.cluster.remote import Remote, remote_for
from rsk.ops.voice import CLI, Voice
from rsk.wire import answers
from rsk.wire.answers import JobEnd
from rsk.wire.protocol import raise_for_error


class LogTail(BaseModel):
    model_config = ConfigDict(extra="forbid")

    schema_version: int = 2  # 2: end.at is an ISO 8601 time (it was epoch seconds)
    job_id: str
    request_id: str
    task: str = ""  # of a batch's or chain's job: the task's key, link1 .. linkN for a chain's links
    state: str = ""  # the job's state as rsk status says it (read when the tail is)
    stream: str
    started: bool
    ended: str | None  # the marker as written (kept for readers of schema 1)
    end: JobEnd | None = None
    size: int
    other_size: int = 0  # the other stream's size: an empty stdout beside a stderr that holds the error
    note: str = ""  # when this stream is empty and the other is not: where to look
    text: str
    start: int = 0  # where `text` begins in the stream (bytes): pass `size` as the next call's `after`
    gap: bool = False  # with `after`: bytes between it and `start` were left out (more than max_bytes)
    followed_s: float | None = None  # with --follow: how long it followed
    timed_out: bool = False  # with --follow: it stopped at its timeout while the job still ran


class LogSet(BaseModel):
    """`rsk logs -r REQUEST`: each job's tail of a request, a batch or a chain, in order (a chain's links by
    number, an extension's included; a batch's tasks as launched, each one's latest attempt)."""

    model_config = ConfigDict(extra="forbid")

    schema_version: int = 2  # 2: each tail is a LogTail of schema 2 (end.at an ISO time)
    target: str
    project: str
    request_id: str
    stream: str
    logs: list[LogTail]


def _read(remote: Remote, project: str, job_id: str, stream: str, max_bytes: int, lines: int,
          voice: Voice = CLI) -> LogTail:  # fmt: skip
    out = remote.call("logs", project, job_id, stream, str(max_bytes), str(lines))
    raise_for_error(out)
    log = answers.logs(out)
    data, size = log.data, log.size
    tail = LogTail(job_id=job_id, request_id=log.rid, stream=stream, started=log.started, ended=log.ended,
                   end=log.end, size=size, other_size=log.other_size, text=data.decode("utf-8", "replace"),
                   start=max(size - len(data), 0))  # fmt: skip
    if size == 0 and log.other_size:
        other = "stderr" if stream == "stdout" else "stdout"
        tail.note = f"{stream} is empty; {other} has {log.other_size} bytes: {voice.logs(job_id, other)}"
    return tail


MAX_SET_BYTES = 1024 * 1024  # a request's logs in all: each job gets its share, at least 16 KiB


def request_logs(target_name: str, project: str, request_id: str, stream: str = "stdout", lines: int = 0,
                 max_bytes: int = MAX_SET_BYTES, voice: Voice = CLI) -> LogSet:  # fmt: skip
    """Every job's tail of a request, over one connection: a chain's links in order, a batch's tasks. A job
    that never ran (a link not needed, a task skipped) is listed with its state and no call for its logs."""
    from rsk.errors import UsageError
    from rsk.local.paths import check_token
    from rsk.ops.status import attempt_of, of_request, ran, status_call

    check_token("request id", request_id)
    with remote_for(target_name) as remote:
        st, _ = status_call(remote, target_name, project)
        jobs = of_request(st.jobs, request_id)
        if any(j.link for j in jobs):  # a chain: every link, an extension's too, by number
            base = attempt_of(request_id)[0]
            jobs = sorted((j for j in st.jobs if j.link and attempt_of(j.request_id)[0] == base),
                          key=lambda j: int(j.link.split("/")[0]))  # fmt: skip
        if not jobs:
            raise UsageError(f"no rsk request {request_id} in project {project} on {target_name}",
                             "`rsk status` lists the project's jobs", code="not-found")  # fmt: skip
        share = max(max_bytes // len(jobs), 16 * 1024)
        tails = []
        for j in jobs:
            if not ran(j):  # skipped, or cancelled before it started: nothing to read
                tail = LogTail(job_id=j.job_id, request_id=j.request_id, stream=stream, started=False, ended=None,
                               size=0, text="", note=f"never ran: {j.state} {j.where}".strip())  # fmt: skip
            else:
                tail = _read(remote, project, j.job_id, stream, share, lines, voice)
            tails.append(tail.model_copy(update={"task": j.task or "", "state": j.state}))
    return LogSet(target=target_name, project=project, request_id=request_id, stream=stream, logs=tails)


def _labelled(remote: Remote, target: str, project: str, tail: LogTail) -> LogTail:
    """The job's task (a batch's key, a chain's linkN) and state as `rsk status` says them, read once at the end."""
    from rsk.ops.status import status_call

    for j in status_call(remote, target, project)[0].jobs:
        if j.job_id == tail.job_id:
            return tail.model_copy(update={"task": j.task or "", "state": j.state})
    return tail


def logs(
    target_name: str,
    project: str,
    job_id: str,
    stream: str = "stdout",
    max_bytes: int = 1024 * 1024,
    lines: int = 0,
    follow_until_end: float | None = None,
    on_poll: Callable[[LogTail], None] | None = None,
    after: int | None = None,
    voice: Voice = CLI,
) -> LogTail:
    """The last `lines` lines (0: all), at most `max_bytes`; with `after`, only what follows that byte of
    the stream. With follow_until_end, poll over one connection until the job's run ends or the time
    passes, calling on_poll with each tail."""
    deadline = None if follow_until_end is None else time.monotonic() + follow_until_end
    with remote_for(target_name) as remote:
        while True:
            out = remote.call("logs", project, job_id, stream, str(max_bytes), str(lines))
            raise_for_error(out)
            log = answers.logs(out)
            data, size = log.data, log.size
            start, gap = max(size - len(data), 0), False
            if after is not None:
                if after >= start:
                    data, start = data[min(after, size) - start :], min(after, size)
                else:
                    gap = True
            tail = LogTail(
                job_id=job_id,
                request_id=log.rid,
                stream=stream,
                started=log.started,
                ended=log.ended,
                end=log.end,
                size=size,
                other_size=log.other_size,
                text=data.decode("utf-8", "replace"),
                start=start,
                gap=gap,
            )
            if size == 0 and log.other_size:
                other = "stderr" if stream == "stdout" else "stdout"
                tail.note = f"{stream} is empty; {other} has {log.other_size} bytes: {voice.logs(job_id, other)}"
            if on_poll:
                on_poll(tail)
            if deadline is None or tail.ended or time.monotonic() >= deadline:
                if deadline is not None:
                    tail.followed_s = round(follow_until_end or 0, 1)
                    tail.timed_out = not tail.ended
                return _labelled(remote, target_name, project, tail)
            time.sleep(1.0)
