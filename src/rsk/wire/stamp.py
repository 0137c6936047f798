"""What code a long-lived process runs (the broker, the page): the size and modification time of every file of
the package and of the cluster programs it ships. A broker serves the code it started with; once these files
change on disk (an upgrade, a checkout), it must not go on serving the old code beside CLI commands that run
the new one: they would disagree about the ledger's shape and about the programs (docs/broker.md). The page
(`rsk ui`) says so at the top and asks to be started again (it cannot restart itself: its sign-in would go)."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

SOURCES = (".py", ".sh", ".awk", ".js", ".css", ".html", ".md")


def roots() -> list[Path]:
    """The package and the directory of the cluster programs (inside the package when installed)."""
    from rsk.wire.bundle import data_dir

    package = Path(__file__).resolve().parent.parent
    remote = data_dir("remote")
    return [package] if package in remote.parents else [package, remote]


def stamp(dirs: list[Path]) -> str:
    """A digest of (path, size, mtime) of every source file below dirs; reads no file's content."""
    h = hashlib.sha256()
    for root in dirs:
        for here, subdirs, files in os.walk(root):
            subdirs[:] = sorted(d for d in subdirs if d != "__pycache__")
            for name in sorted(files):
                if name.endswith(SOURCES):
                    path = Path(here) / name
                    try:
                        st = path.stat()
                    except FileNotFoundError:
                        continue  # removed while we walked: the next stamp differs anyway
                    h.update(f"{path}\0{st.st_size}\0{st.st_mtime_ns}\n".encode())
    return h.hexdigest()
