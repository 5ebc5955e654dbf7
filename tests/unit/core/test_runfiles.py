"""The run directory's file names are spelled in swarm/core/runfiles.py alone (issue 37): every
other module names them through its constants."""

from __future__ import annotations

import ast
from pathlib import Path

from swarm.core import runfiles

SWARM = Path(__file__).resolve().parents[3] / "swarm"
NAMES = {k: v for k, v in vars(runfiles).items() if k.isupper() and isinstance(v, str)}


def test_each_file_has_one_name_and_the_numbered_ones_follow_the_pattern() -> None:
    assert len(set(NAMES.values())) == len(NAMES), NAMES
    assert runfiles.endpoint_metrics_name(0) == "server_metrics-1.jsonl"
    assert runfiles.repeat_dir_name(3) == "repeat-3"


def test_no_other_module_spells_a_run_files_name() -> None:
    spelled = []
    for path in SWARM.rglob("*.py"):
        if path == SWARM / "core" / "runfiles.py":
            continue
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Constant) and node.value in NAMES.values():
                spelled.append(f"{path.relative_to(SWARM.parent)}:{node.lineno} {node.value!r}")
    assert not spelled, spelled
