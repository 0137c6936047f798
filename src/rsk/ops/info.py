"""What a target offers: its partitions and their limits, the cluster's policy, and what this project's
grants have left there (one remote call)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from rsk.cluster.remote import remote_for
from rsk.errors import UsageError
from rsk.ledger.grants import GrantView, list_grants
from rsk.ledger.store import Store
from rsk.request.units import parse_time
from rsk.wire import answers, gres
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


def info(target: str, project: str) -> TargetInfo:
    with remote_for(target) as remote:
        out = remote.call("info")
    raise_for_error(out)
    answer = answers.info(out)
    parts = []
    for r in answer.partitions:
        parts.append(
            Partition(
                name=r.name,
                default=r.default,
                state=r.state,
                max_time_min=minutes(r.time),
                nodes=r.nodes,
                cpus_per_node=r.cpus,
                mem_mb_per_node=r.mem_mb,
                gpus_per_node=gres.gpu_count(r.gres),  # every GPU of the node, of every type
                gpu_types=gres.type_names(r.gres),
            )
        )
    policy = answer.policy.rules
    views = [v for v in list_grants(Store(project)) if not v.grant.targets or target in v.grant.targets]
    return TargetInfo(target=target, project=project, partitions=parts, policy=policy, grants=views)
