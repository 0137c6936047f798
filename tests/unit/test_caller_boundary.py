"""The caller is a value (ADR 0019, ADR 0037): outside the few places that belong to this process itself, no
module (the CLI's included) reads the environment, the working directory, the home directory or the terminal,
and none prints or writes to sys.stdout: output goes to the caller's streams (rsk.local.caller.stdout). No
module keeps state the broker would switch or share between callers (a `global`, a module-level dict, set,
list, lock or context variable, an attribute of another module set): the broker builds each Caller, with its
streams and its connection pool, and passes it down. In the broker every command runs for a caller whose
environment, directory and output are not the process's: a read of os.environ or a write to sys.stdout would
quietly use the broker's own (docs/architecture.md)."""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[2] / "src" / "rsk"

# module (relative to src/rsk) -> why it may read this process's own environment or streams
ALLOWED = {
    "entry.py": "the start path: --version and the choice of a broker, before any caller exists",
    "broker_client.py": "the client side of the broker: it is the caller, and sends its own environment",
    "local/caller.py": "the one reader of the caller: the process's own when no broker serves a caller",
    "local/paths.py": "RSK_HOME, XDG_*, RSK_TARGETS_PATH, ~/.ssh: where this process (the broker's user) keeps state",
    "local/child.py": "the environment of a Python child of this process",
    "cluster/transport.py": "the SSH identity and config of this process's user",
    "ledger/notify.py": "the human's notification hook runs in this process's environment",
    "broker/server.py": "the broker's own log on its stderr",
    "cli/broker_cmd.py": "installs the router of sys.stdout/sys.stderr once as the broker starts (ADR 0037); its log",
}
ENV = {("os", "environ"), ("os", "getenv"), ("os", "getcwd"), ("Path", "cwd"), ("Path", "home"),
       ("sys", "stdout"), ("sys", "stderr"), ("sys", "stdin")}  # fmt: skip


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
        if rel in ALLOWED:  # the allowed places say why above
            continue
        if reads := _reads(path):
            bad[rel] = reads
    assert not bad, f"read the caller (rsk.local.caller) instead: {bad}"


def test_every_allowed_place_still_needs_it() -> None:
    stale = [rel for rel in ALLOWED if not _reads(SRC / rel)]
    assert not stale, f"no longer reads the process: remove from ALLOWED: {stale}"


# module-level state, "module:name" -> why it is the same for every caller, or is the caller itself
STATE = {
    "local/caller.py:_current": "the caller context itself: the Caller this thread acts for",
    "ledger/attempts.py:_live": "the launches alive in this process: a hold names its process, so it is process-wide",
    "ledger/attempts.py:_guard": "the lock of _live",
    "ledger/attempts.py:_current": "this launch's own token, in its context",
    "cli/app.py:_registered": "every command registered once per process: the same for every caller",
    "cli/app.py:_command": "the Click command built once per process: the same for every caller",
    "cli/broker_cmd.py:sys.stdout": "the router, installed once as the broker starts: Click writes there (ADR 0037)",
    "cli/broker_cmd.py:sys.stderr": "the router of sys.stderr, as above",
}
MUTABLE = {"dict", "set", "list", "defaultdict", "OrderedDict", "ContextVar", "Lock", "RLock", "local", "Event"}


def _modules_named(tree: ast.Module) -> set[str]:
    """The names a module binds to other modules: `import x`, `import x as y`, `from rsk.p import module`."""
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update((a.asname or a.name).split(".")[0] for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("rsk"):
            base = SRC.parent / node.module.replace(".", "/")
            names.update(a.asname or a.name for a in node.names if (base / f"{a.name}.py").exists())
    return names


def _state(path: Path) -> list[str]:
    """Names this module keeps at module level that could switch or be shared: `global` rebinding, a mutable
    container, lock or context variable bound at module level, an attribute of another module assigned."""
    tree = ast.parse(path.read_text())
    modules = _modules_named(tree)
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Global):
            found.update(node.names)
        targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(
            node, (ast.AnnAssign, ast.AugAssign)) else []  # fmt: skip
        for t in targets:
            if isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name) and t.value.id in modules:
                found.add(f"{t.value.id}.{t.attr}")
    for node in tree.body:
        if not isinstance(node, (ast.Assign, ast.AnnAssign)):
            continue
        names = node.targets if isinstance(node, ast.Assign) else [node.target]
        call = node.value.func if isinstance(node.value, ast.Call) else None
        called = call.id if isinstance(call, ast.Name) else call.attr if isinstance(call, ast.Attribute) else ""
        if isinstance(node.value, (ast.Dict, ast.List, ast.Set, ast.DictComp, ast.ListComp, ast.SetComp)) or (
            called in MUTABLE
        ):
            found.update(t.id for t in names if isinstance(t, ast.Name) and not t.id.isupper() and t.id != "__all__")
    return sorted(found)


def test_no_module_keeps_state_the_broker_would_switch_or_share() -> None:
    found = {f"{path.relative_to(SRC).as_posix()}:{name}" for path in SRC.rglob("*.py") for name in _state(path)}
    unexplained = sorted(found - set(STATE))
    assert not unexplained, f"carry it in the caller's context (rsk.local.caller.Caller) instead: {unexplained}"
    assert not set(STATE) - found, f"no longer kept: remove from STATE: {sorted(set(STATE) - found)}"


def test_the_state_check_finds_a_switch(tmp_path: Path) -> None:
    """The check above can fail: each way a module could switch behaviour for the broker is found."""
    (tmp_path / "m.py").write_text(
        "import sys\nfrom contextvars import ContextVar\nimport transport\n_pool = {}\n_sink = ContextVar('s')\n"
        "def share():\n    global _shared\n    _shared = {}\n    transport.shared = True\n    sys.stdout = None\n"
    )
    assert _state(tmp_path / "m.py") == ["_pool", "_shared", "_sink", "sys.stdout", "transport.shared"]
