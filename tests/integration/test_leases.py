"""Leases on the lab: one held allocation whose GPUs rsk's controller shares among steps.

Every claim is checked from what the steps themselves recorded (their node, CUDA_VISIBLE_DEVICES,
SLURM_STEP_GPUS, start and end times), from Slurm, and from the cluster's files: never from rsk's own
summary alone.
"""

from __future__ import annotations

import json
import re
import subprocess
import threading
import time
from collections.abc import Iterator
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from rsk.errors import Exit
from tests.conftest import Lab, Ran, rsk
from tests.integration.helpers import CUT_AFTER_S, finished_output, grant, launch, launched

# what each step records: one "start" line (appended, so a step started twice would show two), its node
# and GPUs as Slurm gave them, then one "end" line
RECORD = (
    'echo "start $(date +%s.%N) node=$SLURMD_NODENAME cvd=$CUDA_VISIBLE_DEVICES sg=$SLURM_STEP_GPUS" '
    '>> "$RSK_RUN_DIR/record"; sleep {secs}; echo "end $(date +%s.%N)" >> "$RSK_RUN_DIR/record"'
)


def open_lease(project: str, name: str, *options: str) -> dict[str, Any]:
    r = rsk("lease", "open", name, "--target", "lab", "--project", project, "--partition", "gpu", "--json", *options)
    return launched(r)


def step(project: str, lease: str, *options: str, secs: int = 2, command: tuple[str, ...] | None = None) -> Ran:
    cmd = command or ("sh", "-c", RECORD.format(secs=secs))
    return launch(project, "--lease", lease, *options, command=cmd)


def lease_info(project: str, name: str) -> dict[str, Any]:
    r = rsk("lease", "status", name, "--target", "lab", "--project", project, "--json")
    assert r.rc == 0, r.err
    return dict(json.loads(r.out)["leases"][0])


def wait_running(
    project: str, name: str, timeout: float = 90, states: tuple[str, ...] = ("running",)
) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        info = lease_info(project, name)
        if info["state"] in states:
            return info
        time.sleep(0.5)
    raise AssertionError(f"lease {name} did not start: {info}")


def records(lab: Lab, project: str, rid: str, idx: int = 0) -> list[str]:
    r = lab.ssh(f"cat {lab.root_sh}/runs/{project}/{rid}/t{idx}/record 2>/dev/null || true")
    return [line for line in r.stdout.splitlines() if line]


def close(project: str, name: str) -> dict[str, Any]:
    r = rsk("lease", "close", name, "--target", "lab", "--project", project, "--json")
    assert r.rc == 0, r.err
    return dict(json.loads(r.out))


@pytest.fixture
def leases(lab: Lab, project: str) -> Iterator[list[str]]:
    """Names of leases the test opens; every one is closed afterwards, so the lab's GPUs come back."""
    names: list[str] = []
    yield names
    for name in names:
        rsk("lease", "close", name, "--target", "lab", "--project", project, "--json")


def parse_record(lines: list[str]) -> tuple[float, float, str, set[int], set[int]]:
    starts = [line for line in lines if line.startswith("start ")]
    ends = [line for line in lines if line.startswith("end ")]
    assert len(starts) == 1 and len(ends) == 1, f"a step must start and end exactly once: {lines}"
    words = dict(w.split("=", 1) for w in starts[0].split()[2:] if "=" in w)
    cvd = {int(x) for x in words.get("cvd", "").split(",") if x}
    sg = {int(x) for x in words.get("sg", "").split(",") if x}
    return float(starts[0].split()[1]), float(ends[0].split()[1]), words["node"], cvd, sg


