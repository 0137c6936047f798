"""The cluster side under attack by jobs that run as the same cluster account, on the lab cluster."""

from __future__ import annotations

import contextlib
import json
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from rsk.errors import Exit
from rsk.wire import bundle
from tests.conftest import Lab, rsk
from tests.integration.helpers import finished_output, grant, launch, launched


@contextlib.contextmanager
def bashrc(lab: Lab, lines: str) -> Iterator[None]:
    """Lines put at the top of the cluster user's ~/.bashrc (bash reads it for ssh commands too)."""
    lab.ssh("cp ~/.bashrc ~/.bashrc.rsk-test")
    lab.ssh(f"{{ printf '%s\\n' {json.dumps(lines)}; cat ~/.bashrc.rsk-test; }} > ~/.bashrc")
    try:
        yield
    finally:
        lab.ssh("mv ~/.bashrc.rsk-test ~/.bashrc")


@pytest.fixture
def clean_bashrc(lab: Lab) -> Iterator[None]:
    yield
    lab.ssh("[ ! -f ~/.bashrc.rsk-test ] || mv ~/.bashrc.rsk-test ~/.bashrc")


def test_a_job_rewriting_the_remote_side_changes_nothing_that_runs(lab: Lab, project: str) -> None:
    """A job writes scripts everywhere under the remote root (the way an older rsk deployed them, asking
    for 4 GPUs); the next launch plans and submits exactly what the client shipped."""
    grant(project, "--jobs", "5")
    evil = (
        "for d in scripts/dev scripts/" + bundle.digest()[:16] + " scripts/" + bundle.digest() + "; do "
        'mkdir -p "$R/$d"; for f in submit.sh lib.sh batch.sh policy.sh wrapper.sh status.sh status.awk; do '
        'printf \'#!/bin/sh\\necho @@accepted job=1\\nexec sbatch --gres=gpu:4 "$@"\\n\' > "$R/$d/$f"; done; done; '
        'chmod -R a+x "$R/scripts"; echo rewritten'
    )
    root = lab.ssh(f"cd {lab.root_sh} 2>/dev/null || mkdir -p {lab.root_sh}; cd {lab.root_sh} && pwd -P").stdout.strip()
    job = launched(launch(project, "--env", f"R={root}", command=("sh", "-c", evil)))["job_id"]
    assert finished_output(project, job)["text"] == "rewritten\n"
    assert lab.ssh(f"ls {lab.root_sh}/scripts/dev/submit.sh").returncode == 0
    after = launched(launch(project, "--verbose", command=("sh", "-c", 'echo "gpus=[$CUDA_VISIBLE_DEVICES]"')))
    assert after["plan"]["scripts"] == bundle.digest()
    assert after["plan"]["gpus"] == 0
    assert finished_output(project, after["job_id"])["text"] == "gpus=[]\n"
    shown = lab.ssh(f"scontrol show job {after['job_id']}").stdout
    assert "gpu" not in shown


@pytest.mark.serial  # rewrites the cluster user's ~/.bashrc
def test_a_login_shell_that_prints_rsk_lines_cannot_pass_a_cap(lab: Lab, project: str, clean_bashrc: None) -> None:
    grant(project, "--jobs", "5")
    lab.set_policy("max_active_jobs = 1\n")
    assert launch(project, "-r", "one", command=("sleep", "60")).rc == 0
    noise = "echo '@@active count=0 cap=100'; echo '@@accepted job=1 rid=two replay=1'; echo '@@done rc=0'"
    with bashrc(lab, noise):
        second = launch(project, "-r", "two", command=("sleep", "60"))
    assert second.rc == Exit.CAP, second.err
    assert [line.split(" ")[0] for line in lab.jobs_named(f"rsk:{project}:two")] == []


@pytest.mark.serial  # rewrites the cluster user's ~/.bashrc
def test_the_login_environment_does_not_reach_the_job(lab: Lab, project: str, clean_bashrc: None) -> None:
    """An approved plan runs the same program whatever the login shell sets: PATH, SBATCH_* and the rest."""
    grant(project, "--jobs", "5")
    lab.ssh("mkdir -p ~/evil && printf '#!/bin/sh\\necho impostor\\n' > ~/evil/hostname && chmod +x ~/evil/hostname")
    command = ("sh", "-c", "hostname; echo leak=[$LEAK]; env | grep -c '^SBATCH_' || true")
    before = launched(launch(project, "-r", "b", command=command))
    setup = 'export PATH="$HOME/evil:$PATH" LEAK=secret SBATCH_GRES=gpu:4 SBATCH_EXCLUSIVE=1'
    with bashrc(lab, setup):
        after = launched(launch(project, "-r", "a", command=command))
    assert after["plan_hash"] == before["plan_hash"]  # the login shell is not part of the plan: nor of the job
    text = finished_output(project, after["job_id"])["text"]
    assert "impostor" not in text and "leak=[]" in text and text.strip().endswith("0")
    assert "gpu" not in lab.ssh(f"scontrol show job {after['job_id']}").stdout
    lab.ssh("rm -rf ~/evil")


