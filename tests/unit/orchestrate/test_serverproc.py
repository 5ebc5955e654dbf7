"""A server's log tail (swarm/orchestrate/serverproc.py): bounded whatever the server wrote."""

from __future__ import annotations

from swarm.orchestrate.serverproc import TAIL_LINE_CHARS, log_tail


def test_a_short_log_is_its_last_lines_without_the_route_table(tmp_path):
    log = tmp_path / "s.log"
    log.write_text("one\nRoute: /v1/models\ntwo\nthree\n")
    assert log_tail(log, lines=2) == "two\nthree"
    assert log_tail(tmp_path / "none.log") == "(no log)"


def test_a_huge_line_is_cut_and_only_the_logs_end_is_read(tmp_path):
    log = tmp_path / "s.log"
    log.write_text("start\n" + "x" * 20_000_000 + "\nError: out of memory\n")
    tail = log_tail(log, lines=30)
    first, last = tail.splitlines()
    assert last == "Error: out of memory"
    assert first.startswith("[... the log's first ") and "bytes not read]" in first
    assert first.endswith("more characters cut]")
    assert len(tail) < 2 * TAIL_LINE_CHARS


def test_every_line_is_bounded(tmp_path):
    log = tmp_path / "s.log"
    log.write_text(("y" * 3 * TAIL_LINE_CHARS + "\n") * 5)
    lines = log_tail(log, lines=30).splitlines()
    assert len(lines) == 5
    assert all(len(line) < TAIL_LINE_CHARS + 60 for line in lines)
    assert lines[0].endswith(f" [... {2 * TAIL_LINE_CHARS} more characters cut]")
