"""The workers' CPU on the master: client-bound stages logged once, client_cpu.jsonl appended."""

from __future__ import annotations

import json
import logging

from swarm.core.runfiles import CLIENT_CPU
from swarm.live.client_cpu import ClientCpu


def test_entries_are_kept_and_written_then_the_file_closes(tmp_path):
    cpu = ClientCpu(tmp_path / "out")
    cpu.add("w-1", [[0, 1.0, 2.0, 0.5]])
    cpu.add("w-1", None)  # nothing measured
    cpu.add("w-1", [["not", "numbers", "x"]])  # malformed: skipped
    cpu.close()
    cpu.add("w-1", [[0, 1.0, 2.0]])  # after close: kept in memory, not written
    lines = [json.loads(x) for x in (tmp_path / "out" / CLIENT_CPU).read_text().splitlines()]
    assert [(x["worker"], x["stage"], x["cpu_s"], x["wait_s"]) for x in lines] == [("w-1", 0, 1.0, 0.5)]
    assert cpu.load.seconds[(0, "w-1")] == [2.0, 4.0, 0.5]


def test_without_out_dir_nothing_is_written(tmp_path):
    cpu = ClientCpu(None)
    cpu.add("w-1", [[0, 1.0, 2.0, 0.0]])
    assert cpu.load.busiest() == 50.0
    assert not list(tmp_path.iterdir())


def test_a_client_bound_stage_is_logged_once_and_forgotten_on_clear(caplog):
    cpu = ClientCpu(None)
    cpu.add("w-1", [[1, 2.0, 2.0, 0.5]])  # 125% of a core over 2 s
    with caplog.at_level(logging.WARNING):
        cpu.flag_bound()
        cpu.flag_bound()
    assert caplog.text.count("client-bound") == 1 and "stage 2" in caplog.text
    cpu.clear()
    assert cpu.load.bound() == {}
