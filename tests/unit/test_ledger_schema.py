"""The ledger's compatibility rule (docs/adr/0044): every change of its shape bumps `schema_version`; a ledger of
an older version is migrated on read (and written at the current one on its next change); one of a newer version
is refused whole with a typed error and left as it is; an unknown field is never read past.

tests/unit/ledgers/vN.json are ledgers as the rsk of schema N wrote them (gen.py beside them, run against that
version's code, made them), with the same facts in each: a deny rule, a grant with a budget of 10 jobs, a charge
whose 2 jobs ran, a reservation, an approval used once, a denied card, and from version 3 an open lease."""

from __future__ import annotations

import hashlib
import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from rsk.errors import Exit, NewerLedger, StateError
from rsk.ledger.archive import ARCHIVE_SCHEMA, Record
from rsk.ledger.decide import Facts, decide, usage_by_grant
from rsk.ledger.guard import submitted_jobs
from rsk.ledger.models import LEDGER_SCHEMA, Charge, Grant, JobCost, Ledger
from rsk.ledger.store import Store
from rsk.wire.resources import Resources
from tests.conftest import rsk

FIXTURES = Path(__file__).parent / "ledgers"

# The fingerprint of each version's shape (the JSON schema of rsk.ledger.models.Ledger, without its prose). A change
# of the models that changes it needs a new version: bump LEDGER_SCHEMA, add the step to `migrate`, write the
# fixture vN.json with gen.py, and add its fingerprint here. Never edit a fingerprint that was released.
SHAPES = {
    8: "4223cbb3c078f66c",
    9: "3d725248874dd6a5",
    10: "907aee167142f337",
    11: "bc3c736e71816dcb",
    12: "4da0da53cfefc416",
}


