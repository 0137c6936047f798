"""How rsk starts a Python child of its own (the broker in the background, the URL notification hook): this
interpreter, isolated from the working directory, importing this very rsk.

`python -m rsk` puts the working directory first on sys.path, so an `rsk/` package or an `rsk.py` that an
agent left in its tree would run as the human (as root, when the human is root). The child gets `-P` (no
unsafe path first on sys.path), the directory that holds this rsk package first on PYTHONPATH, every other
PYTHONPATH entry made absolute (a relative one would name the working directory again), and the caller
runs it in `/`. rsk's own settings pass as they are: a relative RSK_HOME or RSK_TARGETS_PATH is refused in the
child as here, and a relative XDG_* ignored (ADR 0054), so none of them names the working directory.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path


def python(module: str, *args: str) -> tuple[list[str], dict[str, str]]:
    """(argv, environment) that run `python -m module args...` with this rsk and nothing from the cwd."""
    package_parent = str(Path(__file__).resolve().parent.parent.parent)  # the directory that holds rsk/
    env = dict(os.environ)
    rest = [str(Path(p).absolute()) for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
    env["PYTHONPATH"] = os.pathsep.join(dict.fromkeys([package_parent, *rest]))
    return [sys.executable, "-P", "-m", module, *args], env
