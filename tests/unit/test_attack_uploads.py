"""F3 of the attack review: another OS user's `--code` upload wrote files as the human. The broker unpacked the
caller's tar with tarfile's "data" filter, which Python before 3.11.13 / 3.12.11 / 3.13.4 lets a crafted tar pass
(CVE-2025-4517). These send such uploads the way the client sent them (a `Sent` line naming the tar's size, then
the tar) to the broker's reading of an upload: nothing lands outside its private directory, and nothing but
regular files is taken."""

from __future__ import annotations

from pathlib import Path

import pytest


# ---------------------------------------------------------------------------------------------------------
def _escaping_tar(dest_len: int, up: int, name: str) -> bytes:
    """A tar of the shape of CVE-2025-4517: symlinks whose expansion passes PATH_MAX, so that os.path.realpath
    (what tarfile's "data" filter checks with) stops expanding and reads `escape` as inside the destination, while
    the kernel follows it `up` directories above it; then `escape/NAME`."""
    import io
    import tarfile

    steps = "abcdefghijklmnop"
    comp = "d" * ((4096 - (dest_len + 1)) // (len(steps) + 1))
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:

        def add(member: str, *, kind: bytes = tarfile.REGTYPE, link: str = "", data: bytes = b"") -> None:
            ti = tarfile.TarInfo(member)
            ti.type, ti.linkname, ti.size, ti.mode = kind, link, len(data), 0o755
            tar.addfile(ti, io.BytesIO(data) if kind == tarfile.REGTYPE else None)

        path = ""
        for s in steps:
            add(f"{path}{comp}", kind=tarfile.DIRTYPE)
            add(f"{path}{s}", kind=tarfile.SYMTYPE, link=comp)
            path = f"{path}{comp}/"
        deep = "/".join([*steps, "l" * 254])
        add(deep, kind=tarfile.SYMTYPE, link="/".join([".."] * len(steps)))
        add("escape", kind=tarfile.SYMTYPE, link="/".join([deep, *[".."] * up]))
        add(f"escape/{name}", data=b"written as the broker's user\n")
    return buf.getvalue()


def _receive(data: bytes) -> Path | None:
    """The broker's reading of a `--code` upload (`Broker._ask`) given `data` as the client sent a tar: the
    directory the files landed in, or None when the upload was refused."""
    import json
    import socket

    from rsk.broker.server import Broker, Config
    from rsk.broker.wanted import Wanted

    broker = Broker(Config(socket=Path("/nonexistent/b.sock")), lambda argv, who: 0, lambda argv, at: Wanted(code="/x"))
    a, b = socket.socketpair()
    with a, b:
        a.sendall(json.dumps({"files": {}, "code": {"path": "/x", "size": len(data)}}).encode() + b"\n" + data)
        a.shutdown(socket.SHUT_WR)
        sent: list[dict[str, object]] = []
        got = broker._ask(b, lambda frame, *_: sent.append(frame), ["launch", "--code", "/x", "--", "true"], Path("/"))
    return None if got is None or got[2] is None else got[2].local


def test_another_users_code_upload_writes_nothing_outside_the_brokers_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """F3. The broker unpacks another user's `--code` tar with tarfile's "data" filter, which Python before
    3.11.13 / 3.12.11 / 3.13.4 lets a crafted tar pass (CVE-2025-4517; the lab's broker runs 3.11.7): on the lab,
    `rskagent` wrote a file into the human's 0700 RSK_HOME as root. Nothing of such an upload lands outside the
    broker's private directory, whatever the Python."""
    import tempfile

    base = tmp_path / "tmp"
    base.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(base))
    dest_len = len(str(base)) + len("/rsk-code-") + 8  # mkdtemp's name
    got = _receive(_escaping_tar(dest_len, 1, "escaped.txt"))
    assert not (base / "escaped.txt").exists(), "the upload wrote beside the broker's directory"
    if got is not None:
        import shutil

        shutil.rmtree(got, ignore_errors=True)


def test_another_users_code_upload_takes_regular_files_only() -> None:
    """A snapshot is regular files (rsk copies nothing else): an upload holding a link of any kind is refused
    whole, before anything is unpacked, rather than unpacked and trusted to a filter."""
    import io
    import tarfile

    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        ti = tarfile.TarInfo("inside")
        ti.type, ti.linkname = tarfile.SYMTYPE, "run.sh"
        tar.addfile(ti)
    assert _receive(buf.getvalue()) is None, "a symlink in another user's upload was unpacked"
