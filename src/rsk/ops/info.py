"""What a target offers: its partitions and their limits, the cluster's policy, and what this project's
grants have left there (one remote call)."""

from __future__ import annotations

import re

from pydantic import BaseModel, ConfigDict

from rsk.cluster.remote import remote_for
from rsk.errors import UsageError
from rsk.ledger.grants import GrantView, list_grants
from rsk.ledger.store import Store
from rsk.request.units import parse_time
from rsk.wire import answers
from rsk.wire.protocol import raise_for_error


class Partition(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str
    default: bool
    state: str
    max_time_min: int | None  # None: no limit
    nodes: int | None
    cpus_per_node: int | None
    mem_mb_per_node: int | None
    gpus_per_node: int
    gpu_types: list[str]


class TargetInfo(BaseModel):
    model_config = ConfigDict(extra="forbid")

    schema_version: int = 2  # 2: the policy's numbers are numbers, its lists lists, and no limit is null
    target: str
    project: str
    partitions: list[Partition]
    policy: answers.Policy
    grants: list[GrantView]  # this project's grants that may cover this target, with what they have left


def minutes(slurm_time: str) -> int | None:
    """A partition's time limit in whole minutes (rsk.request.units reads Slurm's format); None for infinite."""
    if slurm_time in ("", "infinite", "UNLIMITED", "n/a", "NOT_SET"):
        return None
    try:
        return parse_time(slurm_time)
    except UsageError:
        return None


def gpus(gres: str) -> tuple[int, list[str]]:
    """GPUs per node and their types from a GRES string such as gpu:fake:4(S:0) or gpu:a100:8,gpu:2."""
    count, types = 0, []
    for item in gres.split(","):
        fields = re.sub(r"\(.*?\)", "", item).split(":")
        if fields[0] != "gpu":
            continue
        m = re.match(r"\d+", fields[-1])
        n = int(m.group()) if m else 0
        count = max(count, n)
        if len(fields) == 3:
            types.append(fields[1])
    return count, types


def info(target: str, project: str) -> TargetInfo:
    with remote_for(target) as remote:
        out = remote.call("info")
    raise_for_error(out)
    answer = answers.info(out)
    parts = []
    for r in answer.partitions:
        count, types = gpus(r.gres)
        parts.append(
            Partition(
                name=r.name,
                default=r.default,
                state=r.state,
                max_time_min=minutes(r.time),
                nodes=r.nodes,
                cpus_per_node=r.cpus,
                mem_mb_per_node=r.mem_mb,
                gpus_per_node=count,
                gpu_types=types,
            )
        )
    policy = answer.policy.rules
    views = [v for v in list_grants(Store(project)) if not v.grant.targets or target in v.grant.targets]
    return TargetInfo(target=target, project=project, partitions=parts, policy=policy, grants=views)
