"""rsk benchmarks: each bench measures rsk and a baseline in the same run, on the same lab cluster."""

from __future__ import annotations

import contextlib
import getpass
import json
import os
import re
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rsk.ledger.decide import Facts
    from rsk.ops.status import JobState

ROOT = Path(__file__).resolve().parent.parent
LAB = Path(os.environ.get("RSK_LAB_DIR", "/var/lib/rsk-lab"))
USER = os.environ.get("RSK_LAB_USER", "rsklab")
PORT = os.environ.get("RSK_LAB_PORT", "2222")
SSH = ["ssh", "-o", "BatchMode=yes", "-o", "StrictHostKeyChecking=yes",
       "-o", f"UserKnownHostsFile={LAB / 'known_hosts'}",
       "-i", str(LAB / "id_ed25519"), "-p", PORT, f"{USER}@127.0.0.1"]  # fmt: skip
WORK = Path(tempfile.mkdtemp(prefix="rsk-bench-"))
ENV = {
    **os.environ,
    "RSK_HOME": str(WORK / "home"),
    "RSK_TARGETS_PATH": str(WORK / "targets"),
    "PYTHONPATH": str(ROOT / "src"),
    "NO_COLOR": "1",
    "RSK_PYTHON": sys.executable,
    "RSK_BROKER": "off",
}  # fmt: skip  (direct unless a bench names its broker)
REMOTE_ROOT = f"~/.rsk-bench-{uuid.uuid4().hex[:6]}"
RUN = uuid.uuid4().hex[:4]  # request ids of this run: Slurm remembers a finished job's name for minutes
PROJECT = f"bench{RUN}"  # rsk names its jobs rsk:PROJECT:REQUEST: this run cancels only its own
WRAP = f"rsk-bench-{RUN}"  # the baselines' jobs, named so that only they are cancelled (one more sbatch flag)
RSK = [str(ROOT / "bin" / "rsk")]  # as installed: Python starts without site, rsk loads it if it runs here
rows: list[tuple[str, str, str, str, str]] = []
ratios: list[tuple[str, float, str]] = []


def run(cmd: list[str], **kw: object) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, capture_output=True, text=True, env=ENV, check=True, **kw)  # type: ignore[call-overload, no-any-return]


def timed(fn: Callable[[], object], n: int) -> list[float]:
    out = []
    for _ in range(n):
        t0 = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t0)
    return out


def ms(xs: list[float]) -> str:
    return f"{statistics.median(xs) * 1000:.0f} ms (n={len(xs)})"


def setup() -> None:
    (WORK / "targets").mkdir(parents=True)
    text = (
        (ROOT / "targets" / "lab.toml").read_text().replace('remote_root = "~/.rsk"', f'remote_root = "{REMOTE_ROOT}"')
    )
    if limit := os.environ.get("RSK_BENCH_COMMAND_TIMEOUT"):  # seconds one remote call may take (the target's: 120)
        text = re.sub(r"(?m)^command_timeout = .*$", f"command_timeout = {int(limit)}", text)
    (WORK / "targets" / "lab.toml").write_text(text)
    run([*RSK, "grant", "add", "-p", PROJECT, "--target", "lab", "--yes"])
    root = '"$HOME"/' + REMOTE_ROOT[2:]
    # room for the scale bench's sweeps (10,000 sleeping tasks queued at once, and a retry's)
    run([*SSH, f"mkdir -p {root} && echo 'max_active_jobs = 30000' > {root}/policy.conf"])
    run([*RSK, "doctor", "lab"])  # warms the connection path (nothing is deployed: each call ships its program)


def cancel_jobs() -> None:
    """Every job a bench left queued or running: the next bench starts on an idle lab."""
    # only this run's jobs, by id (the lab is shared): rsk's for its projects (PROJECT, and the scale bench's
    # PROJECTsN), the baselines' by their name
    mine = f"awk -v p=rsk:{PROJECT} -v w={WRAP} 'index($2, p) == 1 || $2 == w {{print $1}}'"
    subprocess.run([*SSH, f"squeue -h -u \"$(id -un)\" -o '%i %j' | {mine} | xargs -r scancel"], check=False)


def cleanup() -> None:
    cancel_jobs()
    subprocess.run([*SSH, f'rm -rf "$HOME"/{REMOTE_ROOT[2:]}'], check=False)


def bench_single() -> None:
    n = 10
    i = iter(range(10**6))
    rsk = timed(lambda: run([*RSK, "launch", "-t", "lab", "-p", PROJECT, "-r", f"s{RUN}{next(i)}", "--mem", "64M",
                             "--time", "1", "--json", "--", "true"]), n)  # fmt: skip
    base = timed(
        lambda: run([*SSH, "sbatch", "--parsable", f"--job-name={WRAP}", "--mem=64", "--time=1", "--wrap", "true"]), n
    )
    r = statistics.median(rsk) / statistics.median(base)
    rows.append(
        ("single launch", "rsk launch (plan, ledger, go, journal)", ms(rsk), "ssh HOST sbatch --wrap", ms(base))
    )
    ratios.append(("single", r, "target <= 1.5"))


def bench_batch() -> None:
    n = 200
    tasks = WORK / "tasks.jsonl"
    tasks.write_text("".join(json.dumps({"key": f"t{k}", "argv": ["true"]}) + "\n" for k in range(n)))
    rsk = timed(lambda: run([*RSK, "launch", "-t", "lab", "-p", PROJECT, "-r", f"b{uuid.uuid4().hex[:6]}",
                             "--mem", "64M", "--time", "1", "--tasks", str(tasks), "--json"]), 1)  # fmt: skip

    def seq() -> None:
        for _ in range(n):
            run([*SSH, "sbatch", "--parsable", f"--job-name={WRAP}", "--mem=64", "--time=1", "--wrap", "true"])

    base = timed(seq, 1)
    speedup = base[0] / rsk[0]
    rows.append(("batch of 200", "rsk launch --tasks (one remote program)", ms(rsk), "200 x ssh HOST sbatch", ms(base)))
    ratios.append(("batch", speedup, "speedup, target >= 20"))


