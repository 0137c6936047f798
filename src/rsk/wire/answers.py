"""Every program's answer, decoded in one place: the framed records of one call become one typed model.

`rsk.wire.protocol.parse` reads the frame (`@@NONCE KIND key=value ...`, `done`, `error`); this module reads what
each program says inside it (docs/protocol.md, "Other entries" and `submit plan`), and the operation
modules use only the models it returns. A key a program always prints that is missing, a number that is
not one, a flag that is neither of its two values, a value that is not base64, or a result outside its
set is a ProtocolError naming the line: never a KeyError, ValueError or a pydantic traceback.

Some numbers on the wire are not the program's own: the run markers and the journal words `status`
echoes, a lease's files and its steps' queue entries are files a job of the account can write. Such a
fact that is not a number reads as unknown (None), as before: a job cannot make rsk fail to read its
project by writing a word into a marker.
"""

from __future__ import annotations

import base64
import binascii
import re
from datetime import UTC, datetime
from typing import Literal, TypeVar, cast

from pydantic import BaseModel, ConfigDict, ValidationError

from rsk.errors import ProtocolError
from rsk.wire.protocol import (
    SLURM,
    Accepted,
    Need,
    Output,
    Placement,
    Plan,
    Record,
    is_job_id,
    parse_kv,
    plan_hash,
    unb64,
)

_NUMBER = re.compile(r"-?[0-9]{1,18}")
_COUNT = re.compile(r"[0-9]{1,18}")  # sinfo's counts: 4, or 4+ (at least 4)


def _where(rec: Record) -> str:
    return f"the cluster's @@{rec.kind} line"


def _text(rec: Record, key: str, default: str | None = None) -> str:
    """A key's raw value; without a default the key must be there."""
    value = rec.kv.get(key)
    if value is None:
        if default is None:
            raise ProtocolError(f"{_where(rec)} has no {key}= value")
        return default
    return value


def _number(value: str | None, what: str, *, optional: bool = False, fact: bool = False) -> int | None:
    """The one reading of a number on the wire: decimal (`08` is 8), an optional leading minus. With
    `optional`, a missing or empty value is None; with `fact` (a value a job's files can reach), one that is
    not a number is None as well. Anything else that is not a number is a ProtocolError."""
    if value is None or value == "":
        if optional or fact:
            return None
        raise ProtocolError(f"{what} is missing (a number)")
    if _NUMBER.fullmatch(value):
        return int(value, 10)
    if fact:
        return None
    raise ProtocolError(f"{what} is {value[:40]!r}, not a number")


_ISO = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}")


def when(value: str | None) -> datetime | None:
    """The one reading of a time on the wire: epoch seconds (a lease's files, a run's markers) are UTC; Slurm's
    `2026-12-04T09:11:55` is the cluster's clock, as Slurm prints it. Anything else (empty, `N/A`, `Unknown`, a
    word a job wrote) is unknown: None. An answer says every time as ISO 8601 (`...Z` when it is UTC)."""
    if not value:
        return None
    if _COUNT.fullmatch(value):
        try:
            return datetime.fromtimestamp(int(value, 10), UTC)
        except (OverflowError, OSError, ValueError):
            return None
    if _ISO.fullmatch(value):
        try:
            return datetime.fromisoformat(value)
        except ValueError:
            return None
    return None


def _when(rec: Record, key: str) -> datetime | None:
    return when(rec.kv.get(key))


def _int(rec: Record, key: str, *, optional: bool = False, fact: bool = False) -> int | None:
    return _number(rec.kv.get(key), f"{_where(rec)}'s {key}=", optional=optional, fact=fact)


def _count(rec: Record, key: str, default: int | None = None) -> int:
    """A number the program always prints (or `default`, where the key may be missing or empty)."""
    value = _int(rec, key, optional=default is not None)
    if value is None:
        assert default is not None  # _int raised otherwise
        return default
    return value


def _flag(rec: Record, key: str, true: str = "1", false: str = "0", optional: bool = False) -> bool:
    """A yes/no value: exactly one of its two spellings (with `optional`, missing or empty is no)."""
    value = rec.kv.get(key)
    if value is None or (optional and value == ""):
        if optional:
            return False
        raise ProtocolError(f"{_where(rec)} has no {key}= flag")
    if value not in (true, false):
        raise ProtocolError(f"{_where(rec)} has {key}={value[:40]!r}, not {true} or {false}")
    return value == true


