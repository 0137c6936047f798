"""A grant reads `exhausted` only when no job fits any more: a GPU-hour budget of 0 (no GPUs) or spent leaves room
for work without GPUs, so the grant stays `active` while its jobs and CPU-hours last (docs/adr/0070)."""

from __future__ import annotations

from datetime import UTC, datetime

from rsk.ledger.decide import Usage
from rsk.ledger.grants import view
from rsk.ledger.models import Grant

AT = datetime(2026, 1, 1, tzinfo=UTC)


def test_a_grant_without_gpu_hours_is_active_while_cpu_work_fits() -> None:
    g = Grant(gpu_hours=0, cpu_hours=20, jobs=400)
    fresh = view(g, Usage(), AT)
    assert fresh.status == "active" and fresh.gpu_hours_left == 0
    assert view(g, Usage(cpu_hours_spent=0.01, jobs_spent=4), AT).status == "active"
    spent = Grant(gpu_hours=1, cpu_hours=20)
    assert view(spent, Usage(gpu_hours_spent=1.0), AT).status == "active"  # CPU work still fits


def test_a_grant_whose_jobs_or_cpu_hours_are_spent_is_exhausted() -> None:
    assert view(Grant(jobs=4), Usage(jobs_spent=4), AT).status == "exhausted"
    assert view(Grant(cpu_hours=1), Usage(cpu_hours_spent=0.5, cpu_hours_reserved=0.5), AT).status == "exhausted"
    assert view(Grant(cpu_hours=0), Usage(), AT).status == "exhausted"  # every job uses CPU time