def bench_dag() -> None:
    """A workflow of 200 tasks in 10 levels (each level needs the one before it whole: one job array per level)
    against a flat batch of 200 and against 200 single launches (measured on 5, times 40), in the same run."""
    n, levels = 200, 10
    width = n // levels

    def line(k: int) -> str:
        lv, i = divmod(k, width)
        needs = [f"t{(lv - 1) * width + j}" for j in range(width)] if lv else []
        return json.dumps({"key": f"t{lv * width + i}", "argv": ["true"], "needs": needs}) + "\n"

    dag, flat = WORK / "dag.jsonl", WORK / "flat.jsonl"
    dag.write_text("".join(line(k) for k in range(n)))
    flat.write_text("".join(json.dumps({"key": f"t{k}", "argv": ["true"]}) + "\n" for k in range(n)))

    def launch(tasks: Path) -> Callable[[], object]:
        return lambda: run([*RSK, "launch", "-t", "lab", "-p", PROJECT, "-r", f"d{uuid.uuid4().hex[:6]}", "--mem",
                            "64M", "--time", "1", "--tasks", str(tasks), "--json"])  # fmt: skip

    rsk = timed(launch(dag), 3)
    cancel_jobs()
    base = timed(launch(flat), 3)
    cancel_jobs()
    i = iter(range(10**6))
    single = timed(lambda: run([*RSK, "launch", "-t", "lab", "-p", PROJECT, "-r", f"ds{RUN}{next(i)}", "--mem",
                                "64M", "--time", "1", "--json", "--", "true"]), 5)  # fmt: skip
    rows.append((f"workflow of {n} in {levels} levels", "rsk launch --tasks (needs)", ms(rsk),
                 f"a flat batch of {n}", ms(base)))  # fmt: skip
    ratios.append(("dag-vs-batch", statistics.median(rsk) / statistics.median(base), "target <= 2"))
    ratios.append(("dag-vs-singles", statistics.median(single) * n / statistics.median(rsk), "speedup, target >= 20"))


def thousand_jobs() -> None:
    """1,000 rsk jobs of this run's project: 500 that finish at once and 500 that queue behind long ones
    (cancel_jobs removes them after the bench)."""
    for name, argv in (("fin", ["true"]), ("q", ["sleep", "600"])):
        tasks = WORK / f"{name}.jsonl"
        tasks.write_text("".join(json.dumps({"key": f"{name}{k}", "argv": argv}) + "\n" for k in range(500)))
        run([*RSK, "launch", "-t", "lab", "-p", PROJECT, "-r", f"st-{name}{uuid.uuid4().hex[:4]}", "--mem", "64M",
             "--time", "15", "--tasks", str(tasks), "--json"])  # fmt: skip
    time.sleep(20)


def bench_status() -> None:
    thousand_jobs()
    rsk = timed(lambda: run([*RSK, "status", "-t", "lab", "-p", PROJECT, "--json"]), 5)
    count = len(json.loads(run([*RSK, "status", "-t", "lab", "-p", PROJECT, "--json"]).stdout)["jobs"])
    base = timed(lambda: run([*SSH, "squeue", "--json"]), 5)
    rows.append(
        (f"status of {count} jobs", "rsk status --json (one remote call)", ms(rsk), "ssh HOST squeue --json", ms(base))
    )
    ratios.append(("status", statistics.median(rsk) / statistics.median(base), "target <= 1.5"))


def bench_ledger() -> None:
    sys.path.insert(0, str(ROOT / "src"))
    from rsk.ledger.decide import decide
    from rsk.ledger.models import Approval, Grant, Ledger
    from rsk.ledger.store import read_ledger

    f = _facts()
    at = datetime.now(UTC)
    result = []
    for approvals, grants in ((1_000, 100), (10_000, 1_000), (20_000, 2_000)):
        lg = Ledger(
            project="bench",
            approvals=[Approval(plan_hash=f"{k:064x}", decided_by="b") for k in range(approvals)],
            # every grant but the last misses (partition), so the decision reads them all
            grants=[Grant(partitions=["cpu"], expires=at + timedelta(days=1)) for _ in range(grants - 1)] + [Grant()],
        )
        d = timed(lambda lg=lg: decide(lg, f, at), 20)  # type: ignore[misc]
        path = WORK / f"ledger-{approvals}.json"
        path.write_text(lg.model_dump_json())
        load = timed(lambda path=path: read_ledger(path, "bench"), 5)  # type: ignore[misc]
        result.append((approvals, grants, statistics.median(d) * 1000, statistics.median(load) * 1000,
                       path.stat().st_size))  # fmt: skip
    for a, g, dms, lms, size in result:
        rows.append((f"ledger {a:,} approvals, {g:,} grants", "decision", f"{dms:.2f} ms",
                     f"load+validate ({size / 1e6:.1f} MB)", f"{lms:.0f} ms"))  # fmt: skip
    ratios.append(("ledger", result[1][2] / 20.0, "decision ms / 20 ms budget, target <= 1"))
    bench_ledger_step()


def bench_ledger_step() -> None:
    """A launch's ledger step (lock, load, decide, reserve a charge, write) on a project whose history
    holds 10,000 approvals and 1,000 grants: the used and expired ones went to the archive on the
    first write, so the step reads only what can still decide."""
    from rsk.ledger.decide import decide
    from rsk.ledger.guard import held_jobs, submitted_jobs
    from rsk.ledger.models import Approval, Charge, Grant, JobCost, Ledger, Use
    from rsk.ledger.store import Store

    f, at = _facts(), datetime.now(UTC)
    long_ago = at - timedelta(days=30)
    ended = JobCost(gpu_hours_worst=1, cpu_hours_worst=1, gpu_hours_used=0.5, cpu_hours_used=0.5)
    live_grant = Grant()
    expired = [Grant(partitions=["cpu"], expires=long_ago) for _ in range(999)]
    history = Ledger(
        project="bench-step",
        approvals=[Approval(plan_hash=f"{k:064x}", decided_by="b", uses_left=0, decided_at=long_ago,
                            uses=[Use(request_id=f"old{k}", target="lab", state="submitted", at=long_ago,
                                      submitted_at=long_ago, jobs={str(k): ended})])
                   for k in range(9_900)]
        + [Approval(plan_hash=f"{k:064x}", decided_by="b") for k in range(9_900, 10_000)],
        grants=[*expired, live_grant],
        charges=[Charge(grant_id=expired[k % 999].id, plan_hash=f"{k:064x}", request_id=f"c{k}", target="lab",
                        gpu_hours=1, cpu_hours=1, state="settled", job_costs={f"c{k}": ended}, submitted_at=long_ago)
                 for k in range(5_000)],
    )  # fmt: skip
    os.environ["RSK_HOME"] = str(WORK / "ledger-step-home")
    store = Store("bench-step")
    store.dir.mkdir(parents=True, exist_ok=True)
    store.path.write_text(history.model_dump_json())
    size_before = store.path.stat().st_size
    n = iter(range(10**6))

    def step() -> None:
        k = next(n)
        launch = Store("bench-step")  # each launch has its own, which remembers only what it read itself
        held_jobs(launch.view(), "lab")  # the held line, read before the cluster plans
        with launch.transaction() as ledger:  # the view's reading: the bytes are unchanged (ADR 0036)
            submitted_jobs(ledger, f"new{k}", "nope", "lab", launch.archive)  # a fresh request id, as in a launch
            d = decide(ledger, f, datetime.now(UTC))
            assert d.kind == "grant", d
            ledger.charges.append(Charge(grant_id=d.rule or "", plan_hash=f"new{k}", request_id=f"new{k}",
                                         target="lab", gpu_hours=1, cpu_hours=1))  # fmt: skip

    first = timed(step, 1)  # the first write moves the history to the archive
    size_after = store.path.stat().st_size
    steps = timed(step, 20)
    rows.append(("ledger step of a launch, 10k approvals / 1k grants", "load, decide, reserve, write (warm)",
                 ms(steps), f"first write: archive {size_before / 1e6:.1f} MB -> {size_after / 1e3:.0f} KB hot",
                 ms(first)))  # fmt: skip
    ratios.append(("ledger-step", statistics.median(steps) * 1000 / 20.0, "ms / 20 ms budget, target <= 1"))
    allhot = Ledger(project="bench-hot", approvals=[Approval(plan_hash=f"{k:064x}", decided_by="b")
                                                    for k in range(10_000)], grants=[Grant()] * 1_000)  # fmt: skip
    hot = Store("bench-hot")
    hot.dir.mkdir(parents=True, exist_ok=True)
    hot.path.write_text(allhot.model_dump_json())

    def hot_step() -> None:
        with Store("bench-hot").transaction() as ledger:  # a Store of its own: it parses the file
            d = decide(ledger, f, datetime.now(UTC))
            ledger.charges.append(Charge(grant_id=d.rule or "", plan_hash="x", request_id=f"h{next(n)}",
                                         target="lab", gpu_hours=1, cpu_hours=1))  # fmt: skip

    rows.append(("ledger step, 10k approvals all still live", "load, decide, reserve, write", ms(timed(hot_step, 5)),
                 "(nothing can be archived)", ""))  # fmt: skip