def _b64(rec: Record, key: str, default: str | None = None) -> str:
    """A value in either wire form (base64 or `=LITERAL`), decoded."""
    return unb64(_text(rec, key, default))


def _list(rec: Record, key: str, default: str | None = None) -> list[str]:
    """A comma-separated list (empty: no items)."""
    return [x for x in _text(rec, key, default).split(",") if x]


def _chunks(out: Output) -> bytes:
    """The bytes of the @@chunk lines, in order (each line is whole base64)."""
    data = []
    for r in out.all("chunk"):
        if not r.words:
            continue
        try:
            data.append(base64.b64decode(r.words[0].encode("ascii"), validate=True))
        except (binascii.Error, ValueError, UnicodeEncodeError) as exc:
            raise ProtocolError(f"the cluster sent a @@chunk line that is not base64: {r.words[0][:40]!r}") from exc
    return b"".join(data)


_M = TypeVar("_M", bound=BaseModel)


def _model(cls: type[_M], rec: Record | None, **fields: object) -> _M:
    """Build a model, a value outside its set (a result, a state) a ProtocolError naming the line."""
    try:
        return cls.model_validate(fields)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = _where(rec) if rec is not None else "the cluster's answer"
        loc = ".".join(map(str, first["loc"]))
        raise ProtocolError(f"{where} is malformed at {loc}: {first['msg']}") from None


def _one(out: Output, kind: str) -> Record:
    rec = out.first(kind)
    if rec is None:
        raise ProtocolError(f"the cluster's answer has no @@{kind} line")
    return rec


class Answer(BaseModel):
    model_config = ConfigDict(extra="forbid")


# the journal's lines, as `journal` and `status` carry them -----------------------------------------
class JournalEvent(Answer):
    # one line of the attempt journal (a file a job can write: every field is read leniently); no docstring,
    # as the MCP tools' schemas show it

    n: int
    t: str
    event: str
    request_id: str
    plan_hash: str
    job_id: str | None = None
    rc: int | None = None
    code: str | None = None
    message: str | None = None
    task: str | None = None


def journal_event(n: int, words: list[str]) -> JournalEvent:
    """A journal line's words (`v=2 t=... ev=... rid=... ...`) as an event."""
    kv = parse_kv(words)
    rec = Record("journal", words, kv)
    return JournalEvent(
        n=n,
        t=kv.get("t", ""),
        event=kv.get("ev", "?"),
        request_id=kv.get("rid", ""),
        plan_hash=kv.get("plan", ""),
        job_id=kv.get("job"),
        rc=_int(rec, "rc", fact=True),
        code=kv.get("code"),
        message=unb64(kv["msg"]) if "msg" in kv else None,
        task=kv.get("task") or None,
    )


class JournalLine(Answer):
    """A `@@journal n=N LINE` record: the line number and the line as the journal holds it."""

    n: int
    text: str

    @property
    def event(self) -> JournalEvent:
        return journal_event(self.n, self.text.split(" "))


def _journal_lines(out: Output) -> list[JournalLine]:
    lines = []
    for r in out.all("journal"):
        if not r.words or not r.words[0].startswith("n="):
            raise ProtocolError("the cluster's @@journal line does not start with n=LINE")
        lines.append(JournalLine(n=_count(r, "n"), text=" ".join(r.words[1:])))
    return lines


def _cursor(out: Output) -> int | None:
    rec = out.first("cursor")
    return None if rec is None else _count(rec, "lines")


class JournalAnswer(Answer):
    """`journal PROJECT [AFTER [ANCHOR_LINE ANCHOR_SEAL]]`."""

    base_seal: str  # the seal the first line sent chains to ("" without @@base)
    anchor_ok: bool | None  # None: no anchor was asked about
    lines: list[JournalLine]
    cursor: int | None  # None: no @@cursor line


def journal(out: Output) -> JournalAnswer:
    base, anchor = out.first("base"), out.first("anchor")
    return JournalAnswer(
        base_seal=_text(base, "seal") if base else "",
        anchor_ok=_flag(anchor, "ok") if anchor else None,
        lines=_journal_lines(out),
        cursor=_cursor(out),
    )


