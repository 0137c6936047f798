"""SSH transport: the only module that imports paramiko.

One connection per command (in the broker: one per target, kept open in the broker's `Pool`, which each
caller's context holds); strict host keys from known_hosts (an unknown key is an error,
never added silently); ~/.ssh/config honoured (HostName, User, Port, IdentityFile,
ProxyJump, ProxyCommand); each remote command has a deadline and bounded output.
"""

from __future__ import annotations

import logging
import os
import select
import shlex
import socket
import sys
import threading
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rsk.errors import ConfigError, ConnectError, ProtocolError

if TYPE_CHECKING:
    from rsk.cluster.targets import Target


def _import_paramiko() -> Any:
    """paramiko.config imports `invoke` only for `Match exec` lines in ssh_config, which rsk does not
    support; keeping it out saves ~55 ms at every start. Anything that imports invoke later still can."""
    if "invoke" in sys.modules:
        import paramiko as mod
    else:
        sys.modules["invoke"] = None  # type: ignore[assignment]  # `import invoke` now fails fast
        try:
            import paramiko as mod
        finally:
            del sys.modules["invoke"]
    return mod


if TYPE_CHECKING:
    import paramiko
else:
    paramiko = _import_paramiko()
# paramiko's transport thread logs what ended a connection (a ProxyCommand that failed, a reset) with its
# traceback, which Python's last-resort handler would print on stderr: rsk reports it as a typed error instead
logging.getLogger("paramiko").addHandler(logging.NullHandler())

MAX_OUTPUT = 16 * 1024 * 1024


@dataclass(frozen=True)
class RemoteResult:
    rc: int
    stdout: str
    stderr: str


@dataclass(frozen=True)
class Endpoint:
    host: str
    hostname: str
    port: int
    user: str
    identity_files: list[str]
    known_hosts: Path
    proxy_jump: str | None
    proxy_command: str | None


def local_file(value: str, what: str, where: str) -> Path:
    """A file a target or an ssh_config names (ssh_config, identity_file, known_hosts, IdentityFile): absolute
    or ~/..., never relative, which would be read from whatever directory rsk runs in (an agent's tree could
    then supply a key, the host keys, or an ssh_config whose ProxyCommand runs as the human: ADR 0054)."""
    path = Path(value).expanduser()
    if not path.is_absolute():
        raise ConfigError(
            f"{where} names {what} {value!r}, a relative path: rsk reads no file from the directory it runs in",
            f"write {what} as an absolute path or ~/... (a file of your own configuration)",
            code="relative-path",
        )
    return path


def _ssh_config(target: Target) -> tuple[paramiko.SSHConfig, str]:
    """The ssh_config the target names (it must exist), else ~/.ssh/config when there is one; and its path."""
    if target.ssh_config is None:
        path = local_file("~/.ssh/config", "ssh_config", "the default")
        if not path.is_file():
            return paramiko.SSHConfig(), str(path)
    else:
        path = local_file(target.ssh_config, "ssh_config", f"target {target.name} ({target.source})")
    try:
        return paramiko.SSHConfig.from_path(str(path)), str(path)
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise ConfigError(f"cannot read ssh_config {path} of target {target.name}: {exc}",
                          "fix ssh_config in the target file") from exc  # fmt: skip


def resolve_endpoint(target: Target, host: str | None = None) -> Endpoint:
    """Merge the target with ~/.ssh/config: explicit target fields win."""
    config, config_path = _ssh_config(target)
    cfg = config.lookup(host or target.host)
    is_main = host is None
    hostname = cfg.get("hostname", host or target.host)
    port = (target.port if is_main else None) or int(cfg.get("port", 22))
    user = (target.user if is_main else None) or cfg.get("user") or os.environ.get("USER", "root")
    where = f"target {target.name} ({target.source})"
    identities = (
        [local_file(target.identity_file, "identity_file", where)] if (is_main and target.identity_file) else []
    )
    identities += [local_file(i, "IdentityFile", f"{config_path} (Host {host or target.host})")
                   for i in cfg.get("identityfile", [])]  # fmt: skip
    known = local_file(target.known_hosts, "known_hosts", where) if target.known_hosts else None
    return Endpoint(
        host=host or target.host,
        hostname=hostname,
        port=port,
        user=user,
        identity_files=[str(i) for i in identities],
        known_hosts=known or local_file("~/.ssh/known_hosts", "known_hosts", "the default"),
        proxy_jump=(target.proxy_jump if is_main else None) or cfg.get("proxyjump"),
        proxy_command=cfg.get("proxycommand"),
    )


