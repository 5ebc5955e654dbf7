"""`swarm run` while the run lasts (swarm/orchestrate/waiting.py), with stand-in processes: when the
run is ended early, how a stopped master is waited for, and a worker's one-line reason."""

from __future__ import annotations

import signal
from pathlib import Path

from swarm.core.options import CUT_NOW_SIGNAL, FINAL_REPORT_WAIT_S
from swarm.orchestrate import waiting
from swarm.orchestrate.plan import RunPlan


class Proc:
    def __init__(self, code: int | None = None) -> None:
        self.code = code

    def poll(self) -> int | None:
        return self.code


class Procs:
    """Processes' face: named processes, signals and waits recorded."""

    def __init__(self, **procs: Proc) -> None:
        self.procs = procs
        self.signals: list[tuple[str, int]] = []
        self.waits: list[float] = []
        self.logs: dict[str, str] = {}
        self.master_ends = True
        self.exit_on_wait: dict[str, int] = {}  # a process that exits, with this code, while waited for

    def get(self, name: str) -> Proc | None:
        return self.procs.get(name)

    def named(self, prefix: str) -> list[tuple[str, Proc]]:
        return [(n, p) for n, p in self.procs.items() if n.startswith(prefix)]

    def signal(self, name: str, sig: int) -> None:
        self.signals.append((name, sig))

    def wait_exit(self, names: list[str], timeout_s: float) -> bool:
        self.waits.append(timeout_s)
        for name in names:
            if name in self.exit_on_wait:
                self.procs[name].code = self.exit_on_wait.pop(name)
        return self.master_ends

    def log_tail(self, name: str, chars: int = 2000) -> str:
        return self.logs.get(name, "")[-chars:]


def plan(**kw) -> RunPlan:
    base = dict(hosts=("http://t",), workload="short_qa", workers=2, users=4, spawn_rate=4.0, run_time_s=10,
                stop_timeout_s=7, out=Path("out"), run_id="r", slo=None, model=None, sim_profile="p",
                sim_args=[], prometheus_port=None)  # fmt: skip
    return RunPlan(**{**base, **kw})


def test_the_workers_are_gone_only_when_all_have_quit_one_with_an_error():
    assert not waiting.workers_gone(Procs(master=Proc()))  # no worker: nothing to say
    assert not waiting.workers_gone(Procs(**{"worker-0": Proc(2), "worker-1": Proc()}))
    assert not waiting.workers_gone(Procs(**{"worker-0": Proc(0), "worker-1": Proc(0)}))  # the run's end
    assert waiting.workers_gone(Procs(**{"worker-0": Proc(2), "worker-1": Proc(0)}))


def test_a_graceful_stop_waits_the_stop_timeout_and_the_last_reports():
    procs = Procs(master=Proc(), **{"worker-0": Proc()})
    waiting.stop_gracefully(plan(), procs)
    assert procs.signals == [("master", signal.SIGTERM)]
    assert procs.waits == [7 + FINAL_REPORT_WAIT_S + waiting.STOP_MARGIN_S] == [waiting.stop_budget_s(plan())]


def test_a_master_that_outlives_its_budget_has_its_workers_requests_cut(capsys):
    procs = Procs(master=Proc(), **{"worker-0": Proc(), "worker-1": Proc()})
    procs.master_ends = False
    waiting.stop_gracefully(plan(), procs)
    cut = getattr(signal, CUT_NOW_SIGNAL)
    assert procs.signals == [("master", signal.SIGTERM), ("worker-0", cut), ("worker-1", cut)]
    assert f"the master did not end within {waiting.stop_budget_s(plan())} s" in capsys.readouterr().err


def test_the_wait_ends_the_run_when_every_worker_has_quit(capsys):
    procs = Procs(master=Proc(), **{"worker-0": Proc(2), "worker-1": Proc(2)})
    quit_early: set[str] = set()
    code = waiting.wait_for_master(plan(), procs, procs.procs["master"], quit_early)
    assert code == 1 and quit_early == {"worker-0", "worker-1"}  # the master has no code yet: 1
    assert "every worker has quit; ending the run" in capsys.readouterr().err
    assert procs.signals[0] == ("master", signal.SIGTERM)


