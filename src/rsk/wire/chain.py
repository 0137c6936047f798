"""The attempt journal's seals, checked (pure; docs/protocol.md, "The journal").

Each append on the cluster is one block whose last line ends in " h=SEAL", where
SEAL = sha256(PREVIOUS_SEAL + "\\n" + BLOCK)[:16] and BLOCK is the block's lines, each with its newline,
the last without its seal. Checking the chain finds any edited line and an unsealed (torn) tail; an anchor
(a seal the client saw before, at a line number) finds a journal that was cut short or rewritten.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field

_SEAL = re.compile(r" h=([0-9a-f]{16})$")


def seal(previous: str, block_lines: list[str]) -> str:
    text = "".join(line + "\n" for line in block_lines)
    return hashlib.sha256(f"{previous}\n{text}".encode("utf-8", "surrogateescape")).hexdigest()[:16]


@dataclass
class ChainReport:
    problems: list[str] = field(default_factory=list)
    head_line: int = 0  # the last sealed line checked
    head_seal: str = ""

    @property
    def ok(self) -> bool:
        return not self.problems


def check(base_seal: str, lines: list[tuple[int, str]]) -> ChainReport:
    """Check the blocks in `lines` (line number, text), the first block chained to `base_seal`."""
    report = ChainReport()
    previous = base_seal
    pending: list[str] = []
    first_pending = 0
    for n, text in lines:
        m = _SEAL.search(text)
        if m is None:
            if not pending:
                first_pending = n
            pending.append(text)
            continue
        if seal(previous, [*pending, text[: m.start()]]) != m.group(1):
            start = first_pending if pending else n
            report.problems.append(f"lines {start}-{n} do not match their seal: the journal was edited there")
        previous = m.group(1)
        pending = []
        report.head_line, report.head_seal = n, previous
    if pending:
        report.problems.append(
            f"lines {first_pending}-{lines[-1][0]} carry no seal: a write was cut short (the next append repairs it)"
        )
    return report
