"""A job's logs: a bounded tail of its output, from a byte offset, followed while it runs (one remote call a read)."""

from __future__ import annotations

import time
from collections.abc import Callable

from pydantic import BaseModel, ConfigDict

from rsk.cluster.remote import remote_for
from rsk.wire import answers
from rsk.wire.answers import JobEnd
from rsk.wire.protocol import raise_for_error


class LogTail(BaseModel):
    model_config = ConfigDict(extra="forbid")

    schema_version: int = 1
    job_id: str
    request_id: str
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
                tail.note = f"{stream} is empty; {other} has {log.other_size} bytes: rsk logs {job_id} --stream {other}"
            if on_poll:
                on_poll(tail)
            if deadline is None or tail.ended or time.monotonic() >= deadline:
                if deadline is not None:
                    tail.followed_s = round(follow_until_end or 0, 1)
                    tail.timed_out = not tail.ended
                return tail
            time.sleep(1.0)
