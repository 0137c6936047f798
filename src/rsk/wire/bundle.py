"""The remote scripts as programs: each call ships the whole program it runs (docs/adr/0006-ship-the-scripts.md).

A program is a header (the scripts digest, the active-state set and the awk library every program uses, and
the job wrapper, the lease controller or the status awk where the entry needs them), lib.sh, the library parts
the entry uses, the entry script, and `main "$@"` (docs/adr/0026). It
travels on stdin ahead of the request, read to the byte by a short loader that is the only text on the
command line (`LOADER`, docs/adr/0025), so no program can reach the kernel's limit on one argument and
nothing stored under the remote root is ever executed.
"""

from __future__ import annotations

import hashlib
import shlex
from functools import cache
from pathlib import Path

from rsk.errors import StateError
from rsk.wire.states import ACTIVE

_HERE = Path(__file__).resolve().parent.parent  # the rsk package

# entry -> the parts it needs after lib.sh (in order); the program ends by calling the last part's main
ENTRIES: dict[str, tuple[str, ...]] = {
    "submit": ("policy.sh", "submit.sh"),
    "doctor": ("policy.sh", "doctor.sh"),
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
    "submit-lease": ("policy.sh", "submit.sh"),  # submit, with the controller a lease's job runs
}
# header variable -> the files whose texts it holds, joined (the controller runs in a job, with kv.sh of its own)
_HEADER_FILES: dict[str, dict[str, tuple[str, ...]]] = {
    "submit": {"RSK_WRAPPER": ("wrapper.sh",)},
    "submit-lease": {"RSK_WRAPPER": ("wrapper.sh",), "RSK_CONTROLLER": ("kv.sh", "controller.sh")},
    "status": {"RSK_STATUS_AWK": ("status.awk",)},
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
    h.update(b"active\0" + " ".join(sorted(ACTIVE)).encode() + b"\0")  # part of what runs (awk_library)
    for name, content in files().items():
        h.update(name.encode() + b"\0" + hashlib.sha256(content.encode()).digest())
    return h.hexdigest()


# The command line of every call: read "rsk-program LENGTH" and then exactly LENGTH bytes of program from
# stdin, and run them in this shell. `rsk_take N` reads exactly N bytes: `dd bs=B count=K` makes K read(2)s of at
# most B bytes each, B*K never more than the bytes still missing, so it never takes a byte of what follows; a pipe
# may hand over less, so it loops (a few turns, each at most 64 KiB a read). The submit program reads its request
# with the same function (docs/adr/0058). Programs and requests are ASCII (a unit test holds programs to it), so
# ${#c} counts bytes in any shell and locale. dd is named by its path, so nothing a job puts on the account's PATH
# reads the program.
LOADER = """set -eu
rsk_bad() { echo 'rsk: the program did not arrive whole on stdin' >&2; exit 2; }
rsk_take() {
    RSK_TAKEN='' rsk_n=$1
    while [ "$rsk_n" -gt 0 ]; do
        rsk_b=65536
        [ "$rsk_n" -ge 65536 ] || rsk_b=$rsk_n
        rsk_c=$(/bin/dd bs="$rsk_b" count=$((rsk_n / rsk_b)) 2>/dev/null && echo .) || rsk_bad
        rsk_c=${rsk_c%.}
        [ -n "$rsk_c" ] || rsk_bad
        RSK_TAKEN=$RSK_TAKEN$rsk_c rsk_n=$((rsk_n - ${#rsk_c}))
    done
}
IFS=' ' read -r rsk_m rsk_n || rsk_bad
[ "$rsk_m" = rsk-program ] || rsk_bad
case $rsk_n in '' | *[!0-9]*) rsk_bad ;; esac
rsk_take "$rsk_n"
unset rsk_m rsk_n rsk_c rsk_b
eval "$RSK_TAKEN"
"""


def awk_library() -> str:
    """RSK_AWK: remote/lib.awk behind `active(STATE)`, written from rsk.wire.states.ACTIVE so that the cluster's
    active-state set is the client's, in every awk program (the one reader of it on the cluster)."""
    states = "|".join(sorted(ACTIVE))
    return f"function active(s) {{ return s ~ /^({states})$/ }}\n" + files()["lib.awk"]


def shipped(entry: str) -> bytes:
    """What goes on stdin ahead of the request: the loader's header line, then the program."""
    text = program(entry).encode("ascii")
    return f"rsk-program {len(text)}\n".encode("ascii") + text


@cache
def program(entry: str) -> str:
    """The whole text that runs on the cluster for one entry (the loader reads it from stdin)."""
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
        f"RSK_AWK={shlex.quote(awk_library())}",
    ]
    for var, names in _HEADER_FILES.get(entry, {}).items():
        header.append(f"{var}={shlex.quote(''.join(src[name] for name in names))}")
    parts = [src["kv.sh"], src["lib.sh"], *(src[name] for name in ENTRIES[entry])]
    return "\n".join([*header, *parts, 'main "$@"', ""])


def write_all(directory: str | Path) -> list[Path]:
    """Every program as DIRECTORY/ENTRY.sh, and the loader as loader.sh (for shellcheck and the bats suites:
    they check and run what ships)."""
    loader = Path(directory) / "loader.sh"
    loader.write_text("# shellcheck shell=sh\n" + LOADER, encoding="utf-8")
    out = [loader]
    for entry in ENTRIES:
        path = Path(directory) / f"{entry}.sh"
        path.write_text(program(entry), encoding="utf-8")
        out.append(path)
    return out