# status ----------------------------------------------------------------------------------------------
class JobFacts(Answer):
    """One `@@job` line: the raw facts of one job (squeue's, sacct's, the markers', the journal's). Every
    fact may be blank; the request id and the job id are always there."""

    rid: str
    task: str
    idx: int | None
    job: str
    sq: str  # squeue's state ("" when it does not list the job)
    sq_elapsed: int | None
    sq_limit: int | None
    where: str
    ac: str  # sacct's state ("" without accounting)
    ac_exit: int | None
    ac_elapsed: int | None
    ac_limit: int | None
    # a lease's step, from its lease's files (a job can write them; "" and None for a job): where it is in the
    # lease's queue (q, run, end), its lease's state (rsk_lease's L_state), the node it started on, seconds since
    # it started, its time limit, why it left the queue without running to its end, and whether srun returned
    st: Literal["", "q", "run", "end"]
    st_lease: str
    st_node: str
    st_age: int | None
    st_limit: int | None
    st_why: str
    st_ret: bool
    rc: int | None  # the ended marker's (a job's own file)
    sig: str
    elapsed: int | None
    limit: int | None
    cancel: bool  # rsk asked to cancel it
    submitted: str
    res: list[int | None]  # the journal's nodes,cpus,mem_mb,gpus,time_min ([] when none)
    sq_shape: list[int | None] = []  # what Slurm holds: nodes, cpus (all), mem_mb (a node), gpus (all); [] unlisted
    # where Slurm holds it: its partition (or the list it may start in), account and QOS ("" when not listed)
    sq_part: str = ""
    sq_account: str = ""
    sq_qos: str = ""
    needs: list[tuple[int, str]]  # a workflow's task: the tasks it needs (index, ok|any|notok), from the journal
    stop: str  # a chain's link: why it stopped short of success (yielded, time-limit, budget-spent), its marker's
    result: bool  # the job published a result (result/.rsk-manifest: the job's own files)
    lease: str  # a step: the lease it was queued into
    held: bool  # listed because the ledger holds it
    starts: int  # a step: how many step-started lines name it


def _needs(text: str) -> list[tuple[int, str]]:
    """A journal's `needs=IDX:ok|any|notok,...` (a job can write the journal: what does not read is no need)."""
    out = []
    for word in text.split(","):
        idx, _, cond = word.partition(":")
        if idx.isdigit() and len(idx) < 7 and cond in ("ok", "any", "notok"):
            out.append((int(idx), cond))
    return out


def _job_facts(r: Record) -> JobFacts:
    def fact(key: str) -> int | None:
        return _int(r, key, fact=True)

    res = _text(r, "res", "")
    held_shape = _text(r, "sq_shape", "")
    return _model(
        JobFacts,
        r,
        rid=_text(r, "rid"),
        task=_text(r, "task", ""),
        idx=fact("idx"),
        job=_text(r, "job"),
        sq=_text(r, "sq", ""),
        sq_elapsed=fact("sq_elapsed"),
        sq_limit=fact("sq_limit"),
        where=_text(r, "where", ""),
        ac=_text(r, "ac", ""),
        ac_exit=fact("ac_exit"),
        ac_elapsed=fact("ac_elapsed"),
        ac_limit=fact("ac_limit"),
        st=_text(r, "st", ""),
        st_lease=_text(r, "st_lease", ""),
        st_node=_text(r, "st_node", ""),
        st_age=fact("st_age"),
        st_limit=fact("st_limit"),
        st_why=_text(r, "st_why", ""),
        st_ret=_flag(r, "st_ret", optional=True),
        rc=fact("rc"),
        sig=_text(r, "sig", ""),
        elapsed=fact("elapsed"),
        limit=fact("limit"),
        cancel=_flag(r, "cancel", optional=True),
        submitted=_text(r, "submitted", ""),
        res=[_number(x, "res", fact=True) for x in res.split(",")] if res else [],
        sq_shape=[_number(x, "sq_shape", fact=True) for x in held_shape.split(",")] if held_shape else [],
        sq_part=_text(r, "sq_part", ""),
        sq_account=_text(r, "sq_account", ""),
        sq_qos=_text(r, "sq_qos", ""),
        needs=_needs(_text(r, "needs", "")),
        stop=_text(r, "stop", ""),
        result=_flag(r, "result", optional=True),
        lease=_text(r, "lease", ""),
        held=_flag(r, "held", optional=True),
        starts=_count(r, "starts", 0),
    )


