"""Every JSON answer's shape is the one its `schema_version` names (docs/adr/0050): a key an answer at that version
had is still there, with no type it did not have. Adding a key is no change of version (an agent reads what it
knows); removing or renaming one, or changing its type (a number that becomes a string, an int that becomes an
ISO time, a list that becomes an object), is, and fails here until the answer's `schema_version` is bumped.

tests/unit/snapshots/answer_shapes.json holds each answer's last recorded version and shape (its keys, as paths,
and their JSON types). `RSK_UPDATE_SNAPSHOTS=1 python3 -m pytest tests/unit/test_answer_shapes.py` records a
shape that grew or whose version was bumped; it never records a changed shape under the version it had.
"""

from __future__ import annotations

import importlib
import json
import os
import pkgutil
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

import rsk

SNAPSHOT = Path(__file__).parent / "snapshots" / "answer_shapes.json"

# what an agent reads: every --json answer and every MCP tool's answer (their models)
ANSWERS = [
    "rsk.broker.server.BrokerInfo",
    "rsk.cluster.targets.TargetList",
    "rsk.ledger.cards.CardAnswer",
    "rsk.ledger.cards.CardList",
    "rsk.ledger.cards.Decision",
    "rsk.ledger.grants.GrantList",
    "rsk.ledger.grants.GrantView",
    "rsk.ledger.grants.RuleAnswer",
    "rsk.ledger.grants.RuleList",
    "rsk.mcp.server.LaunchReply",
    "rsk.ops.cancel.CancelReport",
    "rsk.ops.doctor.Report",
    "rsk.ops.events.Events",
    "rsk.ops.fetch.BatchFetchReport",
    "rsk.ops.fetch.BatchResultReport",
    "rsk.ops.fetch.FetchReport",
    "rsk.ops.fetch.ResultReport",
    "rsk.ops.gpus.GpuInventory",
    "rsk.ops.info.TargetInfo",
    "rsk.ops.journal.Journal",
    "rsk.ops.launch.LaunchResult",
    "rsk.ops.launch.PlanReport",
    "rsk.ops.leases.CloseReport",
    "rsk.ops.leases.LeaseList",
    "rsk.ops.logs.LogSet",
    "rsk.ops.logs.LogTail",
    "rsk.ops.reconcile.ReconcileReport",
    "rsk.ops.release.Released",
    "rsk.ops.status.Status",
    "rsk.ops.wait.WaitResult",
]
# versioned files and wire formats, which have rules of their own (docs/adr/0044, docs/protocol.md)
NOT_ANSWERS = {
    "rsk.cluster.targets.Target",  # a target file (an answer's too, inside TargetList, which covers it)
    "rsk.ledger.archive.Record",
    "rsk.ledger.cardtasks.CardTasks",  # a card's every task, beside the ledger (RSK_HOME/projects/P/cards/SHA.json)
    "rsk.ledger.kept.Kept",  # a launch's request as it was accepted (RSK_HOME/projects/P/requests/RID.json)
    "rsk.ledger.models.AuditEntry",
    "rsk.ledger.models.Ledger",
    "rsk.ledger.notify.PageFile",
    "rsk.ledger.unread.UnreadBooks",  # the books poll's failed reads, beside the ledger (RSK_HOME/projects/P)
    "rsk.local.project.ProjectFile",
    "rsk.ops.journal.Anchors",
    "rsk.wire.protocol.Plan",
    "rsk.wire.protocol.Request",
}


def _model(path: str) -> type[BaseModel]:
    module, _, name = path.rpartition(".")
    model = getattr(importlib.import_module(module), name)
    assert isinstance(model, type) and issubclass(model, BaseModel), path
    return model


def _types(node: dict[str, Any], defs: dict[str, Any]) -> list[dict[str, Any]]:
    """The alternatives a schema node allows, its $refs resolved."""
    if "$ref" in node:
        return _types(defs[node["$ref"].split("/")[-1]], defs)
    if "anyOf" in node or "oneOf" in node:
        return [t for alt in node.get("anyOf", node.get("oneOf", [])) for t in _types(alt, defs)]
    if "allOf" in node and len(node["allOf"]) == 1:
        return _types(node["allOf"][0], defs)
    return [node]


def _kind(node: dict[str, Any]) -> str:
    if "const" in node or "enum" in node:
        values = [node["const"]] if "const" in node else node["enum"]
        return {str: "string", bool: "boolean", int: "integer", float: "number"}.get(type(values[0]), "string")
    kind = node.get("type", "any")
    if kind == "string" and node.get("format") in ("date-time", "date"):
        return "time"
    return str(kind)


