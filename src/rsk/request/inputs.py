"""Checks of what an agent sends, before anything is planned or submitted (pure).

Refused with a usage error (exit 2): names that are not whole tokens, text that is not UTF-8 (it could
not be shown to a human or kept in the ledger as it is) or holds a NUL byte (the plan would bind one text
and the cluster's shell run another: sh drops what follows a NUL), and environment names that rsk or Slurm
own or that choose which GPUs a job sees (a job with no GPUs could use GPUs nobody was charged for where
the cluster does not constrain devices). The cluster keeps the same list of names (remote/submit.sh).
"""

from __future__ import annotations

import re
from fnmatch import fnmatchcase

from rsk.errors import UsageError
from rsk.wire.protocol import Request

_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
# names the job wrapper, rsk or Slurm set or read, and those that choose which GPUs a job sees or how their indices
# map (Slurm sets the first from what it allocated; set by hand they widen a job): a job must not be able to change
# them through --env. Shell patterns (`*`: any run of characters), the one list on this side; remote/submit.sh
# (RESERVED_ENV) holds the cluster's, word for word. `*VISIBLE_DEVICES` is every runtime's visibility variable
# (CUDA_, NVIDIA_, ROCR_, HIP_, HSA_, HABANA_, ...); the others are CUDA's, OpenCL's (AMD) and oneAPI's by name.
GPU_SELECTION = ("*VISIBLE_DEVICES", "CUDA_DEVICE_ORDER", "GPU_DEVICE_ORDINAL", "ZE_AFFINITY_MASK",
                 "ZE_ENABLE_PCI_ID_DEVICE_ORDER", "ZE_FLAT_DEVICE_HIERARCHY", "ONEAPI_DEVICE_SELECTOR",
                 "SYCL_DEVICE_FILTER", "SYCL_DEVICE_ALLOWLIST")  # fmt: skip
RESERVED_ENV = ("SLURM_*", "SLURMD_*", "SBATCH_*", "SALLOC_*", "SRUN_*", "RSK_*", "rsk_*", "PATH", *GPU_SELECTION)


def reserved(name: str, patterns: tuple[str, ...] = RESERVED_ENV) -> bool:
    """Whether an environment name matches one of the patterns (case counts, as in the environment)."""
    return any(fnmatchcase(name, p) for p in patterns)


def check_env(entry: str, where: str = "--env") -> str:
    name, sep, _ = entry.partition("=")
    if not sep or not _ENV_NAME.fullmatch(name):
        raise UsageError(
            f"{where} {entry!r} is not NAME=VALUE", "NAME is letters, digits and _, not starting with a digit"
        )
    if reserved(name, GPU_SELECTION):
        raise UsageError(
            f"{where}: {name} chooses which GPUs the job sees, or how they are numbered; Slurm sets that from the GPUs "
            "the job was given",
            "ask for GPUs with --gpus N: the plan, the charge and the human's card then show them",
        )
    if reserved(name):
        raise UsageError(
            f"{where}: the name {name} belongs to rsk or Slurm",
            "rsk and Slurm set SLURM_*, SBATCH_*, RSK_* and the wrapper's rsk_* themselves; give the job's PATH "
            "with --path",
        )
    return entry


def check_text(what: str, value: str) -> str:
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise UsageError(
            f"{what} is not valid UTF-8 (byte {value[exc.start]!r} at {exc.start})",
            "rsk refuses it before anything happens; pass UTF-8 text, or let the job read the bytes from a file",
        ) from None
    nul = value.find("\0")
    if nul >= 0:
        raise UsageError(
            f"{what} holds a NUL byte (at {nul})",
            "the cluster's shell would run the text before it, not what the plan shows; remove it, or let the job "
            "read such bytes from a file",
        )
    return value


def check_request(request: Request) -> Request:
    """Every text of a request is UTF-8 and every environment entry is allowed."""
    for i, arg in enumerate(request.argv):
        check_text(f"argument {i + 1} of the command", arg)
    for name in ("workdir", "path", "partition", "account", "qos", "requester"):
        check_text(name, getattr(request, name))
    if request.script is not None:
        check_text("the script", request.script)
    for entry in request.env:
        check_env(check_text("an --env value", entry))
    for task in request.tasks:
        for i, arg in enumerate(task.argv):
            check_text(f"argument {i + 1} of task {task.key}", arg)
        for entry in task.env:
            check_env(check_text(f"an env value of task {task.key}", entry), f"task {task.key} env")
    return request
