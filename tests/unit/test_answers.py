"""Each program's answer, as the lab's programs printed it (tests/unit/answers/, nonce replaced by N),
decodes to its model; a malformed one is a ProtocolError, never a KeyError or ValueError."""

from __future__ import annotations

import base64
import contextlib
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rsk.errors import ProtocolError, RskError
from rsk.wire import answers
from rsk.wire.protocol import Output, parse

RECORDED = Path(__file__).parent / "answers"


def recorded(name: str, old: str = "", new: str = "") -> Output:
    """A recorded answer, with `old` replaced by `new` (once; it must be there)."""
    text = (RECORDED / f"{name}.txt").read_text()
    if old:
        assert old in text, f"{old!r} is not in {name}.txt"
        text = text.replace(old, new, 1)
    out = parse(text, "N", until="await" if name == "submit_launch_plan" else None)
    assert out is not None
    return out


def test_status() -> None:
    a = answers.status(recorded("status"))
    assert (a.slurm_up, a.at, a.cursor) == (True, "2026-12-03T19:23:59Z", 9)
    assert [line.n for line in a.journal] == list(range(1, 10))
    assert a.journal[1].event.event == "accepted" and a.journal[1].event.job_id == "2184"
    failed, running, lease, step = a.jobs
    assert (failed.rid, failed.job, failed.sq, failed.rc, failed.sig, failed.where) == (
        "r1", "2184", "FAILED", 3, "none", "(NonZeroExitCode)",
    )  # fmt: skip
    assert (failed.sq_elapsed, failed.sq_limit, failed.res, failed.idx) == (0, 3600, [1, 1, 1024, 0, 60], 0)
    assert (running.sq, running.rc, running.elapsed, running.cancel) == ("RUNNING", None, None, False)
    assert not running.held
    assert (lease.lease, lease.res[3]) == ("L1", 2)
    assert (step.job, step.lease, step.starts, step.sq_limit) == ("2190s1", "L1", 1, 180)


def test_status_malformed() -> None:
    with pytest.raises(ProtocolError, match="slurm="):
        answers.status(recorded("status", "slurm=up", "slurm=maybe"))
    # a job's row that does not read is left out, said in unread: never the whole answer (the other jobs read)
    for old, new, what in [("idx=0 job=2184 sq=", "idx=0 sq=", "job="), ("starts=1", "starts=one", "starts="),
                           ("cancel=0", "cancel=yes", "cancel=")]:  # fmt: skip
        a = answers.status(recorded("status", old, new))
        assert len(a.jobs) == 3 and len(a.unread) == 1 and what in a.unread[0], a.unread
    with pytest.raises(ProtocolError, match="lines="):
        answers.status(recorded("status", "cursor lines=9", "cursor lines=six"))


def test_status_reads_a_jobs_own_files_as_facts_never_as_a_failure() -> None:
    """The markers (rc, elapsed, limit) and the journal's res are a job's files: garbage there is unknown."""
    out = recorded("status", "rc=3 sig=none elapsed=0 limit=3600", "rc=x sig=none elapsed=--1 limit=1e9")
    job = answers.status(out).jobs[0]
    assert (job.rc, job.elapsed, job.limit) == (None, None, None)
    job = answers.status(recorded("status", "res=1,1,1024,0,60 lease= held", "res=1,a,,0 lease= held")).jobs[0]
    assert job.res == [1, None, None, 0]


def test_journal() -> None:
    a = answers.journal(recorded("journal"))
    assert (a.base_seal, a.anchor_ok, a.cursor) == ("", None, 9)
    ev = a.lines[5].event
    assert (ev.n, ev.event, ev.request_id, ev.job_id) == (6, "accepted", "r20261203-192345-536219", "2190")
    assert a.lines[8].event.event == "step-started"
    assert a.lines[0].text.startswith("v=2 t=2026-12-03T19:23:42Z ev=intent rid=r1 ")
    anchored = answers.journal(recorded("journal", "@@N base n=0 seal=", "@@N base n=0 seal=\n@@N anchor n=2 ok=0"))
    assert anchored.anchor_ok is False
    with pytest.raises(ProtocolError, match="n=LINE"):
        answers.journal(recorded("journal", "journal n=3 ", "journal "))
    with pytest.raises(ProtocolError, match="seal="):
        answers.journal(recorded("journal", "base n=0 seal=", "base n=0"))
    with pytest.raises(ProtocolError, match="ok="):
        answers.journal(recorded("journal", "@@N base n=0 seal=", "@@N base n=0 seal=\n@@N anchor n=2 ok=maybe"))


