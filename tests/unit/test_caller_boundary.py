"""The caller is a value (ADR 0019): outside the few places that belong to this process itself, no core module
reads the environment, the working directory or the home directory, and none prints. In the broker every
command runs for a caller whose environment and directory are not the process's: a read of os.environ or
Path.cwd() in the core would quietly use the broker's own (docs/architecture.md)."""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[2] / "src" / "rsk"

# module (relative to src/rsk) -> why it may read this process's own environment or streams
ALLOWED = {
    "entry.py": "the start path: --version and the choice of a broker, before any caller exists",
    "broker_client.py": "the client side of the broker: it is the caller, and sends its own environment",
    "local/caller.py": "the one reader of the caller: the process's own when no broker serves a caller",
    "local/paths.py": "RSK_HOME and XDG_*: where this process (the broker's own user) keeps its state",
    "local/child.py": "the environment of a Python child of this process",
    "cluster/targets.py": "RSK_TARGETS_PATH: this process's own target files",
    "cluster/transport.py": "the SSH identity and config of this process's user",
    "ledger/notify.py": "the human's notification hook runs in this process's environment",
    "broker/server.py": "the broker's own log on its stderr",
}
ENV = {("os", "environ"), ("os", "getenv"), ("os", "getcwd"), ("Path", "cwd"), ("Path", "home"),
       ("sys", "stdout"), ("sys", "stderr")}  # fmt: skip


def _reads(path: Path) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and (node.value.id, node.attr) in ENV:
            found.append(f"{node.value.id}.{node.attr} (line {node.lineno})")
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "print":
            found.append(f"print (line {node.lineno})")
        elif isinstance(node, ast.Attribute) and node.attr == "expanduser":
            found.append(f"expanduser (line {node.lineno})")
    return found


def test_no_core_module_reads_the_process_instead_of_the_caller() -> None:
    bad = {}
    for path in SRC.rglob("*.py"):
        rel = path.relative_to(SRC).as_posix()
        if rel.startswith("cli/") or rel in ALLOWED:  # the CLI prints; the allowed places say why above
            continue
        if reads := _reads(path):
            bad[rel] = reads
    assert not bad, f"read the caller (rsk.local.caller) instead: {bad}"


def test_every_allowed_place_still_needs_it() -> None:
    stale = [rel for rel in ALLOWED if not _reads(SRC / rel)]
    assert not stale, f"no longer reads the process: remove from ALLOWED: {stale}"