def test_workers_that_left_before_the_master_told_them_are_named_however_late_it_looked(capsys):
    """Locust's master ends ~0.5 s after its last worker quit: the loop may not have looked in
    between. A worker whose log has no quit from the master left on its own."""
    told = (
        "[2026-11-29 08:46:54,286] vm/INFO/locust.runners: Got quit message from master, shutting down...\n"
    )
    start = "[2026-11-29 08:46:52,246] vm/INFO/locust.main: Starting Locust 2.47.0\n"
    procs = Procs(master=Proc(0), **{"worker-0": Proc(2), "worker-1": Proc(2)})
    procs.logs = {w: start + "[...] vm/ERROR/swarm.live.user: --tokenizer t.json: bad\n" for w in procs.procs}
    quit_early: set[str] = set()
    assert waiting.wait_for_master(plan(), procs, procs.procs["master"], quit_early) == 0
    assert quit_early == {"worker-0", "worker-1"}
    assert "every worker has quit; the run ended" in capsys.readouterr().err
    # at a run's end every worker was told: none is named, whatever its exit code
    procs = Procs(master=Proc(0), **{"worker-0": Proc(1), "worker-1": Proc(0)})
    procs.logs = {
        "worker-0": told + "[...] vm/INFO/locust.main: Shutting down (exit code 1)\n",
        "worker-1": told,
    }
    quit_early = set()
    waiting.wait_for_master(plan(), procs, procs.procs["master"], quit_early)
    assert quit_early == set() and "every worker" not in capsys.readouterr().err
    # one left early (named), the other at the end: the run is not said to have lost every worker
    procs.logs["worker-0"] = start + "[...] vm/ERROR/swarm.live.user: --tokenizer t.json: bad\n"
    waiting.wait_for_master(plan(), procs, procs.procs["master"], quit_early)
    assert quit_early == {"worker-0"} and "every worker" not in capsys.readouterr().err
    assert waiting.worker_failures(procs, quit_early) == [("worker-0", 1, "--tokenizer t.json: bad")]
    # seen leaving while the master ran, but told to quit (a run's end): not early
    procs.logs = {"worker-0": start + told, "worker-1": start + told}
    quit_early = {"worker-0", "worker-1"}
    waiting.wait_for_master(plan(), procs, procs.procs["master"], quit_early)
    assert quit_early == set() and waiting.worker_failures(procs, quit_early) == []
    # logging above INFO (no start-up line, no quit line either): nothing to tell by, the loop's view stands
    procs.logs = {"worker-0": "[...] vm/ERROR/swarm.live.user: bad\n", "worker-1": ""}
    quit_early = {"worker-0"}
    waiting.wait_for_master(plan(), procs, procs.procs["master"], quit_early)
    assert quit_early == {"worker-0"}


def test_a_worker_still_leaving_when_the_master_ends_is_waited_for_and_named(capsys):
    """Both workers refuse their options at start; the master ends as soon as their quits reach it,
    and one of them may not have exited yet. Each is judged once it is out (Locust's master ended
    before the second worker's exit in 5 of 8 runs of test_run_stops.py's test on an idle machine,
    which then named one worker or none)."""
    start = "[2026-11-29 08:46:52,246] vm/INFO/locust.main: Starting Locust 2.47.0\n"
    procs = Procs(master=Proc(0), **{"worker-0": Proc(2), "worker-1": Proc(None)})
    procs.logs = {w: start + "[...] vm/ERROR/swarm.live.user: --tokenizer t.json: bad\n" for w in procs.procs}
    procs.exit_on_wait = {"worker-1": 2}
    quit_early: set[str] = set()
    assert waiting.wait_for_master(plan(), procs, procs.procs["master"], quit_early) == 0
    assert procs.waits == [waiting.WORKER_EXIT_S] and quit_early == {"worker-0", "worker-1"}
    assert "every worker has quit; the run ended" in capsys.readouterr().err
    assert [n for n, _, _ in waiting.worker_failures(procs, quit_early)] == ["worker-0", "worker-1"]


def test_the_wait_returns_the_masters_exit_code():
    procs = Procs(master=Proc(3), **{"worker-0": Proc(0)})
    assert waiting.wait_for_master(plan(), procs, procs.procs["master"], set()) == 3


def test_an_interrupt_before_the_master_starts_stops_nothing_gracefully(capsys):
    procs = Procs()
    waiting.interrupted(plan(), procs)
    assert procs.signals == [] and "interrupted before the run began" in capsys.readouterr().err
    procs = Procs(master=Proc())
    waiting.interrupted(plan(), procs)
    err = capsys.readouterr().err
    assert procs.signals == [("master", signal.SIGTERM)] and "may finish for up to 7 s" in err


def test_only_workers_that_quit_mid_run_with_an_error_are_failures():
    procs = Procs(**{"worker-0": Proc(2), "worker-1": Proc(1), "worker-2": Proc(-9), "worker-3": Proc(0)})
    procs.logs["worker-0"] = "[2026-11-25 16:33:15,936] vm/ERROR/swarm.live.user: --tokenizer t.json: bad\n"
    quit_early = {"worker-0", "worker-2", "worker-3"}  # worker-1 left at the run's end
    assert waiting.worker_failures(procs, quit_early) == [("worker-0", 2, "--tokenizer t.json: bad")]


def test_a_workers_reason_is_its_last_error_line_without_the_log_prefix():
    log = (
        "[2026-11-25 16:33:14,580] vm/INFO/locust.main: Starting Locust 2.47.0\n"
        "[2026-11-25 16:33:15,936] vm/ERROR/swarm.live.user: --tokenizer t.json: cannot load t.json\n"
        "[2026-11-25 16:33:16,077] vm/INFO/locust.main: Shutting down (exit code 2)\n"
    )
    assert waiting.reason_in_log(log) == "--tokenizer t.json: cannot load t.json"
    assert waiting.reason_in_log("locust: error: bad option\nShutting down\n") == "locust: error: bad option"
    assert waiting.reason_in_log("only line\n") == "only line" and waiting.reason_in_log("") == "no output"
