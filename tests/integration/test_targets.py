"""Reaching clusters: ssh_config aliases, ProxyJump, strict host keys, distinct connection errors; watch."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from rsk.errors import Exit
from tests.conftest import LAB_DIR, LAB_PORT, LAB_USER, ROOT, RSK, Lab, rsk
from tests.integration.helpers import grant, launch, launched

JUMP_PORT = 2223


def target(lab: Lab, name: str, **fields: object) -> str:
    base = {
        "host": "127.0.0.1", "port": LAB_PORT, "user": LAB_USER, "identity_file": str(LAB_DIR / "id_ed25519"),
        "known_hosts": str(LAB_DIR / "known_hosts"), "remote_root": lab.remote_root, "connect_timeout": 3,
    }  # fmt: skip
    base.update(fields)
    lines = [f"{k} = {json.dumps(v)}" for k, v in base.items() if v is not None]
    (lab.targets_dir / f"{name}.toml").write_text("\n".join(lines) + "\n")
    return name


@pytest.fixture
def cleanup_targets(lab: Lab) -> Iterator[None]:
    before = set(lab.targets_dir.iterdir())
    yield
    for p in set(lab.targets_dir.iterdir()) - before:
        p.unlink()


def test_ssh_config_alias_with_proxyjump(lab: Lab, project: str, tmp_path: Path, cleanup_targets: None) -> None:
    key = LAB_DIR / "id_ed25519"
    cfg = tmp_path / "ssh_config"
    cfg.write_text(
        f"Host labalias\n  HostName 127.0.0.1\n  Port {LAB_PORT}\n  User {LAB_USER}\n  IdentityFile {key}\n"
        f"  ProxyJump jumphost\nHost jumphost\n  HostName 127.0.0.1\n  Port {JUMP_PORT}\n  User {LAB_USER}\n"
        f"  IdentityFile {key}\n"
    )
    target(lab, "viajump", host="labalias", port=None, user=None, identity_file=None, ssh_config=str(cfg))
    grant(project, "--jobs", "1")
    job = launched(rsk("launch", "-t", "viajump", "-p", project, "--json", "--", "true"))
    assert job["target"] == "viajump"
    # the jump is really in the path: with the jump host's port closed, the same alias fails
    cfg.write_text(cfg.read_text().replace(f"Port {JUMP_PORT}", "Port 1"))
    r = rsk("launch", "-t", "viajump", "-p", project, "--", "true")
    assert r.rc == Exit.CONNECT and "refused" in r.err


def test_changed_host_key_is_refused(lab: Lab, project: str, tmp_path: Path, cleanup_targets: None) -> None:
    known = tmp_path / "known_hosts"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(tmp_path / "other")], check=True)
    other = (tmp_path / "other.pub").read_text().split()[:2]
    known.write_text(f"[127.0.0.1]:{LAB_PORT} {' '.join(other)}\n")
    target(lab, "badkey", known_hosts=str(known))
    r = rsk("launch", "-t", "badkey", "-p", project, "--", "true")
    assert r.rc == Exit.CONFIG
    assert "CHANGED" in r.err and "hint:" in r.err
    assert lab.journal(project) == []


def test_unknown_host_key_is_refused_never_added(lab: Lab, project: str, tmp_path: Path, cleanup_targets: None) -> None:
    known = tmp_path / "known_hosts"
    known.write_text("")
    target(lab, "nokey", known_hosts=str(known))
    r = rsk("launch", "-t", "nokey", "-p", project, "--", "true")
    assert r.rc == Exit.CONFIG and "unknown" in r.err and "verifies its fingerprint" in r.err
    assert known.read_text() == ""


def test_authentication_failure_is_distinct(lab: Lab, project: str, tmp_path: Path, cleanup_targets: None) -> None:
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(tmp_path / "stranger")], check=True)
    target(lab, "noauth", identity_file=str(tmp_path / "stranger"))
    r = rsk("launch", "-t", "noauth", "-p", project, "--", "true", env={"SSH_AUTH_SOCK": ""})
    assert r.rc == Exit.CONFIG and "authentication failed" in r.err


def test_refused_and_timeout_are_distinct(lab: Lab, project: str, cleanup_targets: None) -> None:
    target(lab, "closed", port=1)
    r = rsk("launch", "-t", "closed", "-p", project, "--", "true")
    assert r.rc == Exit.CONNECT and "refused" in r.err
    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(5)
    conns: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        silent.settimeout(0.2)
        while not stop.is_set():
            try:
                conns.append(silent.accept()[0])  # accept, then never say anything
            except OSError:
                continue

    t = threading.Thread(target=accept, daemon=True)
    t.start()
    try:
        target(lab, "silent", port=silent.getsockname()[1], connect_timeout=2)
        started = time.monotonic()
        r = rsk("launch", "-t", "silent", "-p", project, "--", "true")
        assert r.rc == Exit.CONNECT and "timed out" in r.err
        assert time.monotonic() - started < 30
    finally:
        stop.set()
        t.join()
        silent.close()
        for c in conns:
            c.close()


def test_targets_lists_what_it_finds(lab: Lab, cleanup_targets: None) -> None:
    target(lab, "second")
    names = [t["name"] for t in json.loads(rsk("targets", "--json").out)["targets"]]
    assert "lab" in names and "second" in names
    (lab.targets_dir / "broken.toml").write_text("host = [")
    r = rsk("launch", "-t", "broken", "-p", "x", "--", "true")
    assert r.rc == Exit.STATE and "not valid TOML" in r.err


def test_watch_shows_an_unreachable_target_as_stale(lab: Lab, project: str, cleanup_targets: None) -> None:
    grant(project, "--jobs", "1")
    launched(launch(project, "-r", "w"))
    target(lab, "gone", port=1)
    r = rsk("watch", "-t", "lab", "-t", "gone", "-p", project, "--once")
    assert r.rc == 0, r.err
    assert "gone: STALE" in r.out and "refused" in r.out
    assert " w " in r.out or "│ w " in r.out
    body = json.loads(rsk("watch", "-t", "lab", "-t", "gone", "-p", project, "--json").out)
    assert "gone" in body["stale"] and [s["target"] for s in body["statuses"]] == ["lab"]


def test_watch_without_a_terminal_prints_a_table_per_refresh(lab: Lab, project: str) -> None:
    """An agent's shell is no terminal: watch still says something at every refresh, as it comes."""
    from tests.conftest import ROOT, RSK

    grant(project, "--jobs", "1")
    launched(launch(project, "-r", "piped"))
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    proc = subprocess.Popen([*RSK, "watch", "-t", "lab", "-p", project, "--interval", "1"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env)  # fmt: skip
    titles: list[str] = []
    try:
        assert proc.stdout is not None
        deadline = time.monotonic() + 60
        while len(titles) < 2 and time.monotonic() < deadline:
            line = proc.stdout.readline()
            if line.startswith(f"rsk watch: project {project} at "):
                titles.append(line)
    finally:
        proc.kill()
        proc.communicate(timeout=10)
    assert len(titles) == 2, titles  # two refreshes, each printed while watch still runs


@pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is installed by tests/setup.sh")
def test_watch_renders_and_updates_in_a_real_terminal(lab: Lab, project: str, rsk_env: Path) -> None:
    import os

    from tests.conftest import ROOT

    grant(project, "--jobs", "2")
    launched(launch(project, "-r", "first", command=("sleep", "120")))
    session = f"rskwatch{project}"
    env = " ".join(
        f"{k}={v}" for k, v in {"RSK_HOME": rsk_env, "RSK_TARGETS_PATH": lab.targets_dir, "PYTHONPATH": ROOT / "src",
                                "NO_COLOR": "1"}.items()
    )  # fmt: skip
    cmd = f"env {env} {os.sys.executable} -m rsk watch -t lab -p {project} --interval 1"
    subprocess.run(["tmux", "new-session", "-d", "-s", session, "-x", "160", "-y", "40", cmd], check=True)
    try:

        def screen() -> str:
            return subprocess.run(["tmux", "capture-pane", "-p", "-t", session], capture_output=True, text=True).stdout

        def wait_for(text: str) -> str:
            deadline = time.monotonic() + 180  # (a job starts once the lab, shared with other suites, has room)
            while time.monotonic() < deadline:
                s = screen()
                if text in s:
                    return s
                time.sleep(0.5)
            raise AssertionError(f"{text!r} never appeared:\n{screen()}")

        first = wait_for("running")
        assert "rsk watch: project" in first and "first" in first
        launched(launch(project, "-r", "second", command=("sleep", "120")))
        updated = wait_for("second")
        assert "first" in updated
    finally:
        subprocess.run(["tmux", "kill-session", "-t", session], check=False)
        lab.ssh(f"squeue -h -o '%i %j' | awk '$2 ~ /^rsk:{project}:/ {{print $1}}' | xargs -r scancel")


def test_watch_backs_off_while_a_target_is_unreachable(lab: Lab, cleanup_targets: None) -> None:
    from rsk.ops.watcher import MAX_BACKOFF, Watcher

    target(lab, "down", port=1)
    w = Watcher(["down"], "p", interval=10)
    delays = [w.poll().delay for _ in range(3)]
    assert delays == [20, 40, 80]
    assert all(d <= MAX_BACKOFF for d in delays)
    target(lab, "down")  # reachable again: back to the normal interval
    assert w.poll().delay == 10


def test_ssh_config_proxycommand(lab: Lab, project: str, tmp_path: Path, cleanup_targets: None) -> None:
    key = LAB_DIR / "id_ed25519"
    known = LAB_DIR / "known_hosts"
    cfg = tmp_path / "ssh_config"
    cfg.write_text(
        f"Host viacmd\n  HostName 127.0.0.1\n  Port {LAB_PORT}\n  User {LAB_USER}\n  IdentityFile {key}\n"
        f"  ProxyCommand ssh -o BatchMode=yes -o UserKnownHostsFile={known} -i {key} -p {JUMP_PORT} "
        f"{LAB_USER}@127.0.0.1 -W %h:%p\n"
    )
    target(lab, "viacmd", host="viacmd", port=None, user=None, identity_file=None, ssh_config=str(cfg))
    grant(project, "--jobs", "1")
    assert launched(rsk("launch", "-t", "viacmd", "-p", project, "--json", "--", "true"))["target"] == "viacmd"


def test_keys_from_ssh_agent(lab: Lab, project: str, tmp_path: Path, cleanup_targets: None) -> None:
    agent = subprocess.run(["ssh-agent", "-s"], capture_output=True, text=True, check=True).stdout
    env = dict(line.split(";")[0].split("=", 1) for line in agent.splitlines() if "=" in line.split(";")[0])
    try:
        subprocess.run(["ssh-add", "-q", str(LAB_DIR / "id_ed25519")], env={**env, "PATH": "/usr/bin:/bin"}, check=True)
        target(lab, "viaagent", identity_file=None)
        grant(project, "--jobs", "1")
        r = rsk("launch", "-t", "viaagent", "-p", project, "--json", "--", "true",
                env={"SSH_AUTH_SOCK": env["SSH_AUTH_SOCK"], "HOME": str(tmp_path)})  # fmt: skip
        assert launched(r)["target"] == "viaagent"
        # and without the agent the same target has no key to offer
        r = rsk(
            "launch", "-t", "viaagent", "-p", project, "--", "true", env={"SSH_AUTH_SOCK": "", "HOME": str(tmp_path)}
        )
        assert r.rc == Exit.CONFIG and "authentication failed" in r.err
    finally:
        subprocess.run(["kill", env["SSH_AGENT_PID"]], check=False)


def test_every_answer_arrives_whole_under_load(lab: Lab, cleanup_targets: None) -> None:
    """sshd may send a command's exit status before its last output; no answer may lose its end."""
    from concurrent.futures import ThreadPoolExecutor

    from rsk.cluster.remote import remote_for

    with remote_for("lab") as remote:
        remote.call("info")

        def call(_: int) -> int:
            out = remote.call("info")  # raises when @@done is missing
            return len(out.all("policy-rule"))

        with ThreadPoolExecutor(max_workers=4) as pool:
            counts = list(pool.map(call, range(200)))
    assert counts == [11] * 200


def test_target_proxy_jump_with_user_and_port(lab: Lab, project: str, tmp_path: Path, cleanup_targets: None) -> None:
    cfg = tmp_path / "ssh_config"
    cfg.write_text(f"Host 127.0.0.1\n  IdentityFile {LAB_DIR / 'id_ed25519'}\n")  # the jump host's key
    target(lab, "jumpfield", proxy_jump=f"{LAB_USER}@127.0.0.1:{JUMP_PORT}", ssh_config=str(cfg))
    grant(project, "--jobs", "1")
    assert launched(rsk("launch", "-t", "jumpfield", "-p", project, "--json", "--", "true"))["target"] == "jumpfield"
    target(lab, "jumpfield", proxy_jump=f"{LAB_USER}@127.0.0.1:1", ssh_config=str(cfg))
    r = rsk("launch", "-t", "jumpfield", "-p", project, "--", "true")
    assert r.rc == Exit.CONNECT and "refused" in r.err


def test_small_packets_are_not_held_back_on_the_ssh_connection(lab: Lab) -> None:
    """TCP_NODELAY on the connection: without it Nagle's algorithm and the server's delayed acknowledgement
    cost every remote command ~40 ms (several small packets in a row: open, exec, stdin, end of input)."""
    from rsk.cluster.targets import find_target
    from rsk.cluster.transport import connect

    with connect(find_target("lab")) as conn:
        raw = conn.client.get_transport().sock
        assert raw.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) != 0
        assert conn.run("exit 3").rc == 3  # bench/RESULTS.md has what it saves


