"""Calls to the deployed remote scripts: one remote exec per call, deploying first when missing."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from rsk import bundle
from rsk.errors import ProtocolError, RemoteRootError
from rsk.protocol import Output, parse
from rsk.targets import find_target
from rsk.transport import Connection, remote_path

MISSING_RC = 127


class Remote:
    """The rsk scripts on one target, reached over one connection."""

    def __init__(self, conn: Connection) -> None:
        self.conn = conn
        self.root = conn.target.remote_root
        self.digest = bundle.digest()
        self.deployed_now = False

    @property
    def script_dir(self) -> str:
        return remote_path(self.root, "scripts", self.digest)

    def call(self, script: str, *args: str, stdin: bytes = b"", timeout: float | None = None) -> Output:
        """Run scripts/DIGEST/SCRIPT ARGS; deploy the bundle (one upload) if it is not there yet."""
        out = self._exec(script, args, stdin, timeout)
        if out is None:
            self.deploy()
            out = self._exec(script, args, stdin, timeout)
            if out is None:
                raise ProtocolError("the remote scripts are still missing after deployment")
        return out

    def _exec(self, script: str, args: tuple[str, ...], stdin: bytes, timeout: float | None) -> Output | None:
        import shlex

        d = self.script_dir
        cmd = (
            f"d={d}; [ -f \"$d/{script}\" ] || {{ echo '@@missing'; exit {MISSING_RC}; }}; "
            f'RSK_ROOT={remote_path(self.root)} exec /bin/sh "$d/{script}"'
            + "".join(" " + shlex.quote(a) for a in args)
        )
        result = self.conn.run(cmd, stdin=stdin, timeout=timeout)
        if result.rc == MISSING_RC and "@@missing" in result.stdout:
            return None
        if "@@done" not in result.stdout:
            raise ProtocolError(
                f"remote {script} ended without an answer (rc={result.rc}): {result.stderr.strip()[:300]}",
                "run `rsk doctor TARGET`",
            )
        return parse(result.stdout)

    def deploy(self) -> None:
        scripts = remote_path(self.root, "scripts")
        d = self.script_dir
        cmd = (
            f"set -e; umask 022; mkdir -p {scripts}; t=$(mktemp -d {scripts}/.deploy.XXXXXX); "
            f'tar -xf - -C "$t"; chmod 0755 "$t"; '
            f'mv -T "$t" {d} 2>/dev/null || rm -rf "$t"; [ -f {d}/submit.sh ] && echo @@deployed'
        )
        result = self.conn.run(cmd, stdin=bundle.tarball(), timeout=60)
        if result.rc != 0 or "@@deployed" not in result.stdout:
            raise RemoteRootError(
                f"could not deploy the rsk scripts under {self.root}: {result.stderr.strip()[:300]}",
                "check that the remote root is writable and the disk is not full",
            )
        self.deployed_now = True


@contextlib.contextmanager
def remote_for(target_name: str) -> Iterator[Remote]:
    """One connection to a target for the length of the block."""
    with Connection(find_target(target_name)) as conn:
        yield Remote(conn)