def bench_ledger_write() -> None:
    """The write of a launch's ledger step (a charge reserved in a transaction, the previous file kept as the
    backup) against the least a durable replace of the same bytes costs: one atomic write (temporary file,
    fsync, rename, fsync of the directory). Local: no cluster."""
    from rsk.ledger.models import Charge, Grant, Ledger
    from rsk.ledger.store import Store
    from rsk.local.atomic import write_atomic

    os.environ["RSK_HOME"] = str(WORK / "ledger-write-home")
    store = Store("bench-write")
    store.dir.mkdir(parents=True, exist_ok=True)
    store.path.write_text(Ledger(project="bench-write", grants=[Grant() for _ in range(20)]).model_dump_json())
    n = iter(range(10**6))

    def step() -> None:
        with Store("bench-write").transaction() as ledger:
            ledger.charges.append(Charge(grant_id="g", plan_hash=f"w{next(n)}", request_id=f"w{next(n)}",
                                         target="lab", gpu_hours=1, cpu_hours=1))  # fmt: skip

    step()
    data = store.path.read_bytes()
    other = WORK / "ledger-write-home" / "plain.json"
    mine: list[float] = []
    base: list[float] = []
    for _ in range(40):  # alternating: a shared disk's fsync time drifts, and both sides see the same drift
        mine += timed(step, 1)
        base += timed(lambda: write_atomic(other, data), 1)
    rows.append(("ledger write of a launch's step", "transaction: reserve, write, keep the backup", ms(mine),
                 "one atomic write of the same bytes", ms(base)))  # fmt: skip
    ratios.append(("ledger-write", statistics.median(mine) / statistics.median(base), "target <= 2"))


def _facts() -> Facts:
    from rsk.ledger.decide import Facts
    from rsk.wire.resources import Resources

    one = Resources(nodes=1, cpus=1, mem_mb=1, gpus=1, time_min=60)
    return Facts(target="lab", plan_hash="nope", request_id="r", partition="gpu", account="", resources=one,
                 commands=("python x",), qos="", active=0)  # fmt: skip


def bench_startup() -> None:
    base = timed(lambda: run([sys.executable, "-c", "pass"]), 10)
    for args in (["--version"], ["--help"]):
        t = timed(lambda args=args: run([*RSK, *args]), 10)  # type: ignore[misc]
        rows.append((f"rsk {args[0]}", "bin/rsk (as the installed shim)", ms(t), "python -c pass", ms(base)))
        ratios.append((f"startup{args[0].replace('--', '-')}", statistics.median(t) / statistics.median(base),
                       f"absolute {statistics.median(t) * 1000:.0f} ms, target < 150 ms"))  # fmt: skip
    # the CLI's whole import against the dependencies it cannot do without (what the package layout costs)
    cli = timed(lambda: run([sys.executable, "-c", "import rsk.cli.app"]), 10)
    deps = timed(lambda: run([sys.executable, "-c", "import typer"]), 10)
    rows.append(("import rsk.cli.app", "python -c 'import rsk.cli.app'", ms(cli), "import typer", ms(deps)))
    ratios.append(("import-cli", statistics.median(cli) / statistics.median(deps),
                   f"absolute {statistics.median(cli) * 1000:.0f} ms, target <= 1.5"))  # fmt: skip
    # --version through a warm broker: the client, the socket, the CLI's main in the broker for a caller
    sock = Path(f"/tmp/rsk-bench-{uuid.uuid4().hex[:6]}") / "b.sock"
    env = {**ENV, "RSK_BROKER": str(sock)}
    subprocess.run([*RSK, "broker", "start", "--idle", "120", "--socket", str(sock)], env=env, check=True,
                   capture_output=True)  # fmt: skip
    try:
        brokered = timed(lambda: subprocess.run([*RSK, "--version"], env=env, check=True, capture_output=True), 10)
    finally:
        subprocess.run([*RSK, "broker", "stop", "--socket", str(sock)], env=env, check=False, capture_output=True)
    direct = timed(lambda: subprocess.run([*RSK, "--version"], env={**ENV, "RSK_BROKER": "off"}, check=True,
                                          capture_output=True), 10)  # fmt: skip
    rows.append(("rsk --version, warm broker", "bin/rsk --version via the broker", ms(brokered),
                 "bin/rsk --version, no broker", ms(direct)))  # fmt: skip
    ratios.append(("version-brokered", statistics.median(brokered) / statistics.median(direct),
                   f"absolute {statistics.median(brokered) * 1000:.0f} ms, target <= 1.5"))  # fmt: skip