def test_twenty_one_gpu_steps_share_two_nodes_of_four_gpus(
    lab: Lab, project: str, leases: list[str], tmp_path: Path
) -> None:
    grant(project, "--gpu-hours", "20")
    lease = open_lease(project, "pool", "--nodes", "2", "--gpus", "4", "--cpus", "4", "--mem", "2000",
                       "--time", "15", "--drain", "1", "--verbose")  # fmt: skip
    leases.append("pool")
    assert lease["allowed_by"]["kind"] == "grant" and lease["plan"]["kind"] == "lease"
    assert lease["plan"]["gpus"] == 4 and lease["plan"]["nodes"] == 2
    # charged at worst case for the whole allocation: 2 nodes x 4 GPUs x 15 min
    reserved = json.loads(rsk("grant", "list", "--project", project, "--json").out)["grants"][0]["gpu_hours_reserved"]
    assert abs(reserved - 2.0) < 1e-6
    wait_running(project, "pool", timeout=300)  # the whole lab: it starts once every other suite's job lets go
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text("".join(
        json.dumps({"key": f"s{i:02d}", "argv": ["sh", "-c", RECORD.format(secs=4)], "gpus": 1, "mem": "200M",
                    "time": 3}) + "\n" for i in range(20)
    ))  # fmt: skip
    body = launched(rsk("launch", "--target", "lab", "--project", project, "--lease", "pool", "--tasks", str(tasks),
                        "-r", "twenty", "--json"))  # fmt: skip
    assert body["allowed_by"]["kind"] == "lease" and len(body["tasks"]) == 20
    assert all(t["job_id"].startswith(f"{lease['job_id']}s") for t in body["tasks"])
    w = rsk("wait", "--batch", "twenty", "--target", "lab", "--project", project, "--timeout", "300", "--json")
    assert w.rc == 0, w.out + w.err
    assert {j["state"] for j in json.loads(w.out)["jobs"]} == {"succeeded"}
    spans = []
    for idx in range(20):
        start, end, node, cvd, sg = parse_record(records(lab, project, "twenty", idx))
        assert node in ("n1", "n2") and len(sg) == 1 and cvd == sg, (node, cvd, sg)
        spans.append((start, end, node, next(iter(sg))))
    # no GPU was ever held by two live steps
    for i, a in enumerate(spans):
        for b in spans[i + 1 :]:
            if (a[2], a[3]) == (b[2], b[3]):
                assert a[1] <= b[0] or b[1] <= a[0], f"GPU {a[2]}:{a[3]} held twice: {a} {b}"
    # at most 8 at once, and the lease really was shared (several at once)
    most = max(sum(1 for s in spans if s[0] <= t < s[1]) for t in (sp[0] for sp in spans))
    assert 4 <= most <= 8, most
    st = json.loads(rsk("status", "--target", "lab", "--project", project, "--json").out)
    steps = [j for j in st["jobs"] if j["request_id"] == "twenty"]
    assert len(steps) == 20 and {j["lease"] for j in steps} == {"pool"}
    # the grant paid for the lease only; closing settles it to what the allocation held
    report = close(project, "pool")
    leases.remove("pool")
    assert report["result"] == "cancelled" and report["settled"]
    g = json.loads(rsk("grant", "list", "--project", project, "--json").out)["grants"][0]
    assert g["gpu_hours_reserved"] == 0 and 0 < g["gpu_hours_spent"] < 2.0
    assert g["jobs_spent"] == 1  # the lease; its twenty steps cost no jobs of the grant
    # and the close says what the lease cost, as the books have it: what it held, nothing still reserved
    assert report["cost"]["gpu_hours_used"] == pytest.approx(g["gpu_hours_spent"], abs=0.01), report
    assert report["cost"]["gpu_hours_reserved"] == 0 and report["cost"]["cpu_hours_used"] > 0


