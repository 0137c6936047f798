"""Results that are absent or complete, on the lab: a job publishes what it wrote under $RSK_OUT only when it
exits 0, whole, with a manifest; `rsk fetch --result` brings back only that, checked, and makes it appear at
once."""

from __future__ import annotations

import json
import os
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

from rsk.errors import Exit
from tests.conftest import Lab, Ran, rsk
from tests.integration.helpers import grant, launch, launched


def run_to_end(project: str, rid: str, body: str) -> str:
    job = launched(launch(project, "-r", rid, "--mem", "100M", "--time", "2", command=("sh", "-c", body)))["job_id"]
    w = rsk("wait", str(job), "--target", "lab", "--project", project, "--timeout", "120", "--json")
    assert w.rc in (0, Exit.UNSUCCESSFUL), w.err
    return str(job)


def fetch_result(project: str, job: str, to: Path, *extra: str) -> tuple[int, str, str]:
    r = rsk("fetch", job, "--result", "--to", str(to), "--target", "lab", "--project", project, "--json", *extra)
    return r.rc, r.out, r.err


def test_a_result_is_published_whole_and_fetched_whole_once(lab: Lab, project: str, tmp_path: Path) -> None:
    grant(project, "--cpu-hours", "1")
    job = run_to_end(
        project, "ok", 'mkdir -p "$RSK_OUT/m" && echo 0.91 > "$RSK_OUT/m/acc" && seq 1 5000 > "$RSK_OUT/log"'
    )
    st = json.loads(rsk("status", job, "--target", "lab", "--project", project, "--json").out)
    assert st["jobs"][0]["result"] is True
    to = tmp_path / "res"
    rc, out, err = fetch_result(project, job, to)
    assert rc == 0, err
    got = json.loads(out)
    assert got["file_count"] == 2 and sorted(f["path"] for f in got["files"]) == ["log", "m/acc"]
    assert got["files"][1]["to"] == str(to / "m" / "acc")
    assert (to / "m" / "acc").read_text() == "0.91\n" and len((to / "log").read_text().splitlines()) == 5000
    assert (to / ".rsk-manifest").is_file() and not list(tmp_path.glob(".res.rsk-fetch-*"))
    rc, out, _ = fetch_result(project, job, to)  # a second fetch is a no-op
    assert rc == 0 and json.loads(out)["already"] is True


def test_a_job_that_did_not_succeed_publishes_nothing_and_its_stage_comes_back_only_when_asked(
    lab: Lab, project: str, tmp_path: Path
) -> None:
    grant(project, "--cpu-hours", "1")
    # (it also leaves a directory named like rsk's label: the label stays rsk's, that directory does not come back)
    job = run_to_end(project, "bad", 'echo half > "$RSK_OUT/model"; mkdir "$RSK_OUT/.rsk-partial"; '
                     'echo x > "$RSK_OUT/.rsk-partial/x"; exit 4')  # fmt: skip
    st = json.loads(rsk("status", job, "--target", "lab", "--project", project, "--json").out)
    assert st["jobs"][0]["result"] is False
    rc, _, err = fetch_result(project, job, tmp_path / "res")
    assert rc == Exit.USAGE and "is failed: it has no result" in err
    assert not (tmp_path / "res").exists()
    rc, _, err = fetch_result(project, job, tmp_path / "part", "--partial")
    assert rc == 0, err
    assert (tmp_path / "part" / "model").read_text() == "half\n" and (tmp_path / "part" / ".rsk-partial").is_file()
    # a result fetch could not bring back whole (a name outside the fetchable set) is never published either
    odd = run_to_end(project, "odd", 'echo ok > "$RSK_OUT/my results.txt"; echo ok > "$RSK_OUT/plain"')
    rc, _, err = fetch_result(project, odd, tmp_path / "odd")
    assert rc == Exit.USAGE and "has no published result" in err and "--stream stderr" in err, err
    log = json.loads(rsk("logs", odd, "--stream", "stderr", "--target", "lab", "--project", project, "--json").out)
    assert "the result is not published (a file name outside" in log["text"]
    rc, _, err = fetch_result(project, odd, tmp_path / "odd-part", "--partial")
    assert rc == 0 and (tmp_path / "odd-part" / "plain").is_file(), err  # fetchable names come back with --partial