STAMP = 'date +%s.%N > "$RSK_RUN_DIR/began"'


def bench_step() -> None:
    """From `rsk launch --lease` returning to the step running (it records the time it began), in a lease with
    free GPUs, against a fresh sbatch of the same command reaching running, in the same run."""
    run([*RSK, "lease", "open", "bl", "-t", "lab", "-p", PROJECT, "--partition", "gpu", "--gpus", "2", "--cpus",
         "2", "--mem", "1000", "--time", "10", "--drain", "1", "--json"])  # fmt: skip
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        st = json.loads(run([*RSK, "lease", "status", "bl", "-t", "lab", "-p", PROJECT, "--json"]).stdout)
        if st["leases"][0]["state"] == "running":
            break
        time.sleep(0.5)
    root = '"$HOME"/' + REMOTE_ROOT[2:]
    n = 5
    step, fresh = [], []
    for k in range(n):
        run([*RSK, "launch", "-t", "lab", "-p", PROJECT, "--lease", "bl", "-r", f"step{RUN}{k}", "--gpus", "1", "--mem",
             "100M", "--time", "1", "--json", "--", "sh", "-c", STAMP])  # fmt: skip
        returned = time.time()
        began = ""
        waited = time.monotonic() + 120
        while not began:  # the step has written its time by the time a remote cat shows it
            assert time.monotonic() < waited, "the step did not start within 120 s"
            time.sleep(0.2)
            marker = f"{root}/runs/{PROJECT}/step{RUN}{k}/t0/began"
            began = subprocess.run([*SSH, f"cat {marker} 2>/dev/null"], capture_output=True, text=True,
                                   check=False).stdout.strip()  # fmt: skip
        step.append(max(float(began) - returned, 0.0))
        out = f"/tmp/rsk-bench-fresh-{uuid.uuid4().hex[:8]}"
        run([*SSH, f"sbatch --parsable --job-name={WRAP} --partition=gpu --gres=gpu:1 --mem=100 --time=1 "
             + shlex.quote(f"--wrap=date +%s.%N > {out}")])  # fmt: skip
        returned = time.time()
        began = ""
        waited = time.monotonic() + 120
        while not began:
            assert time.monotonic() < waited, "the fresh job did not start within 120 s"
            time.sleep(0.2)
            began = subprocess.run([*SSH, f"cat {out} 2>/dev/null && rm -f {out}"], capture_output=True, text=True,
                                   check=False).stdout.strip()  # fmt: skip
        fresh.append(max(float(began) - returned, 0.0))
    run([*RSK, "lease", "close", "bl", "-t", "lab", "-p", PROJECT, "--json"])
    rows.append(("step start (lease with free GPUs)", "rsk launch --lease returned -> running", ms(step),
                 "ssh sbatch returned -> running", ms(fresh)))  # fmt: skip
    ratios.append(("step-start", statistics.median(step), "seconds, target <= 1"))
    ratios.append(("step-start-vs-fresh", statistics.median(fresh) / max(statistics.median(step), 1e-3),
                   "speedup, target >= 5"))  # fmt: skip


@contextlib.contextmanager
def ssh_master() -> Iterator[list[str]]:
    """What a seasoned user types: OpenSSH over a ControlMaster connection (`ControlMaster auto` and
    `ControlPersist` in ssh_config), started once here and closed after. Yields the ssh command that uses it."""
    control = Path(tempfile.mkdtemp(prefix="rsk-bench-mux-")) / "m"
    mux = [SSH[0], "-o", f"ControlPath={control}", *SSH[1:]]
    subprocess.run([mux[0], "-o", "ControlMaster=yes", "-o", "ControlPersist=600", "-fN", *mux[1:]], check=True)
    try:
        yield mux
    finally:
        subprocess.run([mux[0], "-O", "exit", *mux[1:]], capture_output=True, check=False)