@pytest.mark.serial  # rewrites the cluster user's ~/.bashrc
def test_a_slurm_command_a_job_could_rewrite_answers_nothing(lab: Lab, project: str, clean_bashrc: None) -> None:
    """A job puts a squeue of its own first on the account's PATH, to answer for Slurm (its job "gone", so
    settled low; the cap never reached): every rsk call refuses to read Slurm through it."""
    grant(project, "--jobs", "5")
    job = launched(launch(project, "-r", "real", command=("sleep", "60")))["job_id"]
    lab.ssh("mkdir -p ~/evil && printf '#!/bin/sh\\nexit 0\\n' > ~/evil/squeue && chmod +x ~/evil/squeue")
    before = json.loads(rsk("grant", "list", "--project", project, "--json").out)["grants"]
    try:
        with bashrc(lab, 'export PATH="$HOME/evil:$PATH"'):
            st = rsk("status", "-t", "lab", "-p", project, "--json")
            again = launch(project, "-r", "second", command=("true",))
    finally:
        lab.ssh("rm -rf ~/evil")
    for r in (st, again):
        assert r.rc == Exit.CONFIG, r.err
        assert "untrusted-command" in r.out and "evil/squeue" in r.err
    assert lab.jobs_named(f"rsk:{project}:second") == []
    assert json.loads(rsk("grant", "list", "--project", project, "--json").out)["grants"] == before  # nothing settled
    st = json.loads(rsk("status", "-t", "lab", "-p", project, "--json").out)
    assert [(j["job_id"], j["state"]) for j in st["jobs"]] == [(job, "running")]
    rsk("cancel", job, "-t", "lab", "-p", project)


def test_a_targets_path_into_a_directory_the_account_can_write_answers_nothing(
    lab: Lab, project: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A target's `path` goes first on the cluster's PATH, and through the same check: a directory a job
    could write (here one in the account's home) is refused before anything is read or submitted."""
    grant(project, "--jobs", "5")
    evil = f"evil-{uuid.uuid4().hex[:8]}"
    lab.ssh(f"mkdir -p ~/{evil} && printf '#!/bin/sh\\nexit 0\\n' > ~/{evil}/squeue && chmod +x ~/{evil}/squeue")
    home = lab.ssh('printf %s "$HOME"').stdout
    targets = tmp_path / "targets"
    targets.mkdir()
    text = (lab.targets_dir / "lab.toml").read_text()
    (targets / "lab.toml").write_text(text + f'path = ["{home}/{evil}"]\n')
    monkeypatch.setenv("RSK_TARGETS_PATH", str(targets))
    try:
        st = rsk("status", "-t", "lab", "-p", project, "--json")
        again = launch(project, "-r", "pathed", command=("true",))
    finally:
        lab.ssh(f"rm -rf ~/{evil}")
    for r in (st, again):
        assert r.rc == Exit.CONFIG, r.err
        assert "untrusted-command" in r.out and f"{evil}/squeue" in r.err
    assert lab.jobs_named(f"rsk:{project}:pathed") == []
    view = json.loads(rsk("grant", "list", "--project", project, "--json").out)["grants"][0]
    assert view["jobs_reserved"] == 0 and view["jobs_spent"] == 0


def test_the_journal_reports_edits_and_truncation(lab: Lab, project: str) -> None:
    grant(project, "--jobs", "5")
    for i in range(3):
        launched(launch(project, "-r", f"j{i}"))
    first = json.loads(rsk("journal", "-t", "lab", "-p", project, "--json").out)
    assert first["chain_ok"] is True and len(first["events"]) == 6
    # a job (same account) rewrites an accepted line: the seal no longer matches
    lab.ssh(f"sed -i '2s/ev=accepted/ev=failed/' {lab.root_sh}/journal/{project}.log")
    edited = json.loads(rsk("journal", "-t", "lab", "-p", project, "--json").out)
    assert edited["chain_ok"] is False and "edited" in edited["chain_problems"][0]
    # cut short: the anchor rsk remembered (line 6) is gone
    lab.ssh(f"sed -i '2s/ev=failed/ev=accepted/; 5,6d' {lab.root_sh}/journal/{project}.log")
    cut = json.loads(rsk("journal", "-t", "lab", "-p", project, "--json").out)
    assert cut["chain_ok"] is False and "cut short or rewritten" in cut["chain_problems"][0]
    shown = rsk("journal", "-t", "lab", "-p", project)
    assert "cut short or rewritten" in shown.err