def test_a_changed_file_is_refused_and_a_cut_fetch_leaves_nothing_then_completes(
    lab: Lab, project: str, tmp_path: Path
) -> None:
    grant(project, "--cpu-hours", "1")
    job = run_to_end(project, "big", 'head -c 300000 /dev/zero > "$RSK_OUT/a"; head -c 300000 /dev/zero > "$RSK_OUT/b"')
    to = tmp_path / "res"
    # cut midway (a byte limit stops it after the first file): nothing appears in DIR; the next fetch completes
    r = rsk("fetch", job, "--result", "--to", str(to), "--max-bytes", "65536", "--target", "lab", "--project", project)
    assert r.rc != 0 and not to.exists()
    rc, _, err = fetch_result(project, job, to)
    assert rc == 0, err
    assert (to / "a").stat().st_size == 300000 and (to / "b").stat().st_size == 300000
    # a file changed on the cluster after publication: refused, never copied
    assert lab.ssh(f"printf x >> {lab.root_sh}/runs/{project}/big/t0/result/a").returncode == 0
    rc, _, err = fetch_result(project, job, tmp_path / "again")
    assert rc == Exit.STATE and "does not match its manifest" in err
    assert not (tmp_path / "again").exists()


def test_a_byte_limit_bounds_what_comes_and_the_next_fetch_resumes_there(
    lab: Lab, project: str, tmp_path: Path
) -> None:
    grant(project, "--cpu-hours", "1")
    job = run_to_end(project, "limit", 'head -c 405264 /dev/zero > "$RSK_RUN_DIR/big.txt"')
    to = tmp_path / "got"
    where = ("--target", "lab", "--project", project, "--json")
    r = rsk("fetch", job, "big.txt", "--to", str(to), "--max-bytes", "100000", *where)
    assert r.rc == Exit.USAGE and json.loads(r.out)["error"] == "byte-limit", (r.rc, r.out)
    assert not (to / "big.txt").exists() and (to / "big.txt.rsk-part").stat().st_size <= 100000
    r = rsk("fetch", job, "big.txt", "--to", str(to), *where)
    assert r.rc == 0, r.err
    doc = json.loads(r.out)
    assert doc["files"][0]["resumed_from"] == 65536 and doc["bytes"] == 405264
    assert (to / "big.txt").stat().st_size == 405264


def test_a_result_of_a_job_not_ours_says_so(lab: Lab, project: str, tmp_path: Path) -> None:
    rc, out, _ = fetch_result(project, "99999", tmp_path / "nope")
    doc = json.loads(out)
    assert rc == Exit.USAGE and doc["error"] == "not-ours", doc
    assert doc["message"].endswith("on lab") and "--partial" not in (doc["hint"] or ""), doc
    assert not (tmp_path / "nope").exists()


def test_a_job_killed_mid_write_leaves_no_result_and_reconcile_sets_its_stage_aside(
    lab: Lab, project: str, tmp_path: Path
) -> None:
    grant(project, "--cpu-hours", "1")
    job = str(launched(launch(project, "-r", "kill", "--mem", "100M", "--time", "2",
                              command=("sh", "-c", 'echo half > "$RSK_OUT/model"; sleep 120')))["job_id"])  # fmt: skip
    run = f"{lab.root_sh}/runs/{project}/kill/t0"
    for _ in range(60):
        if lab.ssh(f"test -s {run}/out.stage/model").returncode == 0:
            break
        time.sleep(1)
    # the job's batch shell (rsk's wrapper) killed outright, as a node failure would: nothing sets the stage aside
    assert lab.ssh(f"pkill -9 -f 'job0*{job}/slurm_script'").returncode == 0
    rsk("wait", job, "--target", "lab", "--project", project, "--timeout", "60")
    rc, out, err = fetch_result(project, job, tmp_path / "res")
    assert rc == Exit.USAGE and json.loads(out)["error"] == "no-result", err
    r = rsk("reconcile", "--target", "lab", "--project", project, "--json")
    assert r.rc == 0 and json.loads(r.out)["stale_stages"] == 1, r.out
    assert lab.ssh(f"test -d {run}/partial && test ! -e {run}/out.stage && test ! -e {run}/result").returncode == 0