class StatusAnswer(Answer):
    """`status PROJECT [AFTER]`: Slurm's reachability, one JobFacts per job, and with AFTER the journal."""

    slurm_up: bool
    at: str  # the cluster's clock ("" without @@status)
    jobs: list[JobFacts]
    journal: list[JournalLine]
    cursor: int | None
    unread: list[str] = []  # the @@job lines that did not read (skipped, each "JOB: why"): one job never fails all


def status(out: Output) -> StatusAnswer:
    head = out.first("status")
    up = True
    if head is not None:
        slurm = _text(head, "slurm")
        if slurm not in ("up", "down"):
            raise ProtocolError(f"the cluster's @@status line has slurm={slurm[:40]!r}, not up or down")
        up = slurm == "up"
    jobs, unread = [], []
    for r in out.all("job"):
        try:
            jobs.append(_job_facts(r))
        except ProtocolError as exc:
            unread.append(f"{r.kv.get('job', '')[:40]}: {exc}")
    return StatusAnswer(slurm_up=up, at=_text(head, "t") if head else "", jobs=jobs, journal=_journal_lines(out),
                        cursor=_cursor(out), unread=unread)  # fmt: skip


# cancel, reconcile ----------------------------------------------------------------------------------
class CancelLine(Answer):
    job: str
    rid: str  # "" when the job is not ours
    task: str
    result: Literal["cancelled", "finished", "not-ours", "failed"]
    gone: bool = False  # cancelled, and Slurm listed it no more right after: it pended, never started (ADR 0069)


def cancel(out: Output) -> list[CancelLine]:
    return [
        _model(
            CancelLine,
            r,
            job=_text(r, "job"),
            rid=_text(r, "rid", ""),
            task=_text(r, "task", ""),
            result=_text(r, "result"),
            gone=_flag(r, "gone", optional=True),
        )
        for r in out.all("cancel")
    ]


class ReconcileLine(Answer):
    rid: str
    idx: int | None  # (from the journal, which a job can write: None where it does not read)
    task: str
    plan: str
    result: Literal["reconciled", "abandoned", "unresolved"]
    job: str  # "" for an abandoned or unresolved intent
    unknown: list[str] = []  # unresolved: the account's jobs since the hold that no book holds


class ReconcileAnswer(Answer):
    items: list[ReconcileLine]
    open: int  # how many intents had no outcome
    stale: int  # stages of ended jobs set aside as partial
    # active jobs of the account since the ledger's `since` that no book holds and whose batch script Slurm did not
    # give, whether or not an intent is open (the `reconciled` line's optional `unknown`; empty from a cluster side
    # that does not say)
    unknown: list[str] = []


def reconcile(out: Output) -> ReconcileAnswer:
    items = [
        _model(
            ReconcileLine,
            r,
            rid=_text(r, "rid"),
            idx=_int(r, "idx", fact=True),
            task=_text(r, "task", ""),
            plan=_text(r, "plan"),
            result=_text(r, "result"),
            job=_text(r, "job", ""),
            unknown=_list(r, "unknown", ""),
        )
        for r in out.all("reconcile")
    ]
    done = _one(out, "reconciled")
    return ReconcileAnswer(items=items, open=_count(done, "open"), stale=_count(done, "stale", 0),
                           unknown=_list(done, "unknown", ""))  # fmt: skip


# logs, fetch ----------------------------------------------------------------------------------------
class JobEnd(Answer):
    """How a job's command ended, from the wrapper's marker."""

    # (a job's own file: read leniently)

    exit_code: int | None
    signal: str | None  # None: it exited on its own
    elapsed_s: int | None
    limit_s: int | None
    at: datetime | None  # when it ended (ISO 8601, UTC, in an answer)


