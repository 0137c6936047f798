"""The package tree reads as the pipeline (docs/architecture.md): each package imports only the ones below it,
no module imports itself back through others, and the import tree stays under ten floors."""

from __future__ import annotations

import ast
from functools import cache
from pathlib import Path

SRC = Path(__file__).resolve().parents[2] / "src" / "rsk"

# lowest first; a package may import only packages before it (the top-level stdlib modules come first)
ORDER = ["base", "local", "wire", "cluster", "request", "ledger", "ops", "ui", "mcp", "broker", "cli", "entry"]
BASE = {"__init__", "errors", "codelist", "commands"}
LOCAL = {"broker_client"}  # the broker's client: standard library only, and rsk.local's walks (rsk.local.handover)
ENTRY = {"entry", "launcher", "__main__"}


def _name(path: Path) -> str:
    parts = path.relative_to(SRC).with_suffix("").parts
    return ".".join(("rsk", *parts)).removesuffix(".__init__")


@cache
def _modules() -> dict[str, set[str]]:
    mods: dict[str, set[str]] = {}
    for path in SRC.rglob("*.py"):
        deps: set[str] = set()
        tree = ast.parse(path.read_text())
        # `if TYPE_CHECKING:` imports name types for mypy; nothing is imported when rsk runs
        guarded = [b for b in ast.walk(tree) if isinstance(b, ast.If) and ast.unparse(b.test) == "TYPE_CHECKING"]
        typing_only = {id(n) for b in guarded for stmt in b.body for n in ast.walk(stmt)}
        for node in ast.walk(tree):
            if id(node) in typing_only:
                continue
            if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "rsk":
                for alias in node.names:  # `from rsk.wire import answers` imports the module rsk.wire.answers
                    sub = f"{node.module}.{alias.name}"
                    deps.add(sub if (SRC.parent / (sub.replace(".", "/") + ".py")).exists() else node.module)
            elif isinstance(node, ast.Import):
                deps.update(a.name for a in node.names if a.name.split(".")[0] == "rsk")
        mods[_name(path)] = {d for d in deps if d != "rsk"}
    return mods


def _package(module: str) -> str:
    parts = module.split(".")
    if len(parts) == 1:
        return "base"
    if len(parts) == 2:
        return (
            "entry" if parts[1] in ENTRY else "base" if parts[1] in BASE else "local" if parts[1] in LOCAL else parts[1]
        )
    return parts[1]


def test_every_package_has_a_place_in_the_order() -> None:
    unknown = {_package(m) for m in _modules()} - set(ORDER)
    assert not unknown, f"add {sorted(unknown)} to ORDER and to docs/architecture.md"


def test_no_package_imports_one_above_it() -> None:
    upward = [
        f"{m} imports {d}"
        for m, deps in _modules().items()
        for d in deps
        if d in _modules() and ORDER.index(_package(d)) > ORDER.index(_package(m))
    ]
    assert not upward, "\n".join(sorted(upward))


def test_no_import_circle_and_fewer_than_ten_floors() -> None:
    mods = _modules()

    @cache
    def floor(module: str, path: tuple[str, ...] = ()) -> int:
        assert module not in path, "import circle: " + " -> ".join((*path, module))
        deps = [d for d in mods.get(module, ()) if d in mods]
        return 1 + max((floor(d, (*path, module)) for d in deps), default=0)

    floors = {m: floor(m) for m in mods}
    top = max(floors, key=lambda m: floors[m])
    assert floors[top] < 10, f"{top} stands on {floors[top]} floors"
