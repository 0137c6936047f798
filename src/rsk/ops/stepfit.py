"""Steps share their lease's nodes: each takes GPUs, CPUs and memory from one node of the lease. How many steps
of a shape run side by side, the warning when fewer run than the lease's GPUs allow, and why a queued step
waits. Pure: the numbers come from the plan, the lease's line and the project's status."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Shape:
    """What one node holds (a lease's node) or a step asks; 0 is none."""

    cpus: int
    mem_mb: int
    gpus: int


_NAMES = (("cpus", "CPUs"), ("mem_mb", "MB of memory"), ("gpus", "GPUs"))
_BOUND = {"cpus": "CPUs", "mem_mb": "memory", "gpus": "GPUs"}


def side_by_side(node: Shape, step: Shape) -> tuple[int, str]:
    """How many steps of this shape one node of the lease runs at once, and what bounds it ("" when nothing
    the step asks does)."""
    best, by = -1, ""
    for key, _ in reversed(_NAMES):  # on a tie, the GPUs bound it
        ask = getattr(step, key)
        if ask > 0:
            n = getattr(node, key) // ask
            if best < 0 or n < best:
                best, by = n, _BOUND[key]
    return (max(best, 0), by) if best >= 0 else (0, "")


def fit_warning(lease: str, node: Shape, nodes: int, step: Shape) -> str | None:
    """A warning when the lease runs fewer steps of this shape at once than its GPUs allow: the step's CPUs or
    memory (a step without --mem gets the cluster's default, often as much as a small lease's node) leave GPUs
    idle. None when the GPUs are what bounds it, or the step takes no GPU."""
    if step.gpus <= 0 or node.gpus <= 0:
        return None
    runs, by = side_by_side(node, step)
    by_gpus = node.gpus // step.gpus
    if runs >= by_gpus:
        return None
    fair = Shape(cpus=max(node.cpus // by_gpus, 1), mem_mb=node.mem_mb // by_gpus, gpus=step.gpus)
    return (
        f"this step asks {step.gpus} GPU(s), {step.cpus} CPU(s) and {step.mem_mb} MB; lease {lease} has "
        f"{node.gpus} GPUs, {node.cpus} CPUs and {node.mem_mb} MB per node, so at most {runs * nodes} such "
        f"step(s) run at once (bounded by its {by}) and {(node.gpus - runs * step.gpus) * nodes} GPU(s) sit idle: "
        f"steps take CPUs and memory from the lease too; to run {by_gpus * nodes} side by side, ask "
        f"--cpus {fair.cpus} --mem {fair.mem_mb}M per step"
    )


def waits_for(step: Shape, node: Shape, nodes: int, running: dict[str, Shape]) -> str:
    """Why a queued step waits, from what the lease's running steps hold on each node they run on (node name to
    their sum); "" when some node has room for it (it starts on the controller's next look)."""
    if len(running) < nodes:  # a node of the lease runs nothing
        return ""
    short: list[str] = []
    for held in running.values():
        free = Shape(node.cpus - held.cpus, node.mem_mb - held.mem_mb, node.gpus - held.gpus)
        lacks = [
            f"{getattr(step, key)} {name} ({max(getattr(free, key), 0)} of {getattr(node, key)} free)"
            for key, name in _NAMES
            if getattr(step, key) > getattr(free, key)
        ]
        if not lacks:
            return ""
        short.append(", ".join(lacks))
    return "it asks " + short[0] + " while the lease's other steps run" if short else ""
