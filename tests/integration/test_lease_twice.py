"""`rsk lease close NAME` ends every open lease of that name the ledger holds (it ended only the newest).

The one-live-lease-per-name check of `lease open` (submit.sh check_lease) reads the lease's file on the cluster, which
a job of the account can rewrite: with `job=1` in it, the agent opens the same name again while the first lease runs.
The ledger then holds two open leases of the name. `rsk lease close` sends only the newest one's job (`_held`:
`held[-1]`) and scancels it; `close_lease` marks both closed in the ledger. The first allocation is ended only by its
controller seeing `closed`, and a `closed` that is a directory (which `rm -f` cannot remove, so `printf >closed` is
skipped) never is a file: the first lease runs to its time limit, while the ledger and the answer say it was closed."""

from __future__ import annotations

import json

from tests.conftest import Lab, rsk
from tests.integration.helpers import grant, launched

ACTIVE = ("PENDING", "RUNNING", "CONFIGURING", "COMPLETING", "SUSPENDED", "REQUEUED")


def _open(project: str, name: str) -> str:
    opened = launched(rsk("lease", "open", name, "-t", "lab", "-p", project, "--cpus", "1", "--mem", "64M",
                          "--time", "3", "--drain", "0", "--json"))  # fmt: skip
    return str(opened["job_id"])


def test_a_lease_opened_twice_under_one_name_is_ended_by_its_close(lab: Lab, project: str) -> None:
    grant(project, "--target", "lab", "--jobs", "3")
    first = _open(project, "twice")
    d = f"{lab.root_sh}/leases/{project}/twice"
    second = ""
    try:
        # what a job of the account does: the lease's file names a dead job, so the name looks free
        assert lab.ssh(f"sed -i 's/^job=[0-9]*/job=1/' {d}/lease").returncode == 0
        second = _open(project, "twice")
        assert second != first
        # and `closed` a directory: the close's `rm -f closed && printf ... >closed` writes nothing
        assert lab.ssh(f"mkdir {d}/closed").returncode == 0
        closed = rsk("lease", "close", "twice", "-t", "lab", "-p", project, "--json")
        said = json.loads(closed.out)
        assert said["job_id"] == second and "2 open leases named twice" in said["warnings"][0], said
        ledger = json.loads(rsk("lease", "status", "-t", "lab", "-p", project, "--json").out)
        states = {j: lab.ssh(f"squeue -h -j {j} -o %T").stdout.strip() for j in (first, second)}
        assert states[first] not in ACTIVE, (
            f"lease job {first} is {states[first]} after `rsk lease close twice` said {closed.out} (rc {closed.rc}); "
            f"rsk lease status: {ledger}"
        )
    finally:
        lab.ssh(f"scancel {first} {second}")
