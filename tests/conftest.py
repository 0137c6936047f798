"""Shared fixtures: every test gets its own RSK_HOME and project; lab tests their own remote root."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
LAB_DIR = Path(os.environ.get("RSK_LAB_DIR", "/var/lib/rsk-lab"))
LAB_USER = os.environ.get("RSK_LAB_USER", "rsklab")
LAB_PORT = int(os.environ.get("RSK_LAB_PORT", "2222"))
# RSK_TEST_BROKER=1: every rsk() call goes through a broker that holds the calling test's RSK_HOME and
# targets (started on first use, stopped after the test), so the same suites check both modes
BROKER_MODE = os.environ.get("RSK_TEST_BROKER") == "1"
# No test starts a broker by itself: every rsk process runs directly (RSK_BROKER=off) unless its test names a
# broker's socket, or the broker pass (RSK_TEST_BROKER=1) gives rsk() the one of its RSK_HOME. The tests of
# the automatic broker set it back on for their own processes, in a directory of their own.
os.environ["RSK_BROKER"] = "off"
_brokers: dict[tuple[str, str], Path] = {}


LAB_TESTS = ROOT / "tests" / "integration"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Every test under tests/integration is a lab test (marker `lab`); a test elsewhere that reaches the
    lab must say so itself, or `pytest -m "not lab"` (the quick run) would fail without a lab."""
    unmarked = []
    for item in items:
        if item.path.is_relative_to(LAB_TESTS):
            item.add_marker(pytest.mark.lab)
        elif "lab_session" in getattr(item, "fixturenames", ()) and item.get_closest_marker("lab") is None:
            unmarked.append(item.nodeid)
    if unmarked:
        raise pytest.UsageError("tests that use the lab without the `lab` marker: " + ", ".join(unmarked))


@dataclass
class Ran:
    rc: int
    out: str
    err: str


@pytest.fixture(autouse=True)
def rsk_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path / "rsk-home"
    monkeypatch.setenv("RSK_HOME", str(home))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    monkeypatch.setenv("NO_COLOR", "1")
    for var in ("RSK_PROJECT", "RSK_TARGET", "RSK_TARGETS_PATH"):
        monkeypatch.delenv(var, raising=False)
    return home


@pytest.fixture(autouse=True)
def brokers_stopped() -> Iterator[None]:
    yield
    for sock in _brokers.values():
        subprocess.run([sys.executable, "-m", "rsk", "broker", "stop", "--socket", str(sock)], capture_output=True,
                       env={**os.environ, "PYTHONPATH": str(ROOT / "src")}, check=False)  # fmt: skip
        subprocess.run(["rm", "-rf", str(sock.parent)], check=False)
    _brokers.clear()


def _broker_for(env: dict[str, str]) -> str:
    """The socket of the broker for this RSK_HOME and targets (started now when there is none)."""
    key = (env.get("RSK_HOME", ""), env.get("RSK_TARGETS_PATH", ""))
    if key not in _brokers:
        sock = Path(f"/tmp/rsk-tb-{uuid.uuid4().hex[:8]}") / "b.sock"
        r = subprocess.run([sys.executable, "-m", "rsk", "broker", "start", "--socket", str(sock), "--idle", "300"],
                           capture_output=True, text=True, env=env, check=False)  # fmt: skip
        assert r.returncode == 0, r.stderr
        _brokers[key] = sock
    return str(_brokers[key])


_projects: set[str] = set()  # every project name this session handed out: its jobs are cancelled at the end


@pytest.fixture
def project() -> str:
    name = "t" + uuid.uuid4().hex[:10]
    _projects.add(name)
    return name


# as the installed shim and bin/rsk start it: Python without site, which rsk loads when the command runs here
RSK = [sys.executable, "-S", str(ROOT / "src" / "rsk" / "launcher.py")]


