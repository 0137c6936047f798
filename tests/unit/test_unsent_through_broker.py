"""The file-here warning (ADR 0074) must not make the broker look at a path its caller names, for any caller.

ADR 0064 (and docs/security.md) rests on "the broker opens no path a caller names, of any user, so what it reads of
the caller's tree is what the caller's client could read": an agent of the human's own user in a sandbox reaches the
broker's socket, and to the broker it is the owner. ADR 0074's warning `stat`s `cwd/word` in the broker for its own
user, with the working directory the client claims, let a sandbox that cannot see a directory (an empty tmpfs over it,
a read-deny rule) learn through `rsk plan` which files exist there (up to 2,000 names a request, the first three
found named in the warning). Reproduced on the lab with `unshare -m` and a tmpfs over a 0700 directory.
The look belongs to the client (which sees what the caller sees), never to the broker."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from rsk.local.caller import Caller, Rights, acting_for
from rsk.local.unsent import local_files


def test_the_broker_looks_at_no_path_its_own_users_request_names(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    hidden = tmp_path / "secret"
    (hidden / "sub").mkdir(parents=True)
    (hidden / "key").write_text("not for the sandbox\n")
    (hidden / "sub" / "model.pt").write_text("")
    looked: list[str] = []
    real_stat = Path.stat

    def stat(self: Path, *args: object, **kwargs: object) -> os.stat_result:
        looked.append(str(self))
        return real_stat(self, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(Path, "stat", stat)
    # the broker's own user, as the broker builds its Caller: the cwd is what the client sent, never checked
    sandboxed = Caller(env={}, cwd=tmp_path, rights=Rights(uid=os.getuid(), user="me"), ppid=1)
    with acting_for(sandboxed):
        named = local_files([["cat", "secret/key", "secret/nokey", "secret/sub/model.pt"]])
    assert named == [], f"the broker told its caller which of its paths exist: {named}"
    assert looked == [], f"the broker looked at paths its caller named: {looked}"
