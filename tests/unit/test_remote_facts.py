"""A broker's connection keeps the cluster's facts the plan program printed on it, for FACTS_TTL_S, and sends
them back ahead of the next submit program's request; a refusal drops them; nothing else is ever sent
(docs/adr/0038). The connection is a stand-in that answers as the program would: what is sent is the subject."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from rsk.cluster import remote
from rsk.cluster.remote import FACTS_TTL_S, Remote
from rsk.cluster.transport import RemoteResult
from rsk.errors import ProtocolError
from rsk.wire.protocol import FRAME


class Conn:
    """Records the line that follows the frame in each call, and answers with `reply`'s @@ lines."""

    def __init__(self, shared: bool = True) -> None:
        self.shared = shared
        self.facts: tuple[float, str, str, str] | None = None
        self.target = SimpleNamespace(remote_root="~/.rsk", path=[])
        self.sent: list[str] = []
        self.reply: list[str] = []

    def run(self, command: str, stdin: bytes, timeout: float | None = None) -> RemoteResult:
        after = stdin.decode("ascii").rsplit(f"\n{FRAME} ", 1)[1]  # the frame line follows the program
        nonce, rest = after.split("\n", 1)
        self.sent.append(rest.split("\n", 1)[0])
        lines = [f"@@{nonce} {line}" for line in self.reply] + [f"@@{nonce} done rc=0"]
        return RemoteResult(0, "\n".join(lines) + "\n", "")


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    now = [1000.0]
    monkeypatch.setattr(remote, "time", SimpleNamespace(monotonic=lambda: now[0]))
    return now


def plan(conn: Conn) -> None:
    Remote(conn).call("submit", "plan", stdin=b"rsk-request 2 0\n")  # type: ignore[arg-type]


def test_a_broker_asks_for_the_facts_keeps_them_for_the_ttl_then_asks_again(clock: list[float]) -> None:
    conn = Conn()
    conn.reply = ["facts cluster==rsklab parts=Y3B1KnwxfDR8NDAwMHwobnVsbCl8Mg== arrays=1001"]
    plan(conn)
    assert conn.sent[-1] == "facts -"
    conn.reply = []
    clock[0] += FACTS_TTL_S - 1
    plan(conn)
    assert conn.sent[-1] == "facts =rsklab Y3B1KnwxfDR8NDAwMHwobnVsbCl8Mg== 1001"
    clock[0] += 2  # the facts were read FACTS_TTL_S + 1 ago: read again
    plan(conn)
    assert conn.sent[-1] == "facts -"


def test_a_refusal_drops_the_facts(clock: list[float]) -> None:
    conn = Conn()
    conn.reply = ["facts cluster==rsklab parts=QUJD arrays=1001"]
    plan(conn)
    conn.reply = ["error code=slurm-rejected rc=70 msg=eA=="]
    plan(conn)
    assert conn.sent[-1] == "facts =rsklab QUJD 1001" and conn.facts is None
    conn.reply = []
    plan(conn)
    assert conn.sent[-1] == "facts -"


def test_a_direct_command_and_other_programs_send_and_keep_nothing(clock: list[float]) -> None:
    direct = Conn(shared=False)
    direct.reply = ["facts cluster==rsklab parts=QUJD"]
    plan(direct)
    plan(direct)
    assert direct.sent == ["rsk-request 2 0", "rsk-request 2 0"] and direct.facts is None
    shared = Conn()
    shared.reply = ["facts cluster==rsklab parts=QUJD"]
    Remote(shared).call("status", "p", stdin=b"held \n")  # type: ignore[arg-type]
    assert shared.sent == ["held "] and shared.facts is None


@pytest.mark.parametrize(
    "line",
    [
        "facts cluster==x",
        "facts cluster=a\x01 parts=QUJD arrays=1",
        "facts cluster==x parts=Q; arrays=1",
        "facts cluster==x parts=QUJD arrays=x",
    ],
)
def test_a_malformed_facts_line_is_a_protocol_error(clock: list[float], line: str) -> None:
    conn = Conn()
    conn.reply = [line]
    with pytest.raises(ProtocolError):
        plan(conn)
    assert conn.facts is None
