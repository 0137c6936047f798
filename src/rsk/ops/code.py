"""Code up: a snapshot (rsk.request.code) made to exist on the cluster over the launch's own connection, sending
only the blobs the cluster lacks (docs/protocol.md, "Code")."""

from __future__ import annotations

import io
import tarfile
from pathlib import Path

from rsk.cluster.remote import Remote
from rsk.errors import ProtocolError
from rsk.request.code import CodeSnapshot
from rsk.wire import answers
from rsk.wire.protocol import raise_for_error


def sync(remote: Remote, project: str, snap: CodeSnapshot) -> str:
    """Make the snapshot exist on the cluster, sending only the blobs it lacks. Returns its directory."""
    manifest = snap.manifest.encode("ascii")
    body = f"manifest {len(manifest)}\n".encode("ascii") + manifest  # read to the byte, as a request is (ADR 0058)
    out = remote.call("code", "need", project, snap.digest, stdin=body)
    raise_for_error(out)
    first = answers.code(out)
    if first.ready is not None:
        return first.ready
    need = set(first.need)
    by_sha = {f.sha256: f for f in snap.files}
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.USTAR_FORMAT) as tar:
        for sha in sorted(need):
            if sha not in by_sha:
                raise ProtocolError(f"the cluster asked for a blob that is not in the snapshot: {sha[:16]}")
            tar.add(str(Path(snap.root) / by_sha[sha].path), arcname=sha, recursive=False)
    out = remote.call("code", "put", project, snap.digest, stdin=body + buf.getvalue(), timeout=600)
    raise_for_error(out)
    ready = answers.code(out).ready
    if ready is None:
        raise ProtocolError("the cluster did not confirm the code snapshot")
    return ready
