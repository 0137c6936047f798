"""The remote scripts as one versioned bundle: found in the package or the checkout, digested, tarred."""

from __future__ import annotations

import hashlib
import io
import tarfile
from functools import cache
from pathlib import Path

from rsk.errors import StateError

_HERE = Path(__file__).resolve().parent


def data_dir(name: str) -> Path:
    """remote/ or skills/: inside the installed package, else at the root of the checkout."""
    for candidate in (_HERE / "_data" / name, _HERE.parent.parent / name):
        if candidate.is_dir():
            return candidate
    raise StateError(f"rsk's {name}/ directory is missing from the installation", "reinstall rsk")


@cache
def files() -> tuple[tuple[str, bytes], ...]:
    root = data_dir("remote")
    paths = sorted(p for p in root.iterdir() if p.suffix in (".sh", ".awk") and p.is_file())
    return tuple((p.name, p.read_bytes()) for p in paths)


@cache
def digest() -> str:
    """Content digest of the scripts; names the versioned directory they live in on the cluster."""
    h = hashlib.sha256()
    for name, content in files():
        h.update(name.encode() + b"\0" + hashlib.sha256(content).digest())
    return h.hexdigest()[:16]


def tarball() -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for name, content in files():
            info = tarfile.TarInfo(name)
            info.size = len(content)
            info.mode = 0o755
            tar.addfile(info, io.BytesIO(content))
    return buf.getvalue()
