"""The remote scripts as programs: each call ships the whole program it runs (docs/adr/0006-ship-the-scripts.md).

A program is a header (the scripts digest, and the job wrapper or the status awk where the entry needs
them), lib.sh, the library parts the entry uses, the entry script, and `main "$@"`. It runs on the cluster
as `sh -c PROGRAM`, so nothing stored under the remote root is ever executed.
"""

from __future__ import annotations

import hashlib
import shlex
from functools import cache
from pathlib import Path

from rsk.errors import StateError

_HERE = Path(__file__).resolve().parent

# entry -> the parts it needs after lib.sh (in order); the program ends by calling the last part's main
ENTRIES: dict[str, tuple[str, ...]] = {
    "submit": ("policy.sh", "submit.sh"),
    "doctor": ("policy.sh", "doctor.sh"),
    "policy": ("policy.sh",),
    "status": ("status.sh",),
    "journal": ("journal.sh",),
    "logs": ("logs.sh",),
    "cancel": ("cancel.sh",),
    "reconcile": ("reconcile.sh",),
    "info": ("policy.sh", "info.sh"),
    "code": ("code.sh",),
    "fetch": ("fetch.sh",),
    "gpus": ("gpus.sh",),
    "lease": ("lease.sh",),
}
_MAIN = {"policy": "policy_main"}  # policy.sh is also a library part, so its entry has its own name
_HEADER_FILES = {
    "submit": {"RSK_WRAPPER": "wrapper.sh", "RSK_CONTROLLER": "controller.sh"},
    "status": {"RSK_STATUS_AWK": "status.awk"},
}


def data_dir(name: str) -> Path:
    """remote/ or skills/: inside the installed package, else at the root of the checkout."""
    for candidate in (_HERE / "_data" / name, _HERE.parent.parent / name):
        if candidate.is_dir():
            return candidate
    raise StateError(f"rsk's {name}/ directory is missing from the installation", "reinstall rsk")


@cache
def files() -> dict[str, str]:
    root = data_dir("remote")
    paths = sorted(p for p in root.iterdir() if p.suffix in (".sh", ".awk") and p.is_file())
    return {p.name: p.read_text(encoding="utf-8") for p in paths}


@cache
def digest() -> str:
    """sha256 over the content of every remote file: the `scripts` value bound into each plan."""
    h = hashlib.sha256()
    for name, content in files().items():
        h.update(name.encode() + b"\0" + hashlib.sha256(content.encode()).digest())
    return h.hexdigest()


@cache
def program(entry: str) -> str:
    """The whole text that runs on the cluster for one entry (`sh -c` takes it as one argument)."""
    if entry not in ENTRIES:
        raise ValueError(f"no remote entry {entry!r}")
    src = files()
    header = [
        # SC2034: library constants a program leaves unused; SC2153: RSK_ROOT comes from the caller;
        # SC2016: the job script is written with $ left for the job to expand
        "# shellcheck shell=sh disable=SC2034,SC2153,SC2016",
        f"# rsk remote program {entry} (scripts {digest()})",
        "set -eu",
        f"RSK_SCRIPTS={digest()}",
    ]
    header += [f"{var}={shlex.quote(src[name])}" for var, name in _HEADER_FILES.get(entry, {}).items()]
    parts = [src["lib.sh"], *(src[name] for name in ENTRIES[entry])]
    return "\n".join([*header, *parts, f'{_MAIN.get(entry, "main")} "$@"', ""])


def write_all(directory: str | Path) -> list[Path]:
    """Every program as DIRECTORY/ENTRY.sh (for shellcheck and the bats suites: they check what ships)."""
    out = []
    for entry in ENTRIES:
        path = Path(directory) / f"{entry}.sh"
        path.write_text(program(entry), encoding="utf-8")
        out.append(path)
    return out
