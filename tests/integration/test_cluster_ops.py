"""Batches, user scripts, status, cancel, reconcile and events against the lab cluster."""

from __future__ import annotations

import json
import time
from pathlib import Path

from rsk.errors import Exit
from tests.conftest import Lab, rsk
from tests.integration.helpers import finished_output, grant, grant_view, jfield, launch, launched


def status(project: str) -> dict[str, dict[str, object]]:
    r = rsk("status", "--target", "lab", "--project", project, "--all", "--json")  # every job, at any size
    assert r.rc == 0, r.err
    return {f"{j['request_id']}/{j['task'] or ''}": j for j in json.loads(r.out)["jobs"]}


def wait_states(project: str, want: dict[str, str], timeout: float = 120) -> dict[str, dict[str, object]]:
    deadline = time.monotonic() + timeout
    while True:
        st = status(project)
        if all(k in st and st[k]["state"] == v for k, v in want.items()):
            return st
        assert time.monotonic() < deadline, f"states did not reach {want}: {st}"
        time.sleep(1)


def test_batch_is_one_plan_one_card_each_task_its_own_job(lab: Lab, project: str, tmp_path: Path) -> None:
    tasks = tmp_path / "tasks.jsonl"
    lines = [{"key": f"k{i}", "argv": ["sh", "-c", 'echo "task $T"'], "env": {"T": str(i)}} for i in range(5)]
    lines.append({"key": "gpu", "script": "echo $CUDA_VISIBLE_DEVICES", "gpus": 1})
    tasks.write_text("\n".join(json.dumps(x) for x in lines) + "\n")
    args = ("launch", "--target", "lab", "--project", project, "--partition", "gpu", "--time", "5",
            "--mem", "100M", "--request-id", "sweep", "--tasks", str(tasks), "--json")  # fmt: skip
    pending = rsk(*args)
    assert pending.rc == Exit.PENDING
    card = json.loads(pending.out)["card_id"]
    cards = json.loads(rsk("approvals", "-p", project, "--json").out)["cards"]
    assert len(cards) == 1 and cards[0]["plan"]["jobs"] == 6
    assert rsk("approve", card, "-p", project, "--yes").rc == 0
    result = json.loads(rsk(*args).out)
    jobs = {t["task"]: t["job_id"] for t in result["tasks"]}
    assert sorted(jobs) == ["gpu", "k0", "k1", "k2", "k3", "k4"]
    assert len(set(jobs.values())) == 6
    for i in range(5):
        assert finished_output(project, jobs[f"k{i}"])["text"] == f"task {i}\n"
    assert finished_output(project, jobs["gpu"])["text"].strip().isdigit()
    journal = lab.journal(project)
    assert sum(" ev=intent " in line for line in journal) == 6
    assert sum(" ev=accepted " in line for line in journal) == 6
    # the same batch again: nothing new
    again = json.loads(rsk(*args).out)
    assert again["status"] == "replayed" and {t["job_id"] for t in again["tasks"]} == set(jobs.values())
    assert len(lab.journal(project)) == 12
    st = wait_states(project, {f"sweep/k{i}": "succeeded" for i in range(5)})
    assert st["sweep/gpu"]["gpus"] == 1


def test_batch_grant_charges_every_task(lab: Lab, project: str, tmp_path: Path) -> None:
    grant(project, "--jobs", "3")
    tasks = tmp_path / "t.jsonl"
    tasks.write_text("\n".join(json.dumps({"key": f"t{i}", "argv": ["true"]}) for i in range(4)))
    r = rsk("launch", "-t", "lab", "-p", project, "--tasks", str(tasks), "--json")
    assert r.rc == Exit.PENDING  # 4 jobs do not fit a budget of 3
    tasks.write_text("\n".join(json.dumps({"key": f"t{i}", "argv": ["true"]}) for i in range(3)))
    assert rsk("launch", "-t", "lab", "-p", project, "--tasks", str(tasks), "--json").rc == 0
    view = json.loads(rsk("grant", "list", "-p", project, "--json").out)["grants"][0]
    assert view["jobs_spent"] == 3 and view["jobs_left"] == 0


def test_bad_tasks_file_is_refused_with_its_line(lab: Lab, project: str, tmp_path: Path) -> None:
    tasks = tmp_path / "t.jsonl"
    for body, text in (
        ('{"key": "a", "argv": ["x"]}\n{"key": "a", "argv": ["y"]}', "line 2: key 'a' appears twice"),
        ('{"key": "../x", "argv": ["x"]}', "key '../x' is not valid"),
        ('{"key": "a"}', "exactly one of argv"),
        ("not json", "line 1: not valid JSON"),
    ):
        tasks.write_text(body)
        r = rsk("launch", "-t", "lab", "-p", project, "--tasks", str(tasks))
        assert r.rc == Exit.USAGE and text in r.err, r.err
    assert lab.journal(project) == []


