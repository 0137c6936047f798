"""attack2: a job of the account moves a pending job the ledger holds into a hidden partition
(`scontrol update JobId=J Partition=HIDDEN Gres=gpu:4`, allowed to a job's owner while it pends). squeue without
`-a`/`--all` lists no job of a hidden partition (nor of one unavailable to the user's group), so every read of the
queue rsk makes stops seeing it: status settles it at the plan's worst case ("Slurm's record was gone"), it no
longer counts against --max-active or the cluster's max_active_jobs, `rsk cancel` calls it finished, and it then
runs with the GPUs it gave itself, never charged. rsk's one reader of the queue must ask for every partition."""

from __future__ import annotations

import re

from rsk.wire.bundle import files


def _squeue_calls() -> list[str]:
    calls = []
    for name, text in files().items():
        for line in text.splitlines():
            code = line.split("#", 1)[0] if not line.lstrip().startswith("#") else ""
            for m in re.finditer(r"\bsqueue\s+(-[^)|;]*)", code):
                calls.append(f"{name}: squeue {m.group(1).strip()}")
    return calls


def test_attack2_every_read_of_the_queue_lists_jobs_of_hidden_partitions_too() -> None:
    calls = _squeue_calls()
    assert calls, "no squeue call found in the shipped programs"
    blind = [c for c in calls if not re.search(r"(^|\s)(-a|--all)(\s|$)", c.split(": ", 1)[1])]
    assert not blind, f"squeue calls that do not list hidden partitions' jobs: {blind}"