def test_gpus_of_a_lease_name_the_steps_holding_them(lab: Lab, project: str, leases: list[str]) -> None:
    grant(project, "--gpu-hours", "5")
    opened = open_lease(project, "inv", "--nodes", "1", "--gpus", "4", "--cpus", "4", "--mem", "1000", "--time",
                        "10", "--drain", "1")  # fmt: skip
    assert opened["plan"] is None and opened["plan_hash"]  # as rsk launch: the whole plan only with --verbose
    leases.append("inv")
    wait_running(project, "inv")
    info = lease_info(project, "inv")  # times as every answer says them: ISO 8601, 10 min apart
    start, end = (datetime.fromisoformat(info[k]) for k in ("start", "end"))
    assert info["start"].endswith("Z") and end - start == timedelta(minutes=10), info
    jobs = {}
    for rid, n in (("one", "1"), ("two", "2")):
        jobs[rid] = launched(step(project, "inv", "-r", rid, "--gpus", n, "--mem", "100", "--time", "5",
                                  secs=120))["job_id"]  # fmt: skip
    given: dict[str, set[int]] = {}
    deadline = time.monotonic() + 60
    while len(given) < 2 and time.monotonic() < deadline:
        for rid in jobs:
            lines = records(lab, project, rid)
            if lines:
                given[rid] = {int(x) for x in lines[0].split("sg=")[1].split(",")}
        time.sleep(0.5)
    assert len(given) == 2
    inv = json.loads(rsk("gpus", "--lease", "inv", "--target", "lab", "--project", project, "--json").out)
    held: dict[str, set[int]] = {}
    for node in inv["nodes"]:
        for g in node["gpus"]:
            if g["state"] == "held":
                assert g["project"] == project and g["job_id"] == jobs[g["request_id"]]
                assert g["type"] == "fake" and re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", g["since"]), g
                held.setdefault(g["request_id"], set()).add(g["index"])
    assert held == given
    assert inv["total"] == 4 and inv["free"] == 1
    # cancel: a running step as its own Slurm step, the lease and the other step go on
    c = rsk("cancel", jobs["one"], "--target", "lab", "--project", project, "--json")
    assert c.rc == 0 and json.loads(c.out)["results"][0]["result"] == "cancelled", c.out + c.err
    w = json.loads(rsk("wait", jobs["one"], "--target", "lab", "--project", project, "--json").out)
    assert w["jobs"][0]["state"] == "cancelled"
    assert lease_info(project, "inv")["running"] == 1


def test_a_killed_controller_is_replaced_and_starts_nothing_twice(lab: Lab, project: str, leases: list[str]) -> None:
    grant(project, "--gpu-hours", "5")
    open_lease(project, "phoenix", "--nodes", "1", "--gpus", "4", "--cpus", "4", "--mem", "1000", "--time", "10",
               "--drain", "1")  # fmt: skip
    leases.append("phoenix")
    wait_running(project, "phoenix")
    rids = [f"k{i}" for i in range(6)]
    for rid in rids:  # four run at once, two wait for a GPU
        launched(step(project, "phoenix", "-r", rid, "--gpus", "1", "--mem", "100", "--time", "3", secs=15))
    ldir = f"{lab.root_sh}/leases/{project}/phoenix"
    deadline = time.monotonic() + 30
    while sum(bool(records(lab, project, r)) for r in rids) < 4 and time.monotonic() < deadline:
        time.sleep(0.5)
    first = lab.ssh(f"cat {ldir}/ctl.pid").stdout.strip()
    assert lab.ssh(f"kill -9 {first}").returncode == 0
    for rid in rids:
        w = rsk("wait", "--request-id", rid, "--target", "lab", "--project", project, "--timeout", "120", "--json")
        assert w.rc == 0 and json.loads(w.out)["jobs"][0]["state"] == "succeeded", w.out
        start, end, _, _, _ = parse_record(records(lab, project, rid))  # exactly one start each
        assert end - start >= 15  # the running ones were not killed with the controller
    assert lab.ssh(f"cat {ldir}/ctl.pid").stdout.strip() != first
    log = launched(rsk("logs", lease_job(project, "phoenix"), "--target", "lab", "--project", project, "--json"))
    assert "starting a new one" in log["text"]


def lease_job(project: str, name: str) -> str:
    return str(lease_info(project, name)["job_id"])