def job_end(marker: str) -> JobEnd | None:
    """The `ended` marker (`rc=N sig=NAME|none t=EPOCH elapsed=S limit=S`), None when there is none."""
    if not marker:
        return None
    rec = Record("ended", marker.split(), parse_kv(marker.split()))

    def num(key: str) -> int | None:
        return _int(rec, key, fact=True)

    sig = rec.kv.get("sig")
    return JobEnd(
        exit_code=num("rc"),
        signal=None if sig in (None, "", "none") else sig,
        elapsed_s=num("elapsed"),
        limit_s=num("limit"),
        at=_when(rec, "t"),
    )


class LogAnswer(Answer):
    """`logs PROJECT JOB STREAM MAXBYTES [LINES]`."""

    rid: str
    started: bool
    ended: str | None  # the ended marker as written, stripped (None: not ended)
    end: JobEnd | None
    size: int  # the stream's whole size
    other_size: int  # the other stream's (stderr beside stdout, and the reverse)
    data: bytes  # its last bytes, at most MAXBYTES


def logs(out: Output) -> LogAnswer:
    rec = _one(out, "log")
    ended = _b64(rec, "ended").strip() or None
    return LogAnswer(
        rid=_text(rec, "rid"),
        started=_flag(rec, "started", "yes", "no"),
        ended=ended,
        end=job_end(ended or ""),
        size=_count(rec, "size"),
        other_size=_count(rec, "other"),
        data=_chunks(out),
    )


class FetchEntry(Answer):
    path: str
    size: int


class FetchAnswer(Answer):
    """`fetch PROJECT JOB PATH OFFSET MAXBYTES`: a file (its size and a block of it) or a directory."""

    size: int | None  # a file's size now; None: PATH is a directory
    entries: list[FetchEntry]  # a directory's regular files
    data: bytes
    skipped: list[str] = []  # a directory's files whose names rsk does not fetch (decoded; a job chose them)


def fetch(out: Output) -> FetchAnswer:
    head = out.first("file")
    return FetchAnswer(
        size=_count(head, "size") if head else None,
        entries=[FetchEntry(path=_text(e, "path"), size=_count(e, "size")) for e in out.all("entry")],
        data=_chunks(out),
        skipped=[_b64(e, "path") for e in out.all("skipped")],
    )


class FetchMissing(Answer):
    """What one job of `fetch PROJECT - ...` could not give (its @@missing line): the error its own call would be."""

    code: str
    rc: int
    message: str


def fetch_each(out: Output) -> dict[str, FetchAnswer | FetchMissing]:
    """`fetch PROJECT - PATH OFFSET MAXBYTES` (the jobs on stdin): each job's answer, the records after its @@job line
    up to the next; a job the project's journal does not know has none."""
    each: dict[str, list[Record]] = {}
    mine: list[Record] | None = None
    for r in out.records:
        if r.kind == "job":
            job = _text(r, "job")
            if not is_job_id(job) or job in each:
                raise ProtocolError(f"the cluster's @@job line names {job[:40]!r} twice or is not a job id")
            mine = each[job] = []
        elif mine is None:
            raise ProtocolError(f"the cluster's @@{r.kind} line comes before any @@job line")
        else:
            mine.append(r)
    answered: dict[str, FetchAnswer | FetchMissing] = {}
    for job, records in each.items():
        one = Output(records, 0)
        miss = one.first("missing")
        answered[job] = (
            FetchMissing(code=_text(miss, "code"), rc=_count(miss, "rc"), message=_b64(miss, "msg", ""))
            if miss is not None
            else fetch(one)
        )
    return answered


# doctor, policy, info, gpus, code -------------------------------------------------------------------
class DoctorCheck(Answer):
    name: str
    result: Literal["pass", "fail", "warn", "unavailable"]
    message: str
    hint: str


def doctor(out: Output) -> list[DoctorCheck]:
    return [
        _model(
            DoctorCheck,
            r,
            name=_text(r, "name"),
            result=_text(r, "result"),
            message=_b64(r, "msg"),
            hint=_b64(r, "hint", ""),
        )
        for r in out.all("check")
    ]


class Policy(Answer):
    """The cluster policy's rules, read: a list is None when anything is allowed (`*`), a number None when it
    has no limit (an empty value)."""

    partitions: list[str] | None
    accounts: list[str] | None
    qos: list[str] | None
    max_gpus: int | None  # per node
    max_cpus: int | None  # per node
    max_mem_mb: int | None  # per node
    max_nodes: int | None
    max_time_min: int | None
    max_active_jobs: int | None  # the project's rsk jobs pending or running at once
    default_time_min: int | None
    default_mem_mb: int | None