def _no_delay(client: paramiko.SSHClient) -> None:
    """TCP_NODELAY on a direct TCP connection, as OpenSSH sets it: a remote command is several small
    packets in a row (open, exec, stdin, EOF), and Nagle's algorithm held each one back until the
    previous was acknowledged, which the server delays by up to 40 ms: ~45 ms a command, ~5 ms without."""
    raw = getattr(client.get_transport(), "sock", None)
    if isinstance(raw, socket.socket) and raw.family in (socket.AF_INET, socket.AF_INET6):
        raw.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)


class Exchange:
    """One remote command whose input stays open: read its output up to a marker, answer, read the rest.

    Done only at end of file AND with the exit status: sshd may send the status before the last
    output, so stopping at the status alone can lose the end of an answer."""

    def __init__(self, chan: Any, deadline: float, limit: float, max_output: int) -> None:
        self.chan = chan
        self.deadline = deadline
        self.limit = limit
        self.max_output = max_output
        self.out = bytearray()
        self.err = bytearray()

    def restart_clock(self) -> None:
        """The deadline starts again from now (the program waited for rsk, not the other way round)."""
        self.deadline = time.monotonic() + self.limit

    def read_until(self, marker: bytes) -> bool:
        """Read until `marker` is in the output (True) or the command ended without it (False)."""
        return self._pump(marker)

    def send(self, data: bytes, last: bool = False) -> None:
        try:
            if data:
                self.chan.sendall(data)
            if last:
                self.chan.shutdown_write()
        except (paramiko.SSHException, OSError, EOFError) as exc:
            raise ConnectError(f"the SSH connection broke during a remote command: {exc}", "try again") from exc

    def finish(self) -> RemoteResult:
        """Read to the end; the whole output and the exit status."""
        self._pump(None)
        chan = self.chan
        rc = chan.recv_exit_status() if chan.exit_status_ready() else -1
        text = self.out.decode("utf-8", "replace")
        return RemoteResult(rc=rc, stdout=text, stderr=self.err.decode("utf-8", "replace"))

    def close(self) -> None:
        self.chan.close()

    def _pump(self, marker: bytes | None) -> bool:
        chan, out, err = self.chan, self.out, self.err
        seen = 0  # the marker is searched for only in what arrived since the last look (and a marker's length back)
        try:
            while True:
                if marker is not None and out.find(marker, max(0, seen - len(marker))) >= 0:
                    return True
                seen = len(out)
                left = self.deadline - time.monotonic()
                if left <= 0:
                    raise ConnectError(
                        f"remote command did not finish within {self.limit:g}s",
                        "the cluster is slow or stuck; rsk reconcile resolves anything left half done",
                    )
                select.select([chan], [], [], min(left, 1.0))
                while chan.recv_ready():
                    out += chan.recv(65536)
                while chan.recv_stderr_ready():
                    err += chan.recv_stderr(65536)
                if len(out) + len(err) > self.max_output:
                    raise ProtocolError(
                        f"remote output exceeded {self.max_output} bytes",
                        "check the remote scripts and login banner",
                    )
                drained = not chan.recv_ready() and not chan.recv_stderr_ready()
                if drained and (chan.eof_received or chan.closed):
                    if marker is not None and out.find(marker, max(0, seen - len(marker))) >= 0:
                        return True
                    if chan.exit_status_ready() or chan.closed:
                        return False
                    time.sleep(0.002)  # EOF came first; the exit status follows at once
        except (OSError, EOFError, paramiko.SSHException) as exc:
            raise ConnectError(f"the SSH connection broke during a remote command: {exc}", "try again") from exc


