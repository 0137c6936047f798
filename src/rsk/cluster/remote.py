"""Calls to the cluster: each ships its program (rsk.wire.bundle) and reads only its own framed answer."""

from __future__ import annotations

import contextlib
import secrets
import shlex
from collections.abc import Iterator

from rsk.cluster.targets import find_target
from rsk.cluster.transport import Connection, Exchange, connect, remote_path
from rsk.errors import ProtocolError
from rsk.wire import bundle
from rsk.wire.protocol import FRAME, Output, parse


class Remote:
    """rsk's programs on one target, reached over one connection."""

    def __init__(self, conn: Connection) -> None:
        self.conn = conn
        self.root = conn.target.remote_root

    def command(self, entry: str, args: tuple[str, ...]) -> str:
        """The remote command line: the target's PATH directories and the remote root, then `sh -c LOADER`
        with the arguments; the program itself travels on stdin (`bundle.shipped`), so the line stays short
        whatever the program's size."""
        quoted = "".join(" " + shlex.quote(a) for a in args)
        path = self.conn.target.path
        prefix = f'PATH={shlex.quote(":".join(path))}:"$PATH" ' if path else ""
        loader = shlex.quote(bundle.LOADER)
        return f"{prefix}RSK_ROOT={remote_path(self.root)} exec /bin/sh -c {loader} rsk-{entry}" + quoted

    def call(self, entry: str, *args: str, stdin: bytes = b"", timeout: float | None = None) -> Output:
        """Run one program. After the program, the first stdin line carries a fresh nonce; only `@@NONCE`
        lines count."""
        nonce = secrets.token_hex(16)
        frame = bundle.shipped(entry) + f"{FRAME} {nonce}\n".encode("ascii")
        result = self.conn.run(self.command(entry, args), stdin=frame + stdin, timeout=timeout)
        return _answer(entry, parse(result.stdout, nonce), result.rc, result.stderr)

    def converse(self, entry: str, *args: str, stdin: bytes = b"") -> Conversation:
        """Run a program that answers, then waits for a word from rsk (`@@NONCE await`): `Conversation`."""
        nonce = secrets.token_hex(16)
        frame = bundle.shipped(entry) + f"{FRAME} {nonce}\n".encode("ascii")
        ex = self.conn.open(self.command(entry, args), stdin=frame + stdin)
        try:
            waiting = ex.read_until(f"\n@@{nonce} await ".encode("ascii"))
            if waiting:
                out = parse(ex.out.decode("utf-8", "replace"), nonce, until="await")
                return Conversation(entry, ex, _answer(entry, out, -1, ex.err.decode("utf-8", "replace")), True)
            result = ex.finish()
        except BaseException:
            ex.close()
            raise
        ex.close()
        return Conversation(entry, ex, _answer(entry, parse(result.stdout, nonce), result.rc, result.stderr), False)

    @property
    def host_key(self) -> str:
        return self.conn.host_key


class Conversation:
    """A program's first answer (`first`); when it waits (`waiting`), `reply` sends one line and returns the
    rest of the answer, framed by a new nonce given in that line; `close` ends it without a reply."""

    def __init__(self, entry: str, ex: Exchange, first: Output, waiting: bool) -> None:
        self.entry = entry
        self.first = first
        self.waiting = waiting
        self._ex = ex

    def reply(self, *words: str, mode: str = "") -> Output:
        """Answer the waiting program: WORDS, a fresh nonce that frames the rest of its output, then MODE."""
        if not self.waiting:
            raise ProtocolError(f"the cluster's {self.entry} program is not waiting for an answer")
        self.waiting = False
        nonce = secrets.token_hex(16)
        ex = self._ex
        ex.restart_clock()  # the time the ledger took (its lock may be busy) is not the program's
        try:
            ex.send((" ".join((*words, nonce, *([mode] if mode else []))) + "\n").encode("ascii"), last=True)
            start = len(ex.out)
            result = ex.finish()
        finally:
            ex.close()
        rest = bytes(ex.out[start:]).decode("utf-8", "replace")
        return _answer(self.entry, parse(rest, nonce), result.rc, result.stderr)

    def close(self) -> None:
        self.waiting = False
        self._ex.close()


def _answer(entry: str, out: Output | None, rc: int, stderr: str) -> Output:
    if out is None:
        raise ProtocolError(
            f"the cluster's {entry} program ended without an answer (rc={rc}): {stderr.strip()[:300]}",
            "the connection may have dropped (try again; a request id makes that safe), or run `rsk doctor TARGET`",
        )
    return out


@contextlib.contextmanager
def remote_for(target_name: str) -> Iterator[Remote]:
    """One connection to a target for the length of the block."""
    with connect(find_target(target_name)) as conn:
        yield Remote(conn)