class PolicyAnswer(Answer):
    """`policy show` (and the policy part of `info`): every rule with its value, and where they come from."""

    rules: Policy
    source: str  # "" when the answer has no @@policy line
    digest: str


_POLICY_LISTS = ("partitions", "accounts", "qos")


def policy(out: Output) -> PolicyAnswer:
    head = out.first("policy")
    rules: dict[str, object] = {}
    for r in out.all("policy-rule"):
        key, value = _text(r, "key"), _b64(r, "value", "")
        if key in _POLICY_LISTS:
            rules[key] = None if value.strip() in ("", "*") else [x for x in re.split(r"[\s,]+", value) if x]
        elif key in Policy.model_fields:
            rules[key] = _number(value, f"{_where(r)}'s {key} value", optional=True)
    missing = {k: None for k in Policy.model_fields if k not in rules}  # a rule the program did not print: none
    return PolicyAnswer(
        rules=_model(Policy, head, **rules, **missing),
        source=_text(head, "source") if head else "",
        digest=_text(head, "digest") if head else "",
    )


class PartitionLine(Answer):
    name: str
    default: bool
    state: str
    time: str  # Slurm's time limit as sinfo prints it (rsk.ops.info reads it)
    nodes: int | None  # sinfo's counts: 4, or 4+ read as 4; None when it shows none
    cpus: int | None
    mem_mb: int | None
    gres: str


def _sinfo_count(rec: Record, key: str) -> int | None:
    m = _COUNT.match(_text(rec, key))
    return int(m.group(), 10) if m else None


class InfoAnswer(Answer):
    partitions: list[PartitionLine]
    policy: PolicyAnswer


def info(out: Output) -> InfoAnswer:
    parts = [
        PartitionLine(
            name=_text(r, "name"),
            default=_flag(r, "default"),
            state=_text(r, "state"),
            time=_text(r, "time"),
            nodes=_sinfo_count(r, "nodes"),
            cpus=_sinfo_count(r, "cpus"),
            mem_mb=_sinfo_count(r, "mem_mb"),
            gres=_b64(r, "gres"),
        )
        for r in out.all("partition")
    ]
    return InfoAnswer(partitions=parts, policy=policy(out))


class GpuNodeLine(Answer):
    name: str
    state: str
    partitions: list[str]
    gres: str  # the node's GRES (decoded)
    used: str  # the GRES in use, with Slurm's IDX


class GpuHeldLine(Answer):
    job: str
    name: str  # the job's name (decoded)
    node: str
    gres: str  # what it holds on the node, with IDX
    start: datetime | None  # when the job (or a lease's step) started


class GpusAnswer(Answer):
    """`gpus` (and `lease gpus PROJECT NAME`, in the same form)."""

    nodes: list[GpuNodeLine]
    held: list[GpuHeldLine]


def gpus(out: Output) -> GpusAnswer:
    return GpusAnswer(
        nodes=[
            GpuNodeLine(
                name=_text(r, "name"),
                state=_text(r, "state"),
                partitions=_list(r, "partitions"),
                gres=_b64(r, "gres"),
                used=_b64(r, "used", ""),
            )
            for r in out.all("node")
        ],
        held=[
            GpuHeldLine(
                job=_text(r, "job"),
                name=_b64(r, "name"),
                node=_text(r, "node"),
                gres=_b64(r, "gres"),
                start=_when(r, "start"),
            )
            for r in out.all("held")
        ],
    )


class CodeAnswer(Answer):
    """`code need|put PROJECT DIGEST`: the snapshot's directory once it is built, else the blobs it lacks."""

    ready: str | None
    need: list[str]


def code(out: Output) -> CodeAnswer:
    ready = out.first("ready")
    return CodeAnswer(ready=_text(ready, "dir") if ready else None, need=[_text(r, "sha") for r in out.all("need")])