def rsk(
    *args: str,
    env: dict[str, str] | None = None,
    stdin: str | None = None,
    timeout: float = 300,
    cwd: Path | None = None,
) -> Ran:
    """Run the rsk command as a new process (the way agents and humans run it), in `cwd` when given."""
    full = {**os.environ, "PYTHONPATH": str(ROOT / "src"), **(env or {})}
    if (
        BROKER_MODE
        and full.get("RSK_BROKER") == "off"
        and "RSK_BROKER" not in (env or {})
        and "RSK_NO_BROKER" not in full
    ):
        full["RSK_BROKER"] = _broker_for(full)
    proc = subprocess.run(
        [*RSK, *args],
        capture_output=True,
        text=True,
        env=full,
        input=stdin,
        timeout=timeout,
        check=False,
        cwd=cwd,
    )
    return Ran(proc.returncode, proc.stdout, proc.stderr)


@dataclass
class Lab:
    """The lab cluster, with a remote root of this test session's own."""

    target: str
    targets_dir: Path
    remote_root: str

    def ssh(self, command: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
        """Run a shell command on the cluster as the cluster user, over OpenSSH."""
        return subprocess.run(
            [
                "ssh", "-o", "BatchMode=yes", "-o", "StrictHostKeyChecking=yes",
                "-o", f"UserKnownHostsFile={LAB_DIR / 'known_hosts'}", "-i", str(LAB_DIR / "id_ed25519"),
                "-p", str(LAB_PORT), f"{LAB_USER}@127.0.0.1", command,
            ],
            capture_output=True, text=True, timeout=timeout, check=False,
        )  # fmt: skip

    @property
    def root_sh(self) -> str:
        return '"$HOME"/' + self.remote_root.removeprefix("~/")

    def journal(self, project: str) -> list[str]:
        r = self.ssh(f"cat {self.root_sh}/journal/{project}.log 2>/dev/null || true")
        return [line for line in r.stdout.splitlines() if line]

    def jobs_named(self, prefix: str) -> list[str]:
        r = self.ssh("squeue -h -t all -o '%i %j %T'")
        return [line for line in r.stdout.splitlines() if line.split(" ")[1].startswith(prefix)]

    def set_policy(self, text: str | None) -> None:
        if text is None:
            self.ssh(f"rm -f {self.root_sh}/policy.conf")
        else:
            self.ssh(f"mkdir -p {self.root_sh} && cat > {self.root_sh}/policy.conf <<'EOF'\n{text}\nEOF")


@pytest.fixture(scope="session")
def lab_session(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lab]:
    if not (LAB_DIR / "id_ed25519").exists():
        pytest.fail("the lab cluster is not up: run `sh tests/lab/up.sh` as root first")
    root = f"~/.rsk-test-{uuid.uuid4().hex[:8]}"
    targets = tmp_path_factory.mktemp("targets")
    (targets / "lab.toml").write_text(
        (ROOT / "targets" / "lab.toml").read_text().replace('remote_root = "~/.rsk"', f'remote_root = "{root}"')
    )
    lab = Lab(target="lab", targets_dir=targets, remote_root=root)
    probe = lab.ssh("sinfo -h -o '%P %a'")
    if probe.returncode != 0:
        pytest.fail(f"the lab cluster does not answer over SSH: {probe.stderr.strip()}")
    yield lab
    # only this session's jobs (their names start rsk:PROJECT, PROJECT one handed out here, or a name made
    # from one): other sessions may be testing on the same lab at the same time
    names = " ".join(sorted(_projects))
    lab.ssh(f"squeue -h -o '%i %j' | awk -v ps='{names}' 'BEGIN {{ n = split(ps, p, \" \") }} "
            "{ for (i = 1; i <= n; i++) if (index($2, \"rsk:\" p[i]) == 1) { print $1; break } }' | xargs -r scancel; "
            f"rm -rf {lab.root_sh}")  # fmt: skip


@pytest.fixture
def lab(lab_session: Lab, monkeypatch: pytest.MonkeyPatch) -> Iterator[Lab]:
    monkeypatch.setenv("RSK_TARGETS_PATH", str(lab_session.targets_dir))
    yield lab_session
    lab_session.set_policy(None)
