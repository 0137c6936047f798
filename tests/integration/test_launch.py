"""The spine: one launch through plan, ledger, expect and journal on the real lab cluster."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rsk.errors import Exit
from tests.conftest import Lab, rsk
from tests.integration.helpers import finished_output, grant, jfield, launch, launched


def test_launch_runs_as_cluster_user_and_journals_intent_and_outcome(lab: Lab, project: str) -> None:
    grant(project, "--target", "lab", "--jobs", "2")
    r = launch(project, "--request-id", "one", command=("sh", "-c", 'echo "user=$(whoami)"'))
    result = launched(r)
    assert result["status"] == "submitted"
    assert result["allowed_by"]["kind"] == "grant"
    job = result["job_id"]
    assert job.isdigit()
    assert finished_output(project, job)["text"] == "user=rsklab\n"
    events = [line.split(" ")[2] for line in lab.journal(project)]
    assert events == ["ev=intent", "ev=accepted"]
    assert f"job={job}" in lab.journal(project)[1]
    assert f"plan={result['plan_hash']}" in lab.journal(project)[0]


def test_each_launch_has_intent_and_outcome(lab: Lab, project: str) -> None:
    grant(project, "--jobs", "3")
    jobs = [launched(launch(project, "--request-id", f"r{i}"))["job_id"] for i in range(3)]
    lines = lab.journal(project)
    for i, job in enumerate(jobs):
        mine = [line for line in lines if f" rid=r{i} " in line]
        assert [m.split(" ")[2] for m in mine] == ["ev=intent", "ev=accepted"]
        assert jfield(mine[1], "job") == job


def test_no_covering_grant_submits_nothing(lab: Lab, project: str) -> None:
    r = launch(project, "--request-id", "nogrant")
    assert r.rc == Exit.PENDING, r.err
    body = json.loads(r.out)
    assert body["error"] == "approval-pending"
    assert body["card_id"].startswith("c-")
    assert lab.journal(project) == []
    assert lab.jobs_named(f"rsk:{project}:") == []


def test_grant_scoped_to_other_target_does_not_cover(lab: Lab, project: str) -> None:
    grant(project, "--target", "elsewhere", "--jobs", "5")
    r = launch(project)
    assert r.rc == Exit.PENDING
    assert lab.journal(project) == []


def test_gpu_launch_gets_cuda_visible_devices_from_slurm(lab: Lab, project: str) -> None:
    grant(project, "--jobs", "1")
    cvd = ("sh", "-c", 'echo "cvd=$CUDA_VISIBLE_DEVICES"')
    result = launched(launch(project, "--verbose", "--partition", "gpu", "--gpus", "2", command=cvd))
    assert result["plan"]["gpus"] == 2
    text = finished_output(project, result["job_id"])["text"].strip()
    devices = text.removeprefix("cvd=").split(",")
    assert len(devices) == 2 and all(d.isdigit() for d in devices), text


def test_plan_changed_between_plan_and_submit_is_refused(
    lab: Lab, project: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The policy changes on the cluster after planning: the expect step refuses and sbatch never runs."""
    import rsk.ops.launch as launch_mod

    grant(project, "--jobs", "5")
    real_allow = launch_mod.allow

    def allow_then_change_policy(*args, **kwargs):  # type: ignore[no-untyped-def]
        allowed = real_allow(*args, **kwargs)
        lab.set_policy("max_gpus = 8\n")
        return allowed

    monkeypatch.setattr(launch_mod, "allow", allow_then_change_policy)
    from rsk.errors import ConflictError
    from rsk.wire.protocol import Request

    with pytest.raises(ConflictError) as info:
        launch_mod.launch("lab", Request(project=project, request_id="changed", argv=["true"]))
    assert info.value.code == "plan-mismatch"
    assert lab.journal(project) == []
    assert lab.jobs_named(f"rsk:{project}:") == []
    # the charge was released: the grant has all its jobs left
    r = rsk("grant", "list", "--project", project, "--json")
    assert json.loads(r.out)["grants"][0]["jobs_left"] == 5