def test_a_failed_job_that_made_its_own_result_and_manifest_hands_back_nothing(
    lab: Lab, project: str, tmp_path: Path
) -> None:
    grant(project, "--cpu-hours", "1")
    forge = (  # the command writes result/ and a manifest that matches it, then fails
        'mkdir -p "$RSK_RUN_DIR/result" && cd "$RSK_RUN_DIR/result" && echo half > model'
        ' && printf "%s %s model\\n" "$(sha256sum < model | cut -c1-64)" "$(wc -c < model)" > .rsk-manifest; exit 1'
    )
    job = run_to_end(project, "forged", forge)
    st = json.loads(rsk("status", job, "--target", "lab", "--project", project, "--json").out)
    assert st["jobs"][0]["state"] == "failed" and st["jobs"][0]["result"] is False
    rc, out, err = fetch_result(project, job, tmp_path / "res")
    assert rc == Exit.USAGE and json.loads(out)["error"] == "no-result" and "is failed" in err, (out, err)
    assert not (tmp_path / "res").exists() and not list(tmp_path.glob(".res.rsk-fetch-*"))
    rc, _, err = fetch_result(project, "999999", tmp_path / "res")  # not a job of the project: nothing either
    assert rc == Exit.USAGE and not (tmp_path / "res").exists(), err


def test_a_batchs_results_come_back_in_one_call_each_checked_and_a_second_call_fetches_nothing(
    lab: Lab, project: str, tmp_path: Path
) -> None:
    grant(project, "--cpu-hours", "1")
    lines = [
        {"key": "a", "argv": ["sh", "-c", 'echo 0.5 > "$RSK_OUT/metrics.json"'], "mem": "100M", "time": "2"},
        {
            "key": "b",
            "argv": ["sh", "-c", 'mkdir "$RSK_OUT/m" && echo 0.7 > "$RSK_OUT/m/x"'],
            "mem": "100M",
            "time": "2",
        },
        {"key": "c", "argv": ["sh", "-c", 'echo no > "$RSK_OUT/metrics.json"; exit 3'], "mem": "100M", "time": "2"},
    ]
    f = tmp_path / "t.jsonl"
    f.write_text("".join(json.dumps(x) + "\n" for x in lines))
    common = ("--target", "lab", "--project", project, "--json")
    r = rsk("launch", "-r", "sw", "--tasks", str(f), *common)
    assert r.rc == 0, r.err
    w = rsk("wait", "--batch", "sw", "--timeout", "150", *common)
    assert w.rc == Exit.UNSUCCESSFUL, w.out + w.err
    to = tmp_path / "res"
    r = rsk("fetch", "--batch", "sw", "--result", "--to", str(to), *common)
    assert r.rc == 0, r.err
    got = json.loads(r.out)
    assert got["fetched"] == 2 and got["without"] == ["c"], got
    by = {t["task"]: t for t in got["tasks"]}
    assert by["c"]["result"] is None and by["c"]["state"] == "failed"
    assert (to / "a" / "metrics.json").read_text() == "0.5\n" and (to / "b" / "m" / "x").read_text() == "0.7\n"
    assert (to / "a" / ".rsk-manifest").is_file() and not (to / "c").exists()
    again = json.loads(rsk("fetch", "--batch", "sw", "--result", "--to", str(to), *common).out)
    assert all(t["result"]["already"] for t in again["tasks"] if t["task"] != "c") and again["bytes"] == 0
    # one request of several jobs: the error names the batch form
    one = rsk("fetch", "-r", "sw", "--result", *common)
    assert one.rc == Exit.USAGE and "--batch sw --result" in one.err
    said = json.loads(one.out)  # and says, as data, which task's job published a result
    assert said["error"] == "several-jobs" and said["results"] == {t: by[t]["job_id"] for t in ("a", "b")}, said


