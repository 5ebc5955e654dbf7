"""`swarm run` after the run (swarm/orchestrate/collect.py): no summary is a failed run with the
master's log tail, a worker that failed mid-run fails a run its master called a success, and
summary.json is written once, complete: the master's part renamed, or with the search's why added.
(A whole run's collection: the swarm run integration tests.)"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from swarm.core.runfiles import SUMMARY, SUMMARY_PART
from swarm.orchestrate.collect import finish
from swarm.orchestrate.plan import RunPlan


class Proc:
    def __init__(self, code: int | None) -> None:
        self.code = code

    def poll(self) -> int | None:
        return self.code


class Procs:
    def __init__(self, **procs: Proc) -> None:
        self.procs = procs

    def named(self, prefix: str) -> list[tuple[str, Proc]]:
        return [(n, p) for n, p in self.procs.items() if n.startswith(prefix)]

    def log_tail(self, name: str) -> str:
        return {"master": "master's last words\n", "worker-0": "locust: error: bad option\n"}.get(name, "")


def plan(out: Path) -> RunPlan:
    return RunPlan(hosts=("http://t",), workload="short_qa", workers=1, users=1, spawn_rate=1.0, run_time_s=5,
                   stop_timeout_s=1, out=out, run_id="r1", slo=None, model=None, sim_profile="p", sim_args=[],
                   prometheus_port=None)  # fmt: skip


def test_no_summary_is_a_failed_run_with_the_masters_log_tail(tmp_path, capsys):
    assert finish(plan(tmp_path), 0, Procs()) == 1
    assert finish(plan(tmp_path), 130, Procs()) == 130
    (tmp_path / SUMMARY_PART).write_text('{"run_id": "an-earlier-run", "total": {}}')  # not this run's
    assert finish(plan(tmp_path), 0, Procs()) == 1
    assert not (tmp_path / SUMMARY).exists()
    err = capsys.readouterr().err
    assert "no summary was written (master exit 0); master log tail:\nmaster's last words" in err


def test_a_worker_that_failed_mid_run_is_named_and_fails_the_run(tmp_path, capsys):
    procs = Procs(**{"worker-0": Proc(2), "worker-1": Proc(0)})
    assert finish(plan(tmp_path), 0, procs, quit_early={"worker-0", "worker-1"}) == 2
    assert "swarm: worker-0 exited 2: locust: error: bad option" in capsys.readouterr().err
    assert finish(plan(tmp_path), 0, procs, quit_early=set()) == 1  # (no summary) at the run's end: not named


def test_endpoint_lines_are_each_endpoints_cause_their_contrast_and_outages():
    from swarm.analysis.finding import Finding
    from swarm.orchestrate.collect import endpoint_lines

    found = [
        Finding("saturation", 1, "Ceiling at 8 users: ..."),
        Finding("kv_bound", 1, "endpoint http://b:2: At 8 users the server was KV-bound: ..."),
        Finding("client_vs_server", None, "endpoint http://b:2: The client recorded ..."),
        Finding("endpoints_differ", None, "endpoint http://b:2 is KV-bound; endpoint http://a:1 is not."),
        Finding("endpoint_down", None, "endpoint http://a:1 stopped answering at ..."),
    ]
    assert endpoint_lines(found) == [f.text for f in found[1::2] + found[4:]]


def test_untrusted_lines_are_the_failed_checks_and_resets_said_at_the_runs_end():
    from swarm.analysis.finding import Finding
    from swarm.orchestrate.collect import untrusted_lines

    found = [
        Finding("saturation", 1, "Ceiling at 8 users: ..."),
        Finding("server_check_failed", 1, "The server's /metrics failed a sanity check (...)", trusted=False),
        Finding("client_vs_server", None, "Requests reconcile: ..."),
        Finding("client_vs_server", None, "Requests not reconciled with the server's: ...", trusted=False),
        Finding("server_counter_reset", None, "The server's counters went back during the run (...)"),
    ]
    assert untrusted_lines(found) == [f.text for f in (found[1], found[3], found[4])]


SEARCH = {"headline": "max concurrency meeting the SLO: 200", "bracket": [200, 256], "unit": "users",
          "probes": [{"load": 256, "stage": 5, "ok": False, "bracket": [200, 256]}]}  # fmt: skip


def test_a_search_over_several_endpoints_says_each_endpoints_cause_at_the_answer(tmp_path, capsys):
    from swarm.analysis.rundir import load_run
    from swarm.orchestrate.collect import print_search
    from tests.unit.analysis.test_endpoints import A, B, two_endpoint_run

    run = two_endpoint_run(tmp_path)
    summary = json.loads((run / SUMMARY).read_text())
    summary["search"] = dict(SEARCH)
    data = load_run(run, summary)
    assert print_search(data) is True
    out = capsys.readouterr().out
    assert f"swarm: why: endpoint {A}: " in out and f" endpoint {B}: " in out
    assert "KV-bound" in out.split(f"endpoint {B}: ")[0]  # A's KV fills, B's does not
    search = data.summary["search"]  # what summary.json and the report are then made of
    assert search["why_kind"] == "endpoints_differ" and search["why"] in out
    assert data.summary is summary  # the run is read once: the caller's summary, completed


def _masters_part(run: Path, search: dict | None) -> bytes:
    """The run's summary as the master writes it under swarm run: the part, this run's id."""
    summary = json.loads((run / SUMMARY).read_text())
    (run / SUMMARY).unlink()
    summary["run_id"] = "r1"
    if search is not None:
        summary["search"] = search
    (run / SUMMARY_PART).write_text(json.dumps(summary, indent=2) + "\n")
    return (run / SUMMARY_PART).read_bytes()


@pytest.fixture
def writes(monkeypatch):
    """Each summary written with swarm/stats/summary.py `write`, by its file's name."""
    from swarm.stats import summary

    written: list[str] = []  # (cleared once the run directory is made)
    real = summary.write

    def counted(s, path):
        written.append(Path(path).name)
        real(s, path)

    monkeypatch.setattr(summary, "write", counted)
    return written


