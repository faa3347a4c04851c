"""The package's layer order (DESIGN: definition → signature → providers → local → render → store → runtime
→ compile → optimize / rollout / verify / export → cli), checked on the source: every import, function-local ones
and those only for type checkers (``if TYPE_CHECKING:``) included, goes down the order (or stays in its
own package); no import cycle between modules, counting those too (a cycle a lazy or type-only import
hides is still one module needing the other); no import of another package's underscore names."""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src"
LAYERS = (
    {"errors", "__about__", "lazy", "third_party"},  # small shared leaves (third_party: rosetta's settings of the
    # libraries it uses, scoped to its own work)...
    {"fileio", "yaml_text", "parts"},  # ...and those built on the first
    {"definition"},
    {"schema_types", "settings"},  # settings: the one loader of [tool.rosetta], ROSETTA_* and arguments
    # labeled data: splits, loading, hashing (lint, compile, store checks, verify); signing: the per-project
    # key that authenticates what rosetta reads back (evaluation cache, study journals, outcome logs)
    {"signature", "datasets", "signing"},
    {"providers"},
    {"local"},  # the embedded engine behind the local/ provider, and litellm with it registered
    {"render"},
    {"store"},
    {"runtime"},
    {"lint", "compile"},
    {"optimize"},  # the search: the only stage of a build that runs models
    {"rollout", "verify", "notebook", "export"},  # verify, the notebook helpers and the exports build on the
    # optimizer
    {"cli"},
    {""},  # the package's own __init__: lazy exports of everything
)
RANK = {package: rank for rank, packages in enumerate(LAYERS) for package in packages}


def _modules() -> dict[str, Path]:
    found = {}
    for path in sorted((SRC / "rosetta").rglob("*.py")):
        parts = path.relative_to(SRC).with_suffix("").parts
        found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


MODULES = _modules()


def _package(module: str) -> str:
    """``rosetta.store.lookup`` → ``store``; ``rosetta`` → ``""``."""
    return module.split(".")[1] if "." in module else ""


def _imports(module: str) -> list[tuple[str, list[str], int]]:
    """(imported module, names taken from it, line) for every rosetta import, wherever it stands."""
    tree = ast.parse(MODULES[module].read_text(encoding="utf-8"))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "rosetta":
            for alias in node.names:  # `from rosetta.store import lookup` imports the module lookup
                target = f"{node.module}.{alias.name}"
                found.append((target, [], node.lineno) if target in MODULES else (node.module, [alias.name],
                                                                                    node.lineno))
        elif isinstance(node, ast.Import):
            found += [(alias.name, [], node.lineno) for alias in node.names if alias.name.split(".")[0] == "rosetta"]
    return found


EDGES = {module: _imports(module) for module in MODULES}


def test_every_package_has_a_layer():
    unplaced = sorted({_package(m) for m in MODULES} - set(RANK))
    assert not unplaced, f"packages with no place in the layer order: {unplaced} (add them to LAYERS)"


def test_imports_go_down_the_layer_order():
    upward = [f"{MODULES[source].relative_to(SRC)}:{line}: {source} imports {target}"
              for source, imports in EDGES.items() for target, _, line in imports
              if _package(target) != _package(source) and RANK[_package(target)] >= RANK[_package(source)]]
    assert not upward, "imports that go up (or sideways across) the layer order:\n" + "\n".join(upward)


def test_no_underscore_names_of_another_package():
    private = [f"{MODULES[source].relative_to(SRC)}:{line}: {name} from {target}"
               for source, imports in EDGES.items() for target, names, line in imports for name in names
               if name.startswith("_") and not name.startswith("__") and _package(target) != _package(source)]
    assert not private, "underscore names imported from another package:\n" + "\n".join(private)


def test_no_import_cycles():
    graph = {m: {t for t, _, _ in imports if t in MODULES and t != m} for m, imports in EDGES.items()}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    cycles: list[list[str]] = []

    def visit(node: str) -> None:  # Tarjan's strongly connected components
        index[node] = low[node] = len(index)
        stack.append(node)
        for successor in graph[node]:
            if successor not in index:
                visit(successor)
                low[node] = min(low[node], low[successor])
            elif successor in stack:
                low[node] = min(low[node], index[successor])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    for node in graph:
        if node not in index:
            visit(node)
    assert not cycles, "import cycles:\n" + "\n".join(" ⇄ ".join(c) for c in cycles)
