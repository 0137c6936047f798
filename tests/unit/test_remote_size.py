"""The cluster side stays small: every line of remote/ travels with each call and is read by whoever audits it."""

from __future__ import annotations

from pathlib import Path

REMOTE = Path(__file__).parents[2] / "remote"
MAX_LINES = 2400


def test_the_remote_programs_stay_under_their_line_budget() -> None:
    lines = {p.name: p.read_bytes().count(b"\n") for p in sorted(REMOTE.iterdir()) if p.is_file()}
    total = sum(lines.values())  # as `wc -l remote/*` counts them
    largest = ", ".join(f"{n} {c}" for n, c in sorted(lines.items(), key=lambda x: -x[1])[:3])
    assert total < MAX_LINES, f"remote/ holds {total} lines (largest: {largest}); keep it under {MAX_LINES}"