def test_a_searchs_summary_json_is_written_once_with_its_why(tmp_path, capsys, writes):
    from tests.unit.analysis.test_endpoints import two_endpoint_run

    run = two_endpoint_run(tmp_path)
    part = json.loads(_masters_part(run, dict(SEARCH)))
    writes.clear()
    assert finish(plan(run), 0, Procs()) == 0
    assert writes == [SUMMARY]  # once, complete
    assert not (run / SUMMARY_PART).exists()
    written = json.loads((run / SUMMARY).read_text())
    why = {k: written["search"].pop(k) for k in ("why", "why_kind")}
    assert written == part  # the master's summary, the why added and nothing else
    assert why["why_kind"] == "endpoints_differ" and f"swarm: why: {why['why']}" in capsys.readouterr().out


def test_a_runs_summary_json_is_the_masters_part_renamed(tmp_path, capsys, writes):
    from tests.unit.analysis.test_endpoints import two_endpoint_run

    run = two_endpoint_run(tmp_path)
    part = _masters_part(run, None)
    inode = (run / SUMMARY_PART).stat().st_ino
    writes.clear()
    assert finish(plan(run), 0, Procs()) == 0
    assert writes == [] and not (run / SUMMARY_PART).exists()
    assert (run / SUMMARY).read_bytes() == part and (run / SUMMARY).stat().st_ino == inode  # not rewritten
    assert f"summary in {run / SUMMARY}" in capsys.readouterr().out


def test_the_masters_summary_is_published_even_when_collecting_fails(tmp_path, monkeypatch):
    from swarm.orchestrate import collect

    part = _masters_part_of(tmp_path)

    def broken(*_):
        raise OSError("disk full")

    monkeypatch.setattr(collect, "_print_results", broken)
    with pytest.raises(OSError, match="disk full"):
        finish(plan(tmp_path), 0, Procs())
    assert (tmp_path / SUMMARY).read_bytes() == part and not (tmp_path / SUMMARY_PART).exists()


def _masters_part_of(out: Path) -> bytes:
    (out / SUMMARY_PART).write_text(json.dumps({"run_id": "r1", "total": {}}, indent=2) + "\n")
    return (out / SUMMARY_PART).read_bytes()
