"""`rsk lease close` ends the lease the ledger holds, and reports that lease's cost, whatever the cluster's files say.

The close program read the lease's Slurm job from `leases/P/NAME/lease`, a file of the cluster account: a job of the
account (a step of the lease, or any job of the project) rewrote its `job=` to another id and made `closed` a link
to /dev/null (the controller tests `[ -f closed ]`, which a link to a device fails). The human's close then scancelled
nothing, said "its allocation had ended already", and reported another request's cost while the allocation ran on.
Now the client sends the ledger's job and request id (`lease close P NAME JOB RID`), the program ends that job while
Slurm lists it, whatever its name, and writes `closed` as a file of its own."""

from __future__ import annotations

import json

from tests.conftest import Lab, rsk
from tests.integration.helpers import grant, launched

ACTIVE = ("PENDING", "RUNNING", "CONFIGURING", "COMPLETING", "SUSPENDED", "REQUEUED")


def _open(lab: Lab, project: str, name: str) -> str:
    grant(project, "--target", "lab", "--jobs", "2")
    opened = launched(rsk("lease", "open", name, "-t", "lab", "-p", project, "--cpus", "1", "--mem", "64M",
                          "--time", "3", "--drain", "0", "--json"))  # fmt: skip
    return str(opened["job_id"])


def _closes(lab: Lab, project: str, name: str, job: str) -> None:
    closed = rsk("lease", "close", name, "-t", "lab", "-p", project, "--json")
    report = json.loads(closed.out) if closed.out.strip() else {}
    state = lab.ssh(f"squeue -h -j {job} -o %T").stdout.strip()
    assert state not in ACTIVE, f"lease job {job} is {state} after `rsk lease close` said: {closed.out}"
    assert report.get("job_id") == job, f"the close reported job {report.get('job_id')}, the lease is {job}"


def test_a_lease_close_ends_the_ledgers_lease_whatever_the_lease_file_says(lab: Lab, project: str) -> None:
    job = _open(lab, project, "forged")
    d = f"{lab.root_sh}/leases/{project}/forged"
    try:
        # what a job of the account does: another job id in the lease's file, `closed` a link the controller skips
        forged = lab.ssh(f"sed -i 's/^job=[0-9]*/job=1/' {d}/lease && ln -s /dev/null {d}/closed && cat {d}/lease")
        assert forged.returncode == 0 and forged.stdout.startswith("job=1 "), forged.stderr
        seen = json.loads(rsk("lease", "status", "forged", "-t", "lab", "-p", project, "--json").out)["leases"][0]
        assert seen["job_id"] == job and seen["state"] != "ended", seen  # the ledger's lease, as Slurm has it
        _closes(lab, project, "forged", job)
        assert lab.ssh(f"test -f {d}/closed && ! test -L {d}/closed").returncode == 0  # the close wrote its own
    finally:
        lab.ssh(f"scancel {job}")


def test_a_lease_whose_job_a_job_renamed_is_closed_all_the_same(lab: Lab, project: str) -> None:
    job = _open(lab, project, "renamed")
    try:
        assert lab.ssh(f"scontrol update jobid={job} name=someone-else").returncode == 0
        _closes(lab, project, "renamed", job)
    finally:
        lab.ssh(f"scancel {job}")
