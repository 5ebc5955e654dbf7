"""docs/cli.md is generated (scripts/cli_reference.py) from the parsers and the option table, and the
committed page is what the script writes now: a changed option or help text without
`make cli-reference` fails here, so the CLI reference cannot drift."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from swarm.cli import COMMANDS
from swarm.core.options import OPTIONS

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def page() -> str:
    spec = importlib.util.spec_from_file_location("cli_reference", REPO / "scripts/cli_reference.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("COLUMNS", "80")  # render() fixes its own width; restored afterwards
        return module.render()


def test_committed_cli_reference_is_current(page: str) -> None:
    committed = (REPO / "docs/cli.md").read_text()
    assert committed == page, "docs/cli.md is stale: run `make cli-reference` and commit docs/cli.md"


def test_cli_reference_covers_every_command_and_option(page: str) -> None:
    for name in COMMANDS:
        assert f"## `swarm {name}`" in page
        assert f"usage: swarm {name}" in page
    for opt in OPTIONS:
        assert f"| `{opt.flag}" in page, opt.flag