def test_cancel() -> None:
    (c,) = answers.cancel(recorded("cancel"))
    assert (c.job, c.rid, c.task, c.result) == ("2187", "r2", "", "cancelled")
    with pytest.raises(ProtocolError, match="result"):
        answers.cancel(recorded("cancel", "result=cancelled", "result=gone"))
    with pytest.raises(ProtocolError, match="job="):
        answers.cancel(recorded("cancel", "job=2187 ", ""))


def test_reconcile() -> None:
    assert answers.reconcile(recorded("reconcile")).model_dump() == {"items": [], "open": 0, "stale": 0, "unknown": []}
    a = answers.reconcile(recorded("reconcile_items"))
    assert [(i.rid, i.idx, i.task, i.result, i.job) for i in a.items] == [
        ("seen", 0, "", "reconciled", "2018"), ("gone", 1, "k2", "abandoned", ""),
    ]  # fmt: skip
    assert a.open == 2 and a.unknown == []
    said = recorded("reconcile", "reconciled open=0 stale=0", "reconciled open=0 stale=0 unknown=77,78_1")
    assert answers.reconcile(said).unknown == ["77", "78_1"]  # unheld jobs whose batch script Slurm did not give
    with pytest.raises(ProtocolError, match="@@reconciled"):
        answers.reconcile(recorded("reconcile", "@@N reconciled open=0 stale=0\n", ""))
    # an open intent's idx is the journal's, which a job can write: what does not read is unknown
    assert answers.reconcile(recorded("reconcile_items", "idx=1", "idx=one")).items[1].idx is None


def test_logs() -> None:
    a = answers.logs(recorded("logs"))
    assert (a.rid, a.started, a.size, a.data) == ("r1", True, 6, b"hello\n")
    assert a.ended == "rc=3 sig=none t=1796325823 elapsed=0 limit=3600"
    assert a.end is not None and (a.end.exit_code, a.end.signal, a.end.limit_s) == (3, None, 3600)
    with pytest.raises(ProtocolError, match="started="):
        answers.logs(recorded("logs", "started=yes", "started=1"))
    with pytest.raises(ProtocolError, match="size="):
        answers.logs(recorded("logs", "size=6", "size=six"))
    with pytest.raises(ProtocolError, match="chunk"):
        answers.logs(recorded("logs", "chunk aGVsbG8K", "chunk aGVsb!8K"))
    with pytest.raises(ProtocolError, match="@@log"):
        answers.logs(recorded("logs", "@@N log ", "@@N blog "))


def test_fetch() -> None:
    d = answers.fetch(recorded("fetch_dir"))
    assert (d.size, [(e.path, e.size) for e in d.entries], d.data) == (None, [("a.txt", 5)], b"")
    f = answers.fetch(recorded("fetch_file"))
    assert (f.size, f.entries, f.data) == (5, [], b"data\n")
    with pytest.raises(ProtocolError, match="size="):
        answers.fetch(recorded("fetch_dir", "size=5", "size="))
    with pytest.raises(ProtocolError, match="size="):
        answers.fetch(recorded("fetch_file", "size=5", "size=5x"))


def test_fetch_each() -> None:
    each = answers.fetch_each(recorded("fetch_each"))
    assert set(each) == {"77_0", "77_1", "78"}  # 99: the journal knows no such job, so the cluster says nothing of it
    got = each["77_0"]
    assert isinstance(got, answers.FetchAnswer) and (got.size, got.data) == (4, b"0.5\n")
    missing = each["78"]
    assert isinstance(missing, answers.FetchMissing)
    assert (missing.code, missing.rc, missing.message) == ("not-found", 2, "job 78 has no run directory yet")
    with pytest.raises(ProtocolError, match="before any @@job"):
        answers.fetch_each(recorded("fetch_each", "@@N job job=78\n", ""))
    with pytest.raises(ProtocolError, match="twice"):
        answers.fetch_each(recorded("fetch_each", "job=77_1", "job=78"))
    with pytest.raises(ProtocolError, match="rc="):
        answers.fetch_each(recorded("fetch_each", "rc=2", "rc=two"))