class Connection:
    """One SSH connection to a target; `run` executes one remote command."""

    def __init__(self, target: Target) -> None:
        self.target = target
        self.shared = False  # a broker's connection: close() leaves it open for the next command
        # the cluster's facts as the plan program printed them on this connection (rsk.cluster.remote keeps them)
        self.facts: tuple[float, str, str, str] | None = None
        self._clients: list[paramiko.SSHClient] = []
        self.client = self._connect(resolve_endpoint(target), sock=None, hops=0)

    @property
    def alive(self) -> bool:
        transport = self.client.get_transport()
        return transport is not None and transport.is_active()

    def _connect(self, ep: Endpoint, sock: Any, hops: int) -> paramiko.SSHClient:
        if hops > 8:
            raise ConfigError(f"ProxyJump chain to {ep.host} is too long", "check ~/.ssh/config for a loop")
        if sock is None and ep.proxy_jump and ep.proxy_jump.lower() != "none":
            # ProxyJump a,b,c: connect to a, through a to b, through b to c, through c to the target
            via: paramiko.SSHClient | None = None
            for spec in (s.strip() for s in ep.proxy_jump.split(",")):
                if not spec:
                    raise ConfigError(f"ProxyJump {ep.proxy_jump!r} has an empty hop", "fix the target or ssh_config")
                hop = self._hop(spec, first=via is None)
                via = self._connect(hop, sock=self._channel(via, hop) if via else None, hops=hops + 1)
            assert via is not None
            sock = self._channel(via, ep)
        elif sock is None and ep.proxy_command:
            try:
                sock = paramiko.ProxyCommand(ep.proxy_command)
            except (OSError, ValueError) as exc:  # not found, not executable, unbalanced quotes
                raise ConfigError(f"the ProxyCommand for {ep.host} cannot start ({ep.proxy_command!r}): {exc}",
                                  "fix ProxyCommand in the ssh_config the target uses; `ssh -G HOST` shows it",
                                  code="proxy-command") from exc  # fmt: skip
        client = paramiko.SSHClient()
        if not ep.known_hosts.is_file():
            raise ConfigError(
                f"known_hosts file {ep.known_hosts} does not exist",
                "a human adds the cluster's host key after comparing its fingerprint with the one the cluster's "
                "admins publish (INSTALL.md); an agent must not add host keys itself",
            )
        client.load_host_keys(str(ep.known_hosts))
        client.set_missing_host_key_policy(paramiko.RejectPolicy())
        where = f"{ep.user}@{ep.hostname}:{ep.port}"
        started = time.monotonic()
        try:
            client.connect(
                ep.hostname,
                port=ep.port,
                username=ep.user,
                key_filename=ep.identity_files or None,  # type: ignore[arg-type]  # paramiko takes a list too
                timeout=self.target.connect_timeout,
                banner_timeout=self.target.connect_timeout,
                auth_timeout=self.target.connect_timeout,
                allow_agent=True,
                look_for_keys=not ep.identity_files,
                sock=sock,
            )
        except paramiko.BadHostKeyException as exc:
            raise ConfigError(
                f"the host key of {ep.hostname}:{ep.port} CHANGED (not the one in {ep.known_hosts})",
                "this may be an attack or a reinstalled host; ask the cluster admins before you "
                "replace the key in known_hosts",
            ) from exc
        except paramiko.AuthenticationException as exc:
            raise ConfigError(
                f"authentication failed for {where}",
                "check the user and identity_file in the target (or ssh-agent); try `ssh` with the same settings",
            ) from exc
        except paramiko.ProxyCommandFailure as exc:
            raise self._proxy_ended(ep, str(exc)) from exc
        except paramiko.SSHException as exc:
            ended = _proxy_exit(sock)
            if ended is not None:  # the banner read saw its end of file: the proxy, not the host, is why
                raise self._proxy_ended(ep, f"exit status {ended}") from exc
            if "no authentication methods available" in str(exc).lower():
                raise ConfigError(
                    f"authentication failed for {where}: no key to offer",
                    "set identity_file in the target or IdentityFile in ~/.ssh/config, or load a key into ssh-agent",
                ) from exc
            if "not found in known_hosts" in str(exc):
                raise ConfigError(
                    f"the host key of {ep.hostname}:{ep.port} is unknown (not in {ep.known_hosts})",
                    "a human verifies its fingerprint with the cluster's admins and adds it to known_hosts "
                    "(INSTALL.md); an agent must not add host keys itself",
                ) from exc
            stalled = time.monotonic() - started >= self.target.connect_timeout * 0.9
            if stalled or "banner" in str(exc).lower() or "no existing session" in str(exc).lower():
                raise ConnectError(
                    f"connecting to {where} timed out: no SSH banner within {self.target.connect_timeout:g}s",
                    "the host or a proxy in between is not answering SSH; try again later",
                ) from exc
            raise ConnectError(f"SSH to {where} failed: {exc}", "try again; `rsk doctor` checks the target") from exc
        except TimeoutError as exc:
            raise ConnectError(
                f"connecting to {where} timed out after {self.target.connect_timeout:g}s",
                "the cluster may be down or unreachable; try again later",
            ) from exc
        except (paramiko.ssh_exception.NoValidConnectionsError, ConnectionRefusedError) as exc:
            raise ConnectError(
                f"connection to {where} refused",
                "is sshd running there and is the port right? try again later",
            ) from exc
        except OSError as exc:
            raise ConnectError(f"cannot reach {where}: {exc}", "check the host name and network") from exc
        _no_delay(client)
        self._clients.append(client)
        return client

    @staticmethod
    def _proxy_ended(ep: Endpoint, why: str) -> ConnectError:
        return ConnectError(
            f"the ProxyCommand for {ep.host} ended before SSH could begin: {why}",
            f"run it by hand to see why ({ep.proxy_command}); try again once it connects",
            code="proxy-command",
        )

    def _hop(self, spec: str, first: bool) -> Endpoint:
        """A ProxyJump hop, [user@]host[:port], resolved through ssh_config like any host."""
        user, _, rest = spec.rpartition("@")
        host, _, port = rest.partition(":")
        if not host or (port and not port.isdigit()):
            raise ConfigError(f"ProxyJump hop {spec!r} is not [user@]host[:port]", "fix the target or ssh_config")
        ep = resolve_endpoint(self.target, host)
        ep = replace(ep, user=user or ep.user, port=int(port or ep.port))
        # as with ssh -J: the first hop keeps its own proxy settings; a later one is reached through
        # the hop before it, never through its own
        return ep if first else replace(ep, proxy_jump=None, proxy_command=None)

    def _channel(self, via: paramiko.SSHClient, ep: Endpoint) -> Any:
        transport = via.get_transport()
        assert transport is not None
        try:
            return transport.open_channel("direct-tcpip", (ep.hostname, ep.port), ("127.0.0.1", 0))
        except (paramiko.ChannelException, paramiko.SSHException) as exc:
            raise ConnectError(
                f"a jump host could not open a connection to {ep.hostname}:{ep.port}: {exc}",
                "check that the jump host allows TCP forwarding and reaches the next host",
            ) from exc

    @property
    def host_key(self) -> str:
        """The verified host key of the cluster, as OpenSSH prints it (SHA256:...)."""
        import base64
        import hashlib

        transport = self.client.get_transport()
        assert transport is not None
        blob = transport.get_remote_server_key().asbytes()
        return "SHA256:" + base64.b64encode(hashlib.sha256(blob).digest()).decode().rstrip("=")

    def run(
        self,
        command: str,
        stdin: bytes = b"",
        timeout: float | None = None,
        max_output: int = MAX_OUTPUT,
    ) -> RemoteResult:
        """Run one command; stdin is sent whole, then closed. Raises on deadline or oversize output."""
        ex = self.open(command, stdin, timeout, max_output)
        try:
            ex.send(b"", last=True)
            return ex.finish()
        finally:
            ex.close()

    def open(
        self,
        command: str,
        stdin: bytes = b"",
        timeout: float | None = None,
        max_output: int = MAX_OUTPUT,
    ) -> Exchange:
        """Start one command and send `stdin`, keeping its input open for a later answer (`Exchange`)."""
        transport = self.client.get_transport()
        if transport is None or not transport.is_active():
            raise ConnectError("the SSH connection was closed", "try again")
        limit = timeout or self.target.command_timeout
        try:
            chan = transport.open_session(timeout=self.target.connect_timeout)
            chan.exec_command(command)
            if stdin:
                chan.sendall(stdin)
        except (paramiko.SSHException, OSError) as exc:
            raise ConnectError(f"remote command could not start: {exc}", "try again") from exc
        return Exchange(chan, time.monotonic() + limit, limit, max_output)

    def close(self) -> None:
        if not self.shared:
            self.shut()

    def shut(self) -> None:
        for client in reversed(self._clients):
            client.close()

    def __enter__(self) -> Connection:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()