@pytest.mark.serial  # runs tests/setup.sh, which re-reads the lab's sshd configuration
def test_what_the_demo_sets_up_works_from_any_other_directory(tmp_path: Path) -> None:
    """README's first command sets everything up; afterwards, in any other directory, rsk finds the lab target
    and the demo project's state (the user's config and state directories, not the checkout's)."""
    env = {**os.environ, "HOME": str(tmp_path), "XDG_CONFIG_HOME": str(tmp_path / "config"),
           "XDG_STATE_HOME": str(tmp_path / "state")}  # fmt: skip
    env.pop("RSK_HOME", None)
    env.pop("RSK_TARGETS_PATH", None)
    demo = subprocess.run(["sh", str(ROOT / "tests" / "lab" / "demo.sh")], capture_output=True, text=True, env=env,
                          timeout=300, check=False)  # fmt: skip
    assert demo.returncode == 0, demo.stdout + demo.stderr
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    ran = subprocess.run([*RSK, "init", "--project", "demo", "--target", "lab"], cwd=elsewhere, env=env,
                         capture_output=True, text=True, check=False)  # fmt: skip
    assert ran.returncode == 0, ran.stderr
    listed = subprocess.run([*RSK, "targets"], cwd=elsewhere, env=env, capture_output=True, text=True, check=False)
    assert "lab " in listed.stdout and f"looked in {tmp_path / 'config' / 'rsk' / 'targets'}" in listed.stdout
    grants = subprocess.run([*RSK, "info", "--json"], cwd=elsewhere, env=env, capture_output=True, text=True,
                            check=False)  # fmt: skip
    assert grants.returncode == 0, grants.stderr
    assert json.loads(grants.stdout)["grants"], "the demo's grant is found from here"