def test_script_sbatch_resources_join_the_plan(lab: Lab, project: str, tmp_path: Path) -> None:
    grant(project, "--jobs", "2", "--max-gpus", "1")
    script = tmp_path / "job.sbatch"
    script.write_text("#!/bin/bash\n#SBATCH --partition=gpu\n#SBATCH --gres=gpu:2\n#SBATCH --time=00:05:00\n"
                      'echo "bash=${BASH_VERSION:+yes} gpus=$CUDA_VISIBLE_DEVICES"\n')  # fmt: skip
    r = rsk("launch", "-t", "lab", "-p", project, "--script", str(script), "--json")
    assert r.rc == Exit.PENDING  # 2 GPUs from the script exceed the grant's ceiling of 1
    cards = json.loads(rsk("approvals", "-p", project, "--json").out)["cards"]
    assert cards[0]["plan"]["gpus"] == 2 and cards[0]["plan"]["time_min"] == 5
    assert "GPUs 2 > ceiling 1" in cards[0]["closest_why"][0]
    script.write_text(script.read_text().replace("gpu:2", "gpu:1"))
    job = launched(rsk("launch", "-t", "lab", "-p", project, "--script", str(script), "--json"))
    text = finished_output(project, job["job_id"])["text"]
    assert text.startswith("bash=yes gpus=") and text.strip().split("=")[-1].isdigit()


def test_script_with_unplannable_sbatch_lines_is_refused(lab: Lab, project: str, tmp_path: Path) -> None:
    grant(project, "--jobs", "2")
    script = tmp_path / "job.sbatch"
    script.write_text("#!/bin/sh\n#SBATCH --exclusive\ntrue\n")
    r = rsk("launch", "-t", "lab", "-p", project, "--script", str(script))
    assert r.rc == Exit.USAGE and "#SBATCH --exclusive is not something rsk can plan" in r.err
    script.write_text("#!/bin/sh\n#SBATCH --time=10\ntrue\n")
    r = rsk("launch", "-t", "lab", "-p", project, "--time", "20", "--script", str(script))
    assert r.rc == Exit.USAGE and "disagree" in r.err
    assert lab.journal(project) == []


def test_status_reports_outcomes_without_accounting(lab: Lab, project: str) -> None:
    grant(project, "--jobs", "4")
    ok = launched(launch(project, "-r", "ok"))["job_id"]
    launched(launch(project, "-r", "bad", command=("sh", "-c", "exit 7")))
    launched(launch(project, "-r", "long", command=("sleep", "300")))
    st = wait_states(project, {"ok/": "succeeded", "bad/": "failed", "long/": "running"})
    assert st["bad/"]["exit_code"] == 7
    assert st["ok/"]["job_id"] == ok
    r = rsk("cancel", "-t", "lab", "-p", project, "--request-id", "long", "--json")
    assert [x["result"] for x in json.loads(r.out)["results"]] == ["cancelled"]
    st = wait_states(project, {"long/": "cancelled"})
    assert st["long/"]["signal"] == "TERM"
    # a job Slurm has forgotten keeps its final state from the run markers
    line = "v=1 t=x ev=accepted rid=gone plan=p job=999999 res=1,1,1,0,1"
    lab.ssh(f"printf '{line}\\n' >> {lab.root_sh}/journal/{project}.log"
            f" && mkdir -p {lab.root_sh}/runs/{project}/gone && printf 'rc=0 sig=TERM t=1 elapsed=61 limit=60\\n'"
            f" > {lab.root_sh}/runs/{project}/gone/ended")  # fmt: skip
    assert status(project)["gone/"]["state"] == "timed-out"


