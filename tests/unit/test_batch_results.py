"""How many calls `rsk fetch --batch B --result` makes: a few that list many tasks' results and bring their files by
name, never a call or three per task; what a call of many did not bring (a larger file, a task it could not answer
for) comes by the task's own calls, and every file is checked against its manifest all the same. The cluster here is a
stand-in that answers `status` and `fetch` as the programs do (the real one: tests/integration/test_results.py and
tests/shell/code_fetch.bats); the files and the checks are real."""

from __future__ import annotations

import base64
import contextlib
import hashlib
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from rsk.ops import fetch as fetch_mod
from rsk.ops.fetch import BLOCK, EACH, INLINE, PER_CALL, fetch_batch_results
from rsk.wire.protocol import Output, parse

NONCE = "0" * 32


class _Cluster:
    """A batch `b` of `n` tasks whose even ones published `r.txt` (and `big.bin` for task 0, larger than INLINE)."""

    def __init__(self, n: int, big: bool = False, unanswered: frozenset[str] = frozenset()) -> None:
        self.n, self.big, self.unanswered = n, big, unanswered
        self.calls: Counter[str] = Counter()  # "fetch -" (of many jobs), "fetch JOB" (of one), "status"

    def files(self, k: int) -> dict[str, bytes]:
        got = {"r.txt": f"{k}\n".encode()}
        if self.big and k == 0:
            got["big.bin"] = b"x" * (INLINE + 1)
        manifest = "".join(f"{hashlib.sha256(d).hexdigest()} {len(d)} {p}\n" for p, d in sorted(got.items()))
        return {**got, ".rsk-manifest": manifest.encode()}

    def answer(self, job: str, path: str, offset: int, most: int) -> list[str]:
        k = int(job.split("_")[1])
        files = self.files(k)
        if path == ".rsk-result":
            return [f"entry path={p} size={len(d)}" for p, d in files.items()]
        data = files[path.removeprefix(".rsk-result/")]
        chunk = data[offset : offset + most]
        return [f"file size={len(data)}"] + ([f"chunk {base64.b64encode(chunk).decode()}"] if chunk else [])

    def call(self, entry: str, *args: str, stdin: bytes = b"", timeout: float | None = None) -> Output:
        rows: list[str] = []
        if entry == "status":
            self.calls["status"] += 1
            rows.append("status slurm=up t=2026-01-01T00:00:00Z project=p")
            for k in range(self.n):
                rc = k % 2
                rows.append(f"job rid=b task=t{k} idx={k} job=500_{k} rc={rc} sig=none elapsed=3 limit=600 "
                            f"result={1 - rc} res=1,1,64,0,10")  # fmt: skip
        else:
            assert entry == "fetch"
            _, job, path, offset, most = args
            self.calls["fetch -" if job == "-" else "fetch JOB"] += 1
            if job != "-":
                rows += self.answer(job, path, int(offset), int(most))
            else:
                assert stdin.startswith(b"jobs ")
                for j in stdin.decode().split(" ", 1)[1].strip().split(","):
                    if j in self.unanswered:
                        continue  # as the cluster does for a job its journal does not know
                    rows += [f"job job={j}", *self.answer(j, path, int(offset), int(most))]
        out = parse("".join(f"@@{NONCE} {r}\n" for r in [*rows, "done rc=0"]), NONCE)
        assert out is not None
        return out


def _stand_in(monkeypatch: pytest.MonkeyPatch, cluster: _Cluster) -> None:
    @contextlib.contextmanager
    def remote_for(_target: str) -> Iterator[_Cluster]:
        yield cluster

    monkeypatch.setattr(fetch_mod, "remote_for", remote_for)


def _calls_for(published: int, names: int) -> int:
    """What a batch whose `published` results hold `names` small files each (the manifest one of them) takes."""
    per = PER_CALL // BLOCK  # each small file is at most a block
    return -(-published // EACH) + names * -(-published // per)


@pytest.mark.parametrize("n", [10, 1000])
def test_a_batchs_results_take_a_few_calls_whatever_the_number_of_tasks(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, n: int
) -> None:
    cluster = _Cluster(n)
    _stand_in(monkeypatch, cluster)
    report = fetch_batch_results("lab", "p", "b", tmp_path / "res")
    assert report.fetched == n // 2 and len(report.without) == n // 2
    assert cluster.calls == Counter({"status": 1, "fetch -": _calls_for(n // 2, 2)})  # and no call of one job
    assert (tmp_path / "res" / "t4" / "r.txt").read_text() == "4\n"
    assert (tmp_path / "res" / "t4" / ".rsk-manifest").is_file() and not (tmp_path / "res" / "t1").exists()
    assert (tmp_path / "res" / "t4" / ".rsk-job").read_text() == "500_4\n"  # whose result it is
    again = fetch_batch_results("lab", "p", "b", tmp_path / "res")  # all there: the cluster is asked nothing of them
    assert all(t.result is None or t.result.already for t in again.tasks) and again.bytes == 0
    assert again.fetched == n // 2 and again.tasks[4].result is not None and again.tasks[4].result.file_count == 1
    assert cluster.calls == Counter({"status": 2, "fetch -": _calls_for(n // 2, 2)})


def test_a_result_fetched_before_from_another_job_is_compared_on_the_cluster(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """A task's directory that holds an earlier job's result (a retry published a new one) is no result of its
    latest job: the cluster's manifest is read and compared, and the directory refused as it was before."""
    cluster = _Cluster(2)
    _stand_in(monkeypatch, cluster)
    fetch_batch_results("lab", "p", "b", tmp_path / "res")
    (tmp_path / "res" / "t0" / ".rsk-job").write_text("499_0\n")
    again = fetch_batch_results("lab", "p", "b", tmp_path / "res")  # the same manifest: it is that result still
    assert again.tasks[0].result is not None and again.tasks[0].result.already
    assert cluster.calls["fetch -"] == _calls_for(1, 2) + _calls_for(1, 1)


def test_what_a_call_of_many_did_not_bring_comes_by_the_tasks_own_calls_and_is_checked_the_same(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    cluster = _Cluster(6, big=True, unanswered=frozenset({"500_2"}))
    _stand_in(monkeypatch, cluster)
    report = fetch_batch_results("lab", "p", "b", tmp_path / "res")
    assert report.fetched == 3
    assert (tmp_path / "res" / "t0" / "big.bin").stat().st_size == INLINE + 1  # larger than INLINE: its own call
    assert (tmp_path / "res" / "t2" / "r.txt").read_text() == "2\n"  # not in the calls of many: its own three
    assert cluster.calls["fetch JOB"] == 1 + 3