def shape(model: type[BaseModel]) -> dict[str, str]:
    """Every key path of the answer (`jobs[].state`, `policy.max_gpus`, `counts{}`) and its JSON types."""
    schema = model.model_json_schema(mode="serialization")
    defs = schema.get("$defs", {})
    out: dict[str, str] = {}

    def walk(path: str, node: dict[str, Any], seen: tuple[str, ...]) -> None:
        kinds = set()
        for alt in _types(node, defs):
            kind = _kind(alt)
            kinds.add(kind)
            title = str(alt.get("title", ""))
            if title in seen:  # a model inside itself: its keys are recorded once
                continue
            if kind == "object":
                for key, sub in alt.get("properties", {}).items():
                    walk(f"{path}.{key}" if path else key, sub, (*seen, title))
                extra = alt.get("additionalProperties")
                if isinstance(extra, dict):
                    walk(f"{path}{{}}", extra, (*seen, title))
            elif kind == "array" and isinstance(alt.get("items"), dict):
                walk(f"{path}[]", alt["items"], (*seen, title))
        if path:
            out[path] = "|".join(sorted(kinds))

    walk("", schema, ())
    return out


def broken(old: dict[str, str], new: dict[str, str]) -> list[str]:
    """What a reader of the old shape would miss in the new one: a key gone, or a type it did not allow."""
    found = []
    for path, kinds in old.items():
        if path not in new:
            found.append(f"{path}: gone")
        elif not set(new[path].split("|")) <= set(kinds.split("|")) | {"any"}:
            found.append(f"{path}: {kinds} became {new[path]}")
    return found


def test_every_versioned_model_of_an_answer_is_listed() -> None:
    """A new answer model joins ANSWERS (or NOT_ANSWERS, for a file or wire format), so its shape is kept."""
    versioned = set()
    for info in pkgutil.walk_packages(rsk.__path__, "rsk."):
        if info.name.endswith("__main__"):
            continue
        module = importlib.import_module(info.name)
        for obj in vars(module).values():
            ours = isinstance(obj, type) and issubclass(obj, BaseModel) and obj.__module__ == module.__name__
            if ours and "schema_version" in obj.model_fields:
                versioned.add(f"{obj.__module__}.{obj.__qualname__}")
    assert versioned - set(ANSWERS) - NOT_ANSWERS == set(), "add each to ANSWERS or NOT_ANSWERS"
    assert set(ANSWERS) <= versioned


def test_each_answers_shape_is_the_one_its_schema_version_names() -> None:
    recorded: dict[str, Any] = json.loads(SNAPSHOT.read_text()) if SNAPSHOT.exists() else {}
    update = os.environ.get("RSK_UPDATE_SNAPSHOTS") == "1"
    problems, changed = [], False
    for path in ANSWERS:
        model = _model(path)
        version = model.model_fields["schema_version"].default
        now = shape(model)
        was = recorded.get(path)
        if was is None or version > was["schema_version"]:
            if not update:
                problems.append(f"{path}: record its shape at schema_version {version} (RSK_UPDATE_SNAPSHOTS=1)")
            recorded[path], changed = {"schema_version": version, "shape": now}, True
            continue
        if version < was["schema_version"]:
            problems.append(f"{path}: schema_version {version} is older than the recorded {was['schema_version']}")
            continue
        gone = broken(was["shape"], now)
        if gone:
            problems.append(f"{path}: its shape changed under schema_version {version} ({'; '.join(gone[:5])}): "
                            "bump its schema_version, say so in CHANGELOG.md, and record it")  # fmt: skip
        elif now != was["shape"]:  # keys added: the same version; recorded when asked
            recorded[path] = {"schema_version": version, "shape": now}
            changed = True
    if update and changed and not problems:
        SNAPSHOT.write_text(json.dumps(recorded, indent=1, sort_keys=True) + "\n")
    assert not problems, "\n".join(problems)


def test_a_removed_key_or_a_changed_type_is_a_change_and_an_added_key_is_not() -> None:
    old = {"a": "integer", "b": "string|null", "c[].d": "string"}
    assert broken(old, {**old, "e": "integer"}) == []
    assert broken(old, {**old, "b": "string"}) == []  # narrower: every reader of the old shape reads it
    assert broken(old, {"a": "string", "b": "string|null"}) == ["a: integer became string", "c[].d: gone"]


@pytest.mark.parametrize("path", ["rsk.ops.info.TargetInfo", "rsk.ops.leases.LeaseList"])
def test_the_shapes_read_types_where_an_agent_meets_them(path: str) -> None:
    got = shape(_model(path))
    if path.endswith("TargetInfo"):
        assert got["policy.max_active_jobs"] == "integer|null" and got["policy.partitions"] == "array|null"
    else:
        assert got["leases[].start"] == "null|time"
