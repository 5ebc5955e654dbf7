"""Tests mirror the package (issue 26): tests/unit/<sub>/test_<module>[_<topic>].py tests
swarm/<sub>/<module>.py, and every module with behaviour of its own has a unit test file, or is
listed below with the reason it has none (and where it is tested instead). Both lists are checked
against the tree, so a renamed module, a stray test file or a new untested module fails here."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "swarm"
UNIT = ROOT / "tests" / "unit"

# test files that test no one module, each with why
NOT_A_MODULE: dict[str, str] = {
    "test_changelog.py": "CHANGELOG.md against the tree",
    "test_layers.py": "the import rules of docs/ARCHITECTURE.md over all of swarm/",
    "test_matrix_harness.py": "tests/helpers' diagnosis matrix harness",
    "test_mirror.py": "this file: the layout of tests/unit itself",
    "orchestrate/test_compose.py": "docker-compose.yml (no Docker engine here: parsed and checked instead)",
}

# modules without a unit test file of their own, each with why and where they are tested
NO_UNIT_TEST: dict[str, str] = {
    "locustfile.py": "13 lines of imports for Locust; run by every integration test",
    "core/buckets.py": "constants (vLLM's bucket bounds); used by stats/test_aggregate.py, live/test_exporter.py",
    "core/events.py": "one Locust event hook; fired in client/test_transport_fuzz.py, live/test_plugin_local.py",
    "core/options.py": "the option table (data); test_cli_reference.py and orchestrate/test_run_options.py",
    "analysis/server_parse.py": "the /metrics text parser, moved out of server_metrics.py; its cases are "
    "analysis/test_server_metrics*.py's and test_server_checks_generated.py's",
    "core/recordfile.py": "Parquet parts; live/test_recorder.py writes and reads them back",
    "stats/wire.py": "TypedDicts of the wire format; live/test_plugin_local.py, stats/test_aggregate.py",
    "load/prompts/make_corpus.py": "a maintainer's script that regenerated the bundled prompt files",
    "load/trace_prompts.py": "load/test_trace.py (a trace row's prompt)",
    "sim/server.py": "the HTTP server: tests/integration/test_sim_http.py and the other *_sim tests",
    "sim/llamacpp.py": "the llama.cpp face over HTTP: integration/test_swarm_target.py, test_promql.py",
    "sim/trace.py": "the simulator's trace record; sim/test_delivery.py",
    "grafana/cli.py": "`swarm grafana` argument wiring; grafana/test_dashboards.py",
    "grafana/names.py": "metric names (data); grafana/test_dashboards.py, grafana/test_api.py",
    "analysis/gpu_diagnosis.py": "analysis/test_gpu_metrics.py",
    "analysis/rundir.py": "loads a run directory: analysis/test_plots.py, test_search_report.py, integration",
    "live/argcheck.py": "a subprocess entry point: integration/test_bad_input.py",
    "live/keyorigin.py": "integration/test_secrets.py (the key goes to its origin only)",
    "live/master.py": "in a Locust master: live/test_plugin_local.py, integration/test_distributed.py",
    "live/prepare.py": "a user's start-up: live/test_state_init_wait.py, integration tests",
    "live/replay.py": "the replay's Locust hooks and worker queue: integration/test_trace_replay.py",
    "live/shape.py": "the load shape in Locust: integration/test_rate_rebalance.py and the sweep tests",
    "live/user.py": "client/test_transport_fuzz.py drives LLMUser.send; integration/test_user_*.py",
    "live/worker.py": "the worker's statistics in Locust: live/test_plugin_local.py, integration/test_distributed.py",
    "live/webauth.py": "Locust's web login: integration/test_secrets.py",
}


def _modules() -> dict[str, set[str]]:
    """Package folder (relative, "" for the top) -> names a test file may be named after."""
    out: dict[str, set[str]] = {}
    for path in PACKAGE.rglob("*.py"):
        rel = path.relative_to(PACKAGE)
        folder = rel.parent.as_posix().replace(".", "")
        if path.name == "__init__.py":
            if rel.parent != Path("."):  # a package with its code in __init__ (live/webui)
                parent = rel.parent.parent.as_posix().replace(".", "")
                out.setdefault(parent, set()).add(rel.parent.name)
        elif path.name != "__main__.py":
            out.setdefault(folder, set()).add(path.stem)
    return out


def _defines_anything(path: Path) -> bool:
    return any(isinstance(n, ast.FunctionDef | ast.ClassDef) for n in ast.parse(path.read_text()).body)


def _test_files() -> list[Path]:
    return sorted(p.relative_to(UNIT) for p in UNIT.rglob("test_*.py"))


def _tested_name(test: Path, names: set[str]) -> str | None:
    stem = test.stem.removeprefix("test_")
    matches = [n for n in names if stem == n or stem.startswith(n + "_")]
    return max(matches, key=len) if matches else None


def test_every_unit_test_file_is_named_after_a_module_of_its_folder():
    modules = _modules()
    stray = []
    for test in _test_files():
        folder = test.parent.as_posix().replace(".", "")
        if test.as_posix() in NOT_A_MODULE:
            continue
        if _tested_name(test, modules.get(folder, set())) is None:
            stray.append(test.as_posix())
    assert not stray, (
        f"tests/unit/{{sub}}/test_{{module}}[_{{topic}}].py must test swarm/{{sub}}/{{module}}.py: {stray} "
        "match no module (rename it after the module it tests, or list it in NOT_A_MODULE with why)"
    )
    for listed in NOT_A_MODULE:
        assert (UNIT / listed).is_file(), f"NOT_A_MODULE lists {listed}, which is gone"


def test_every_module_has_a_unit_test_file_or_a_reason():
    tested: set[str] = set()
    modules = _modules()
    for test in _test_files():
        folder = test.parent.as_posix().replace(".", "")
        name = _tested_name(test, modules.get(folder, set()))
        if name is not None:
            tested.add(f"{folder}/{name}".lstrip("/"))
    untested = []
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE)
        if path.name == "__main__.py" or (path.name == "__init__.py" and rel.parent == Path(".")):
            continue
        key = rel.parent.as_posix() if path.name == "__init__.py" else rel.with_suffix("").as_posix()
        if path.name == "__init__.py" and not _defines_anything(path):
            continue  # a package's docstring and imports
        if key not in tested and f"{key}.py" not in NO_UNIT_TEST and rel.as_posix() not in NO_UNIT_TEST:
            untested.append(rel.as_posix())
    assert not untested, (
        f"{untested}: no tests/unit/<sub>/test_<module>.py; add one, or list the module in NO_UNIT_TEST "
        "with why and where it is tested"
    )
    for listed in NO_UNIT_TEST:
        assert (PACKAGE / listed).is_file(), f"NO_UNIT_TEST lists swarm/{listed}, which is gone"