def _fingerprint(model: type[BaseModel] = Ledger) -> str:
    def bare(x: Any) -> Any:
        if isinstance(x, dict):
            return {k: bare(v) for k, v in x.items() if k not in ("description", "title")}
        if isinstance(x, list):
            return [bare(v) for v in x]
        return x

    text = json.dumps(bare(model.model_json_schema()), sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def test_the_ledgers_shape_is_the_one_its_schema_version_names() -> None:
    assert max(SHAPES) == LEDGER_SCHEMA, "record the fingerprint of the new version in SHAPES"
    assert _fingerprint() == SHAPES[LEDGER_SCHEMA], (
        f"the ledger's shape changed (fingerprint {_fingerprint()}) but LEDGER_SCHEMA is still {LEDGER_SCHEMA}: an "
        "older rsk would call a ledger with the new field invalid, or a newer one read past it. Bump LEDGER_SCHEMA, "
        "add the step to rsk.ledger.models.migrate and a fixture tests/unit/ledgers/vN.json (gen.py), and record "
        "the new fingerprint here (docs/adr/0044)"
    )


ARCHIVE_SHAPES = {
    2: "7438d9cb17d447f8"
}  # the archive line's own shape (its entry is a ledger entry of `ledger_schema`)


def test_the_archive_lines_shape_is_the_one_its_schema_version_names() -> None:
    assert max(ARCHIVE_SHAPES) == ARCHIVE_SCHEMA
    assert _fingerprint(Record) == ARCHIVE_SHAPES[ARCHIVE_SCHEMA], (
        f"archive.jsonl's line changed (fingerprint {_fingerprint(Record)}): bump ARCHIVE_SCHEMA, read the older "
        "lines in rsk.ledger.archive.Record.current, and record the fingerprint here (docs/adr/0044)"
    )


def _fixtures() -> list[Path]:
    return sorted(FIXTURES.glob("v*.json"))


def test_there_is_a_fixture_for_every_version() -> None:
    versions = {json.loads(p.read_text())["schema_version"] for p in _fixtures()}
    assert versions == set(range(1, LEDGER_SCHEMA + 1))


def _place(path: Path, project: str = "p") -> Store:
    store = Store(project)
    store.dir.mkdir(parents=True, exist_ok=True)
    store.path.write_bytes(path.read_bytes())
    return store


@pytest.mark.parametrize("fixture", _fixtures(), ids=lambda p: p.stem)
def test_an_older_ledger_reads_with_every_fact_it_holds_and_is_written_at_the_current_version(fixture: Path) -> None:
    version = json.loads(fixture.read_text())["schema_version"]
    store = _place(fixture)
    ledger = store.load()
    assert ledger.schema_version == LEDGER_SCHEMA
    # the grant's books: 2 jobs ran, 1 reserved, of 10; the approval's use; the denied card; the deny rule
    usage = usage_by_grant(ledger.charges, grants=ledger.grants)["g-00000001"]
    assert (usage.jobs_spent, usage.jobs_reserved, usage.gpu_hours_reserved) == (2, 1, 3.0)
    assert submitted_jobs(ledger, "r-run", "b" * 64, "lab") == ["101", "102"]
    assert ledger.approvals[0].uses_left == 0 and [u.request_id for u in ledger.approvals[0].uses] == ["r-appr"]
    assert ledger.cards[0].status == "denied" and ledger.cards[0].reason == "too big"
    big = Facts(target="lab", plan_hash="x", request_id="r9", partition="gpu", account="", qos="",
                resources=Resources(nodes=1, cpus=1, mem_mb=100, gpus=8, time_min=10), commands=("true",),
                active=0, gpu_hours=1.3, cpu_hours=0.2)  # fmt: skip
    assert decide(ledger, big, datetime.now(UTC)).kind == "deny"
    if version >= 3:
        lease = ledger.leases[0]
        assert (lease.resources.mem_mb, lease.resources.time_min) == (500, 60)
        assert lease.steps is None if version < 5 else [s.job_id for s in lease.steps or []] == ["300s1"]
    # its next change writes it at the current version; the file as it was is the backup
    before = store.path.read_bytes()
    with store.transaction() as ledger:
        ledger.grants.append(Grant(jobs=1))
    assert json.loads(store.path.read_text())["schema_version"] == LEDGER_SCHEMA
    assert store.backup.read_bytes() == before
    assert len(store.load().grants) == 2


def _future(project: str, root: Path) -> Path:
    """A ledger as a newer rsk would write it: a field this rsk does not know narrows the grant (were it read past,
    the grant would allow more than its human gave) and an entry of a kind this rsk has no list for."""
    path = root / "projects" / project / "ledger.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    doc = json.loads((FIXTURES / f"v{LEDGER_SCHEMA}.json").read_text())
    doc["schema_version"] = LEDGER_SCHEMA + 1
    doc["grants"][0]["only_users"] = ["alice"]
    doc["quotas"] = [{"id": "q-1", "gpu_hours_a_day": 1}]
    path.write_text(json.dumps(doc))
    return path


def test_a_newer_ledger_is_refused_whole_and_left_as_it_is(tmp_path: Path) -> None:
    import os

    path = _future("p", Path(os.environ["RSK_HOME"]))
    store = Store("p")
    before = path.read_bytes()
    for read in (store.load, store.view):
        with pytest.raises(NewerLedger) as caught:
            read()
    err = caught.value
    assert err.exit_code == Exit.STATE and err.code == "ledger-newer"
    assert f"newer rsk (schema_version {LEDGER_SCHEMA + 1}" in err.message and "upgrade rsk" in (err.hint or "")
    assert err.details["schema_version"] == LEDGER_SCHEMA + 1 and err.details["understood"] == LEDGER_SCHEMA
    with pytest.raises(NewerLedger), store.transaction() as ledger:
        ledger.grants.clear()  # never reached
    assert path.read_bytes() == before and not store.backup.exists() and not store.archive.path.exists()


def test_the_commands_refuse_a_newer_ledger_with_exit_6_and_write_nothing(rsk_env: Path, project: str) -> None:
    path = _future(project, rsk_env)
    before = path.read_bytes()
    for argv in (["grant", "list"], ["grant", "add", "--jobs", "1", "--yes"], ["approvals"],
                 ["deny-rule", "add", "--reason", "x", "--gpus-at-least", "1", "--yes"]):  # fmt: skip
        r = rsk(*argv, "-p", project, "--json")
        assert r.rc == Exit.STATE, (argv, r.out, r.err)
        doc = json.loads(r.out)
        assert doc["error"] == "ledger-newer" and "upgrade rsk" in doc["hint"], doc
        assert "Traceback" not in r.err
    assert path.read_bytes() == before
    assert {p.name for p in path.parent.iterdir()} <= {"ledger.json", "ledger.lock"}  # no backup, archive, audit


def test_an_unknown_field_in_a_ledger_of_this_version_is_refused_never_read_past() -> None:
    """A field this rsk does not know could narrow what an entry allows: it is refused, so it never relaxes."""
    doc = json.loads((FIXTURES / f"v{LEDGER_SCHEMA}.json").read_text())
    doc["grants"][0]["only_users"] = ["alice"]
    store = _place(FIXTURES / f"v{LEDGER_SCHEMA}.json")
    store.path.write_text(json.dumps(doc))
    with pytest.raises(StateError) as caught:
        store.load()
    assert not isinstance(caught.value, NewerLedger)
    assert "grants.0.only_users" in caught.value.message


def _archive_line(store: Store, record: dict[str, object]) -> None:
    store.archive.path.parent.mkdir(parents=True, exist_ok=True)
    with store.archive.path.open("a") as fh:
        fh.write(json.dumps(record, separators=(",", ":")) + "\n")  # as rsk writes its lines


def _settled(rid: str) -> dict[str, object]:
    cost = JobCost(gpu_hours_worst=1.0, cpu_hours_worst=1.0, gpu_hours_used=1.0, cpu_hours_used=1.0)
    ch = Charge(grant_id="g-1", plan_hash="h", request_id=rid, target="lab", gpu_hours=1.0, cpu_hours=1.0,
                state="settled", job_costs={"501": cost})  # fmt: skip
    return ch.model_dump(mode="json")


def test_an_archive_line_of_a_newer_rsk_is_refused_never_skipped() -> None:
    """A request's archived jobs keep it from being submitted again: a line this rsk cannot read is not forgotten
    (that would let the request run twice), it refuses the read."""
    store = Store("p")
    _archive_line(
        store, {"schema_version": 1, "kind": "charge", "archived": "2026-01-01T00:00:00Z", "entry": _settled("r-old")}
    )  # fmt: skip  (as rsk wrote it before archive schema 2)
    assert [c.request_id for c in store.archive.charges()] == ["r-old"]
    assert submitted_jobs(Ledger(project="p"), "r-old", "h", "lab", store.archive) == ["501"]
    newer_entry = Record(kind="charge", entry={**_settled("r-new"), "refund": 1}).model_dump(mode="json")
    _archive_line(store, {**newer_entry, "ledger_schema": LEDGER_SCHEMA + 1})
    with pytest.raises(NewerLedger):
        submitted_jobs(Ledger(project="p"), "r-new", "h", "lab", store.archive)
    store.archive.path.write_text("")
    _archive_line(store, {"schema_version": ARCHIVE_SCHEMA + 1, "kind": "charge", "what": "new",
                          "entry": _settled("r-new")})  # fmt: skip
    with pytest.raises(NewerLedger):
        store.archive.charges()
    store.archive.path.write_text('{"schema_version": 1, "kind": "charge", "entry": {"broken\n')
    assert store.archive.charges() == []  # a damaged line (a crash mid-append) is still skipped


def test_each_write_keeps_the_ledger_it_replaces_as_the_backup_a_file_of_its_own(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from rsk.ledger.models import Charge
    from rsk.ledger.store import Store

    monkeypatch.setenv("RSK_HOME", str(tmp_path))
    store = Store("p")
    for k in range(3):
        before = store.path.read_bytes() if store.path.exists() else None
        with store.transaction() as ledger:
            ledger.charges.append(Charge(grant_id="g", plan_hash=f"h{k}", request_id=f"r{k}", target="lab",
                                         gpu_hours=1, cpu_hours=1))  # fmt: skip
        if before is not None:
            assert store.backup.read_bytes() == before  # the previous version, whole
            assert store.backup.stat().st_ino != store.path.stat().st_ino  # never the same file as the ledger
    assert not list(store.dir.glob(".*.tmp"))  # no temporary name left behind
