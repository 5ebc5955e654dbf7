"""The import rule of docs/ARCHITECTURE.md, checked over the AST of every module under swarm/.

Layers, bottom up: core; client, stats, load, sim; live, analysis, grafana; orchestrate; and the
top-level entry points (swarm/__init__.py, cli.py, __main__.py, locustfile.py, _compat.py).
A subpackage imports only the subpackages its row allows (every import counts: module level,
inside functions, and under `if TYPE_CHECKING:`), and no two modules reach each other through
runtime imports (no cycle, `TYPE_CHECKING` imports aside: they never run).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SWARM = Path(__file__).resolve().parents[2] / "swarm"

ALLOWED: dict[str, set[str]] = {
    "core": {"core"},
    "client": {"core", "client"},
    "stats": {"core", "stats"},
    "load": {"core", "load"},
    "sim": {"core", "sim"},
    "live": {"core", "client", "stats", "load", "live"},
    "analysis": {"core", "stats", "analysis"},
    "grafana": {"core", "grafana"},
    "orchestrate": {"core", "client", "stats", "load", "sim", "analysis", "grafana", "orchestrate"},
}
TOP = "(top)"


def module_name(path: Path) -> str:
    rel = path.relative_to(SWARM.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


MODULES: dict[str, Path] = {module_name(p): p for p in SWARM.rglob("*.py")}


def layer(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 2 or (len(parts) == 2 and parts[1] in ALLOWED) else TOP


def _type_checking(node: ast.If) -> bool:
    t = node.test
    return (isinstance(t, ast.Name) and t.id == "TYPE_CHECKING") or (
        isinstance(t, ast.Attribute) and t.attr == "TYPE_CHECKING"
    )


def imports(module: str) -> list[tuple[str, bool]]:
    """(imported swarm module, runtime?) for every import statement of `module`."""
    path = MODULES[module]
    tree = ast.parse(path.read_text(), str(path))
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    out: list[tuple[str, bool]] = []

    def resolve(name: str) -> str:
        while name and name not in MODULES:  # `from swarm.x import y`: y a name in swarm.x
            name = name.rpartition(".")[0]
        return name

    def visit(node: ast.AST, runtime: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and _type_checking(child):
                for n in child.body:
                    visit_stmt(n, False)
                for n in child.orelse:
                    visit_stmt(n, runtime)
                continue
            visit_stmt(child, runtime)

    def visit_stmt(node: ast.AST, runtime: bool) -> None:
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name == "swarm" or alias.name.startswith("swarm."):
                    out.append((resolve(alias.name), runtime))
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - node.level + 1]
                name = ".".join([*base, node.module] if node.module else base)
            else:
                name = node.module or ""
            if name == "swarm" or name.startswith("swarm."):
                for alias in node.names:
                    out.append((resolve(f"{name}.{alias.name}"), runtime))
        visit(node, runtime)

    visit(tree, True)
    return [(m, rt) for m, rt in out if m and m != module]


GRAPH = {m: imports(m) for m in MODULES}


def test_every_subpackage_is_a_known_layer() -> None:
    subpackages = {p.name for p in SWARM.iterdir() if (p / "__init__.py").exists()}
    assert subpackages - {"models", "prompts"} <= set(ALLOWED), "a new subpackage needs its row in ALLOWED"


@pytest.mark.parametrize("module", sorted(MODULES))
def test_imports_follow_the_layers(module: str) -> None:
    own = layer(module)
    if own == TOP:
        return
    wrong = sorted({m for m, _ in GRAPH[module] if layer(m) not in ALLOWED[own]})
    assert not wrong, f"{module} ({own}) imports {wrong}: {own} may import only {sorted(ALLOWED[own])}"


def test_live_and_analysis_never_import_each_other() -> None:
    assert "analysis" not in ALLOWED["live"] and "live" not in ALLOWED["analysis"]
    assert "live" not in ALLOWED["orchestrate"], "orchestrate starts Locust in processes; it never imports it"


def find_cycle(graph: dict[str, list[tuple[str, bool]]]) -> list[str] | None:
    state: dict[str, int] = {}
    stack: list[str] = []

    def dfs(m: str) -> list[str] | None:
        state[m] = 1
        stack.append(m)
        for n, runtime in graph.get(m, []):
            if not runtime or n not in graph:
                continue
            if state.get(n) == 1:
                return [*stack[stack.index(n) :], n]
            if n not in state and (c := dfs(n)):
                return c
        stack.pop()
        state[m] = 2
        return None

    for m in sorted(graph):
        if m not in state and (c := dfs(m)):
            return c
    return None


def test_no_import_cycle() -> None:
    # a package's __init__ importing its own submodules is not a cycle of the architecture
    graph = {m: [(n, rt) for n, rt in deps if not m.startswith(n + ".")] for m, deps in GRAPH.items()}
    cycle = find_cycle(graph)
    assert cycle is None, "import cycle: " + " -> ".join(cycle or [])


def test_the_checker_sees_violations() -> None:
    """The checker itself: a made-up graph with an upward import and a cycle is caught."""
    assert layer("swarm.core.records") == "core" and layer("swarm.cli") == TOP
    assert find_cycle({"a": [("b", True)], "b": [("a", True)]}) == ["a", "b", "a"]
    assert find_cycle({"a": [("b", False)], "b": [("a", True)]}) is None
    assert ("swarm.core.records", True) in GRAPH["swarm.stats.aggregate"]