def test_doctor() -> None:
    checks = answers.doctor(recorded("doctor"))
    assert [c.name for c in checks][:4] == ["commands", "sha256", "version", "controller"]
    assert checks[1].message == "found" and checks[1].result == "pass"
    devices = next(c for c in checks if c.name == "devices")
    assert devices.result == "warn" and "ConstrainDevices" in devices.hint
    with pytest.raises(ProtocolError, match="result"):
        answers.doctor(recorded("doctor", "name=sha256 result=pass", "name=sha256 result=fine"))
    with pytest.raises(ProtocolError, match="base64"):
        answers.doctor(recorded("doctor", "msg=Zm91bmQ=", "msg=Zm9!bmQ"))


def test_policy() -> None:
    a = answers.policy(recorded("info"))
    assert (a.source, a.digest) == ("default", "default-1")
    # numbers are numbers; a list that allows anything, and a number with no limit, are None
    assert a.rules.max_active_jobs == 100 and a.rules.partitions is None and a.rules.max_gpus is None
    assert a.rules.default_time_min == 60
    two = answers.policy(recorded("info", "key=partitions value=Kg==", "key=partitions value=Y3B1IGdwdQ=="))
    assert two.rules.partitions == ["cpu", "gpu"]
    with pytest.raises(ProtocolError, match="key="):
        answers.policy(recorded("info", "key=qos ", ""))
    with pytest.raises(ProtocolError, match="max_active_jobs value"):
        answers.policy(recorded("info", "value=MTAw", "value==many"))


def test_info() -> None:
    a = answers.info(recorded("info"))
    cpu, gpu = a.partitions
    assert (cpu.name, cpu.default, cpu.state, cpu.time, cpu.nodes, cpu.cpus, cpu.mem_mb, cpu.gres) == (
        "cpu", True, "up", "1-00:00:00", 2, 4, 4000, "gpu:fake:4",
    )  # fmt: skip
    assert (gpu.name, gpu.default) == ("gpu", False)
    assert a.policy.rules.default_mem_mb == 1024
    assert answers.info(recorded("info", "nodes=2", "nodes=2+")).partitions[0].nodes == 2  # sinfo: at least 2
    with pytest.raises(ProtocolError, match="default="):
        answers.info(recorded("info", "default=1", "default=yes"))
    with pytest.raises(ProtocolError, match="gres="):
        answers.info(recorded("info", " gres=Z3B1OmZha2U6NA==", ""))


def test_gpus() -> None:
    a = answers.gpus(recorded("gpus"))
    assert [(n.name, n.state, n.partitions, n.gres) for n in a.nodes] == [
        ("n1", "MIXED", ["cpu", "gpu"], "gpu:fake:4"), ("n2", "MIXED", ["cpu", "gpu"], "gpu:fake:4"),
    ]  # fmt: skip
    assert a.nodes[0].used == "gpu:fake:2(IDX:0-1)"
    (held,) = a.held
    assert (held.job, held.node, held.gres) == ("2190", "n1", "gpu:fake:2(IDX:0-1)")
    assert held.start == datetime(2026, 12, 3, 19, 23, 46)  # Slurm's time, the cluster's clock
    assert held.name == "rsk:tae45560dbd:r20261203-192345-536219"
    lease = answers.gpus(recorded("lease_gpus"))
    assert [(n.name, n.gres, n.used) for n in lease.nodes] == [("n1", "gpu:2", "")]
    assert [(h.job, h.gres) for h in lease.held] == [("2190s1", "gpu:1(IDX:0)")]
    # a step's start is the epoch its marker holds: one time format for an answer, UTC
    assert lease.held[0].start == datetime.fromtimestamp(1796325834, UTC)
    assert answers.gpus(recorded("lease_gpus", "start=1796325834", "start=soon")).held[0].start is None
    with pytest.raises(ProtocolError, match="node="):
        answers.gpus(recorded("gpus", " node=n1", ""))
    with pytest.raises(ProtocolError, match="base64"):
        answers.gpus(recorded("gpus", "gres=Z3B1OmZha2U6NA==", "gres=gpu:4"))


