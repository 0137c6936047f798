"""What a request's argv names on the caller's machine: the files and the directory the broker asks the client
to send (read with the CLI's own parser, rsk.cli.argv.wanted, which the CLI hands the broker)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path


@dataclass(frozen=True)
class Wanted:
    """The local paths a request names, absolute (relative to the caller's working directory)."""

    files: list[str] = field(default_factory=list)
    code: str | None = None
    exclude: list[str] = field(default_factory=list)

    @property
    def empty(self) -> bool:
        return not self.files and self.code is None


# what argv names, read with the CLI's own parser (rsk.cli.argv.wanted): the broker asks the client for it
Reader = Callable[[list[str], Callable[[str], Path]], Wanted]