def test_cancel_touches_only_this_projects_rsk_jobs(lab: Lab, project: str) -> None:
    grant(project, "--jobs", "2")
    mine = launched(launch(project, "-r", "mine", command=("sleep", "300")))["job_id"]
    foreign = lab.ssh("sbatch --parsable --wrap 'sleep 300'").stdout.strip()
    other = "o" + project
    grant(other, "--jobs", "1")
    theirs = launched(launch(other, "-r", "theirs", command=("sleep", "300")))["job_id"]
    try:
        # a journal line that claims the foreign job: its Slurm name lacks the identity, so it is left alone
        lab.ssh(f"printf 'v=1 t=x ev=accepted rid=fake plan=p job={foreign}\\n' >> {lab.root_sh}/journal/{project}.log")
        for job in (foreign, theirs):
            r = rsk("cancel", job, "-t", "lab", "-p", project, "--json")
            doc = json.loads(r.out)  # an error document, as every refusal is: its reason in `error`
            assert r.rc == Exit.USAGE and doc["error"] == "not-ours" and doc["hint"], r.out
            assert [x["result"] for x in doc["results"]] == ["not-ours"], r.out
        # every command given a job id of another project, or of no job at all, says so the same way
        hint = json.loads(rsk("cancel", theirs, "-t", "lab", "-p", project, "--json").out)["hint"]
        for job in (theirs, "99999999"):
            for argv in (["wait", job], ["logs", job], ["status", job], ["fetch", job, "--result"], ["cancel", job]):
                said_ = rsk(*argv, "-t", "lab", "-p", project, "--json")
                said = json.loads(said_.out)
                assert said_.rc == Exit.USAGE and said["error"] == "not-ours", (argv, said_.out)
                assert said["hint"] == hint, (argv, said)
                assert said["message"].startswith(f"job {job} was not launched through rsk in project {project}"), said
        live = lab.ssh("squeue -h -o %i").stdout.split()
        assert foreign in live and theirs in live
        r = rsk("cancel", mine, "-t", "lab", "-p", project, "--json")
        assert [x["result"] for x in json.loads(r.out)["results"]] == ["cancelled"]
        again = rsk("cancel", mine, "-t", "lab", "-p", project, "--json")
        assert [x["result"] for x in json.loads(again.out)["results"]] == ["finished"]
    finally:
        lab.ssh(f"scancel {mine} {foreign} {theirs}")


def test_cancel_of_a_batch_of_hundreds_cancels_every_task_once_and_journals_each(
    lab: Lab, project: str, tmp_path: Path
) -> None:
    """A batch of 300 sleeping tasks (most of them pending): one cancel takes every task, answers for each on Slurm's
    word, and journals each; a second cancel finds them all finished."""
    n = 300
    lab.set_policy(f"max_active_jobs = {n}\n")
    grant(project, "--jobs", str(n))
    tasks = tmp_path / "t.jsonl"
    tasks.write_text("".join(json.dumps({"key": f"k{i}", "argv": ["sleep", "600"]}) + "\n" for i in range(n)))
    shape = ("-t", "lab", "-p", project, "-r", "many", "--time", "15", "--mem", "10M", "--tasks", str(tasks), "--json")
    plan = json.loads(rsk("plan", *shape).out)  # a big batch: its first 50 tasks, and how many more
    assert len(plan["plan"]["tasks"]) == 50 and plan["tasks_omitted"] == n - 50 and plan["jobs"] == n
    assert len(json.loads(rsk("plan", *shape, "--all").out)["plan"]["tasks"]) == n  # every one, asked
    r = rsk("launch", *shape, "--all")
    jobs = {t["task"]: t["job_id"] for t in launched(r)["tasks"]}
    assert len(set(jobs.values())) == n
    try:
        c = rsk("cancel", "-t", "lab", "-p", project, "--batch", "many", "--json", "--all")
        assert c.rc == 0, c.out + c.err
        results = json.loads(c.out)["results"]
        assert json.loads(c.out)["counts"] == {"cancelled": n}
        assert sorted(x["job_id"] for x in results) == sorted(jobs.values())
        assert [x["task"] for x in results] == [f"k{i}" for i in range(n)]  # in the batch's order (k2 before k10)
        assert {x["result"] for x in results} == {"cancelled"} and {x["task"] for x in results} == set(jobs)
        active = lab.ssh("squeue -h -r -t PENDING,RUNNING,SUSPENDED -o %i").stdout.split()
        assert not set(active) & set(jobs.values())
        cancelled = [line for line in lab.journal(project) if " ev=cancelled rid=many " in line]
        assert sorted(jfield(line, "job") or "" for line in cancelled) == sorted(jobs.values())
        deadline = time.monotonic() + 120  # a busy lab's nodes may still be ending some (COMPLETING): wait them out
        while time.monotonic() < deadline and set(lab.ssh("squeue -h -r -o %i").stdout.split()) & set(jobs.values()):
            time.sleep(2)
        again = json.loads(rsk("cancel", "-t", "lab", "-p", project, "--batch", "many", "--json").out)
        assert len(again["results"]) == 50 and {x["result"] for x in again["results"]} == {"finished"}
        assert again["results_omitted"] == n - 50 and again["counts"] == {"finished": n}
        assert status(project)["many/k0"]["state"] == "cancelled"
    finally:
        lab.ssh(f"scancel {' '.join(sorted({j.split('_')[0] for j in jobs.values()}))}")


