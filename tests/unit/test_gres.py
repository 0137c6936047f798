"""GRES strings, read once on this side (rsk.wire.gres): `rsk info` and `rsk gpus` count the same GPUs."""

from __future__ import annotations

import pytest

from rsk.ops.info import info
from rsk.wire.gres import gpu_count, gpu_types, held_indices, items, type_names
from rsk.wire.protocol import b64, parse

N = "0123456789abcdef0123456789abcdef"


@pytest.mark.parametrize(
    ("gres", "types"),
    [
        ("gpu:a100:2,gpu:v100:1", ["a100", "a100", "v100"]),
        ("gpu:a100:2(S:0-1),gpu:v100:1", ["a100", "a100", "v100"]),
        ("gpu:a100:2(S:0,1),gpu:v100:1(S:1)", ["a100", "a100", "v100"]),  # a comma inside the tail is not the list's
        ("gres/gpu:a100:2,gres/gpu:v100:1", ["a100", "a100", "v100"]),
        ("gres/gpu:a100=2", ["a100", "a100"]),  # TRES style
        ("gres:gpu:1", [None]),
        ("gpu:4(S:0-1)", [None] * 4),
        ("gpu:fake:4", ["fake"] * 4),
        ("gpu:fake:2,license:x:1", ["fake", "fake"]),
        ("gpu:fake:3(IDX:0,2-3)", ["fake"] * 3),
        ("gpu:0(IDX:N/A)", []),
        ("(null)", []),
        ("", []),
        ("mps:100,gpu:a100:1", ["a100"]),
    ],
)
def test_each_form_names_its_gpus_in_order(gres: str, types: list[str | None]) -> None:
    assert gpu_types(gres) == types
    assert gpu_count(gres) == len(types)


def test_types_are_named_once_and_items_split_outside_parentheses() -> None:
    assert type_names("gpu:a100:2,gpu:v100:1,gpu:a100:1") == ["a100", "v100"]
    assert type_names("gpu:4") == []
    assert items("gpu:a:1(IDX:0,2),gpu:b:1") == ["gpu:a:1(IDX:0,2)", "gpu:b:1"]


def test_held_indices() -> None:
    assert held_indices("gpu:fake:3(IDX:0,2-3)") == [0, 2, 3]
    assert held_indices("gpu:a100:1(IDX:1),gpu:v100:1(IDX:2)") == [1, 2]
    assert held_indices("gpu:fake:0(IDX:N/A)") == []


def test_info_counts_every_gpu_of_a_node_as_gpus_does(monkeypatch: pytest.MonkeyPatch) -> None:
    """`rsk info` said 2 GPUs a node for gpu:a100:2,gpu:v100:1 where `rsk gpus` and Slurm say 3."""
    from contextlib import contextmanager

    from rsk.ops import info as info_mod

    text = "\n".join([
        f"@@{N} partition name=gpu default=0 state=up time=1-00:00:00 nodes=2 cpus=4 mem_mb=4000 "
        f"gres={b64('gpu:a100:2(S:0-1),gpu:v100:1')}",
        f"@@{N} partition name=cpu default=1 state=up time=infinite nodes=2 cpus=4 mem_mb=4000 gres={b64('(null)')}",
        f"@@{N} done rc=0",
    ])  # fmt: skip
    out = parse(text, N)
    assert out is not None

    class Remote:
        def call(self, *_: str) -> object:
            return out

    @contextmanager
    def remote_for(_: str):  # type: ignore[no-untyped-def]
        yield Remote()

    monkeypatch.setattr(info_mod, "remote_for", remote_for)
    got = {p.name: p for p in info("lab", "p").partitions}
    assert (got["gpu"].gpus_per_node, got["gpu"].gpu_types) == (3, ["a100", "v100"])
    assert (got["cpu"].gpus_per_node, got["cpu"].gpu_types) == (0, [])
