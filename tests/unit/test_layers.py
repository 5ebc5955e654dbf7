"""The import rule of docs/ARCHITECTURE.md, checked over the AST of every module under swarm/.

Layers, bottom up: core; client, stats, load, sim; live, analysis, grafana; orchestrate; tune; and
the top-level entry points (swarm/__init__.py, cli.py, __main__.py, locustfile.py).
A subpackage imports only the subpackages its row allows, and no module reaches itself again
through imports (no cycle). Every import counts for both: module level, inside functions, and
under `if TYPE_CHECKING:` (a type that needs a cycle to be named is a design that needs one).
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
    "tune": {"core", "stats", "load", "sim", "analysis", "orchestrate", "tune"},
}
TOP = "(top)"


def module_name(path: Path, root: Path = SWARM) -> str:
    rel = path.relative_to(root.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def modules(root: Path) -> dict[str, Path]:
    return {module_name(p, root): p for p in root.rglob("*.py")}


MODULES: dict[str, Path] = modules(SWARM)


def layer(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 2 or (len(parts) == 2 and parts[1] in ALLOWED) else TOP


def _type_checking(node: ast.If) -> bool:
    t = node.test
    return (isinstance(t, ast.Name) and t.id == "TYPE_CHECKING") or (
        isinstance(t, ast.Attribute) and t.attr == "TYPE_CHECKING"
    )


def imports(module: str, known: dict[str, Path] = MODULES) -> list[tuple[str, bool]]:
    """(imported swarm module, runtime?) for every import statement of `module`."""
    path = known[module]
    tree = ast.parse(path.read_text(), str(path))
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    out: list[tuple[str, bool]] = []

    def resolve(name: str) -> str:
        while name and name not in known:  # `from swarm.x import y`: y a name in swarm.x
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


def import_graph(root: Path) -> dict[str, list[tuple[str, bool]]]:
    """module -> (imported swarm module, runtime?) for every module of the package at `root`."""
    known = modules(root)
    return {m: imports(m, known) for m in known}


GRAPH = import_graph(SWARM)


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


# tune/twin/ (swarm twin) reads and writes what a tune's configurations are, and nothing else of tune/:
# its command, runs and servers are tune's (`swarm tune --predict-first` imports the twin, never back)
TWIN_MAY_IMPORT_OF_TUNE = {"swarm.tune.plan", "swarm.tune.results", "swarm.tune.report"}


def test_the_twin_takes_only_a_tunes_vocabulary_of_tune() -> None:
    twin = [m for m in MODULES if m.startswith("swarm.tune.twin")]
    assert twin, "swarm/tune/twin/ is gone: say where the twin lives now"
    wrong = {
        (m, n)
        for m in twin
        for n, _ in GRAPH[m]
        if n.startswith("swarm.tune")
        and not n.startswith("swarm.tune.twin")
        and n not in TWIN_MAY_IMPORT_OF_TUNE
    }
    assert not wrong, sorted(wrong)


def find_cycle(graph: dict[str, list[tuple[str, bool]]]) -> list[str] | None:
    state: dict[str, int] = {}
    stack: list[str] = []

    def dfs(m: str) -> list[str] | None:
        state[m] = 1
        stack.append(m)
        for n, _runtime in graph.get(m, []):  # TYPE_CHECKING imports count too
            if n not in graph:
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


def package_graph(graph: dict[str, list[tuple[str, bool]]]) -> dict[str, list[tuple[str, bool]]]:
    """`graph` less a module's imports of its own package (a package's __init__ importing its
    submodules is not a cycle of the architecture)."""
    return {m: [(n, rt) for n, rt in deps if not m.startswith(n + ".")] for m, deps in graph.items()}


def check_no_cycle(graph: dict[str, list[tuple[str, bool]]]) -> None:
    cycle = find_cycle(package_graph(graph))
    assert cycle is None, "import cycle: " + " -> ".join(cycle or [])


def test_no_import_cycle() -> None:
    check_no_cycle(GRAPH)


def test_the_checker_sees_violations() -> None:
    """The checker itself: a made-up graph with an upward import and a cycle is caught."""
    assert layer("swarm.core.records") == "core" and layer("swarm.cli") == TOP
    assert find_cycle({"a": [("b", True)], "b": [("a", True)]}) == ["a", "b", "a"]
    assert find_cycle({"a": [("b", False)], "b": [("a", True)]}) == ["a", "b", "a"]
    assert find_cycle({"a": [("b", False)], "b": []}) is None
    assert ("swarm.core.records", True) in GRAPH["swarm.stats.aggregate"]


def test_a_cycle_through_a_type_checking_import_is_found(tmp_path: Path) -> None:
    """A real package whose one cycle runs through an `if TYPE_CHECKING:` import (the shape of
    live/state.py typing its `stats` as the plugin that imports it) fails the structure test."""
    pkg = tmp_path / "swarm"
    (pkg / "live").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "live" / "__init__.py").write_text("")
    (pkg / "live" / "state.py").write_text(
        "from __future__ import annotations\n"
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n"
        "    from swarm.live.plugin import StatsPlugin\n"
    )
    (pkg / "live" / "plugin.py").write_text("from swarm.live.state import swarm_state\n")
    graph = import_graph(pkg)
    assert ("swarm.live.plugin", False) in graph["swarm.live.state"]  # seen, as not run
    cycle = find_cycle(package_graph(graph))
    assert cycle is not None and set(cycle) == {"swarm.live.state", "swarm.live.plugin"}
    with pytest.raises(AssertionError, match="import cycle"):
        check_no_cycle(graph)


def test_the_folder_tree_is_the_only_import_path() -> None:
    """No alias finder and no module `__getattr__` hands out a module or name from another place
    (swarm 0.1's flat paths, `swarm.user` and the like, went in 0.2.0: CHANGELOG.md). The one
    `__getattr__` is the top level's, loading `LLMUser` lazily (importing Locust patches gevent in)."""
    import importlib.util

    import swarm  # noqa: F401  (what used to install the finder)

    for old in ("swarm.user", "swarm.plugin", "swarm.aggregate", "swarm.report"):
        assert importlib.util.find_spec(old) is None, f"{old} still imports"
    for module, path in MODULES.items():
        body = ast.parse(path.read_text(), str(path)).body
        hooks = [n for n in body if isinstance(n, ast.FunctionDef) and n.name == "__getattr__"]
        assert module == "swarm" or not hooks, f"{module} hands out names through a module __getattr__"