# lease ----------------------------------------------------------------------------------------------
class LeaseLine(Answer):
    """One `@@lease` line. Its shape and times come from the lease's files (a job can write them): a value
    there that is not a number is None; the step counts are the program's own."""

    name: str
    job: str
    rid: str
    state: str
    nodes: int | None
    gpus: int | None
    cpus: int | None
    mem: int | None
    time: int | None
    partition: str
    drain: int | None
    overrun: str
    hosts: list[str]
    start: datetime | None
    end: datetime | None
    queued: int
    running: int
    ended: int
    drained: bool


def _lease(r: Record) -> LeaseLine:
    def fact(key: str) -> int | None:
        return _int(r, key, fact=True)

    return LeaseLine(
        name=_text(r, "name"),
        job=_text(r, "job"),
        rid=_text(r, "rid"),
        state=_text(r, "state"),
        nodes=fact("nodes"),
        gpus=fact("gpus"),
        cpus=fact("cpus"),
        mem=fact("mem"),
        time=fact("time"),
        partition=_text(r, "partition"),
        drain=fact("drain"),
        overrun=_text(r, "overrun"),
        hosts=_list(r, "hosts"),
        start=_when(r, "start"),
        end=_when(r, "end"),
        queued=_count(r, "queued"),
        running=_count(r, "running"),
        ended=_count(r, "ended"),
        drained=_flag(r, "drained"),
    )


def leases(out: Output) -> list[LeaseLine]:
    """`lease status PROJECT [NAME]`, `lease drain|resume PROJECT NAME`: one line per lease."""
    return [_lease(r) for r in out.all("lease")]


class LeaseClosed(Answer):
    name: str
    job: str
    result: Literal["cancelled", "ended", "failed"]
    queued: int  # queued steps cancelled


def lease_closed(out: Output) -> LeaseClosed:
    r = _one(out, "closed")
    return _model(
        LeaseClosed,
        r,
        name=_text(r, "name"),
        job=_text(r, "job"),
        result=_text(r, "result"),
        queued=_count(r, "queued", 0),
    )


# submit ---------------------------------------------------------------------------------------------
_RESOURCE_KEYS = ("nodes", "cpus", "mem_mb", "gpus", "time_min")


def plan(out: Output) -> Plan:
    """`submit plan` / `submit launch` up to its await: the Plan from the @@planline records, the hash the
    cluster printed checked, with the policy's verdict, the active jobs, the estimate and the priors."""
    lines = [(r.words[0], r.words[1] if len(r.words) > 1 else "") for r in out.all("planline") if r.words]
    rec = out.first("plan")
    if rec is None or not rec.words:
        raise ProtocolError("the cluster's answer has no @@plan line")
    printed = rec.words[0]
    if plan_hash(lines) != printed:
        raise ProtocolError("the plan hash does not match the plan lines", "the remote scripts may be damaged")
    fields: dict[str, object] = {"hash": printed, "env": [], "argv": [], "tasks": []}
    tasks: list[dict[str, object]] = []
    for key, value in lines:
        text = unb64(value)
        if key == "task":
            tasks.append({"key": text, "env": [], "argv": []})
        elif key in ("tres", "tenv", "targ", "tneeds"):
            if not tasks:
                raise ProtocolError(f"plan line {key} comes before any task")
            if key == "tneeds":
                tasks[-1]["needs"] = [Need.from_wire(w) for w in text.split(",")]
            elif key == "tres":
                parts = text.split(",")
                if len(parts) != 5:
                    raise ProtocolError(f"malformed task resources: {text!r}")
                tasks[-1].update(zip(_RESOURCE_KEYS, parts, strict=True))
            else:
                cast(list[str], tasks[-1]["env" if key == "tenv" else "argv"]).append(text)
        elif key in ("env", "arg"):
            cast(list[str], fields["env" if key == "env" else "argv"]).append(text)
        elif key in fields:
            raise ProtocolError(f"the plan repeats {key!r}")
        else:
            fields[key] = text
    if fields.get("kind") != "batch":
        one = {k: fields.get(k) for k in _RESOURCE_KEYS}
        tasks = [{**one, "key": "", "env": [], "argv": fields["argv"]}]
    fields["tasks"] = tasks
    fields.pop("protocol", None)
    fields["placement"] = _placement(fields.pop("lease", None), fields.pop("lease_job", None))
    pol, active, estimate = out.first("policy"), out.first("active"), out.first("estimate")
    fields["verdict"] = _text(pol, "verdict", "allow") if pol else "allow"
    fields["reasons"] = [_b64(r, "msg", "") for r in out.all("policy-reason")]
    if active:
        fields["active"] = _count(active, "count", 0)
        fields["active_cap"] = _int(active, "cap", optional=True)
        fields["active_jobs"] = _list(active, "jobs", "")
        if "at_once" in active.kv:  # (an older program does not say)
            fields["at_once"] = _count(active, "at_once")
    if estimate:
        fields["estimate_start"], fields["estimate_nodes"] = _estimate(estimate)
    fields["prior"] = [
        {
            "idx": _count(r, "idx"),
            "state": _text(r, "state"),
            "job_id": _text(r, "job", ""),
            "plan_hash": _text(r, "plan", ""),
        }
        for r in out.all("prior")
    ]
    try:
        return Plan.model_validate(fields)
    except ValidationError as exc:
        first = exc.errors()[0]
        raise ProtocolError(
            f"the plan from the cluster is incomplete or malformed at {'.'.join(map(str, first['loc']))}: "
            f"{first['msg']}"
        ) from exc