def test_cancelling_a_sweep_midway_charges_only_what_ran_and_gives_the_rest_back(
    lab: Lab, project: str, tmp_path: Path
) -> None:
    """A sweep of 30 tasks, 2 at a time, cancelled after a few ran: Slurm keeps the tasks that never started as one
    pending record, which it forgets MinJobAge after the cancel (30 s on the lab, no accounting). The cancel itself
    reads what Slurm says of them, so they settle at 0 and give their job count back (`grant add --help`), and the
    answer says what the request was charged; nothing settles at its worst case."""
    n = 30
    lab.set_policy(f"max_active_jobs = {n}\n")
    grant(project, "--jobs", str(n), "--cpu-hours", "5")
    tasks = tmp_path / "t.jsonl"
    tasks.write_text("".join(json.dumps({"key": f"k{i}", "argv": ["sleep", "8"]}) + "\n" for i in range(n)))
    r = rsk("launch", "-t", "lab", "-p", project, "-r", "half", "--time", "2", "--mem", "10M", "--tasks", str(tasks),
            "--max-running", "2", "--json")  # fmt: skip
    jobs = {t["task"]: t["job_id"] for t in launched(r)["tasks"]}
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            if sum(j["state"] == "succeeded" for j in status(project).values()) >= 2:
                break
            time.sleep(2)
        c = rsk("cancel", "-t", "lab", "-p", project, "--batch", "half", "--json")
        assert c.rc == 0, c.out + c.err
        assert rsk("wait", "-t", "lab", "-p", project, "--batch", "half", "--json").rc == Exit.UNSUCCESSFUL
        time.sleep(35)  # past the lab's MinJobAge: Slurm forgets every task; the pending ones it never listed
        status(project)
        g = grant_view(project)
        assert g["jobs_at_worst"] == 0, g
        assert g["jobs_spent"] <= 8 and g["cpu_hours_spent"] < 0.05, g  # what ran: a few tasks of 8 s
        # status says what the request cost, from the books (U2): CPU-h and GPU-h used, nothing left reserved
        st = json.loads(rsk("status", "-t", "lab", "-p", project, "--batch", "half", "--json").out)
        assert (
            st["costs"]["half"]["cpu_hours_used"] == g["cpu_hours_spent"]
            and not st["costs"]["half"]["cpu_hours_reserved"]
        )
        assert "CPU-h, 0.00 GPU-h used" in rsk("status", "-t", "lab", "-p", project, "--batch", "half").out
        charged = json.loads(c.out)["charged"]  # the cancel's answer said so
        assert [x["request_id"] for x in charged] == ["half"]
        assert charged[0]["never_started"] >= n - 8 and charged[0]["cpu_hours_used"] < 0.05, charged
    finally:
        lab.ssh(f"scancel {' '.join(sorted({j.split('_')[0] for j in jobs.values()}))}")


def test_reconcile_resolves_open_intents(lab: Lab, project: str) -> None:
    job = lab.ssh(f"sbatch --parsable --job-name rsk:{project}:sent --wrap 'sleep 60'").stdout.strip()
    lab.ssh(f"mkdir -p {lab.root_sh}/journal && printf 'v=1 t=x ev=intent rid=sent plan=p1\\nv=1 t=x ev=intent "
            f"rid=lost plan=p2\\n' >> {lab.root_sh}/journal/{project}.log")  # fmt: skip
    r = rsk("reconcile", "-t", "lab", "-p", project, "--json")
    items = {i["request_id"]: i for i in json.loads(r.out)["items"]}
    assert items["sent"]["result"] == "reconciled" and items["sent"]["job_id"] == job
    assert items["lost"]["result"] == "abandoned"
    assert json.loads(rsk("reconcile", "-t", "lab", "-p", project, "--json").out)["items"] == []
    lab.ssh(f"scancel {job}")


def test_events_wait_for_changes_with_a_cursor(lab: Lab, project: str) -> None:
    grant(project, "--jobs", "1")
    first = json.loads(rsk("events", "-t", "lab", "-p", project, "--json").out)
    assert first["events"] == []
    job = launched(launch(project, "-r", "ev", command=("sleep", "2")))["job_id"]
    seen: list[dict[str, object]] = []
    cursor = first["cursor"]
    deadline = time.monotonic() + 90
    while not any(e["kind"] == "state" and e["new_state"] == "succeeded" for e in seen):
        assert time.monotonic() < deadline, seen
        r = rsk("events", "-t", "lab", "-p", project, "--after", cursor, "--wait", "30", "--json")
        body = json.loads(r.out)
        seen += body["events"]
        cursor = body["cursor"]
    kinds = [(e["kind"], e.get("new_state") or e["journal"]["event"]) for e in seen]
    assert ("journal", "intent") in kinds and ("journal", "accepted") in kinds
    assert all(e["job_id"] in (job, None) for e in seen)
    bad = rsk("events", "-t", "lab", "-p", project, "--after", "nonsense", "--json")
    assert bad.rc == Exit.USAGE
