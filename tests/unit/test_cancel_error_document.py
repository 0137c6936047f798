"""A cancel that ends as an error document (`not-ours`, `cancel-failed`) still carries what its report says.

ADR 0073 made the error document of a cancel carry the brief `results`, `counts` and `results_omitted`. It still
drops the report's `warnings` and `charged`: when a job of the account held the project's lock, the cancel went on
without it and the journal does not record it (ADR 0056, `lock-held`), and the never-started tasks it settled at 0
(ADR 0069). `rsk cancel --json` prints them only on stderr as text, and an MCP `cancel` (which raises the same error)
loses them: an agent reading the one JSON document is never told that the journal has no record of its cancel. A job
of the account chooses when both happen (it holds the lock; it keeps one job Slurm does not cancel, or plants a
journal line that makes one `not-ours`). Pure."""

from __future__ import annotations

import pytest

from rsk.errors import RskError
from rsk.ops.cancel import CancelReport, CancelResult, Charged, refused

LOCK = "the lock of project p could not be taken in 5 s (...): cancelled all the same, not journaled"


@pytest.mark.parametrize("odd", ["failed", "not-ours"])
def test_a_cancels_error_document_keeps_its_warnings_and_charges(odd: str) -> None:
    results = [CancelResult(job_id=f"9_{i}", request_id="sw", result="cancelled") for i in range(200)]
    results.append(CancelResult(job_id="77", request_id="sw", result=odd))
    report = CancelReport(target="lab", project="p", counts={"cancelled": 200, odd: 1}, results=results,
                          charged=[Charged(request_id="sw", never_started=150, cpu_hours_used=0.5, gpu_hours_used=0,
                                           cpu_hours_reserved=0.1, gpu_hours_reserved=0)],
                          warnings=[LOCK])  # fmt: skip
    with pytest.raises(RskError) as caught:
        refused(report.brief(50))
    doc = caught.value.to_json()
    listed = doc["results"]
    assert isinstance(listed, list) and listed[0]["job_id"] == "77" and doc["results_omitted"] == 150
    assert doc.get("warnings") == [LOCK], f"the error document drops the report's warnings: {sorted(doc)}"
    assert doc.get("charged"), f"the error document drops what the books charge after the cancel: {sorted(doc)}"
