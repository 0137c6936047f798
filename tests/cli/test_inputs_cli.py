"""What an agent sends and the files rsk reads, through the rsk command without a cluster: every bad input
is a typed error with its exit code and a hint, refused before anything is filed or sent, and rsk's own
files are left as they were."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from rsk.errors import Exit
from tests.conftest import ROOT, rsk

# a target that does not exist: every refusal below must come before rsk looks for one
NOWHERE = ("--target", "nowhere")
# which GPUs a job sees, or how they are numbered: CUDA, ROCm, HIP, HSA, OpenCL (AMD), oneAPI (Level Zero, SYCL)
GPU_SELECTION = ("CUDA_VISIBLE_DEVICES", "NVIDIA_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES",
                 "HSA_VISIBLE_DEVICES", "HABANA_VISIBLE_DEVICES", "GPU_DEVICE_ORDINAL", "CUDA_DEVICE_ORDER",
                 "ZE_AFFINITY_MASK", "ZE_ENABLE_PCI_ID_DEVICE_ORDER", "ZE_FLAT_DEVICE_HIERARCHY",
                 "ONEAPI_DEVICE_SELECTOR", "SYCL_DEVICE_FILTER", "SYCL_DEVICE_ALLOWLIST")  # fmt: skip


def refused(args: list[str], project: str, home: Path, rc: Exit = Exit.USAGE) -> str:
    r = rsk(args[0], "--project", project, *NOWHERE, *args[1:])  # before any `--`: after it, the command's
    assert r.rc == rc, (args, r.rc, r.out, r.err)
    assert "Traceback" not in r.err and "error:" in r.err and "hint:" in r.err, r.err
    assert not (home / "projects" / project / "ledger.json").exists()  # no card, no charge, nothing decided
    return r.err


@pytest.mark.parametrize("name", GPU_SELECTION)
def test_gpu_visibility_variables_are_refused_in_env_and_task_env(
    name: str, rsk_env: Path, project: str, tmp_path: Path
) -> None:
    err = refused(["launch", "--env", f"{name}=0,1,2,3", "--", "true"], project, rsk_env)
    assert name in err and "--gpus" in err
    tasks = tmp_path / "t.jsonl"
    tasks.write_text(json.dumps({"key": "a", "argv": ["true"], "env": {name: "0"}}) + "\n")
    assert name in refused(["launch", "--tasks", str(tasks)], project, rsk_env)


def test_the_cluster_refuses_the_same_environment_names_as_the_client() -> None:
    from rsk.request.inputs import GPU_SELECTION as CLIENT_GPU
    from rsk.request.inputs import RESERVED_ENV, reserved

    assert all(reserved(n, CLIENT_GPU) for n in GPU_SELECTION) and set(CLIENT_GPU) <= set(RESERVED_ENV)
    assert not any(reserved(n) for n in ("VISIBLE", "DEVICES", "CUDA_HOME", "OMP_NUM_THREADS", "path", "slurm_x"))
    text = (ROOT / "remote" / "submit.sh").read_text()
    m = re.search(r"^RESERVED_ENV='([^']*)'$", text, flags=re.MULTILINE)
    assert m is not None
    assert m.group(1).split(" ") == list(RESERVED_ENV)  # word for word, in the same order


def test_a_nul_byte_in_a_script_a_task_or_an_env_value_is_refused(rsk_env: Path, project: str, tmp_path: Path) -> None:
    script = tmp_path / "job.sh"
    script.write_bytes(b"#!/bin/sh\necho ok\0; rm -rf ~\n")
    assert "NUL" in refused(["launch", "--script", str(script)], project, rsk_env)
    for line in ({"key": "a", "argv": ["echo", "ok\0x"]}, {"key": "a", "argv": ["true"], "env": {"A": "1\0"}}):
        tasks = tmp_path / "t.jsonl"
        tasks.write_text(json.dumps(line) + "\n")
        assert "NUL" in refused(["launch", "--tasks", str(tasks)], project, rsk_env)


def test_a_nul_byte_in_an_argument_or_env_value_is_refused_where_requests_are_built() -> None:
    # the MCP server and the CLI build requests here (a process's own argv cannot hold a NUL)
    from rsk.errors import UsageError
    from rsk.request.spec import LaunchSpec, build_request

    for spec in (LaunchSpec(argv=["echo", "a\0b"]), LaunchSpec(argv=["true"], env=["A=1\0"]),
                 LaunchSpec(argv=["true"], workdir="/tmp\0/x")):  # fmt: skip
        with pytest.raises(UsageError, match="NUL"):
            build_request(spec, "p", "me")


def test_files_that_are_not_utf8_are_usage_errors(rsk_env: Path, project: str, tmp_path: Path) -> None:
    bad = tmp_path / "latin1"
    bad.write_bytes(b'{"key": "a", "argv": ["echo", "caf\xe9"]}\n')
    for option in ("--script", "--tasks"):
        err = refused(["launch", option, str(bad)], project, rsk_env)
        assert "not UTF-8" in err and str(bad) in err


@pytest.mark.parametrize(
    ("line", "says"),
    [
        ("[" * 100_000 + "]" * 100_000, "deeper than"),
        ('{"key": "a", "argv": ["true"], "gpus": 0, "gpus": 4}', "appears twice"),
        ('{"key": "a", "argv": ["true"], "gpus": true}', "gpus"),
        ('{"key": "a", "argv": ["true"], "nodes": "2"}', "nodes"),
        ('{"key": "a", "argv": ["true"], "cpus": NaN}', "NaN"),
    ],
    ids=["deep", "duplicate-key", "bool-as-number", "string-as-number", "nan"],
)
def test_task_lines_that_json_would_misread_are_usage_errors(
    line: str, says: str, rsk_env: Path, project: str, tmp_path: Path
) -> None:
    tasks = tmp_path / "t.jsonl"
    tasks.write_text(line + "\n")
    assert says in refused(["launch", "--tasks", str(tasks)], project, rsk_env)


def test_numbers_are_numbers_where_the_agent_supplies_them() -> None:
    from pydantic import ValidationError

    from rsk.ops.leases import LeaseSpec
    from rsk.request.spec import LaunchSpec

    for bad in ({"gpus": True}, {"nodes": "2"}, {"cpus": 1.5}):
        with pytest.raises(ValidationError):
            LaunchSpec(argv=["true"], **bad)  # type: ignore[arg-type]
        with pytest.raises(ValidationError):
            LeaseSpec(name="l", **bad)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ('{"schema_version": 4, "project": "P", "grants": ' + "[" * 5000 + "]" * 5000 + "}", "deeper than"),
        ('{"schema_version": 4, "project": "P", "project": "P"}', "appears twice"),
        ('{"schema_version": 4, "project": "P", "grants": [], "grants": [{"jobs": 1000}]}', "appears twice"),
        ('{"schema_version": true, "project": "P"}', "schema_version"),
    ],
    ids=["deep", "duplicate-key", "duplicate-list", "bool-version"],
)
def test_a_ledger_json_would_misread_is_a_state_error_and_is_left_as_it_is(
    text: str, says: str, rsk_env: Path, project: str
) -> None:
    path = rsk_env / "projects" / project / "ledger.json"
    path.parent.mkdir(parents=True)
    data = text.replace('"P"', json.dumps(project)).encode()
    path.write_bytes(data)
    for args in (["grant", "list", "--json"], ["approvals", "--json"]):
        r = rsk(*args, "--project", project)
        assert r.rc == Exit.STATE, (args, r.rc, r.err)
        assert says in r.err and "hint:" in r.err and "Traceback" not in r.err, r.err
    assert path.read_bytes() == data


@pytest.mark.parametrize(
    "anchors",
    [
        {"lab": {"line": "x", "seal": "ab"}},
        {"lab": {"line": True, "seal": "ab"}},
        {"lab": []},
        [1, 2],
        {"schema_version": 9, "targets": {}},
    ],
)
def test_a_damaged_journal_anchors_file_is_a_state_error_and_is_left_as_it_is(
    anchors: object, rsk_env: Path, project: str
) -> None:
    path = rsk_env / "projects" / project / "journal-anchors.json"
    path.parent.mkdir(parents=True)
    data = json.dumps(anchors).encode()
    path.write_bytes(data)
    r = rsk("journal", "--project", project, "--target", "lab")
    assert r.rc == Exit.STATE, (r.rc, r.err)
    assert "journal-anchors.json" in r.err and "hint:" in r.err and "Traceback" not in r.err, r.err
    assert path.read_bytes() == data


def test_a_journal_anchors_file_of_the_older_form_is_read() -> None:
    from rsk.ops.journal import Anchors
    from rsk.wire.safejson import loads

    raw = loads('{"lab": {"line": 12, "seal": "00ff"}}')
    assert Anchors.model_validate({"schema_version": 1, "targets": raw}).targets["lab"].line == 12


def test_a_chain_among_other_tasks_or_with_needs_is_refused_with_the_way_to_run_it(
    rsk_env: Path, project: str, tmp_path: Path
) -> None:
    tasks = tmp_path / "t.jsonl"
    chain = {"key": "train", "argv": ["python", "t.py"], "time": "1:00:00", "budget": "3:00:00"}
    tasks.write_text(json.dumps(chain) + "\n" + json.dumps({"key": "eval", "argv": ["e"], "needs": ["train"]}) + "\n")
    err = refused(["launch", "--tasks", str(tasks)], project, rsk_env)
    assert "is a chain" in err and "rsk wait --request-id" in err
    tasks.write_text(json.dumps(chain) + "\n")
    assert "on its line" in refused(["launch", "--tasks", str(tasks), "--budget", "4:00:00"], project, rsk_env)


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["fetch", "--request-id", "r1", "--json"], "--request-id"),
        (["fetch", "--result", "--json"], "JOB"),
        (["nosuch", "--json"], "nosuch"),
        (["launch", "--gpus", "many", "--json", "--", "true"], "--gpus"),
    ],
)
def test_a_refused_argv_answers_json_on_stdout_when_asked(
    args: list[str], says: str, rsk_env: Path, project: str
) -> None:
    r = rsk(*args)
    assert r.rc == Exit.USAGE, (r.rc, r.out, r.err)
    doc = json.loads(r.out)  # an agent that guessed an option still reads one JSON document
    assert doc["error"] == "usage" and doc["exit_code"] == Exit.USAGE and says in doc["message"], doc
    assert "--help" in doc["hint"] and "Traceback" not in r.err
    assert not (rsk_env / "projects" / project).exists()


def test_max_running_is_a_batchs_and_at_least_one(rsk_env: Path, project: str, tmp_path: Path) -> None:
    tasks = tmp_path / "sweep.jsonl"
    tasks.write_text("".join(json.dumps({"key": f"k{i}", "argv": ["true"]}) + "\n" for i in range(3)))
    assert "--tasks" in refused(["plan", "--max-running", "2", "--", "true"], project, rsk_env)  # one job: no batch
    assert "--lease" in refused(["launch", "--tasks", str(tasks), "--max-running", "2", "--lease", "dev"], project,
                                rsk_env)  # fmt: skip
    r = rsk("plan", "--project", project, *NOWHERE, "--tasks", str(tasks), "--max-running", "0")
    assert r.rc == Exit.USAGE and "Traceback" not in r.err, r.err
    big = tmp_path / "big.jsonl"  # more than a batch takes: refused before any cluster is asked
    big.write_text("".join(json.dumps({"key": f"k{i}", "argv": ["true"]}) + "\n" for i in range(10_001)))
    assert "at most 10000" in refused(["launch", "--tasks", str(big)], project, rsk_env)