KEEPALIVE_S = 15


class Pool:
    """One open connection per target, shared by the commands of the callers that hold this pool (the broker
    builds one and puts it in every Caller it makes: its warm connections). Without one, `connect` opens a
    new connection for each command."""

    def __init__(self) -> None:
        self._conns: dict[str, Connection] = {}
        self._lock = threading.Lock()

    def get(self, target: Target) -> Connection:
        """The target's open connection (reconnected when it dropped; a command that was running on a dropped
        connection fails with ConnectError, exit 75)."""
        key = target.model_dump_json()
        with self._lock:
            conn = self._conns.get(key)
            if conn is not None and conn.alive:
                return conn
            if conn is not None:
                conn.shut()
            conn = Connection(target)
            conn.shared = True
            transport = conn.client.get_transport()
            if transport is not None:
                transport.set_keepalive(KEEPALIVE_S)
            self._conns[key] = conn
            return conn

    def status(self) -> dict[str, bool]:
        """Target name -> whether its connection is up (for `rsk broker status`)."""
        with self._lock:
            return {c.target.name: c.alive for c in self._conns.values()}

    def close(self) -> None:
        with self._lock:
            for conn in self._conns.values():
                conn.shut()
            self._conns.clear()


def _proxy_exit(sock: Any) -> int | None:
    """The exit status of a ProxyCommand that has ended (its end of file can come a moment before its exit). Read
    without reaping it (WNOWAIT): paramiko's close signals the process by its pid."""
    process = getattr(sock, "process", None)
    if process is None:
        return None
    deadline = time.monotonic() + 1
    while True:
        try:
            done = os.waitid(os.P_PID, process.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
        except ChildProcessError:
            return None
        if done is not None:
            return int(done.si_status)
        if time.monotonic() > deadline:
            return None
        time.sleep(0.02)


def connect(target: Target) -> Connection:
    """A connection to the target: the caller's shared one when its context holds a pool (in the broker),
    else a new one."""
    from rsk.local import caller

    pool = caller.pool()
    return pool.get(target) if pool is not None else Connection(target)


def remote_path(root: str, *parts: str) -> str:
    """A shell word for ROOT/parts: a leading ~/ becomes "$HOME"/; everything else is quoted."""
    tail = "/".join(p.strip("/") for p in parts if p)
    if root == "~" or root.startswith("~/"):
        rest = root[2:].strip("/")
        joined = "/".join(p for p in (rest, tail) if p)
        return '"$HOME"/' + shlex.quote(joined) if joined else '"$HOME"'
    return shlex.quote("/".join(p for p in (root.rstrip("/"), tail) if p))
