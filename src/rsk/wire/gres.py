"""Slurm's GRES strings, the one reading on this side (remote/lib.awk's gres_gpus is the cluster's): which GPUs a
node's or a job's GRES names, of which types, and which of a node's GPU indices a job holds.

Forms Slurm writes: `gpu:4`, `gpu:a100:2`, a list of them (`gpu:a100:2,gpu:v100:1`: three GPUs), each with a
parenthesised tail (`gpu:a100:2(S:0-1)`, `gpu:fake:3(IDX:0,2-3)`, whose commas are not the list's), a `gres/` or
`gres:` prefix (`gres/gpu:a100:2`, TRES style `gres/gpu:a100=2`), and other GRES beside GPUs (`license:x:1`).
"""

from __future__ import annotations

import re

_ITEM = re.compile(r"(?:gres[/:])?gpu(?::(?P<type>[^:(,=]+))?[:=](?P<count>\d+)(?:\((?P<extra>[^)]*)\))?")
_IDX = re.compile(r"IDX:([0-9,-]+)")


def items(gres: str) -> list[str]:
    """The list's items: split at the commas outside parentheses."""
    out, depth, start = [], 0, 0
    for i, c in enumerate(gres):
        if c == "(":
            depth += 1
        elif c == ")":
            depth = max(depth - 1, 0)
        elif c == "," and depth == 0:
            out.append(gres[start:i])
            start = i + 1
    out.append(gres[start:])
    return [s.strip() for s in out if s.strip()]


def gpu_types(gres: str) -> list[str | None]:
    """One entry per GPU, its type (None where Slurm names none), in Slurm's index order:
    gpu:a100:2(S:0-1),gpu:v100:1 is [a100, a100, v100]."""
    out: list[str | None] = []
    for item in items(gres):
        m = _ITEM.fullmatch(item)
        if m:
            out += [m.group("type")] * int(m.group("count"))
    return out


def gpu_count(gres: str) -> int:
    """How many GPUs the GRES names, of every type: gpu:a100:2,gpu:v100:1 is 3."""
    return len(gpu_types(gres))


def type_names(gres: str) -> list[str]:
    """The GPU types the GRES names, each once, in order: gpu:a100:2,gpu:v100:1,gpu:a100:1 is [a100, v100]."""
    return list(dict.fromkeys(t for t in gpu_types(gres) if t is not None))


def held_indices(gres: str) -> list[int]:
    """The GPU indices a GRES string with IDX holds: gpu:fake:3(IDX:0,2-3) is [0, 2, 3]; IDX:N/A holds none."""
    found: list[int] = []
    for m in _IDX.finditer(gres):
        for part in m.group(1).split(","):
            lo, _, hi = part.partition("-")
            if lo.isdigit() and (not hi or hi.isdigit()):
                found += range(int(lo), int(hi or lo) + 1)
    return found