# sbatch --test-only, its times in epoch seconds (SLURM_TIME_FORMAT=%s): "sbatch: Job N to start at 1796391286
# using 1 processors on nodes n1 in partition p"
_TEST_ONLY = re.compile(r" to start at (?P<start>[0-9T:-]+) using .*? on nodes (?P<nodes>\S+) in partition")


def _estimate(rec: Record) -> tuple[str, str]:
    """When (ISO 8601, `Z` for UTC) and where the plan would start: a step "in-lease" (its lease's name), else what
    Slurm's test-only said of the first shape (the one reading of that text), "unknown" where it said nothing
    readable."""
    if "lease" in rec.kv:
        return "in-lease", f"lease {_text(rec, 'lease')}"
    said = _TEST_ONLY.search(_b64(rec, "said", ""))
    start = when(said["start"]) if said else None
    if said is None or start is None:
        return "unknown", said["nodes"] if said else ""
    return start.isoformat().replace("+00:00", "Z"), said["nodes"]


def _placement(lease: object, job: object) -> Placement:
    """A step's plan binds its lease's name and job ("lease", "lease_job"); any other plan runs on Slurm."""
    if lease is None and job is None:
        return SLURM
    if not isinstance(lease, str) or not isinstance(job, str) or not _COUNT.fullmatch(job):
        raise ProtocolError("the plan's lease placement needs the lease's name and its Slurm job")
    return Placement(kind="lease", lease=lease, job=job)


_WIRE = re.compile(r"=[A-Za-z0-9._/:@+,-]*|[A-Za-z0-9+/]+=*")


def slurm_facts(out: Output) -> tuple[str, str, str] | None:
    """`submit`'s @@facts line (printed when rsk asked for them): the cluster's name and its partitions' lines,
    as the wire values to send back ahead of a later request (rsk.cluster.remote), and Slurm's MaxArraySize; None
    without one."""
    rec = out.first("facts")
    if rec is None:
        return None
    cluster, parts = _text(rec, "cluster"), _text(rec, "parts")
    if not (_WIRE.fullmatch(cluster) and _WIRE.fullmatch(parts)):
        raise ProtocolError("the cluster's @@facts line is not two wire values")
    return cluster, parts, str(_count(rec, "arrays"))


def warnings(out: Output) -> list[str]:
    """Every @@warning line (a journal that could not take a line the program wrote after Slurm acted), as a
    sentence for the caller: what the program did stands, and Slurm's jobs carry their own evidence."""
    return [f"the cluster warns ({_text(r, 'code', 'warning')}): {_b64(r, 'msg', '')}" for r in out.all("warning")]


def accepted(out: Output) -> list[Accepted]:
    """Every @@accepted line: one for a job, one per task of a batch (possibly none)."""
    return [
        Accepted(
            job_id=_text(r, "job"),
            request_id=_text(r, "rid"),
            plan_hash=_text(r, "plan"),
            replay=_flag(r, "replay", optional=True),
            idx=_count(r, "idx", 0),
            task=_text(r, "task", "") or None,
        )
        for r in out.all("accepted")
        if is_job_id(r.kv.get("job", ""))
    ]
