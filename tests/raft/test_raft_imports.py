"""The Raft core stays pure and its modules form no cycle (docs/raft.md, "Modules").

Read from the sources (type-only imports included): a module of ``litemq.raft`` imports only
the standard library, ``litemq.limits`` (the bounds) and other ``litemq.raft`` modules; the core
(everything but the simulator) imports nothing that does I/O, threads or reads a clock; and the
imports between ``litemq.raft`` modules have no cycle.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import litemq.raft

RAFT_DIR = Path(litemq.raft.__file__).parent
IMPURE = {"asyncio", "socket", "selectors", "select", "threading", "time", "datetime", "os", "io",
          "pathlib", "subprocess", "multiprocessing", "concurrent", "signal", "shutil", "tempfile"}


def _imports() -> dict[str, set[str]]:
    """Module name (``node``) -> every module it imports (``litemq.raft.core``, ``random``...)."""
    out: dict[str, set[str]] = {}
    for path in sorted(RAFT_DIR.glob("*.py")):
        names: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                names |= {a.name for a in node.names}
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                if node.module == "litemq.raft":  # from litemq.raft import leader
                    names |= {f"litemq.raft.{a.name}" for a in node.names}
                else:
                    names.add(node.module)
        out[path.stem] = names
    return out


def test_raft_imports_only_the_standard_library_limits_and_itself():
    modules = _imports()
    assert {"core", "step", "leader", "follower", "candidate", "node"} <= modules.keys()
    for mod, names in modules.items():
        for name in names:
            top = name.split(".")[0]
            ok = (
                name in ("__future__", "litemq", "litemq.limits")
                or name.startswith("litemq.raft.")
                or top in sys.stdlib_module_names
            )
            assert ok, f"raft/{mod}.py imports {name}"
            if mod != "sim":
                assert top not in IMPURE, f"raft/{mod}.py imports {name}: the core is pure"
    # ``from litemq import X`` is allowed for limits only
    for path in RAFT_DIR.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module == "litemq":
                assert [a.name for a in node.names] == ["limits"], f"{path.name}: {ast.unparse(node)}"


def test_raft_modules_have_no_import_cycle():
    modules = _imports()
    graph = {
        mod: {n.split(".")[2] for n in names if n.startswith("litemq.raft.")} - {mod}
        for mod, names in modules.items()
        if mod != "__init__"
    }
    done: set[str] = set()

    def visit(mod: str, path: tuple[str, ...]) -> None:
        assert mod not in path, "import cycle: " + " -> ".join(path[path.index(mod):] + (mod,))
        if mod in done:
            return
        for dep in sorted(graph.get(mod, ())):
            visit(dep, path + (mod,))
        done.add(mod)

    for mod in sorted(graph):
        visit(mod, ())