def test_steps_outlive_their_allocation_and_a_new_lease_takes_them_over(
    lab: Lab, project: str, leases: list[str]
) -> None:
    grant(project, "--gpu-hours", "5")
    opened = open_lease(project, "relay", "--nodes", "1", "--gpus", "1", "--cpus", "1", "--mem", "500", "--time",
                        "10", "--drain", "1")  # fmt: skip
    first = opened["job_id"]
    leases.append("relay")
    wait_running(project, "relay")
    assert rsk("lease", "drain", "relay", "--target", "lab", "--project", project).rc == 0
    queued = [launched(step(project, "relay", "-r", f"q{i}", "--gpus", "1", "--mem", "100", "--time", "2"))["job_id"]
              for i in range(2)]  # fmt: skip
    lab.ssh(f"scancel {first}")  # the allocation ends under them (a time limit, a node failure)
    deadline = time.monotonic() + 30
    while lease_info(project, "relay")["state"] != "ended" and time.monotonic() < deadline:
        time.sleep(0.5)
    st = json.loads(rsk("status", "--target", "lab", "--project", project, "--json").out)
    mine = {j["job_id"]: j for j in st["jobs"] if j["job_id"] in queued}
    assert {j["state"] for j in mine.values()} == {"pending"}
    assert {j["where"] for j in mine.values()} == {"(LeaseEnded)"}  # they say why they wait
    refused = step(project, "relay", "--gpus", "1")
    assert refused.rc == Exit.USAGE and "has ended" in refused.err
    # its own request id again: that lease has ended on Slurm's word, never a replay of a lease that takes no step
    again = rsk("lease", "open", "relay", "--target", "lab", "--project", project, "--partition", "gpu", "--json",
                "-r", opened["request_id"], "--nodes", "1", "--gpus", "1", "--cpus", "1", "--mem", "500", "--time",
                "10", "--drain", "1")  # fmt: skip
    assert again.rc == Exit.USAGE and json.loads(again.out)["error"] == "lease-ended", again.out
    # without a request id, the same name opens it anew (the earlier open's id is taken only while it lives)
    second = open_lease(project, "relay", "--nodes", "1", "--gpus", "1", "--cpus", "1", "--mem", "500", "--time",
                        "10", "--drain", "1")["job_id"]  # fmt: skip
    assert second != first
    for i in range(2):
        w = rsk("wait", "--request-id", f"q{i}", "--target", "lab", "--project", project, "--timeout", "120", "--json")
        assert w.rc == 0 and json.loads(w.out)["jobs"][0]["state"] == "succeeded", w.out
        parse_record(records(lab, project, f"q{i}"))


def test_what_a_lease_refuses(lab: Lab, project: str, leases: list[str]) -> None:
    grant(project, "--gpu-hours", "5", "--jobs", "1")
    open_lease(project, "small", "--nodes", "1", "--gpus", "2", "--cpus", "2", "--mem", "1000", "--time", "3",
               "--drain", "0")  # fmt: skip
    leases.append("small")
    wait_running(project, "small")
    never = step(project, "small", "--gpus", "3")
    assert never.rc == Exit.REJECTED and "never run in lease small" in never.err  # the agent asks for less
    assert "open a larger lease" in never.err
    assert step(project, "small", "--nodes", "2").rc == Exit.REJECTED
    # a step longer than what is left of the lease (overrun refuse, the default)
    time.sleep(2)
    long = step(project, "small", "--gpus", "1", "--time", "3")
    assert long.rc == Exit.REJECTED and "outlive" in long.err
    assert step(project, "missing", "--gpus", "1").rc == Exit.USAGE
    # another project has no such lease: leases are the project's own
    assert step("other" + project[:8], "small", "--gpus", "1").rc == Exit.USAGE
    # deny rules still apply inside a lease
    r = rsk("deny-rule", "add", "--project", project, "--command", "*forbidden*", "--reason", "no", "--yes")
    assert r.rc == 0, r.err
    denied = step(project, "small", "--gpus", "1", "--time", "1", command=("echo", "forbidden"))
    assert denied.rc == Exit.DENIED
    # the grant allowed one job (the lease); steps are not jobs of the grant
    cursor = json.loads(rsk("events", "--target", "lab", "--project", project, "--json").out)["cursor"]
    ok = launched(step(project, "small", "-r", "hello", "--gpus", "1", "--time", "1", command=("echo", "hello")))
    # a step's output, events and journal lines, like a job's
    tail = finished_output(project, ok["job_id"])
    assert tail["text"] == "hello\n" and tail["end"]["exit_code"] == 0
    ev = json.loads(rsk("events", "--after", cursor, "--target", "lab", "--project", project, "--json").out)
    assert any(e.get("job_id") == ok["job_id"] for e in ev["events"]), ev
    journal = json.loads(rsk("journal", "--target", "lab", "--project", project, "--json").out)["events"]
    # the controller journals the start of every step, sealed as rsk's own lines
    assert [e["event"] for e in journal if e["request_id"] == "hello"] == ["intent", "accepted", "step-started"]


