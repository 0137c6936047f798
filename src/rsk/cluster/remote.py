"""Calls to the cluster: each ships its program (rsk.wire.bundle) and reads only its own framed answer."""

from __future__ import annotations

import contextlib
import secrets
import shlex
import time
from collections.abc import Callable, Iterator

from rsk.cluster.targets import find_target
from rsk.cluster.transport import Connection, Exchange, connect, remote_path
from rsk.errors import ProtocolError
from rsk.wire import answers, bundle
from rsk.wire.protocol import FRAME, Output, parse

# How long a broker's connection keeps the cluster's facts (its name, its partitions and their nodes) that the
# plan program printed, and sends them back instead of having scontrol and sinfo read again (docs/adr/0038).
FACTS_TTL_S = 60.0
_FACTS_ENTRIES = ("submit", "submit-lease")


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
        frame = bundle.shipped(entry) + f"{FRAME} {nonce}\n".encode("ascii") + self._facts_line(entry)
        result = self.conn.run(self.command(entry, args), stdin=frame + stdin, timeout=timeout)
        return self._keep_facts(entry, _answer(entry, parse(result.stdout, nonce), result.rc, result.stderr))

    def converse(self, entry: str, *args: str, stdin: bytes = b"") -> Conversation:
        """Run a program that answers, then waits for a word from rsk (`@@NONCE await`): `Conversation`."""
        nonce = secrets.token_hex(16)
        frame = bundle.shipped(entry) + f"{FRAME} {nonce}\n".encode("ascii") + self._facts_line(entry)
        ex = self.conn.open(self.command(entry, args), stdin=frame + stdin)

        def keep(out: Output) -> Output:
            return self._keep_facts(entry, out)

        try:
            waiting = ex.read_until(f"\n@@{nonce} await ".encode("ascii"))
            if waiting:
                out = parse(ex.out.decode("utf-8", "replace"), nonce, until="await")
                first = keep(_answer(entry, out, -1, ex.err.decode("utf-8", "replace")))
                return Conversation(entry, ex, first, True, keep)
            result = ex.finish()
        except BaseException:
            ex.close()
            raise
        ex.close()
        first = keep(_answer(entry, parse(result.stdout, nonce), result.rc, result.stderr))
        return Conversation(entry, ex, first, False, keep)

    def _facts_line(self, entry: str) -> bytes:
        """Ahead of a submit program's request on a broker's connection: the facts the program printed on this
        connection less than FACTS_TTL_S ago, else `facts -`, which asks it to print those it reads. Only
        what the cluster printed on this very connection is ever sent back; a direct command sends nothing."""
        if entry not in _FACTS_ENTRIES or not self.conn.shared:
            return b""
        kept = self.conn.facts
        if kept is not None and time.monotonic() - kept[0] < FACTS_TTL_S:
            return f"facts {kept[1]} {kept[2]} {kept[3]}\n".encode("ascii")
        return b"facts -\n"

    def _keep_facts(self, entry: str, out: Output) -> Output:
        """Keeps the facts a submit program printed; any refusal it reports (Slurm's above all) drops them."""
        if entry in _FACTS_ENTRIES and self.conn.shared:
            if out.first("error") is not None:
                self.conn.facts = None
            elif (got := answers.slurm_facts(out)) is not None:
                self.conn.facts = (time.monotonic(), *got)
        return out

    @property
    def host_key(self) -> str:
        return self.conn.host_key


class Conversation:
    """A program's first answer (`first`); when it waits (`waiting`), `reply` sends one line and returns the
    rest of the answer, framed by a new nonce given in that line; `close` ends it without a reply."""

    def __init__(self, entry: str, ex: Exchange, first: Output, waiting: bool,
                 seen: Callable[[Output], Output] = lambda out: out) -> None:  # fmt: skip
        self.entry = entry
        self.first = first
        self.waiting = waiting
        self._ex = ex
        self._seen = seen

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
        return self._seen(_answer(self.entry, parse(rest, nonce), result.rc, result.stderr))

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