def test_files_a_directory_fetch_leaves_out_are_named_never_dropped_silently(
    lab: Lab, project: str, tmp_path: Path
) -> None:
    grant(project, "--cpu-hours", "1")
    job = run_to_end(project, "sp", 'mkdir -p "$RSK_RUN_DIR/out" && echo a > "$RSK_RUN_DIR/out/ok.csv" && '
                     'echo b > "$RSK_RUN_DIR/out/my results.csv"')  # fmt: skip
    common = ("--target", "lab", "--project", project)
    r = rsk("fetch", job, "out", "--to", str(tmp_path / "f"), *common, "--json")
    assert r.rc == 0, r.err
    got = json.loads(r.out)
    assert [f["path"] for f in got["files"]] == ["out/ok.csv"] and got["skipped"] == ["out/my results.csv"], got
    text = rsk("fetch", job, "out", "--to", str(tmp_path / "g"), *common)
    assert "left out 1 file(s)" in text.err and "my results.csv" in text.err, text.err
    # a succeeded job whose result could not be published: the answer names where to read why
    kept = run_to_end(project, "sp2", 'echo r > "$RSK_OUT/r e.txt"')
    none = rsk("fetch", kept, "--result", "--to", str(tmp_path / "h"), *common, "--json")
    said = json.loads(none.out)
    assert none.rc == Exit.USAGE and said["error"] == "no-result", none.out
    assert f"rsk logs {kept} --stream stderr" in said["hint"] and f"rsk fetch {kept} --result --partial" in said["hint"]
    # what it left is named, not dropped silently: its name is not one rsk fetches
    back = rsk("fetch", kept, "--result", "--partial", "--to", str(tmp_path / "p"), *common, "--json")
    assert back.rc == 0 and json.loads(back.out)["skipped"] == ["r e.txt"], back.out + back.err


# the human's fetch in a tree an agent writes: no link it placed is followed -----------------------------------
def human_dir(tmp_path: Path) -> Path:
    """A directory of the human's that a planted link points at: nothing may appear in it or change."""
    human = tmp_path / "human"
    human.mkdir()
    (human / "precious").write_text("precious\n")
    return human


def untouched(human: Path) -> bool:
    return sorted(p.name for p in human.iterdir()) == ["precious"] and (human / "precious").read_text() == "precious\n"


def refused(r: Ran, human: Path) -> str:
    """'' when the fetch was refused for the link and left the human's directory as it was, else what went wrong
    (and the directory is put back, for the next attempt)."""
    if not untouched(human):
        for p in human.iterdir():
            subprocess.run(["rm", "-rf", str(p)], check=False)
        (human / "precious").write_text("precious\n")
        return f"wrote through the link (rc {r.rc})"
    if r.rc != Exit.USAGE or json.loads(r.out or "{}").get("error") != "link-refused":
        return f"rc {r.rc}: {r.out.strip()[:300]} {r.err.strip()[:300]}"
    return ""


def planted(tmp_path: Path, n: int, *dirs: str) -> Path:
    """The agent's working tree for one attempt, with these directories made in it."""
    tree = tmp_path / f"tree{n}"
    for d in ("", *dirs):
        (tree / d).mkdir(parents=True, exist_ok=True)
    return tree


