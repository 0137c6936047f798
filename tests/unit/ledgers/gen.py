"""Prints a ledger as the rsk of schema version N wrote it: that version's own models fill in its defaults.

Run against that version's code, never this one's (its models are the point):
    git archive COMMIT src | tar -x -C /tmp/vN
    PYTHONPATH=/tmp/vN/src python3 -P tests/unit/ledgers/gen.py N > tests/unit/ledgers/vN.json
Fields an older version does not know are dropped; a version whose shape moved is written its way here.
"""

import copy
import importlib
import sys

from pydantic import ValidationError

V = int(sys.argv[1])
T = "2026-01-01T00:00:00Z"
cost = {"gpu_hours_worst": 1.0, "cpu_hours_worst": 1.0}
plan = {
    "target": "lab",
    "cluster": "rsklab",
    "user": "rsklab",
    "root": "/home/rsklab/.rsk",
    "hostkey": "SHA256:x",
    "command": "python train.py",
    "argv": ["python", "train.py"],
    "kind": "argv",
    "workdir": "/home/rsklab",
    "code": "",
    "path": "",
    "partition": "gpu",
    "account": "",
    "qos": "",
    "nodes": 1,
    "cpus": 2,
    "mem_mb": 1000,
    "gpus": 8,
    "time_min": 60,
    "env": ["HOME=/home/rsklab"],
    "gpu_hours": 8.0,
    "cpu_hours": 2.0,
    "jobs": 1,
    "estimate_start": "now",
    "policy_verdict": "allow",
    "policy_reasons": [],
}
base = {
    "schema_version": V,
    "project": "p",
    "deny_rules": [
        {"id": "d-00000001", "reason": "8+ GPU jobs go through the lab lead", "gpus_at_least": 8, "created": T}
    ],
    "approvals": [
        {
            "id": "a-00000001",
            "plan_hash": "a" * 64,
            "uses_left": 0,
            "decided_by": "human",
            "decided_at": T,
            "note": "one-off",
            "card_id": "c-000000000001",
            "request_id": "r-appr",
            "uses": [
                {
                    "request_id": "r-appr",
                    "target": "lab",
                    "state": "submitted",
                    "jobs": {"201": cost},
                    "at": T,
                    "submitted_at": T,
                }
            ],
        }
    ],
    "grants": [
        {
            "id": "g-00000001",
            "targets": ["lab"],
            "max_gpus": 1,
            "gpu_hours": 10.0,
            "jobs": 10,
            "created": T,
            "created_by": "human",
        }
    ],
    "charges": [
        {
            "id": "ch-00000001",
            "grant_id": "g-00000001",
            "plan_hash": "b" * 64,
            "request_id": "r-run",
            "target": "lab",
            "gpu_hours": 2.0,
            "cpu_hours": 2.0,
            "jobs": 2,
            "state": "submitted",
            "job_costs": {"101": cost, "102": cost},
            "created": T,
            "submitted_at": T,
        },
        {
            "id": "ch-00000002",
            "grant_id": "g-00000001",
            "plan_hash": "f" * 64,
            "request_id": "r-held",
            "target": "lab",
            "gpu_hours": 1.0,
            "cpu_hours": 1.0,
            "jobs": 1,
            "state": "reserved",
            "created": T,
        },
    ],
    "cards": [
        {
            "id": "c-000000000002",
            "plan_hash": "c" * 64,
            "request_id": "r-denied",
            "requester": "agent",
            "filed_by": "rsklab",
            "status": "denied",
            "created": T,
            "target": "lab",
            "request": {"project": "p", "request_id": "r-denied", "argv": ["python", "train.py"]},
            "plan": plan,
            "decided_by": "human",
            "decided_at": T,
            "reason": "too big",
        }
    ],
    "leases": [
        {
            "id": "l-00000001",
            "name": "L",
            "target": "lab",
            "job_id": "300",
            "request_id": "r-lease",
            "plan_hash": "d" * 64,
            "allowed_by": "grant g-00000001",
            "resources": {"nodes": 1, "cpus": 1, "mem_mb": 500, "gpus": 0, "time_min": 60},
            "opened": T,
            "steps": [{"job_id": "300s1", "request_id": "r-step", "plan_hash": "e" * 64, "task": "", "at": T}],
        }
    ],
}
d = copy.deepcopy(base)
if V < 7:
    for x in d["leases"]:
        x.update(x.pop("resources"))
if V == 1:
    ch = d["charges"][0]
    ch["state"], ch["job_id"] = "spent", "101,102"
    del ch["job_costs"], ch["submitted_at"]
    a = d["approvals"][0]
    a["used_by"] = ["r-appr"]
    del a["uses"]
    p = d["cards"][0]["plan"]
    p["env_names"] = ["HOME"]
    del p["env"]
try:
    models = importlib.import_module("rsk.ledger.models")
except ImportError:
    models = importlib.import_module("rsk.ledger")

for _ in range(100):
    try:
        ledger = models.Ledger.model_validate(d)
        break
    except ValidationError as exc:
        errs = exc.errors()
        extra = [e for e in errs if e["type"] == "extra_forbidden"]
        if not extra:
            raise
        for e in extra:
            node = d
            for k in e["loc"][:-1]:
                node = node[k]
            node.pop(e["loc"][-1], None)
assert models.LEDGER_SCHEMA == V, models.LEDGER_SCHEMA
print(ledger.model_dump_json(indent=1))