def test_lease() -> None:
    (x,) = answers.leases(recorded("lease"))
    assert (x.name, x.job, x.state, x.nodes, x.gpus, x.mem, x.time, x.drain, x.overrun) == (
        "L1", "2190", "running", 1, 2, 1024, 10, 5, "refuse",
    )  # fmt: skip
    assert (x.hosts, x.start, x.end, x.queued, x.running, x.ended, x.drained) == (
        ["n1"], datetime.fromtimestamp(1796325826, UTC), datetime.fromtimestamp(1796326426, UTC), 0, 1, 0, False,
    )  # fmt: skip
    # the lease's files are a job's to write: a shape that is not a number is unknown, not a failure
    assert answers.leases(recorded("lease", "gpus=2", "gpus=two"))[0].gpus is None
    assert answers.leases(recorded("lease", "end=1796326426", "end=-1"))[0].end is None
    with pytest.raises(ProtocolError, match="queued="):  # the program's own count
        answers.leases(recorded("lease", "queued=0", "queued=none"))
    with pytest.raises(ProtocolError, match="drained="):
        answers.leases(recorded("lease", "drained=0", "drained=no"))
    closed = answers.lease_closed(recorded("lease_close"))
    assert (closed.name, closed.job, closed.result, closed.queued) == ("L1", "2190", "cancelled", 0)
    with pytest.raises(ProtocolError, match="result"):
        answers.lease_closed(recorded("lease_close", "result=cancelled", "result=why"))
    with pytest.raises(ProtocolError, match="@@closed"):
        answers.lease_closed(recorded("lease_close", "@@N closed", "@@N opened"))


def test_code() -> None:
    a = answers.code(recorded("code_need"))
    assert (a.ready, a.need) == (None, ["e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"])
    ready = answers.code(recorded("code_need", "need sha=e3b0c442", "ready dir=/home/rsklab/.rsk/code/p/snap/d "))
    assert (ready.ready, ready.need) == ("/home/rsklab/.rsk/code/p/snap/d", [])
    with pytest.raises(ProtocolError, match="sha="):
        answers.code(recorded("code_need", "sha=", "hash="))


def test_a_journal_that_refused_the_outcome_is_a_warning_for_the_caller() -> None:
    msg = base64.b64encode(b"cannot append to /r/journal/p.log").decode()
    out = recorded("submit_launch_go", "@@N accepted", f"@@N warning code=journal-unwritable msg={msg}\n@@N accepted")
    assert answers.warnings(out) == ["the cluster warns (journal-unwritable): cannot append to /r/journal/p.log"]
    assert [a.job_id for a in answers.accepted(out)] == ["2492_0", "2492_1"]  # what Slurm took stands
    assert answers.warnings(recorded("submit_launch_go")) == []


def test_submit_plan_and_accepted() -> None:
    plan = answers.plan(recorded("submit_plan"))
    assert (plan.kind, plan.argv, plan.verdict, plan.name) == ("argv", ["echo", "hi"], "allow", "job")
    batch = answers.plan(recorded("submit_launch_plan"))
    assert (batch.kind, [t.key for t in batch.tasks], batch.active, batch.active_cap, batch.active_jobs) == (
        "batch", ["k1", "k2"], 0, 100, [],
    )  # fmt: skip
    assert (plan.estimate_start, plan.estimate_nodes) == ("2026-12-04T19:24:00Z", "n2")  # Slurm's instant, UTC
    assert batch.estimate_nodes == "n1"
    said = next(w for w in recorded("submit_plan").records if w.kind == "estimate").kv["said"]
    step = answers.plan(recorded("submit_plan", f"said={said}", "lease=dev"))
    assert (step.estimate_start, step.estimate_nodes) == ("in-lease", "lease dev")
    odd = answers.plan(recorded("submit_plan", f"said={said}", "said=bm8gZXN0aW1hdGU="))  # "no estimate"
    assert (odd.estimate_start, odd.estimate_nodes) == ("unknown", "")
    accepted = answers.accepted(recorded("submit_launch_go"))
    assert [(a.job_id, a.request_id, a.idx, a.task, a.replay) for a in accepted] == [
        ("2492_0", "b1", 0, "k1", False), ("2492_1", "b1", 1, "k2", False),
    ]  # fmt: skip
    assert accepted[0].plan_hash == batch.hash
    with pytest.raises(ProtocolError, match="count="):
        answers.plan(recorded("submit_launch_plan", "count=0", "count=none"))
    with pytest.raises(ProtocolError, match="replay="):
        answers.accepted(recorded("submit_launch_go", "replay=0", "replay=no"))
    with pytest.raises(ProtocolError, match="idx="):
        answers.accepted(recorded("submit_launch_go", "idx=1", "idx=x"))


