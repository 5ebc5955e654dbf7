"""CHANGELOG.md's newest release is the version pyproject.toml builds, and every import path the
changelog says was removed is really gone (tests/unit/test_layers.py checks the tree itself)."""

from __future__ import annotations

import importlib.util
import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_newest_changelog_entry_is_the_package_version() -> None:
    version = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    releases = re.findall(r"^## \[(\d+\.\d+\.\d+)\]", (ROOT / "CHANGELOG.md").read_text(), re.M)
    assert releases and releases[0] == version, (releases[:1], version)


def test_the_removed_paths_it_lists_do_not_import() -> None:
    text = (ROOT / "CHANGELOG.md").read_text()
    removed = text.split("### Removed", 1)[1].split("### ", 1)[0]
    table = [line.strip() for line in removed.splitlines() if line.strip().startswith("| `swarm.")]
    old = {m for line in table for m in re.findall(r"`(swarm\.[a-z_]+)`", line.split("|")[1])}
    assert len(old) == 32, sorted(old)  # swarm/_compat.py's table
    still = [m for m in sorted(old) if importlib.util.find_spec(m) is not None]
    assert not still, f"listed as removed, still importable: {still}"
