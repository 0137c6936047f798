"""The GPU inventory from the cluster's GRES records (pure parsing)."""

from __future__ import annotations

from rsk.ops.gpus import gpu_types, held_indices, inventory_from, node_types, said
from rsk.wire.protocol import b64, parse

N = "0123456789abcdef0123456789abcdef"


def test_gres_strings() -> None:
    assert gpu_types("gpu:a100:2,gpu:v100:1") == ["a100", "a100", "v100"]
    assert gpu_types("gpu:4(S:0-1)") == [None] * 4
    assert gpu_types("gpu:fake:2,license:x:1") == ["fake", "fake"]
    assert held_indices("gpu:fake:3(IDX:0,2-3)") == [0, 2, 3]
    assert held_indices("gpu:fake:0(IDX:N/A)") == []


def test_each_gpu_is_free_held_by_whom_or_unavailable() -> None:
    text = "\n".join([
        f"@@{N} node name=n1 state=MIXED partitions=cpu,gpu gres={b64('gpu:fake:4')} used={b64('gpu:fake:3(IDX:0-2)')}",
        f"@@{N} node name=n2 state=IDLE+DRAIN partitions=gpu gres={b64('gpu:2')} used={b64('gpu:0(IDX:N/A)')}",
        f"@@{N} held job=7_1 name={b64('innocent')} node=n1 gres={b64('gpu:fake:2(IDX:0,2)')} "
        "start=2026-12-04T09:11:55",
        f"@@{N} held job=8 name={b64('someone else')} node=n1 gres={b64('gpu:fake:1(IDX:1)')} start=1796375524",
        f"@@{N} done rc=0",
    ])  # fmt: skip
    out = parse(text, N)
    assert out is not None
    inv = inventory_from("lab", out, held_by={"7_1": ("proj", "train-1")})  # whose: the ledger's, not the name's
    assert (inv.total, inv.free) == (6, 1)
    n1, n2 = inv.nodes
    assert [(g.index, g.state, g.job_id) for g in n1.gpus] == [
        (0, "held", "7_1"), (1, "held", "8"), (2, "held", "7_1"), (3, "free", None),
    ]  # fmt: skip
    assert (n1.gpus[0].project, n1.gpus[0].request_id) == ("proj", "train-1")
    # both spellings of a start time on the wire answer as ISO 8601: Slurm's as it is, epoch seconds in UTC
    doc = inv.model_dump(mode="json")["nodes"][0]["gpus"]
    assert (doc[0]["since"], doc[1]["since"]) == ("2026-12-04T09:11:55", "2026-12-04T09:12:04Z")
    assert said(n1.gpus[1].since) == "2026-12-04 09:12:04 UTC"
    assert (n1.gpus[1].project, n1.gpus[1].job_name) == (None, "someone else")
    assert [g.state for g in n2.gpus] == ["unavailable", "unavailable"] and n2.free == 0


def test_a_leases_view_takes_its_nodes_gpu_types_from_the_clusters() -> None:
    cluster = parse("\n".join([
        f"@@{N} node name=n1 state=MIXED partitions=gpu gres={b64('gpu:a100:4')} used=",
        f"@@{N} node name=n2 state=MIXED partitions=gpu gres={b64('gpu:a100:2,gpu:v100:2')} used=",
        f"@@{N} done rc=0",
    ]), N)  # fmt: skip
    lease = parse("\n".join([
        f"@@{N} node name=n1 state=running partitions=gpu gres={b64('gpu:2')} used=",
        f"@@{N} node name=n2 state=running partitions=gpu gres={b64('gpu:2')} used=",
        f"@@{N} done rc=0",
    ]), N)  # fmt: skip
    assert cluster is not None and lease is not None
    types = node_types(inventory_from("lab", cluster))
    assert types == {"n1": "a100"}  # n2's GPUs are of two types: which one a lease holds is not known
    inv = inventory_from("lab", lease, types)
    assert [[g.type for g in n.gpus] for n in inv.nodes] == [["a100", "a100"], [None, None]]


def test_a_gpu_is_a_projects_only_by_its_ledgers_ids_never_by_the_name_a_job_gives_itself() -> None:
    text = "\n".join([
        f"@@{N} node name=n1 state=MIXED partitions=gpu gres={b64('gpu:4')} used={b64('gpu:4(IDX:0-3)')}",
        f"@@{N} held job=20 name={b64('rsk:other:stolen')} node=n1 gres={b64('gpu:1(IDX:0)')} start=",
        f"@@{N} held job=21 name={b64('rsk:mine:fake')} node=n1 gres={b64('gpu:1(IDX:1)')} start=",
        f"@@{N} held job=30s1 name={b64('rsk:mine:s1')} node=n1 gres={b64('gpu:1(IDX:2)')} start=",
        f"@@{N} held job=30s2 name={b64('rsk:other:x')} node=n1 gres={b64('gpu:1(IDX:3)')} start=",
        f"@@{N} done rc=0",
    ])  # fmt: skip
    out = parse(text, N)
    assert out is not None
    # job 20 renamed itself as another project's; 21 claims to be mine, no ledger holds it; a lease (job 30) of
    # mine runs step 30s1 the ledger allowed, and 30s2 it did not: that one is its lease's
    held_by = {"20": ("mine", "train"), "30": ("mine", "lease-rid"), "30s1": ("mine", "step-rid")}
    gpus = inventory_from("lab", out, held_by=held_by).nodes[0].gpus
    assert [(g.job_id, g.project, g.request_id, g.job_name) for g in gpus] == [
        ("20", "mine", "train", None), ("21", None, None, "rsk:mine:fake"),
        ("30s1", "mine", "step-rid", None), ("30s2", "mine", "lease-rid", None),
    ]  # fmt: skip
    assert all(g.project is None for g in inventory_from("lab", out).nodes[0].gpus)  # no ledger: nobody's