def bench_broker() -> None:
    """A warm broker against raw ssh and against OpenSSH's ControlMaster (single launch, plan, status), and 8
    agents launching at once through one broker against 8 direct processes."""
    sock = Path(f"/tmp/rsk-bench-{uuid.uuid4().hex[:6]}") / "b.sock"
    env = {**ENV, "RSK_BROKER": str(sock)}
    direct = ENV
    subprocess.run([*RSK, "broker", "start", "--idle", "600"], env=env, check=True, capture_output=True)
    try:
        bench_against_mux(env)  # leaves the 1,000 jobs of its status row queued for the next one
        i = iter(range(10**6))

        def brokered(*args: str) -> None:
            subprocess.run([*RSK, *args], env=env, check=True, capture_output=True)

        count = len(json.loads(run([*RSK, "status", "-t", "lab", "-p", PROJECT, "--json"]).stdout)["jobs"])
        st = timed(lambda: brokered("status", "-t", "lab", "-p", PROJECT, "--json"), 5)
        sq = timed(lambda: run([*SSH, "squeue", "--json"]), 5)
        rows.append((f"status of {count} jobs, warm broker", "rsk status --json via the broker", ms(st),
                     "ssh HOST squeue --json", ms(sq)))  # fmt: skip
        ratios.append(("status-warm", statistics.median(st) / statistics.median(sq), "target <= 1.0"))

        cancel_jobs()
        brokered("status", "-t", "lab", "-p", PROJECT)  # warms the connection
        n = 10
        warm = timed(lambda: brokered("launch", "-t", "lab", "-p", PROJECT, "-r", f"w{RUN}{next(i)}", "--mem", "64M",
                                      "--time", "1", "--json", "--", "true"), n)  # fmt: skip
        base = timed(
            lambda: run([*SSH, "sbatch", "--parsable", f"--job-name={WRAP}", "--mem=64", "--time=1", "--wrap", "true"]),
            n,
        )
        rows.append(("single launch, warm broker", "rsk launch via the broker", ms(warm), "ssh HOST sbatch --wrap",
                     ms(base)))  # fmt: skip
        ratios.append(("single-warm", statistics.median(warm) / statistics.median(base), "target <= 1.0"))

        def eight(environ: dict[str, str], tag: str) -> None:
            argv = [[*RSK, "launch", "-t", "lab", "-p", PROJECT, "-r", f"{tag}{RUN}{k}-{next(i)}", "--mem", "64M",
                     "--time", "1", "--json", "--", "true"] for k in range(8)]  # fmt: skip
            procs = [subprocess.Popen(a, env=environ, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                     for a in argv]  # fmt: skip
            assert all(p.wait() == 0 for p in procs)

        through = timed(lambda: eight(env, "eb"), 3)
        alone = timed(lambda: eight(direct, "ed"), 3)
        rows.append(("8 agents launching at once", "through one broker", ms(through), "8 direct processes",
                     ms(alone)))  # fmt: skip
        ratios.append(("eight-agents", statistics.median(alone) / statistics.median(through), "speedup, target >= 3"))
    finally:
        subprocess.run([*RSK, "broker", "stop"], env=env, check=False, capture_output=True)


def bench_agents() -> None:
    """32 agents launching 5 jobs each at once through one broker (tests/integration/test_broker_agents.py checks
    that every launch is accepted once): how long until the last one is accepted, and how many were told to retry
    (exit 75, then retried with the same request id)."""
    import threading
    from concurrent.futures import ThreadPoolExecutor

    agents, each = 32, 5
    sock = Path(f"/tmp/rsk-bench-{uuid.uuid4().hex[:6]}") / "b.sock"
    env = {**ENV, "RSK_BROKER": str(sock)}
    subprocess.run([*RSK, "broker", "start", "--idle", "600"], env=env, check=True, capture_output=True)
    retries = 0
    lock = threading.Lock()

    def agent(k: int) -> None:
        nonlocal retries
        start.wait()
        for i in range(each):
            while True:
                argv = [*RSK, "launch", "-t", "lab", "-p", PROJECT, "-r", f"g{RUN}{k}-{i}", "--mem", "64M", "--time",
                        "1", "--json", "--", "true"]  # fmt: skip
                p = subprocess.run(argv, env=env, capture_output=True, check=False)
                if p.returncode != 75:
                    break
                with lock:
                    retries += 1
            assert p.returncode == 0, p.stderr

    try:
        subprocess.run([*RSK, "status", "-t", "lab", "-p", PROJECT], env=env, check=True, capture_output=True)
        start = threading.Barrier(agents + 1)
        with ThreadPoolExecutor(agents) as pool:
            futures = [pool.submit(agent, k) for k in range(agents)]
            start.wait()
            t0 = time.perf_counter()
            for f in futures:
                f.result()
            took = time.perf_counter() - t0
    finally:
        subprocess.run([*RSK, "broker", "stop"], env=env, check=False, capture_output=True)
    rows.append((f"{agents} agents x {each} launches at once", "through one broker, until the last is accepted",
                 f"{took * 1000:.0f} ms", f"told to retry: {retries}", ""))  # fmt: skip
    ratios.append(("agents-32", took / 10.0, f"seconds / 10 s for {agents * each} launches, target <= 1"))


def bench_against_mux(env: dict[str, str]) -> None:
    """Warm launch, plan and status through the broker against the same Slurm command over a ControlMaster."""
    i = iter(range(10**6))

    def brokered(*args: str) -> None:
        subprocess.run([*RSK, *args], env=env, check=True, capture_output=True)

    brokered("status", "-t", "lab", "-p", PROJECT)  # warms the broker's connection
    with ssh_master() as mux:
        n = 10
        shape = ["--parsable", f"--job-name={WRAP}", "--mem=64", "--time=1", "--wrap", "true"]
        launch = timed(lambda: brokered("launch", "-t", "lab", "-p", PROJECT, "-r", f"m{RUN}{next(i)}", "--mem",
                                        "64M", "--time", "1", "--json", "--", "true"), n)  # fmt: skip
        sbatch = timed(lambda: run([*mux, "sbatch", *shape]), n)
        plan = timed(lambda: brokered("plan", "-t", "lab", "-p", PROJECT, "-r", f"mp{RUN}", "--mem", "64M", "--time",
                                      "1", "--json", "--", "true"), n)  # fmt: skip
        test_only = timed(lambda: run([*mux, "sbatch", "--test-only", *shape]), n)
        thousand_jobs()  # status against squeue --json at the scale of the status bench
        status = timed(lambda: brokered("status", "-t", "lab", "-p", PROJECT, "--json"), 5)
        squeue = timed(lambda: run([*mux, "squeue", "--json"]), 5)
    for what, mine, base_what, base, name, target in (
        ("rsk launch via the broker", launch, "mux ssh sbatch --wrap", sbatch, "launch-warm-mux", "target <= 3"),
        ("rsk plan via the broker", plan, "mux ssh sbatch --test-only", test_only, "plan-warm-mux", "target <= 2"),
        ("rsk status --json via the broker", status, "mux ssh squeue --json", squeue, "status-warm-mux",
         "target <= 1.5"),
    ):  # fmt: skip
        rows.append((f"{name.removesuffix('-mux')}, against a ControlMaster", what, ms(mine), base_what, ms(base)))
        ratios.append((name, statistics.median(mine) / statistics.median(base), target))


def bench_profile() -> None:
    """Where a warm launch spends its time: the client's whole command (bin/rsk through a running broker),
    and the same launch run in this process as the broker runs it (shared connection, Click command built
    once), with a timestamp at each step of the remote conversation and cProfile over one launch."""
    import cProfile
    import io
    import pstats

    sock = Path(f"/tmp/rsk-bench-{uuid.uuid4().hex[:6]}") / "b.sock"
    env = {**ENV, "RSK_BROKER": str(sock)}
    subprocess.run([*RSK, "broker", "start", "--idle", "600"], env=env, check=True, capture_output=True)
    i = iter(range(10**6))

    def launch_argv() -> list[str]:
        return ["launch", "-t", "lab", "-p", PROJECT, "-r", f"pf{RUN}{next(i)}", "--mem", "64M", "--time", "1",
                "--json", "--", "true"]  # fmt: skip

    try:
        subprocess.run([*RSK, "status", "-t", "lab", "-p", PROJECT], env=env, check=True, capture_output=True)
        n = 10
        whole = timed(lambda: subprocess.run([*RSK, *launch_argv()], env=env, check=True, capture_output=True), n)
        start = timed(lambda: run([*RSK, "--version"]), n)
        roundtrip = timed(lambda: subprocess.run([*RSK, "targets", "--json"], env=env, check=True,
                                                 capture_output=True), n)  # fmt: skip
    finally:
        subprocess.run([*RSK, "broker", "stop"], env=env, check=False, capture_output=True)

    os.environ.update({k: v for k, v in ENV.items() if k.startswith("RSK_") and k != "RSK_BROKER"})
    os.environ["RSK_NO_BROKER"] = "1"
    sys.path.insert(0, str(ROOT / "src"))
    from rsk.cli.app import command, main
    from rsk.cluster import transport
    from rsk.local.caller import Caller, Rights, acting_for, passed_env

    command()
    pool = transport.Pool()  # as the broker holds its warm connections: in the caller it acts for
    acting = contextlib.ExitStack()
    acting.enter_context(acting_for(Caller(env=passed_env(os.environ), cwd=Path.cwd(), ppid=os.getppid(), pool=pool,
                                           rights=Rights(uid=os.getuid(), user=getpass.getuser()))))  # fmt: skip
    marks: list[tuple[str, float]] = []

    def mark(name: str, fn: Callable[..., object]) -> Callable[..., object]:
        def wrapped(*a: object, **kw: object) -> object:
            marks.append((name + " called", time.perf_counter()))
            try:
                return fn(*a, **kw)
            finally:
                marks.append((name, time.perf_counter()))

        return wrapped

    transport.Connection.open = mark("open", transport.Connection.open)  # type: ignore[method-assign, assignment]
    transport.Exchange.read_until = mark("await", transport.Exchange.read_until)  # type: ignore[method-assign, assignment]
    transport.Exchange.send = mark("go", transport.Exchange.send)  # type: ignore[method-assign, assignment]
    transport.Exchange.finish = mark("finish", transport.Exchange.finish)  # type: ignore[method-assign, assignment]

    def in_broker() -> dict[str, float]:
        marks.clear()
        t0 = time.perf_counter()
        with contextlib.redirect_stdout(io.StringIO()):
            main(launch_argv())
        end = time.perf_counter()
        at = dict(marks)
        return {
            "parse the command line, read the project and its ledger, build the request": at["open called"] - t0,
            "open a channel on the warm connection, send the program": at["open"] - at["open called"],
            "the cluster: plan up to @@await (scontrol, sinfo, squeue, sbatch --test-only)":
                at["await"] - at["await called"],
            "the ledger: decide under the lock, reserve the charge, write": at["go called"] - at["await"],
            "the cluster: after go (lock, journal, sbatch, journal)": at["finish"] - at["go called"],
            "settle the answer, print": end - at["finish"],
            "the whole launch in the broker": end - t0,
        }  # fmt: skip

    with contextlib.redirect_stdout(io.StringIO()):
        main(["status", "-t", "lab", "-p", PROJECT])  # the connection, as a broker has it warm
    phases = [in_broker() for _ in range(n)]
    prof = cProfile.Profile()
    prof.enable()
    in_broker()
    prof.disable()
    text = io.StringIO()
    pstats.Stats(prof, stream=text).sort_stats("cumulative").print_stats(25)
    (WORK.parent / f"rsk-bench-profile-{RUN}.txt").write_text(text.getvalue())
    acting.close()
    pool.close()
    broker = statistics.median([p["the whole launch in the broker"] for p in phases])
    rows.append(("warm launch: the whole command", "bin/rsk launch through the broker", ms(whole), "", ""))
    rows.append(("  of which the client's start", "bin/rsk --version (Python -S, entry)", ms(start), "", ""))
    rows.append(("  a request with no remote call", "bin/rsk targets --json through the broker", ms(roundtrip),
                 "", ""))  # fmt: skip
    for name in phases[0]:
        rows.append((f"  in the broker: {name}"[:60], "", ms([p[name] for p in phases]), "", ""))
    rows.append(("  the client and the socket (the rest)", "", f"{(statistics.median(whole) - broker) * 1000:.0f} ms",
                 f"cProfile: {WORK.parent}/rsk-bench-profile-{RUN}.txt", ""))  # fmt: skip


def board_jobs(n: int = 1000) -> list[JobState]:
    """n jobs as the board meets them: batches of 100 in every state, a workflow in 4 levels, chains of 5 links
    and a lease with its steps (a tenth each), the rest single jobs."""
    from rsk.ops.status import JobState

    states = ["pending", "running", "succeeded", "failed", "cancelled", "timed-out"]

    def job(rid: str, job_id: str, k: int, **kw: object) -> JobState:
        task = kw.pop("task", None)
        return JobState(request_id=rid, task=task, job_id=job_id, state=states[k % len(states)],
                        exit_code=0 if k % 3 == 0 else None, signal=None, elapsed_s=60 * k, limit_s=3600, where="n1",
                        submitted="2026-01-01T00:00:00", nodes=1, cpus=2, mem_mb=1000, gpus=1, **kw)  # fmt: skip

    tenth = n // 10
    jobs = [job(f"sweep-{b}", f"{1000 + b * 100 + k}", k, task=f"seed-{k}") for b in range(6) for k in range(100)]
    jobs += [job("flow", f"2000_{k}", k, task=f"t{k}", needs=[f"t{k - tenth // 4}"] if k >= tenth // 4 else [])
             for k in range(tenth)]  # fmt: skip
    jobs += [job(f"run-{c}", f"{3000 + c * 5 + i}", i, task=f"link{i + 1}", link=f"{i + 1}/5")
             for c in range(tenth // 5) for i in range(5)]  # fmt: skip
    jobs += [job("hold", "4000", 1, lease="gpus")]
    jobs += [job(f"step-{k}", f"4000s{k}", k, lease="gpus") for k in range(tenth - 1)]
    jobs += [job(f"one-{k}", f"{5000 + k}", k) for k in range(n - len(jobs))]
    return jobs


def bench_board() -> None:
    """The page's board (rsk ui) at 1,000 jobs (batches, a workflow, chains, a lease, single jobs): its live part
    rendered as the page serves it (escaped HTML), and the whole page opened in Chromium, from the request until
    it is laid out; the budget is a second."""
    import threading

    sys.path.insert(0, str(ROOT / "src"))
    import uvicorn

    from rsk.ops.status import Status
    from rsk.ops.watcher import Snapshot
    from rsk.ui.guard import Guard
    from rsk.ui.pages import board_section
    from rsk.ui.server import Config, Ui, bind, server_config

    jobs = board_jobs()
    snap = Snapshot([Status(target="lab", project="bench", slurm="up", at="now", jobs=jobs)], {}, 5.0)
    t = timed(lambda: board_section([("bench", snap)], "", time.time()), 10)
    size = len(board_section([("bench", snap)], "", time.time()))
    rows.append(("ui board, 1,000 jobs", "render the live part", ms(t), f"({size / 1e6:.1f} MB of HTML)", ""))
    chromium = Path(os.environ.get("RSK_TEST_CHROMIUM", "/usr/bin/chromium"))
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        sync_playwright = None  # type: ignore[assignment]
    if sync_playwright is None or not chromium.exists():
        ratios.append(("ui-board", statistics.median(t) / 1.0, "seconds / 1 s budget, target <= 1 (no Chromium)"))
        return
    sock = bind(0)
    port = sock.getsockname()[1]
    ui = Ui(Guard(port=port), Config(targets=[], board_every=3600.0))
    assert ui.board is not None
    ui.board.value, ui.board.at, ui.board.wall = [("bench", snap)], ui.board.clock(), time.time()  # no cluster asked
    server = uvicorn.Server(server_config(ui))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    while not server.started:
        time.sleep(0.02)
    base = f"http://127.0.0.1:{port}"
    laid_out = "document.querySelectorAll('details.batch').length + document.body.getBoundingClientRect().height"
    swap = """async () => { const t0 = performance.now(); const r = await fetch('/board?part=1');
        document.getElementById('live').innerHTML = await r.text(); document.body.getBoundingClientRect();
        return performance.now() - t0; }"""
    try:
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=str(chromium))
            page = browser.new_context(viewport={"width": 1280, "height": 800}).new_page()
            page.goto(f"{base}/launch?token={ui.guard.token}")
            page.wait_for_url(f"{base}/")

            def open_board() -> None:
                page.goto(f"{base}/board")
                page.evaluate(laid_out)

            opened = timed(open_board, 10)
            live = [page.evaluate(swap) / 1000 for _ in range(10)]
            browser.close()
    finally:
        server.should_exit = True
        thread.join(10)
    rows.append(("  in Chromium", "open /board until laid out", ms(opened), "", ""))
    rows.append(("  in Chromium", "a live refresh (fetch, swap, lay out)", ms(live), "", ""))
    ratios.append(("ui-board", statistics.median(opened) / 1.0, "seconds to open the board at 1,000 jobs in Chromium "
                   "/ 1 s budget, target <= 1"))  # fmt: skip


SIZES = [100, 1_000, 10_000]  # bench/run.sh scale --sizes 100,1000 (or RSK_BENCH_SIZES) runs fewer
SCALE_WHAT = {
    "plan": "rsk plan --tasks (sleeping sweep), median of 3",
    "launch": "rsk launch --tasks (sleeping sweep)",
    "status": "rsk status --batch (all queued), median of 3",
    "cancel": "rsk cancel --batch (all queued)",
    "wait": "rsk wait --batch (all ended), median of 3",
    "retry": "rsk retry --failed (half the tasks)",
    "fetch": "rsk fetch --batch --result (half publish)",
    "fetch-again": "the same fetch again (nothing new), median of 3",
}


class Failed(Exception):
    """An rsk call of the scale bench did not answer as it should (its exit code, its message)."""


def active_tasks(project: str, rid: str) -> int:
    """How many jobs of a request Slurm still has pending or running (raw squeue: outside every measured call)."""
    name = f"rsk:{project}:{rid}"
    out = subprocess.run([*SSH, "squeue -h -r -u \"$(id -un)\" -t PENDING,RUNNING,CONFIGURING,COMPLETING,SUSPENDED "
                          "-o '%j'"], capture_output=True, text=True, check=True).stdout  # fmt: skip
    return sum(line == name for line in out.splitlines())


def drain(project: str, rid: str, what: str) -> float:
    """Until Slurm has none of the request's jobs pending or running; how long that took (not measured as an op)."""
    t0 = time.perf_counter()
    while (left := active_tasks(project, rid)) > 0:
        print(f"  {what}: {left} task(s) of {rid} still pending or running ...", file=sys.stderr, flush=True)
        time.sleep(min(30.0, 2.0 + left / 50))
    return time.perf_counter() - t0


def bench_scale() -> None:
    """Each client-side operation as one rsk call through a warm broker (as an agent runs them), at 100, 1,000
    and 10,000 tasks: plan, launch, status and cancel on a sweep of sleeping tasks; wait, fetch --batch --result
    and retry --failed on a sweep whose odd tasks fail and whose every task writes a result (the even ones publish
    it). Waiting for the cluster to run a sweep is outside every measured call. `ratio scale-OP` is t(largest
    size)/t(the size before), against linear growth (10x) plus fixed cost: target <= 12. A size whose plan or
    launch rsk or the cluster refuses is reported and skipped; an operation that fails is reported, not timed."""
    sock = Path(f"/tmp/rsk-bench-{uuid.uuid4().hex[:6]}") / "b.sock"
    env = {**ENV, "RSK_BROKER": str(sock)}
    subprocess.run([*RSK, "broker", "start", "--idle", "3600"], env=env, check=True, capture_output=True)
    took: dict[int, dict[str, float | str]] = {}
    try:
        for n in SIZES:
            print(f"bench: scale {n:,} tasks ...", file=sys.stderr, flush=True)
            try:
                took[n] = scale_size(n, env)
            except Failed as exc:  # its plan or launch: the size is refused
                rows.append((f"scale, {n:,} tasks", "refused", str(exc)[:200], "", ""))
                print(f"bench: scale {n:,} tasks refused: {exc}", file=sys.stderr, flush=True)
            finally:
                cancel_jobs()
    finally:
        subprocess.run([*RSK, "broker", "stop"], env=env, check=False, capture_output=True)

    def shown(x: float | str) -> str:
        return f"{x * 1000:.0f} ms" if isinstance(x, float) else f"failed: {x}"[:120]

    sizes = sorted(took)
    for op, what in SCALE_WHAT.items():
        for k, n in enumerate(sizes):
            base = (f"{sizes[k - 1]:,} tasks", shown(took[sizes[k - 1]][op])) if k else ("", "")
            rows.append((f"scale {op}, {n:,} tasks", what, shown(took[n][op]), *base))
    if len(sizes) >= 2:
        big, small = sizes[-1], sizes[-2]
        note = f"t({big:,})/t({small:,}), target <= 12" + ("" if big == 10_000 else " at 10,000/1,000")
        for op in SCALE_WHAT:
            a, b = took[big][op], took[small][op]
            if isinstance(a, float) and isinstance(b, float):
                ratios.append((f"scale-{op}", a / b, note))
            else:
                print(f"ratio scale-{op} -  # failed at {big if isinstance(b, float) else small:,}", file=sys.stderr)
    cancel, status = took.get(1_000, {}).get("cancel"), took.get(1_000, {}).get("status")
    if isinstance(cancel, float) and isinstance(status, float):
        ratios.append(
            ("scale-cancel-vs-status", cancel / status, "cancel / status of 1,000 sleeping tasks, target <= 3")
        )


def scale_size(n: int, env: dict[str, str]) -> dict[str, float | str]:
    """One size: a project (and a grant) for each of its two sweeps, so that neither's jobs weigh on the other's
    status, and nothing the one leaves running on the cluster (a cancel past its time) holds the other's lock. Each
    op's seconds, or why it failed."""
    sleeping, working = f"{PROJECT}s{n}", f"{PROJECT}w{n}"
    for project in (sleeping, working):
        run([*RSK, "grant", "add", "-p", project, "--target", "lab", "--yes"])
    sleep, work = WORK / f"sleep{n}.jsonl", WORK / f"work{n}.jsonl"
    sleep.write_text("".join(json.dumps({"key": f"s{k}", "argv": ["sleep", "600"]}) + "\n" for k in range(n)))
    # every task writes a result; the odd ones exit 1, so only the even ones publish it
    script = 'echo "$1" > "$RSK_OUT/r.txt"; exit $(($1 % 2))'
    work.write_text("".join(json.dumps({"key": f"w{k}", "argv": ["sh", "-c", script, "sh", str(k)]}) + "\n"
                            for k in range(n)))  # fmt: skip
    shape = ["--mem", "64M", "--time", "15"]

    def rsk(project: str, *args: str, ok: tuple[int, ...] = (0,)) -> tuple[float, dict[str, Any]]:
        t0 = time.perf_counter()
        p = subprocess.run([*RSK, *args, "-t", "lab", "-p", project, "--json"], env=env, capture_output=True,
                           text=True, check=False)  # fmt: skip
        took = time.perf_counter() - t0
        try:
            doc = json.loads(p.stdout)
        except ValueError:
            doc = {}
        if p.returncode not in ok:
            raise Failed(f"`rsk {args[0]}` exit {p.returncode} after {took:.0f} s: "
                         f"{doc.get('message') or p.stderr.strip()[-300:]}")  # fmt: skip
        return took, doc

    t: dict[str, float | str] = {}

    def op(name: str, project: str, args: tuple[str, ...], good: Callable[[dict[str, Any]], bool], what: str, *,
           ok: tuple[int, ...] = (0,), calls: int = 1) -> None:  # fmt: skip
        """Time the call (the median of `calls`); what it answered checked (`good`), else `what` went wrong."""
        try:
            answers = [rsk(project, *args, ok=ok) for _ in range(calls)]
            t[name] = statistics.median(x for x, _ in answers) if all(good(d) for _, d in answers) else what
        except Failed as exc:
            t[name] = str(exc)
        if isinstance(t[name], str):
            print(f"bench: scale {n:,} {name}: {t[name]}", file=sys.stderr, flush=True)

    s_rid, w_rid = f"sl{RUN}", f"wk{RUN}"
    t["plan"] = statistics.median(rsk(sleeping, "plan", "-r", s_rid, *shape, "--tasks", str(sleep))[0]
                                  for _ in range(3))  # fmt: skip
    t["launch"] = rsk(sleeping, "launch", "-r", s_rid, *shape, "--tasks", str(sleep))[0]
    try:
        op("status", sleeping, ("status", "--batch", s_rid, "--all"), lambda d: len(d["jobs"]) == n,
           "not every task listed", calls=3)  # fmt: skip
        op("cancel", sleeping, ("cancel", "--batch", s_rid, "--all"),
           lambda d: len(d["results"]) == n and all(r["result"] == "cancelled" for r in d["results"]),
           "not every task cancelled")  # fmt: skip
    finally:
        cancel_jobs()  # whatever happened: no sleeping task is left holding the lab's CPUs
    drain(sleeping, s_rid, "the cancelled sweep")
    for again in (2, 1, 0):  # the same request id: a launch whose answer was lost is found, never submitted twice
        try:
            rsk(working, "launch", "-r", w_rid, *shape, "--tasks", str(work))
            break
        except Failed as exc:
            if not again or "exit 75" not in str(exc):
                raise
    ran = drain(working, w_rid, "the sweep")
    counts = {"succeeded": (n + 1) // 2, "failed": n // 2}
    op("wait", working, ("wait", "--batch", w_rid), lambda d: d["counts"] == counts, "not half succeeded, half failed",
       ok=(11,), calls=3)  # fmt: skip
    op("fetch", working, ("fetch", "--batch", w_rid, "--result", "--to", str(WORK / f"results{n}")),
       lambda d: d["fetched"] == (n + 1) // 2, "not every result fetched")  # fmt: skip
    op("fetch-again", working, ("fetch", "--batch", w_rid, "--result", "--to", str(WORK / f"results{n}")),
       lambda d: d["fetched"] == (n + 1) // 2 and d["bytes"] == 0, "not every result found there", calls=3)  # fmt: skip
    op("retry", working, ("retry", "--batch", w_rid, "--failed", "--all"), lambda d: len(d["tasks"]) == n // 2,
       "not the failed half retried")  # fmt: skip
    cancel_jobs()  # the retried half would only fail again
    drain(working, f"{w_rid}.a2", "the retried half")
    rows.append((f"scale, {n:,} tasks", "the sweep ran (not measured)", f"{ran:.0f} s", "", ""))
    return t


BENCHES = {"single": bench_single, "batch": bench_batch, "dag": bench_dag, "status": bench_status,
           "ledger": bench_ledger, "startup": bench_startup, "step": bench_step, "broker": bench_broker,
           "profile": bench_profile, "agents": bench_agents,
           "board": bench_board, "ledger-write": bench_ledger_write, "scale": bench_scale}  # fmt: skip
LOCAL = {"board", "startup", "ledger-write"}  # benches that need no lab cluster


def main() -> None:
    names = sys.argv[1:] or list(BENCHES)
    sizes = os.environ.get("RSK_BENCH_SIZES", "")
    if "--sizes" in names:  # bench/run.sh scale --sizes 100,1000
        at = names.index("--sizes")
        sizes, names = (names[at + 1] if at + 1 < len(names) else ""), names[:at] + names[at + 2 :]
    if sizes:
        try:
            SIZES[:] = sorted({int(x.replace("_", "")) for x in sizes.split(",") if x})
        except ValueError:
            sys.exit(f"--sizes takes task counts: 100,1000,10000, not {sizes!r}")
    for name in names:
        if name not in BENCHES:
            sys.exit(f"unknown bench {name!r}; choose from {', '.join(BENCHES)}")
    lab = any(name not in LOCAL for name in names)
    if lab:
        setup()
    try:
        for name in names:
            print(f"bench: {name} ...", file=sys.stderr, flush=True)
            BENCHES[name]()
            if lab:
                cancel_jobs()
    finally:
        if lab:
            cleanup()
    print(f"{'bench':<34} {'rsk':<44} {'':>20}  {'baseline':<30} {'':>20}")
    for bench, what, value, base_what, base_value in rows:
        print(f"{bench:<34} {what:<44} {value:>20}  {base_what:<30} {base_value:>20}")
    for name, ratio, note in ratios:
        print(f"ratio {name} {ratio:.2f}  # {note}")


if __name__ == "__main__":
    main()
