"""Calls to the cluster: each ships its program (rsk.bundle) and reads only its own framed answer."""

from __future__ import annotations

import contextlib
import secrets
import shlex
from collections.abc import Iterator

from rsk import bundle
from rsk.errors import ProtocolError
from rsk.protocol import FRAME, Output, parse
from rsk.targets import find_target
from rsk.transport import Connection, connect, remote_path


class Remote:
    """rsk's programs on one target, reached over one connection."""

    def __init__(self, conn: Connection) -> None:
        self.conn = conn
        self.root = conn.target.remote_root

    def command(self, entry: str, args: tuple[str, ...]) -> str:
        """The remote command line: the remote root, then `sh -c PROGRAM` with the arguments."""
        quoted = "".join(" " + shlex.quote(a) for a in args)
        return (
            f"RSK_ROOT={remote_path(self.root)} exec /bin/sh -c {shlex.quote(bundle.program(entry))} rsk-{entry}"
            + quoted
        )

    def call(self, entry: str, *args: str, stdin: bytes = b"", timeout: float | None = None) -> Output:
        """Run one program. The first stdin line carries a fresh nonce; only `@@NONCE` lines count."""
        nonce = secrets.token_hex(16)
        frame = f"{FRAME} {nonce}\n".encode("ascii")
        result = self.conn.run(self.command(entry, args), stdin=frame + stdin, timeout=timeout)
        out = parse(result.stdout, nonce)
        if out is None:
            raise ProtocolError(
                f"the cluster's {entry} program ended without an answer (rc={result.rc}): "
                f"{result.stderr.strip()[:300]}",
                "the connection may have dropped (try again; a request id makes that safe), or run `rsk doctor TARGET`",
            )
        return out

    @property
    def host_key(self) -> str:
        return self.conn.host_key


@contextlib.contextmanager
def remote_for(target_name: str) -> Iterator[Remote]:
    """One connection to a target for the length of the block."""
    with connect(find_target(target_name)) as conn:
        yield Remote(conn)
