"""A run directory from the simulator's engine on its virtual clock, in about a second.

What `swarm run --sweep U1,U2,.. --stage-time S --warmup W --workload synthetic` against
`swarm sim --profile P FLAGS` writes for the analysis to read, minus the HTTP path: the request
records (requests.parquet), the /metrics scrapes (server_metrics.jsonl, one a second as the run's
poller takes them), the simulator's trace (sim-trace.jsonl) and the stage windows (summary.json;
each stage's figures are computed from the records, as `swarm report` does for a run without
them). The engine is the one the real-time simulator steps (swarm/sim/engine.py), built from the
same flags by the simulator's own CLI, and the scrapes are the text its /metrics would serve
(swarm/sim/metrics.py): a cause that lives in the engine (a KV pool, a sequence cap, the cost of a
token) is there exactly as in real time, on a clock that does not wait.

What it leaves out is everything between the engine and the user: no front-end lane, no network
delay, no client CPU (there is no client.jsonl: the client-bound rule has nothing to judge). A
user sends its next request CLIENT_GAP_S after its answer ended; the users of a stage start at its
first instant; the run stops sending at the last stage's end and lets the requests in flight
finish, as `swarm run` does by default, and the scrapes go on until they have (the last one when
the last request has ended, as the run's poller takes one once the run is over). The diagnosis's rules are tested on these directories over
many cases in seconds (tests/unit/orchestrate/test_virtual_run.py, benchmarks/diagnosis_matrix.py
`--virtual`), one real-time run per capability staying end to end.
"""

from __future__ import annotations

import heapq
import json
import random
from collections.abc import Callable
from collections.abc import Sequence as Seq
from dataclasses import dataclass, field
from pathlib import Path

from swarm.analysis.server_parse import parse_metrics
from swarm.core.recordfile import write_records
from swarm.core.records import Outcome, RequestRecord
from swarm.core.runfiles import REQUESTS, SERVER_METRICS, SIM_TRACE, SUMMARY
from swarm.sim.calibrate import CLIENT_GAP_S
from swarm.sim.engine import Engine, Sequence
from swarm.sim.metrics import SimMetrics
from swarm.sim.profile import Profile
from swarm.sim.trace import TraceRecord, TraceWriter

MODEL = "sim-model"  # what `swarm sim` serves by default
ENDPOINT = "virtual-clock"  # the records' endpoint label (a real run's is the host's)
START_WALL_S = 1_800_000_000.0  # the virtual clock's zero as a wall time (2027-01-15 08:00 UTC)


Request = Callable[[random.Random], tuple[int, int, str]]
"""One request drawn: (prompt tokens, answer tokens, finish reason)."""


def synthetic(input_tokens: tuple[int, int], output_tokens: tuple[int, int]) -> Request:
    """`--workload synthetic`: prompts of `input_tokens` and exactly `output_tokens` answer tokens
    (ignore_eos), each an inclusive (low, high) range drawn uniformly."""

    def draw(rng: random.Random) -> tuple[int, int, str]:
        return rng.randint(*input_tokens), rng.randint(*output_tokens), "length"

    return draw


def workload(profile: Profile, spec: str) -> Request:
    """A built-in workload (`--workload short_qa`, `chat:3,short_qa:1`): its prompts through the chat
    template as the simulator counts them, its max_tokens, the answer's length as the profile draws
    it (thinking off). UsageError for a workload that needs the server's tokenizer."""
    from swarm.load.workloads import workload_draw

    prompts = workload_draw(spec)

    def draw(rng: random.Random) -> tuple[int, int, str]:
        pieces, max_tokens = prompts(rng)
        total, _, finish = profile.draw_output(rng, max_tokens, thinking=False)
        return len(pieces), total, finish

    return draw


@dataclass(frozen=True)
class VirtualSweep:
    """The load: closed-loop users per stage (never fewer than the stage before), each stage
    `stage_s` long of which the first `warmup_s` is not measured, each request drawn by `request`
    (`synthetic`, `workload`) with `seed`; the workload's name is the records' `workload`."""

    users: tuple[int, ...]
    stage_s: float
    warmup_s: float
    request: Request
    seed: int = 1
    name: str = "synthetic"
    scrape_s: float = 1.0
    gap_s: float = CLIENT_GAP_S

    def __post_init__(self) -> None:
        if not self.users or any(b < a for a, b in zip(self.users, self.users[1:], strict=False)):
            raise ValueError(f"users {self.users}: a closed-loop sweep's users never fall")
        if not 0 <= self.warmup_s < self.stage_s:
            raise ValueError(f"warm-up {self.warmup_s} s must be shorter than the stage ({self.stage_s} s)")


