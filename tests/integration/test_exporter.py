"""/metrics text of the exporter passes `promtool check metrics` (promtool is a process); the
exporter's in-process checks are in tests/unit/live/test_exporter.py."""

from __future__ import annotations

import shutil
import subprocess

import pytest

from tests.helpers.synthetic import exporter_records, exporter_text


@pytest.fixture(scope="module")
def text() -> str:
    return exporter_text(exporter_records())


def test_promtool_accepts_it(text):
    promtool = shutil.which("promtool")
    if promtool is None:
        pytest.skip("promtool missing: run scripts/install-system-deps.sh")
    p = subprocess.run([promtool, "check", "metrics"], input=text, capture_output=True, text=True, timeout=30)
    assert p.returncode == 0, p.stdout + p.stderr