def test_a_fetch_of_paths_follows_no_link_an_agent_placed(lab: Lab, project: str, tmp_path: Path) -> None:
    """`rsk fetch JOB PATH` and `--to DIR`: a link at rsk-results, at rsk-results/JOB, below it, at a parent of
    --to, or at a resumed .rsk-part (a symbolic or a hard link to the human's file) is refused, and nothing of
    the human's changes; a link at the file's own name is replaced, never written through."""
    grant(project, "--cpu-hours", "1")
    job = run_to_end(project, "links", 'mkdir -p "$RSK_RUN_DIR/out" && echo 0.9 > "$RSK_RUN_DIR/out/metrics.json"')
    human = human_dir(tmp_path)
    where = ("--target", "lab", "--project", project, "--json")
    res = Path("rsk-results")
    part = res / job / "out" / "metrics.json.rsk-part"
    plants: list[tuple[str, tuple[str, ...], Callable[[Path], None]]] = [
        ("rsk-results", (), lambda t: (t / res).symlink_to(human)),
        ("rsk-results/JOB", (str(res),), lambda t: (t / res / job).symlink_to(human)),
        ("rsk-results/JOB/out", (str(res / job),), lambda t: (t / res / job / "out").symlink_to(human)),
        ("a resumed .rsk-part, a symlink", (str(part.parent),), lambda t: (t / part).symlink_to(human / "precious")),
        ("a resumed .rsk-part, a hard link", (str(part.parent),), lambda t: os.link(human / "precious", t / part)),
    ]
    failed = {}
    for n, (what, dirs, plant) in enumerate(plants):
        tree = planted(tmp_path, n, *dirs)
        plant(tree)
        failed[what] = refused(rsk("fetch", job, "out/metrics.json", *where, cwd=tree), human)
    # a parent named by --to, absolute and relative
    tree = planted(tmp_path, 10)
    (tree / "res").symlink_to(human)
    r = rsk("fetch", job, "out/metrics.json", "--to", str(tree / "res" / "x"), *where)
    failed["--to's parent"] = refused(r, human)
    failed["--to's parent, relative"] = refused(
        rsk("fetch", job, "out/metrics.json", "--to", "res/x", *where, cwd=tree), human
    )
    assert not {k: v for k, v in failed.items() if v}, failed
    # the file's own name: the link is replaced by the file, the human's file stays as it was
    tree = planted(tmp_path, 11, str(res / job / "out"))
    (tree / res / job / "out" / "metrics.json").symlink_to(human / "precious")
    r = rsk("fetch", job, "out/metrics.json", *where, cwd=tree)
    assert r.rc == 0, r.err
    got = tree / res / job / "out" / "metrics.json"
    assert not got.is_symlink() and got.read_text() == "0.9\n"
    assert untouched(human)


def test_a_result_fetch_follows_no_link_an_agent_placed(lab: Lab, project: str, tmp_path: Path) -> None:
    """`--result`, `-r R --result` and `--partial`: a link at the stage inside the work directory (the way it
    was found: the human's file overwritten with the job's text), at the work directory, at a resumed part, at
    DIR's parent, at DIR itself, at a parent named by --to, is refused and nothing of the human's changes."""
    grant(project, "--cpu-hours", "1")
    ok = run_to_end(project, "res", 'echo 0.91 > "$RSK_OUT/acc"')
    bad = run_to_end(project, "part", 'echo half > "$RSK_OUT/model"; exit 4')
    human = human_dir(tmp_path)
    where = ("--target", "lab", "--project", project, "--json")
    res = Path("rsk-results")
    work, pwork = res / f".{ok}.rsk-fetch-{ok}", res / f".{bad}.rsk-fetch-{bad}"
    rwork = res / f".res.rsk-fetch-{ok}"  # -r res: the result is named for the request
    forms: list[tuple[str, tuple[str, ...], tuple[str, ...], Callable[[Path], None]]] = [
        ("--result: the stage", (ok, "--result"), (str(work),), lambda t: (t / work / ".rsk-result").symlink_to(human)),
        ("--result: the work directory", (ok, "--result"), (str(res),), lambda t: (t / work).symlink_to(human)),
        ("--result: a resumed part", (ok, "--result"), (str(work / ".rsk-result"),),
         lambda t: (t / work / ".rsk-result" / "acc.rsk-part").symlink_to(human / "precious")),
        ("--result: rsk-results", (ok, "--result"), (), lambda t: (t / res).symlink_to(human)),
        ("--result: DIR itself", (ok, "--result"), (str(res),), lambda t: (t / res / ok).symlink_to(human)),
        ("-r R --result: the stage", ("-r", "res", "--result"), (str(rwork),),
         lambda t: (t / rwork / ".rsk-result").symlink_to(human)),
        ("--partial: the stage", (bad, "--result", "--partial"), (str(pwork),),
         lambda t: (t / pwork / ".rsk-partial").symlink_to(human)),
        ("--partial: rsk-results/JOB", (bad, "--result", "--partial"), (str(res),),
         lambda t: (t / res / bad).symlink_to(human)),
    ]  # fmt: skip
    failed = {}
    for n, (what, argv, dirs, plant) in enumerate(forms):
        tree = planted(tmp_path, n, *dirs)
        plant(tree)
        failed[what] = refused(rsk("fetch", *argv, *where, cwd=tree), human)
    tree = planted(tmp_path, 20)
    (tree / "out").symlink_to(human)
    r = rsk("fetch", "-r", "res", "--result", "--to", str(tree / "out" / "r"), *where)
    failed["-r R --result --to: its parent"] = refused(r, human)
    assert not {k: v for k, v in failed.items() if v}, failed
    # without a link, the same forms bring the result back where they always did
    tree = planted(tmp_path, 21)
    assert rsk("fetch", ok, "--result", *where, cwd=tree).rc == 0
    assert (tree / res / ok / "acc").read_text() == "0.91\n" and not list((tree / res).glob(".*"))