@dataclass(frozen=True)
class VirtualLoad:
    """What `swarm tune --virtual` runs each configuration with: its swarm run options' closed-loop
    sweep (users per stage, stage and warm-up seconds), built-in workload and --slo."""

    users: tuple[int, ...]
    stage_s: float
    warmup_s: float
    workload: str
    slo: str | None


def sim_profile(profile: str, sim_args: Seq[str] = ()) -> Profile:
    """The engine's profile as `swarm sim --profile PROFILE SIM_ARGS` builds it (its own parser and
    checks: a flag it refuses raises UsageError here)."""
    return sim_command_profile(["--profile", profile, *sim_args])


def sim_command_profile(sim_args: Seq[str]) -> Profile:
    """The engine's profile of `swarm sim SIM_ARGS`, checked as `swarm run` checks its embedded
    simulator's (UsageError for what the simulator refuses)."""
    from swarm.orchestrate.plan import sim_config

    return sim_config(sim_args, "swarm sim").profile


def sim_args_of(command: Seq[str]) -> list[str] | None:
    """The arguments of `swarm sim` in a server command (`python -m swarm sim ...`, `swarm sim ...`,
    `.venv/bin/swarm sim ...`); None when the command does not run the simulator."""
    for i, word in enumerate(command[:-1]):
        if Path(word).name == "swarm" and command[i + 1] == "sim":
            return list(command[i + 2 :])
    return None


@dataclass
class _Sent:
    user: int
    stage: int
    warmup: bool
    finish: str
    itl: list[float] = field(default_factory=list)  # the gaps between its tokens


