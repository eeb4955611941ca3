"""The layers of docs/architecture.md hold: import-linter's contracts (pyproject.toml) pass, they
name every package and module under src/litemq, and no import cycle spans two packages.

Type-only imports (under ``TYPE_CHECKING``) count everywhere: a lower layer that needs something
from a higher one declares a ``typing.Protocol`` in its own package instead.
"""

from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path

import grimp
import pytest

import litemq

ROOT = Path(__file__).resolve().parents[1]
PACKAGE_DIR = Path(litemq.__file__).resolve().parent


def _contracts() -> list[dict]:
    with open(ROOT / "pyproject.toml", "rb") as f:
        return tomllib.load(f)["tool"]["importlinter"]["contracts"]


def _top_level_modules() -> set[str]:
    """litemq.<name> for every package and module directly under src/litemq (not __init__)."""
    out = set()
    for p in PACKAGE_DIR.iterdir():
        if p.is_dir() and (p / "__init__.py").exists():
            out.add(f"litemq.{p.name}")
        elif p.suffix == ".py" and p.stem != "__init__":
            out.add(f"litemq.{p.stem}")
    return out


def _layered_modules() -> set[str]:
    (layers,) = [c for c in _contracts() if c["type"] == "layers"]
    return {m.strip() for layer in layers["layers"] for m in layer.replace(":", "|").split("|")}


def test_layers_contract_names_every_package_and_module():
    missing = _top_level_modules() - _layered_modules()
    assert not missing, f"add these to the layers contract in pyproject.toml: {sorted(missing)}"
    assert _layered_modules() - _top_level_modules() == set()  # no stale names either


def test_lint_imports_passes():
    lint = Path(sys.executable).with_name("lint-imports")
    res = subprocess.run([str(lint), "--no-cache"], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stdout + res.stderr
    kept = [line for line in res.stdout.splitlines() if line.rstrip().endswith("KEPT")]
    assert len(kept) == len(_contracts()) >= 4, res.stdout


def _package_of(module: str) -> str:
    """The package a module belongs to, for the cycle check: a package is its own
    (``litemq.broker.handlers``), a plain module belongs to its parent package
    (``litemq.broker.handlers.txn`` to ``litemq.broker.handlers``, ``litemq.broker.server`` to
    ``litemq.broker``), so sub-packages are packages of their own. A module directly under
    ``litemq`` (``litemq.metrics``) is its own unit, as each is a layer of the contract."""
    parts = module.split(".")
    if len(parts) <= 2 or (PACKAGE_DIR.joinpath(*parts[1:]) / "__init__.py").exists():
        return module
    return ".".join(parts[:-1])


def _cycles(graph: grimp.ImportGraph) -> list[list[str]]:
    """Strongly connected components (more than one module) of the module import graph (Tarjan)."""
    adjacency = {m: sorted(graph.find_modules_directly_imported_by(m)) for m in sorted(graph.modules)}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[list[str]] = []
    for root in adjacency:
        if root in index:
            continue
        work = [(root, iter(adjacency[root]))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(adjacency[child])))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    m = stack.pop()
                    on_stack.discard(m)
                    component.append(m)
                    if m == node:
                        break
                if len(component) > 1:
                    components.append(sorted(component))
    return components


@pytest.fixture(scope="module")
def import_graph() -> grimp.ImportGraph:
    return grimp.build_graph("litemq", exclude_type_checking_imports=False, cache_dir=None)


def _spanning_cycles(graph: grimp.ImportGraph) -> list[list[str]]:
    """The edges (``importer -> imported``) between two packages of each import cycle that has any."""
    spanning = []
    for component in _cycles(graph):
        members = set(component)
        edges = [f"{m} -> {t}" for m in component for t in sorted(graph.find_modules_directly_imported_by(m))
                 if t in members and _package_of(t) != _package_of(m)]
        if edges:
            spanning.append(edges)
    return spanning


def test_no_import_cycle_spans_two_packages(import_graph):
    spanning = _spanning_cycles(import_graph)
    assert not spanning, "import cycles across packages:\n" + "\n\n".join("\n".join(e) for e in spanning)


def test_sub_packages_are_packages():
    assert _package_of("litemq.broker.handlers.txn") == "litemq.broker.handlers"
    assert _package_of("litemq.broker.handlers") == "litemq.broker.handlers"
    assert _package_of("litemq.broker.http.views") == "litemq.broker.http"
    assert _package_of("litemq.broker.server") == "litemq.broker"
    assert _package_of("litemq.broker") == "litemq.broker"
    assert _package_of("litemq.metrics") == "litemq.metrics"


def test_cycle_between_sub_packages_of_one_package_is_found():
    """A cycle between ``litemq.broker`` and its sub-package ``litemq.broker.handlers`` (the one
    ``broker/server.py`` <-> ``broker/handlers/sasl.py`` closed before sasl typed its connection as
    a Protocol) fails the check, while a cycle inside one package does not."""
    graph = grimp.ImportGraph()
    for m in ("litemq", "litemq.broker", "litemq.broker.server", "litemq.broker.authz",
              "litemq.broker.handlers", "litemq.broker.handlers.sasl", "litemq.broker.handlers.core"):
        graph.add_module(m)
    graph.add_import(importer="litemq.broker.server", imported="litemq.broker.handlers.sasl")
    graph.add_import(importer="litemq.broker.handlers.sasl", imported="litemq.broker.server")
    graph.add_import(importer="litemq.broker.handlers.core", imported="litemq.broker.handlers.sasl")
    graph.add_import(importer="litemq.broker.handlers.sasl", imported="litemq.broker.handlers.core")
    assert _spanning_cycles(graph) == [["litemq.broker.handlers.sasl -> litemq.broker.server",
                                        "litemq.broker.server -> litemq.broker.handlers.sasl"]]


def test_cycle_finder_sees_a_cycle():
    """The check above would fail on a real cycle (guards against a finder that finds nothing)."""
    graph = grimp.ImportGraph()
    for m in ("litemq", "litemq.a", "litemq.a.x", "litemq.b", "litemq.b.y"):
        graph.add_module(m)
    graph.add_import(importer="litemq.a.x", imported="litemq.b.y")
    graph.add_import(importer="litemq.b.y", imported="litemq.a.x")
    assert _cycles(graph) == [["litemq.a.x", "litemq.b.y"]]
