"""A configuration's server (swarm/tune/server.py): a server that exits or never answers
is ServerFailed with its log's tail (the prefix-cache reset: tests/unit/core/test_prefix_cache.py)."""

from __future__ import annotations

import sys

import pytest

from swarm.orchestrate.processes import free_port
from swarm.tune import server as tune_server


def test_a_server_that_exits_fails_with_its_log_tail(tmp_path):
    cmd = [sys.executable, "-c", "import sys; print('unknown flag --no-such-flag'); sys.exit(3)"]
    with pytest.raises(tune_server.ServerFailed) as e:
        tune_server.start(cmd, f"http://127.0.0.1:{free_port()}", tmp_path / "s.log", 30)
    assert "exited with code 3" in e.value.reason and "\n" not in e.value.reason
    assert "unknown flag --no-such-flag" in e.value.log_tail


def test_a_server_that_never_answers_is_stopped(tmp_path):
    cmd = [sys.executable, "-c", "import time; time.sleep(60)"]
    with pytest.raises(tune_server.ServerFailed) as e:
        tune_server.start(cmd, f"http://127.0.0.1:{free_port()}", tmp_path / "s.log", 1)
    assert "did not answer" in e.value.reason


def test_a_command_that_does_not_exist(tmp_path):
    with pytest.raises(tune_server.ServerFailed, match="could not start"):
        tune_server.start(["/no/such/server"], "http://127.0.0.1:1", tmp_path / "s.log", 1)
