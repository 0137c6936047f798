"""Who may use the page (pure, but for the peer's OS user read from /proc): a single-use launch token that
becomes a session cookie, the exact Host, and for every POST the Origin and a CSRF token (ADR 0031).

The checks, in the order a request meets them (rsk.ui.server):
1. the TCP peer is a process of the page's own OS user (Linux: /proc/net/tcp); another user's is refused;
2. the Host header is exactly 127.0.0.1:PORT or localhost:PORT (421 otherwise: DNS rebinding, other ports);
3. the launch URL spends its token once and sets the session cookie (HttpOnly, SameSite=Strict);
4. every other page needs that cookie (403);
5. a POST needs an Origin of the page itself, no cross-site fetch metadata, and the session's CSRF token.
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import secrets
import struct
import threading
from dataclasses import dataclass, field
from pathlib import Path

# every answer carries these: no framing, no inline script or style, nothing from elsewhere, no referrer
SECURITY_HEADERS = {
    "content-security-policy": (
        "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; "
        "form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
    ),
    "x-frame-options": "DENY",
    "x-content-type-options": "nosniff",
    "referrer-policy": "same-origin",  # no-referrer would make a form's Origin "null"
    "cache-control": "no-store",
    "cross-origin-opener-policy": "same-origin",
    "cross-origin-resource-policy": "same-origin",
}


@dataclass(frozen=True)
class Session:
    secret: str  # the cookie's value: never shown, never logged
    csrf: str  # in every form of the session's pages
    public: str  # what the audit names: a digest of the secret, not the secret

    @staticmethod
    def new() -> Session:
        secret = secrets.token_urlsafe(32)
        return Session(secret, secrets.token_urlsafe(32), hashlib.sha256(secret.encode()).hexdigest()[:12])


@dataclass
class Guard:
    """One page's keys: its port, its launch token (spent once), its sessions."""

    port: int
    token: str = field(default_factory=lambda: secrets.token_urlsafe(32))
    spent: bool = False
    sessions: dict[str, Session] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def hosts(self) -> frozenset[str]:
        return frozenset({f"127.0.0.1:{self.port}", f"localhost:{self.port}"})

    @property
    def origins(self) -> frozenset[str]:
        return frozenset(f"http://{h}" for h in self.hosts)

    @property
    def cookie(self) -> str:
        """The session cookie's name, the port's own: cookies ignore ports, and two pages must not sign each
        other out."""
        return f"rsk_ui_{self.port}"

    def url(self, path: str = "/") -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def launch_url(self) -> str:
        return self.url(f"/launch?token={self.token}")

    def host_ok(self, host: str | None) -> bool:
        """The Host header names this page exactly (a browser always sends the port it connected to)."""
        return host is not None and host.lower() in self.hosts

    def spend(self, token: str | None) -> Session | None:
        """The launch token, once: a new session; a wrong or spent token: None."""
        with self._lock:
            if self.spent or token is None or not hmac.compare_digest(token.encode(), self.token.encode()):
                return None
            self.spent = True
            session = Session.new()
            self.sessions[session.secret] = session
            return session

    def session(self, cookie: str | None) -> Session | None:
        if not cookie:
            return None
        with self._lock:
            for secret, session in self.sessions.items():
                if hmac.compare_digest(cookie.encode(), secret.encode()):
                    return session
        return None

    def refuse_origin(self, origin: str | None, fetch_site: str | None) -> str:
        """Why a POST is refused by where it came from ("" when from this page): a browser names the page that
        sent it in Origin (always, for a POST) and Sec-Fetch-Site."""
        if origin is None or origin.lower() not in self.origins:
            return "the request did not come from this page (its Origin)"
        if fetch_site is not None and fetch_site != "same-origin":
            return "the request did not come from this page (Sec-Fetch-Site)"
        return ""

    def refuse_post(self, session: Session, origin: str | None, fetch_site: str | None, csrf: str | None) -> str:
        """Why a POST of this session is refused ("" when it may act): an act comes from this page only."""
        if why := self.refuse_origin(origin, fetch_site):
            return why
        if not csrf or not hmac.compare_digest(csrf.encode(), session.csrf.encode()):
            return "the form's CSRF token is missing or wrong: reload the page"
        return ""


def _addr(hexaddr: str) -> tuple[str, int]:
    """An address of /proc/net/tcp{,6}: 32-bit words in the host's byte order, then the port in hex."""
    word, _, port = hexaddr.partition(":")
    raw = b"".join(struct.pack("=I", int(word[i : i + 8], 16)) for i in range(0, len(word), 8))
    ip = ipaddress.ip_address(raw)
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return str(ip), int(port, 16)


def peer_socket(
    client: tuple[str, int], server: tuple[str, int], proc: Path = Path("/proc/net")
) -> tuple[int, int] | None:
    """(OS user, inode) of the socket at the other end of a TCP connection (the one whose local address is
    the client's and remote address the server's), from /proc/net/tcp and tcp6; None: no /proc to ask (not
    Linux). (-1, 0): /proc answers but lists no such socket (refused like another user's)."""
    tables = [proc / "tcp", proc / "tcp6"]
    if not any(t.exists() for t in tables):
        return None
    for table in tables:
        try:
            lines = table.read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            f = line.split()
            if len(f) < 10:
                continue
            if f[3] == "01" and _addr(f[1]) == client and _addr(f[2]) == server:  # ESTABLISHED
                return int(f[7]), int(f[9])
    return -1, 0


def peer_uid(client: tuple[str, int], server: tuple[str, int], proc: Path = Path("/proc/net")) -> int | None:
    """The OS user at the other end (peer_socket), None where there is no /proc to ask, -1 for none found."""
    found = peer_socket(client, server, proc)
    return None if found is None else found[0]


def socket_owner(inode: int, proc: Path = Path("/proc")) -> str:
    """Which process holds a socket ("PID NAME", "" when none this user can see): the browser, or whatever
    sent the request, for the audit. Evidence for a later look, not proof (a process can name itself)."""
    if inode <= 0:
        return ""
    want = f"socket:[{inode}]"
    for pid_dir in proc.glob("[0-9]*"):
        try:
            for fd in (pid_dir / "fd").iterdir():
                if str(fd.readlink()) == want:
                    name = (pid_dir / "comm").read_text().strip()
                    return f"{pid_dir.name} {name}"
        except OSError:
            continue
    return ""
