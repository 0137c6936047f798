"""Kept requests: every accepted launch's request and its snapshot's paths, read back for a conflict (what another
launch of the id changes) and for a retry (a batch's tasks); the older form, a bare request, still reads."""

from __future__ import annotations

import pytest

from rsk.errors import ConflictError, UsageError
from rsk.ledger.kept import _kept, asked, keep, kept
from rsk.ledger.models import Charge, JobCost, Ledger
from rsk.ops.launch import _ran_before
from rsk.request.code import CodeFile, CodeSnapshot
from rsk.wire.protocol import Request, TaskSpec

P = "p"


def _snap(*paths: str, fixed: str = "") -> CodeSnapshot:
    files = [CodeFile(path=x, sha256=("1" if x == fixed else "0") * 64, size=1, executable=False) for x in paths]
    return CodeSnapshot(root="/c", files=files, digest="d-" + "-".join(paths) + fixed, total_bytes=len(files))


def _request(**kw: object) -> Request:
    return Request.model_validate({"project": P, "request_id": "r1", "argv": ["python3", "train.py"], **kw})


def test_another_launch_of_a_request_that_ran_is_told_what_it_changes() -> None:
    old = _snap("train.py", "old.txt")
    keep(_request(code=old.digest, time_min=2, requester="a", hostkey="k1"), old)
    new = _snap("train.py", "extra.txt", fixed="train.py")  # train.py fixed: its content changed
    before = asked(P, "r1")
    assert before is not None and before.files_known
    later = _request(code=new.digest, time_min=3, requester="b", hostkey="k2")  # who asks and the key: not the work's
    d = before.differs(later, new)
    assert (d.fields, d.added, d.removed, d.changed) == (["code", "time_min"], ["extra.txt"], ["old.txt"], ["train.py"])
    cost = JobCost(gpu_hours_worst=0, cpu_hours_worst=1)
    ran = Charge(grant_id="g", plan_hash="h", request_id="r1", target="lab", gpu_hours=0, cpu_hours=1,
                 state="submitted", job_costs={"101": cost})  # fmt: skip
    ledger = Ledger(project=P, charges=[ran])
    said = ConflictError("request id r1 was already used for another plan (h)", code="request-conflict")
    exc = _ran_before(said, ledger, "lab", later, new)
    assert exc.details == {"differs": ["code", "time_min"], "code_added": ["extra.txt"], "code_removed": ["old.txt"],
                           "code_changed": ["train.py"], "jobs": ["101"], "job_count": 1}  # fmt: skip
    assert exc.message.endswith(
        "differs in code, time_min; added under --code: extra.txt; gone under --code: old.txt; "
        "changed under --code: train.py"
    )
    same = _ran_before(ConflictError("m", code="request-conflict"), ledger, "lab", _request(code=old.digest,
                       time_min=2), old)  # fmt: skip
    assert same.details["differs"] == [] and "same work as then" in same.message
    assert (same.hint or "").startswith("request id r1 already ran as job(s) 101. You asked for the same work")


def test_a_sweep_that_ran_is_named_in_a_hint_of_a_line_not_by_its_every_job() -> None:
    """A 3,000-task sweep launched again under its id for another plan: the hint names a few jobs and the count (it
    listed all 3,000, 33 KB on stderr); `details.jobs` its first 50 in Slurm's order, `job_count` all."""
    cost = JobCost(gpu_hours_worst=0, cpu_hours_worst=1)
    ran = Charge(grant_id="g", plan_hash="h", request_id="r1", target="lab", gpu_hours=0, cpu_hours=3000,
                 state="submitted", job_costs={f"500_{i}": cost for i in reversed(range(3000))})  # fmt: skip
    exc = _ran_before(ConflictError("m", code="request-conflict"), Ledger(project=P, charges=[ran]), "lab",
                      _request(), None)  # fmt: skip
    assert exc.details["jobs"] == [f"500_{i}" for i in range(50)] and exc.details["job_count"] == 3000
    assert len(exc.hint or "") < 600, exc.hint
    assert "already ran as 3000 jobs (500_0, " in (exc.hint or "")


def test_a_request_launched_elsewhere_says_nothing_it_does_not_know() -> None:
    exc = _ran_before(ConflictError("m", code="request-conflict"), Ledger(project=P), "lab", _request(), None)
    assert exc.message == "m" and "differs" not in exc.details


def test_a_batch_kept_in_the_older_form_still_retries_and_a_single_job_is_no_batch() -> None:
    batch = _request(request_id="b1", tasks=[TaskSpec(key="t1", argv=["true"])])
    path = _kept(P, "b1")
    path.parent.mkdir(parents=True)
    path.write_text(batch.model_dump_json())  # as rsk kept it before: the bare request
    assert kept(P, "b1").tasks == batch.tasks and asked(P, "b1") is not None
    keep(_request())
    with pytest.raises(UsageError, match="no kept request for batch r1"):
        kept(P, "r1")
    assert asked(P, "nothing") is None


def test_a_version_1_record_without_digests_reads_and_says_nothing_changed_within_a_file() -> None:
    import json

    old = _snap("train.py")
    keep(_request(code=old.digest), old)
    path = _kept(P, "r1")
    record = json.loads(path.read_text())
    del record["code_sums"]
    path.write_text(json.dumps({**record, "schema_version": 1}))  # as rsk 0.4 kept it
    before = asked(P, "r1")
    new = _snap("train.py", fixed="train.py")
    assert before is not None and before.schema_version == 1
    d = before.differs(_request(code=new.digest), new)
    assert d.fields == ["code"] and d.changed == [] and d.added == [] and d.removed == []