def test_a_lease_drains_before_its_end_and_clips_steps_that_would_outlive_it(
    lab: Lab, project: str, leases: list[str]
) -> None:
    grant(project, "--gpu-hours", "5")
    shape = ("--nodes", "1", "--gpus", "1", "--cpus", "1", "--mem", "500", "--time", "2")
    # "short" clips a step to what is left of it; "late" drains in its last 2 minutes
    open_lease(project, "short", *shape, "--drain", "0", "--overrun", "clip")
    open_lease(project, "late", *shape[:-1], "3", "--drain", "2")  # draining after its first minute
    # a lease whose drain covers its whole time could run no step: refused before anything is decided
    useless = rsk("lease", "open", "useless", "--target", "lab", "--project", project, "--partition", "gpu", "--json",
                  *shape, "--drain", "2")  # fmt: skip
    assert useless.rc == Exit.USAGE and "could run no step" in useless.err, useless.out + useless.err
    leases += ["short", "late"]
    info = wait_running(project, "short")
    time.sleep(2)
    clipped = launched(step(project, "short", "-r", "clipped", "--gpus", "1", "--mem", "100", "--time", "2", secs=1))
    w = rsk("wait", clipped["job_id"], "--target", "lab", "--project", project, "--timeout", "60", "--json")
    assert w.rc == 0 and json.loads(w.out)["jobs"][0]["state"] == "succeeded", w.out
    log = launched(rsk("logs", str(info["job_id"]), "--target", "lab", "--project", project, "--json"))["text"]
    assert f"step {clipped['job_id']} (clipped) started on n" in log and "for 1 min" in log, log
    # in its last minutes a lease starts nothing new, and says so
    late = wait_running(project, "late", states=("draining",))
    queued = launched(step(project, "late", "-r", "queued", "--gpus", "1", "--mem", "100", "--time", "1"))
    time.sleep(2)
    st = json.loads(rsk("status", queued["job_id"], "--target", "lab", "--project", project, "--json").out)
    assert st["jobs"][0]["state"] == "pending" and st["jobs"][0]["where"] == "(LeaseDraining)", st
    log = launched(rsk("logs", str(late["job_id"]), "--target", "lab", "--project", project, "--json"))["text"]
    assert "draining: the allocation ends in under 2 min" in log
    assert records(lab, project, "queued") == []


def test_a_forged_lease_directory_runs_nothing(lab: Lab, project: str) -> None:
    """An agent's own job writes a lease file naming itself: the cluster plans the step, the ledger
    knows no such lease, so nothing is queued."""
    grant(project, "--gpu-hours", "1", "--jobs", "1")
    job = launched(launch(project, "-r", "host", command=("sleep", "120")))["job_id"]
    ldir = f"{lab.root_sh}/leases/{project}/fake"
    lab.ssh(f"mkdir -p {ldir}/q {ldir}/run {ldir}/end && echo 'job={job} rid=host plan=x partition=cpu account= "
            f"qos= nodes=1 cpus=1 mem=1000 gpus=0 time=60 drain=0 overrun=refuse' > {ldir}/lease")  # fmt: skip
    r = step(project, "fake", "--time", "1", command=("true",))
    assert r.rc == Exit.USAGE and "not open in this project's ledger" in r.err
    assert lab.ssh(f"ls {ldir}/q").stdout.strip() == ""
    rsk("cancel", job, "--target", "lab", "--project", project)


