"""Suite-wide: tests under tests/integration and tests/e2e start real processes, so they carry the
`integration` marker wherever they are collected from (`-m "not integration"` keeps its meaning)."""

from __future__ import annotations

from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent
PROCESS_DIRS = ("integration", "e2e")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        path = Path(item.path).resolve()
        if path.is_relative_to(TESTS) and path.relative_to(TESTS).parts[0] in PROCESS_DIRS:
            item.add_marker(pytest.mark.integration)