def test_a_batch_fetch_follows_no_link_an_agent_placed(lab: Lab, project: str, tmp_path: Path) -> None:
    """`--batch B PATH...` and `--batch B --result`: a link at rsk-results/B, at rsk-results/B/KEY, or at a
    task's work directory is refused, and nothing of the human's changes."""
    grant(project, "--cpu-hours", "1")
    tasks = tmp_path / "t.jsonl"
    body = 'echo 0.5 > "$RSK_OUT/m.json" && echo 1 > "$RSK_RUN_DIR/log.txt"'
    tasks.write_text(json.dumps({"key": "a", "argv": ["sh", "-c", body], "mem": "100M", "time": "2"}) + "\n")
    where = ("--target", "lab", "--project", project, "--json")
    assert rsk("launch", "-r", "bl", "--tasks", str(tasks), *where).rc == 0
    assert rsk("wait", "--batch", "bl", "--timeout", "150", *where).rc == 0
    job = json.loads(rsk("status", "--batch", "bl", *where).out)["jobs"][0]["job_id"]
    human = human_dir(tmp_path)
    res = Path("rsk-results")
    forms: list[tuple[str, tuple[str, ...], tuple[str, ...], Callable[[Path], None]]] = [
        ("--batch B PATH: rsk-results/B", ("log.txt",), (str(res),), lambda t: (t / res / "bl").symlink_to(human)),
        ("--batch B PATH: rsk-results/B/KEY", ("log.txt",), (str(res / "bl"),),
         lambda t: (t / res / "bl" / "a").symlink_to(human)),
        ("--batch B --result: rsk-results/B", ("--result",), (str(res),),
         lambda t: (t / res / "bl").symlink_to(human)),
        ("--batch B --result: the work directory", ("--result",), (str(res / "bl"),),
         lambda t: (t / res / "bl" / f".a.rsk-fetch-{job}").symlink_to(human)),
        ("--batch B --result: the stage", ("--result",), (str(res / "bl" / f".a.rsk-fetch-{job}"),),
         lambda t: (t / res / "bl" / f".a.rsk-fetch-{job}" / ".rsk-result").symlink_to(human)),
    ]  # fmt: skip
    failed = {}
    for n, (what, argv, dirs, plant) in enumerate(forms):
        tree = planted(tmp_path, n, *dirs)
        plant(tree)
        failed[what] = refused(rsk("fetch", "--batch", "bl", *argv, *where, cwd=tree), human)
    assert not {k: v for k, v in failed.items() if v}, failed