DECODERS: list[Callable[[Output], Any]] = [
    answers.status, answers.journal, answers.cancel, answers.reconcile, answers.logs, answers.fetch,
    answers.fetch_each, answers.doctor, answers.policy, answers.info, answers.gpus, answers.code, answers.leases,
    answers.lease_closed, answers.plan, answers.accepted,
]  # fmt: skip
KINDS = ["status", "job", "journal", "cursor", "base", "anchor", "cancel", "reconcile", "reconciled", "log",
         "chunk", "file", "entry", "check", "policy", "policy-rule", "partition", "node", "held", "ready", "need",
         "lease", "closed", "planline", "plan", "active", "prior", "accepted", "missing"]  # fmt: skip
word = st.text(alphabet="abcn=0129-_,.:/+!xyz", max_size=12)
record = st.builds(lambda k, ws: f"@@N {k} " + " ".join(ws), st.sampled_from(KINDS), st.lists(word, max_size=6))


@settings(max_examples=300, deadline=None)
@given(st.lists(record, max_size=12))
def test_every_decoder_gives_a_model_or_a_typed_error(lines: list[str]) -> None:
    try:
        out = parse("\n".join([*lines, "@@N done rc=0"]), "N")
    except RskError:
        return
    assert out is not None
    for decode in DECODERS:
        with contextlib.suppress(RskError):
            decode(out)


def test_a_job_writing_a_crafted_number_into_its_marker_cannot_stop_rsk_reading_its_project() -> None:
    """The ended marker is the job's to write: `rc=--1` (which passed a `lstrip("-").isdigit()` check and then
    failed int()) or `elapsed=²` is an unknown fact, and the other jobs of the project are still read."""
    from rsk.ops.status import jobs_from

    crafted = "rc=--1 sig=none elapsed=\u00b2 limit=3600"
    jobs = jobs_from(recorded("status", "rc=3 sig=none elapsed=0 limit=3600", crafted))
    assert [j.job_id for j in jobs] == ["2184", "2187", "2190", "2190s1"]
    assert (jobs[0].exit_code, jobs[0].state) == (None, "failed")  # squeue's FAILED still decides


def test_a_job_runs_on_slurm_or_in_a_lease_one_placement() -> None:
    from rsk.ops.board import batches
    from rsk.ops.status import Status, jobs_from
    from rsk.wire.protocol import Placement, placement

    jobs = jobs_from(recorded("status"))
    assert [j.placement for j in jobs] == [
        Placement(kind="slurm"), Placement(kind="slurm"), Placement(kind="slurm"),  # the lease's own job too
        Placement(kind="lease", lease="L1", job="2190"),
    ]  # fmt: skip
    assert placement("7_3") == Placement(kind="slurm")
    (lease_view,) = [v for v in batches([Status(target="lab", project="p", slurm="up", at="", jobs=jobs)])
                     if v.request_id == "lease L1"]  # fmt: skip
    assert [j.job_id for j in lease_view.paid] == ["2190"]  # a step uses the lease's allocation
    job_plan = answers.plan(recorded("submit_plan"))
    assert job_plan.placement == Placement(kind="slurm") and not job_plan.is_step
    step = Placement(kind="lease", lease="L1", job="9")
    assert answers.plan(recorded("submit_launch_plan")).model_copy(update={"placement": step}).is_step


def test_a_jobs_end_time_reads_as_an_iso_time() -> None:
    end = answers.job_end("rc=75 sig=USR1 t=1796390761 elapsed=53 limit=120 stop=yielded")
    assert end is not None and end.at == datetime.fromtimestamp(1796390761, UTC) and end.exit_code == 75
    assert end.model_dump(mode="json")["at"].endswith("Z")
    late = answers.job_end("rc=0 sig=none t=soon elapsed=1 limit=60")  # a job's own file: a word is unknown
    assert late is not None and late.at is None
