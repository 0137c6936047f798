"""The cluster side stays small: every line of remote/ travels with each call and is read by whoever audits it."""

from __future__ import annotations

from pathlib import Path

import pytest

REMOTE = Path(__file__).parents[2] / "remote"
MAX_LINES = 2400


# The budget is not met yet: remote/ is being cut to it. When this xpasses, remote/ is under 2,400 lines: remove the
# marker, and the budget holds from then on.
@pytest.mark.xfail(strict=True, reason="remote/ is being cut to its 2,400-line budget; remove this marker once under")
def test_the_remote_programs_stay_under_their_line_budget() -> None:
    lines = {p.name: p.read_bytes().count(b"\n") for p in sorted(REMOTE.iterdir()) if p.is_file()}
    total = sum(lines.values())  # as `wc -l remote/*` counts them
    largest = ", ".join(f"{n} {c}" for n, c in sorted(lines.items(), key=lambda x: -x[1])[:3])
    assert total < MAX_LINES, f"remote/ holds {total} lines (largest: {largest}); keep it under {MAX_LINES}"