def write_sweep(out: Path, profile: Profile, sweep: VirtualSweep, slo: str | None = None) -> int:
    """Run `sweep` on `profile`'s engine and write the run directory `out` (created; it must not
    hold a run); `slo` (`--slo`'s objectives), judged on the whole run as `swarm run` judges them.
    Returns the number of request records written."""
    objectives = None
    if slo is not None:
        from swarm.stats import slo as slo_rules

        objectives = slo_rules.parse(slo)  # UsageError before anything runs
    out.mkdir(parents=True, exist_ok=True)
    if (out / SUMMARY).exists():
        raise FileExistsError(f"{out} already holds a run")
    rng = random.Random(sweep.seed)
    engine = Engine(profile)
    metrics = SimMetrics(engine, MODEL)
    finished: list[Sequence] = []
    engine.on_finish = finished.append
    stages = len(sweep.users)
    end = stages * sweep.stage_s
    arrivals: list[tuple[float, int, int]] = []  # (time, tie-break, user)
    users = 0
    for i, n in enumerate(sweep.users):  # each stage's new users start at its first instant
        for _ in range(n - users):
            heapq.heappush(arrivals, (i * sweep.stage_s, users, users))
            users += 1
    sent: dict[str, _Sent] = {}
    records: list[RequestRecord] = []
    trace = TraceWriter(out / SIM_TRACE)
    scrapes = open(out / SERVER_METRICS, "w")  # noqa: SIM115 - closed below, with the trace
    counter = 0
    next_scrape = sweep.scrape_s
    t = 0.0
    try:
        _scrape(scrapes, metrics, -sweep.scrape_s / 2)  # the poller's first, before the load starts
        while arrivals or engine.running or engine.waiting:
            while arrivals and arrivals[0][0] <= t:
                at, _, user = heapq.heappop(arrivals)
                stage = min(int(at // sweep.stage_s), stages - 1)
                prompt, answer, finish = sweep.request(rng)
                seq = Sequence(f"v{counter}", prompt, answer, (), at, max_tokens=answer)
                counter += 1
                sent[seq.id] = _Sent(user, stage, at - stage * sweep.stage_s < sweep.warmup_s, finish)
                engine.add(seq)
            plan = engine.schedule(t)
            if plan is None:  # idle until the next arrival (or the next scrape, whichever is first)
                nxt = arrivals[0][0] if arrivals else t
                while next_scrape <= nxt:
                    _scrape(scrapes, metrics, next_scrape)
                    next_scrape += sweep.scrape_s
                t = max(nxt, t)
                continue
            done = t + engine.step_seconds(plan)
            while next_scrape <= done:  # what /metrics said during the step
                _scrape(scrapes, metrics, next_scrape)
                next_scrape += sweep.scrape_s
            before = {seq.id: seq.last_token_time for seq, _ in plan.scheduled}
            engine.complete(plan, done)
            for seq, _ in plan.scheduled:
                prev = before[seq.id]
                if prev is not None and seq.last_token_time == done:
                    s = sent[seq.id]
                    s.itl.append(done - prev)
            t = done
            for seq in finished:
                s = sent.pop(seq.id)
                metrics.observe_success(seq, s.finish)
                records.append(_record(seq, s, sweep))
                trace.write(_trace(seq, s.finish))
                if t + sweep.gap_s < end:  # the user's next request; none after the run's end
                    heapq.heappush(arrivals, (t + sweep.gap_s, counter, s.user))
            finished.clear()
        _scrape(scrapes, metrics, t)  # the poller's last scrape, once the run has ended
    finally:
        trace.close()
        scrapes.close()
    records.sort(key=lambda r: r.start_wall_s)
    n = write_records(records, out / REQUESTS)
    summary = _summary(out, sweep)
    _add_blocks(summary, out / REQUESTS, sweep)
    if objectives is not None:
        from swarm.stats import slo as slo_rules
        from swarm.stats.summary_sections import verdict_entries

        summary["slo"] = verdict_entries(slo_rules.evaluate(objectives, summary))
    (out / SUMMARY).write_text(json.dumps(summary, indent=2) + "\n")
    return n


def _add_blocks(summary: dict, records: Path, sweep: VirtualSweep) -> None:
    """Each stage's figures and the run's, computed from the records as `swarm report` computes them
    for a run without a summary (requests per stage sent in it, latencies of its measured window)."""
    import pandas as pd

    from swarm.analysis.rundir import block_from_records, stage_rows

    df = pd.read_parquet(records)
    rows, _ = stage_rows(summary, df)
    for entry, row in zip(summary["stages"], rows, strict=True):
        entry["total"] = row.entry["total"]
    summary["total"] = block_from_records(df, len(sweep.users) * sweep.stage_s)


def _scrape(f, metrics: SimMetrics, at: float) -> None:
    snap = parse_metrics(metrics.render().decode(), ts=START_WALL_S + at, family="vllm")
    f.write(json.dumps(snap.to_json()) + "\n")


def _record(seq: Sequence, s: _Sent, sweep: VirtualSweep) -> RequestRecord:
    first, last = seq.first_token_time, seq.last_token_time
    assert first is not None and last is not None  # a finished sequence produced its tokens
    ttft = first - seq.arrival_time
    return RequestRecord(
        workload=sweep.name,
        start_wall_s=START_WALL_S + seq.arrival_time,
        outcome=Outcome.OK,
        stage=s.stage,
        request_id=seq.id,
        http_status=200,
        ttft_s=ttft,
        ttfa_s=ttft,
        e2e_s=last - seq.arrival_time,
        tpot_s=(last - first) / (seq.generated - 1) if seq.generated > 1 else None,
        itl_s=s.itl,
        prompt_tokens=seq.prompt_tokens,
        output_tokens=seq.generated,
        tokens_from_usage=True,
        finish_reason=s.finish,
        warmup=s.warmup,
        model=MODEL,
        endpoint=ENDPOINT,
    )


def _trace(seq: Sequence, finish: str) -> TraceRecord:
    def wall(x: float | None) -> float | None:
        return None if x is None else START_WALL_S + x

    return TraceRecord(
        id=seq.id,
        arrival_time=START_WALL_S + seq.arrival_time,
        first_token_time=wall(seq.first_token_time),
        last_token_time=wall(seq.last_token_time),
        end_time=wall(seq.finish_time),
        endpoint="chat",
        stream=True,
        prompt_tokens=seq.prompt_tokens,
        completion_tokens=seq.generated,
        finish_reason=finish,
        cached_tokens=seq.cached_tokens,
        first_write_time=wall(seq.first_token_time),  # no front-end lane, no network: written at once
        scheduled_time=wall(seq.scheduled_time),
    )


def _summary(out: Path, sweep: VirtualSweep) -> dict:
    stages = [
        {
            "stage": i,
            "name": f"stage {i + 1}",
            "users": n,
            "start_s": START_WALL_S + i * sweep.stage_s,
            "end_s": START_WALL_S + (i + 1) * sweep.stage_s,
            "warmup_s": sweep.warmup_s,
            "duration_s": sweep.stage_s,
        }
        for i, n in enumerate(sweep.users)
    ]
    return {
        "run_id": f"virtual-{out.name}",
        "clock": "virtual",
        "model_name": MODEL,
        "start_s": START_WALL_S,
        "end_s": START_WALL_S + len(sweep.users) * sweep.stage_s,
        "users": max(sweep.users),
        "notes": ["the simulator's engine on its virtual clock (swarm/orchestrate/virtual_run.py)"],
        "stages": stages,
    }