@pytest.mark.serial  # cuts every SSH session of the cluster user
def test_a_connection_cut_during_a_step_submit_replays(
    lab: Lab, project: str, leases: list[str], slow_lock: Path
) -> None:
    grant(project, "--gpu-hours", "5")
    open_lease(project, "cut", "--nodes", "1", "--gpus", "1", "--cpus", "1", "--mem", "500", "--time", "10",
               "--drain", "1")  # fmt: skip
    leases.append("cut")
    wait_running(project, "cut")
    # while the submit waits for the lock, every SSH session of the cluster user is cut
    killer = threading.Timer(CUT_AFTER_S, lambda: subprocess.run(["pkill", "-KILL", "-f", "sshd: rsklab"], check=False))
    killer.start()
    cut = step(project, "cut", "-r", "once", "--gpus", "1", "--mem", "100", "--time", "2")
    killer.join()
    assert cut.rc == Exit.CONNECT, cut.out + cut.err
    assert "--request-id once" in cut.err
    slow_lock.unlink()
    # reconcile settles whatever the cut left (an intent with its queue entry, or with none); never queues
    assert rsk("reconcile", "--target", "lab", "--project", project, "--json").rc == 0
    again = launched(step(project, "cut", "-r", "once", "--gpus", "1", "--mem", "100", "--time", "2"))
    entries = lab.ssh(f"cat {lab.root_sh}/leases/{project}/cut/*/*.step | grep -c ' rid=once '").stdout.strip()
    assert entries == "1"
    w = rsk("wait", again["job_id"], "--target", "lab", "--project", project, "--timeout", "60", "--json")
    assert w.rc == 0, w.out
    parse_record(records(lab, project, "once"))