def test_a_launch_is_one_remote_program_that_submits_only_on_rsks_go(
    lab: Lab, project: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Plan and submit share one remote program: rsk dying while the ledger decides (no `go`) leaves
    nothing on the cluster, and the same request id then submits exactly once, still one program."""
    import rsk.ops.launch as launch_mod
    from rsk.cluster.transport import Connection
    from rsk.wire.protocol import Request

    grant(project, "--jobs", "5")
    real_allow = launch_mod.allow

    def allow_then_die(*args, **kwargs):  # type: ignore[no-untyped-def]
        real_allow(*args, **kwargs)
        raise KeyboardInterrupt  # the agent's process is killed after the ledger allowed, before the go

    monkeypatch.setattr(launch_mod, "allow", allow_then_die)
    request = Request(project=project, request_id="onego", argv=["true"])
    with pytest.raises(KeyboardInterrupt):
        launch_mod.launch("lab", request)
    assert lab.journal(project) == []
    assert lab.jobs_named(f"rsk:{project}:onego") == []

    monkeypatch.setattr(launch_mod, "allow", real_allow)
    programs: list[str] = []
    real_open = Connection.open

    def counting_open(self: Connection, command: str, *args, **kwargs):  # type: ignore[no-untyped-def]
        programs.append(command.rsplit(" ", 2)[-1])
        return real_open(self, command, *args, **kwargs)

    monkeypatch.setattr(Connection, "open", counting_open)
    result = launch_mod.launch("lab", request)
    assert result.status == "submitted"
    assert programs == ["launch"]  # one program on one channel, not a plan and then a submit
    assert [line.split(" ")[2] for line in lab.journal(project)] == ["ev=intent", "ev=accepted"]
    assert len(lab.jobs_named(f"rsk:{project}:onego")) == 1


def test_same_request_id_never_submits_twice(lab: Lab, project: str) -> None:
    grant(project, "--jobs", "5")
    first = launched(launch(project, "--request-id", "once"))
    again = launched(launch(project, "--request-id", "once"))
    assert again["status"] == "replayed"
    assert again["job_id"] == first["job_id"]
    assert len(lab.jobs_named(f"rsk:{project}:once")) <= 1
    assert [line.split(" ")[2] for line in lab.journal(project)] == ["ev=intent", "ev=accepted"]
    r = rsk("grant", "list", "--project", project, "--json")
    assert json.loads(r.out)["grants"][0]["jobs_spent"] == 1


def test_a_request_id_used_for_another_plan_names_the_jobs_it_ran(lab: Lab, project: str) -> None:
    # the same launch after an upgrade of rsk is another plan too: the answer says which job is the work's
    grant(project, "--jobs", "5")
    first = launched(launch(project, "--request-id", "twice"))
    other = launch(project, "--request-id", "twice", command=("echo", "other"))
    doc = json.loads(other.out)
    assert other.rc == Exit.CONFLICT and doc["error"] == "request-conflict", doc
    assert doc["jobs"] == [str(first["job_id"])] and "!" not in doc["message"], doc
    assert "rsk wait -r twice" in doc["hint"] and "do not launch it again" in doc["hint"], doc
    assert doc["differs"] == ["argv"] and "it differs in argv" in doc["message"], doc
    assert len(lab.jobs_named(f"rsk:{project}:twice")) <= 1


def test_a_request_id_that_ran_says_what_another_launch_of_it_changes_under_code(
    lab: Lab, project: str, tmp_path: Path
) -> None:
    grant(project, "--jobs", "5")
    code = tmp_path / "code"
    code.mkdir()
    (code / "train.py").write_text("print('hi')\n")
    (code / "old.txt").write_text("o\n")
    first = launched(launch(project, "-r", "ran-code", "--code", str(code), command=("python3", "train.py")))
    (code / "extra.txt").write_text("x\n")
    (code / "old.txt").unlink()
    (code / "train.py").write_text("print('fixed')\n")  # a fix: the same file, other content
    other = launch(project, "-r", "ran-code", "--code", str(code), "--time", "3", command=("python3", "train.py"))
    doc = json.loads(other.out)
    assert other.rc == Exit.CONFLICT and doc["error"] == "request-conflict", doc
    assert doc["differs"] == ["code", "time_min"] and doc["jobs"] == [str(first["job_id"])], doc
    assert doc["job_count"] == 1, doc
    assert doc["code_added"] == ["extra.txt"] and doc["code_removed"] == ["old.txt"], doc
    assert doc["code_changed"] == ["train.py"], doc
    assert "added under --code: extra.txt; gone under --code: old.txt; changed under --code: train.py" in doc["message"]
    planned = rsk("plan", "-t", "lab", "-p", project, "-r", "ran-code", "--code", str(code), "--json", "--",
                  "python3", "train.py")  # fmt: skip
    assert planned.rc == Exit.CONFLICT and json.loads(planned.out)["differs"] == ["code"], planned.out
    (code / "extra.txt").unlink()
    (code / "old.txt").write_text("o\n")
    (code / "train.py").write_text("print('hi')\n")
    again = launched(launch(project, "-r", "ran-code", "--code", str(code), command=("python3", "train.py")))
    assert again["status"] == "replayed" and again["job_id"] == first["job_id"]


def test_a_command_that_names_a_file_here_without_code_is_told_before_a_human_looks(
    lab: Lab, project: str, tmp_path: Path
) -> None:
    """`python3 train.py` from a directory that has train.py, without --code: the job would run in the cluster
    account's home, where train.py is not. The plan and the launch that files a card say so (and how to send it);
    with --code the same command says nothing."""
    (tmp_path / "train.py").write_text("print('hi')\n")
    scope = ("-t", "lab", "-p", project, "--json")
    planned = rsk("plan", *scope, "--", "python3", "train.py", cwd=tmp_path)
    said = json.loads(planned.out)["warnings"]
    assert planned.rc == 0 and len(said) == 1 and said[0].startswith("train.py is a file here"), planned.out
    assert "--code ." in said[0] and "rsk: warning: train.py is a file here" in planned.err
    pending = rsk("launch", *scope, "-r", "unsent", "--", "python3", "train.py", cwd=tmp_path)
    doc = json.loads(pending.out)
    assert pending.rc == Exit.PENDING and doc["warnings"] == said, doc
    sent = rsk("plan", *scope, "--code", ".", "--", "python3", "train.py", cwd=tmp_path)
    assert sent.rc == 0 and json.loads(sent.out)["warnings"] == [], sent.out
    elsewhere = rsk("plan", *scope, "--", "python3", "train.py", cwd=tmp_path.parent)  # no train.py there
    assert json.loads(elsewhere.out)["warnings"] == [], elsewhere.out


def test_hostile_arguments_and_environment_reach_the_job_byte_for_byte(lab: Lab, project: str) -> None:
    grant(project, "--jobs", "1")
    hostile = ["it's", 'a "quote"', "$(touch /tmp/pwned)", "`id`", "a;b", "*", "new\nline", "é ü 漢", "  sp  ", ""]
    value = "v $(x) `y` ; * 'q' \"d\"\nline2"
    r = launch(
        project,
        "--env",
        f"HOSTILE={value}",
        command=("sh", "-c", 'for a in "$@"; do printf "[%s]" "$a"; done; printf "{%s}" "$HOSTILE"', "sh", *hostile),
    )
    job = launched(r)["job_id"]
    text = finished_output(project, job)["text"]
    assert text == "".join(f"[{a}]" for a in hostile) + "{" + value + "}"


def test_unknown_target_is_a_usage_error(lab: Lab, project: str) -> None:
    r = rsk("launch", "--target", "nosuch", "--project", project, "--", "true")
    assert r.rc == Exit.USAGE
    assert "no target named 'nosuch'" in r.err
    assert "hint:" in r.err


def test_gpu_visibility_and_nul_bytes_are_refused_before_the_cluster_plans(
    lab: Lab, project: str, tmp_path: object
) -> None:
    """A 0-GPU job asking to see the node's GPUs, or a NUL that would make dash run other text than the
    plan binds: exit 2 with nothing filed, planned, journaled or submitted; the cluster refuses the same
    names when a request reaches it without the client's check."""
    from pathlib import Path

    from rsk.cluster.remote import remote_for
    from rsk.errors import UsageError
    from rsk.wire.protocol import Request, raise_for_error

    grant(project, "--jobs", "5", "--max-gpus", "0")
    script = Path(str(tmp_path)) / "job.sh"
    script.write_bytes(b"#!/bin/sh\necho allowed\0; nvidia-smi\n")
    for r in (launch(project, "--env", "CUDA_VISIBLE_DEVICES=0,1,2,3", command=("nvidia-smi",)),
              launch(project, "--env", "ROCR_VISIBLE_DEVICES=0"),
              rsk("launch", "--target", "lab", "--project", project, "--script", str(script))):  # fmt: skip
        assert r.rc == Exit.USAGE and "hint:" in r.err, r.out + r.err
    assert lab.journal(project) == [] and lab.jobs_named(f"rsk:{project}:") == []
    grants = json.loads(rsk("grant", "list", "--project", project, "--json").out)["grants"]
    assert grants[0]["jobs_spent"] == 0 and grants[0]["jobs_reserved"] == 0
    assert json.loads(rsk("approvals", "--project", project, "--json").out)["cards"] == []
    # straight to the cluster's planner, past the client's check: the same list refuses it there
    bare = Request(project=project, request_id="bare", argv=["true"], env=["GPU_DEVICE_ORDINAL=0"], requester="t")
    with remote_for("lab") as remote:
        out = remote.call("submit", "plan", stdin=bare.encode())
    with pytest.raises(UsageError, match="GPU_DEVICE_ORDINAL"):
        raise_for_error(out)
