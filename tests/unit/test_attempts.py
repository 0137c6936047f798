"""Which launches are under way, and what a second launch of a request id may give back (no cluster)."""

from __future__ import annotations

import subprocess
import sys

from rsk.ledger import attempts, guard
from rsk.ledger.models import Charge, Grant
from rsk.ledger.store import Store


def test_an_attempt_is_alive_while_its_launch_runs_and_its_process_lives() -> None:
    with attempts.attempt() as token:
        assert attempts.current() == token and attempts.alive(token)
        with attempts.attempt() as inner:  # another launch in the same process (the broker, rsk mcp)
            assert attempts.alive(inner) and attempts.alive(token)
        assert not attempts.alive(inner)
    assert attempts.current() is None and not attempts.alive(token)
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    host, _, started, nonce = token.split(":")
    assert not attempts.alive(f"{host}:{gone.stdout.strip()}:{started}:{nonce}")  # its process ended
    assert attempts.alive(f"elsewhere:1:1:{nonce}")  # another host's cannot be checked: it holds
    assert not attempts.alive("not a token") and attempts.all_gone([])  # an older rsk's hold names no launch


def test_a_second_launch_gives_back_only_what_no_live_launch_holds() -> None:
    store = Store("p")
    g = Grant(jobs=2)
    with attempts.attempt() as first:
        with store.transaction() as ledger:
            ledger.grants.append(g)
            live = Charge(grant_id=g.id, plan_hash="a", request_id="r", target="lab", gpu_hours=0, cpu_hours=0,
                          holders=[first])  # fmt: skip
            dead = Charge(grant_id=g.id, plan_hash="b", request_id="r", target="lab", gpu_hours=0, cpu_hours=0,
                          holders=["vm:1:0:dead"])  # fmt: skip
            ledger.charges += [live, dead]
        with attempts.attempt():  # the second launch, another plan
            with store.transaction() as ledger:
                assert guard.replaceable(ledger, "r", "c") == {dead.id}  # the live one still counts
                assert guard.replaceable(ledger, "r", "a") == {live.id, dead.id}  # the same plan is shared
                guard._release_holds(store, ledger, "r", "decided again")
            guard.release(store, "r", "not submitted: request-conflict")  # the second one's own failure
        states = {c.id: c.state for c in store.load().charges}  # (what is released moves to the archive)
        assert states.get(live.id) == "reserved" and states.get(dead.id, "released") == "released"
        guard.release(store, "r", "not submitted: it failed")  # the first one lets go of its own
    assert {c.id: c.state for c in store.load().charges}.get(live.id, "released") == "released"