def test_a_step_written_into_the_queue_by_the_account_runs_journaled_and_shows_as_undecided(
    lab: Lab, project: str, leases: list[str]
) -> None:
    """Anything running as the cluster account (a job, an ssh session) can write a queue entry: the
    controller starts it, but journals it first, and every view says the ledger never decided it."""
    grant(project, "--gpu-hours", "1")
    lease = open_lease(project, "inj", "--nodes", "1", "--gpus", "1", "--cpus", "1", "--mem", "500", "--time", "5",
                       "--drain", "1")  # fmt: skip
    leases.append("inj")
    wait_running(project, "inj")
    ok = launched(step(project, "inj", "-r", "mine", "--gpus", "1", "--mem", "100", "--time", "1", secs=1))
    ljob = lease["job_id"]
    ldir = f"{lab.root_sh}/leases/{project}/inj"
    # a step of the account's own making: its script, then its line (the entry the controller looks for)
    lab.ssh(f"cd {ldir} && echo 'echo injected' > q/000090.sh && echo 'seq=000090 job={ljob}s90 rid=evil idx=0 "
            "task= plan=0000 gpus=1 cpus=1 mem=100 time=1' > q/000090.step")  # fmt: skip
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        st = json.loads(rsk("status", "--target", "lab", "--project", project, "--json").out)
        evil = [j for j in st["jobs"] if j["job_id"] == f"{ljob}s90"]
        if evil and evil[0]["state"] in ("succeeded", "failed", "lost"):
            break
        time.sleep(1)
    assert evil, st
    assert lab.ssh(f"cat {lab.root_sh}/runs/{project}/evil/t0/stdout").stdout.strip() == "injected"  # it ran
    assert evil[0]["lease"] == "inj" and evil[0]["request_id"] == "evil" and evil[0]["undecided"], evil
    assert any(f"undecided step {ljob}s90" in w and "docs/security.md" in w for w in st["warnings"]), st
    mine = next(j for j in st["jobs"] if j["job_id"] == ok["job_id"])
    assert mine["undecided"] == "" and mine["starts"] == 1, mine  # the step the ledger allowed is not flagged
    shown = rsk("status", "--target", "lab", "--project", project)
    assert "UNDECIDED" in shown.out and f"undecided step {ljob}s90" in shown.out.replace("\n", " "), shown.out
    info = lease_info(project, "inj")
    assert info["undecided"] == [f"{ljob}s90"], info
    text = rsk("lease", "status", "inj", "--target", "lab", "--project", project)
    assert "UNDECIDED" in text.out and f"undecided step {ljob}s90" in text.err, text.out + text.err
    watch = json.loads(rsk("watch", "--once", "--json", "--target", "lab", "--project", project).out)
    assert any(f"undecided step {ljob}s90" in w for s in watch["statuses"] for w in s["warnings"]), watch
    # the controller's line is in the journal, sealed like rsk's own
    j = json.loads(rsk("journal", "--target", "lab", "--project", project, "--json").out)
    assert j["chain_ok"], j["chain_problems"]
    assert [e["event"] for e in j["events"] if e["job_id"] == f"{ljob}s90"] == ["step-started"]
    assert [e["event"] for e in j["events"] if e["job_id"] == ok["job_id"]][-1] == "step-started"
    # the allowed step, once it ended, copied into a new slot to run it again under its own id
    w = rsk("wait", ok["job_id"], "--target", "lab", "--project", project, "--timeout", "60", "--json")
    assert w.rc == 0, w.out
    cp = lab.ssh(
        f"cd {ldir} && f=$(grep -l ' rid=mine ' end/*.step) && cp \"${{f%.step}}.sh\" q/000091.sh "
        "&& sed 's/^seq=[0-9]*/seq=000091/' \"$f\" > q/000091.step.tmp && mv q/000091.step.tmp q/000091.step"
    )
    assert cp.returncode == 0, cp.stderr
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        st = json.loads(rsk("status", "--target", "lab", "--project", project, "--json").out)
        mine = next(j for j in st["jobs"] if j["job_id"] == ok["job_id"])
        if mine["starts"] == 2:
            break
        time.sleep(1)
    assert "started 2 times" in mine["undecided"], mine
    assert any(f"undecided step {ok['job_id']}" in w for w in st["warnings"]), st["warnings"]


def test_a_step_whose_memory_leaves_gpus_idle_is_warned_and_a_queued_step_says_what_it_waits_for(
    lab: Lab, project: str, leases: list[str]
) -> None:
    """Steps take CPUs and memory from their lease's node as well as GPUs: a step asking all of a node's memory
    runs alone while the lease's other GPUs sit idle. The launch says so (and the shape that would not), and a
    step queued behind it says what it waits for."""
    grant(project, "--gpu-hours", "2")
    open_lease(project, "mem", "--nodes", "1", "--gpus", "2", "--cpus", "2", "--mem", "600", "--time", "5",
               "--drain", "1")  # fmt: skip
    leases.append("mem")
    wait_running(project, "mem")
    first = launched(step(project, "mem", "-r", "big1", "--gpus", "1", "--mem", "600", "--time", "3", secs=60))
    said = " ".join(first["warnings"])
    assert "at most 1 such step(s) run at once (bounded by its memory)" in said, first
    assert "1 GPU(s) sit idle" in said and "--cpus 1 --mem 300M" in said, said
    second = launched(step(project, "mem", "-r", "big2", "--gpus", "1", "--mem", "600", "--time", "3", secs=1))
    deadline = time.monotonic() + 60
    where = ""
    while time.monotonic() < deadline:
        st = json.loads(rsk("status", second["job_id"], "--target", "lab", "--project", project, "--json").out)
        where = st["jobs"][0]["where"]
        if "600 MB of memory (0 of 600 free)" in where:
            break
        time.sleep(1)
    assert "it asks 600 MB of memory (0 of 600 free)" in where, where
    # a step of the fair shape is told nothing
    fair = launched(step(project, "mem", "-r", "fair", "--gpus", "1", "--cpus", "1", "--mem", "300", "--time", "3"))
    assert fair["warnings"] == [], fair
    # cancel takes a queued step out of its lease's queue: it never starts
    c = rsk("cancel", "-r", "big2", "--target", "lab", "--project", project, "--json")
    assert c.rc == 0 and [r["result"] for r in json.loads(c.out)["results"]] == ["cancelled"], c.out + c.err
    st = json.loads(rsk("status", second["job_id"], "--target", "lab", "--project", project, "--json").out)
    assert st["jobs"][0]["state"] == "cancelled", st


def test_opening_the_same_lease_again_without_a_request_id_answers_with_it(
    lab: Lab, project: str, leases: list[str]
) -> None:
    """A repeated `rsk lease open NAME` (a lost answer, a timeout) is the same request: the card that waits
    for the human, then the lease itself; never a second card or a second allocation."""
    shape = ("--nodes", "1", "--gpus", "1", "--cpus", "1", "--mem", "300", "--time", "3", "--drain", "1")
    r = rsk("lease", "open", "again", "--target", "lab", "--project", project, "--partition", "gpu", "--json", *shape)
    assert r.rc == Exit.PENDING, r.out + r.err
    card = json.loads(r.out)["card_id"]
    r2 = rsk("lease", "open", "again", "--target", "lab", "--project", project, "--partition", "gpu", "--json", *shape)
    assert r2.rc == Exit.PENDING and json.loads(r2.out)["card_id"] == card, r2.out
    assert json.loads(r2.out)["new_card"] is False
    rsk("withdraw", card, "--target", "lab", "--project", project, "--json")
    grant(project, "--gpu-hours", "1")
    first = open_lease(project, "twice", *shape)
    leases.append("twice")
    second = open_lease(project, "twice", *shape)
    assert second["status"] == "replayed" and second["job_id"] == first["job_id"], second
    assert second["request_id"] == first["request_id"]
    close(project, "twice")
    third = open_lease(project, "twice", *shape)  # closed: opening it again is a new lease
    assert third["status"] == "submitted" and third["job_id"] != first["job_id"], third


def test_waiting_on_a_lease_card_returns_once_the_lease_runs(lab: Lab, project: str, leases: list[str]) -> None:
    """A lease no grant covers files a card; the agent waits on it as the answer says. Once a human approves, that
    wait opens the lease and returns when it runs (`open`, exit 0, how to queue steps), not when its time is over."""
    r = rsk("lease", "open", "carded", "--target", "lab", "--project", project, "--partition", "gpu", "--nodes", "1",
            "--gpus", "1", "--cpus", "1", "--mem", "500", "--time", "10", "--json")  # fmt: skip
    pending = json.loads(r.out)
    assert r.rc == Exit.PENDING and pending["next"] == f"rsk wait {pending['card_id']} --project {project}", pending
    assert f"rsk lease open carded --request-id {pending['request_id']}" in pending["hint"], pending["hint"]
    leases.append("carded")
    assert rsk("approve", pending["card_id"], "--project", project, "--yes").rc == 0
    w = rsk("wait", pending["card_id"], "--target", "lab", "--project", project, "--timeout", "240", "--json")
    answer = json.loads(w.out)
    assert w.rc == 0 and answer["status"] == "open", answer
    assert answer["hint"].startswith("lease carded is open: queue steps with `rsk launch --lease carded -- CMD`")
    assert lease_info(project, "carded")["state"] in ("starting", "running")
    ran = launched(step(project, "carded", "--gpus", "1", "--mem", "100", "--time", "2", secs=1))
    assert ran["allowed_by"]["kind"] == "lease"
