"""swarm/tune/twin/evidence.py: a run's records and scrapes as a twin's evidence, on hand-made
records whose held tokens and in-flight counts are known."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from swarm.analysis.finding import StageRow
from swarm.analysis.rundir import RunData
from swarm.analysis.server_metrics import StageServerStats
from swarm.core.errors import UsageError
from swarm.stats.cpu import ClientLoad
from swarm.tune.twin.evidence import held_tokens, run_evidence


def records(rows) -> pd.DataFrame:
    cols = [
        "stage",
        "start_wall_s",
        "ttft_s",
        "e2e_s",
        "prompt_tokens",
        "output_tokens",
        "tpot_s",
        "finish_reason",
    ]
    df = pd.DataFrame(rows, columns=cols)
    df["outcome"], df["warmup"] = "ok", False
    return df


def test_held_tokens_counts_each_request_from_first_token_to_end_block_rounded():
    # one request decoding over [0, 10) of a [0, 20) window: half the time, 1 in flight; prompt 16 +
    # 1..17 tokens made, rounded up to 16-token blocks: 32 or 48 tokens while it decodes
    df = records([(0, -1.0, 1.0, 11.0, 16, 17, 0.6, "stop")])
    running, held, batch = held_tokens(df, 0.0, 20.0)
    assert running == pytest.approx(0.5)
    assert 0.5 * 32 <= held <= 0.5 * 48
    assert batch == 1.0  # a token is made in a batch of one, whatever the idle half


def test_run_evidence_prefers_the_servers_numbers_and_falls_back_to_the_clients():
    df = records(
        [
            (0, 0.1 * i, 0.05, 1.05, 10 + i % 5, 20, 0.05, "length" if i % 4 == 0 else "stop")
            for i in range(40)
        ]
    )
    row = StageRow(stage=0, users=4, start_s=0.0, end_s=5.0)
    served = StageServerStats(
        stage=0,
        running_mean=4.0,
        running_max=4.0,
        kv_mean=0.1,
        duration_s=5.0,
        prompt_tok_s=100.0,
        prefix_hits=50.0,
    )
    served.latency["itl"] = {"mean": 0.03}
    data = RunData(Path("run"), {}, df, [], ClientLoad(), rows=[row], server={0: served})
    ev = run_evidence(data)
    s = ev.stages[0]
    assert (s.running_mean, s.kv_mean, s.itl_mean_s, s.itl_source) == (4.0, 0.1, 0.03, "server")
    assert s.prefill_tok_s == pytest.approx(100.0 - 50.0 / 5.0)  # the cache's hits were not computed
    assert ev.outputs == (20,) * 40 and ev.cut_share == pytest.approx(0.25)
    assert ev.longest_request == 14 + 20 and len(ev.ttft_low) == 40
    bare = run_evidence(RunData(Path("run"), {}, df, [], ClientLoad(), rows=[row]))
    b = bare.stages[0]
    assert b.itl_source == "client" and b.itl_mean_s == pytest.approx(0.05)
    assert b.kv_mean is None and b.running_max is None  # absent, never 0
    assert b.running_mean == pytest.approx(40 * 1.0 / 5.0, rel=0.05)  # requests decoding at once


def test_a_run_without_records_is_one_line():
    with pytest.raises(UsageError, match="no request records"):
        run_evidence(RunData(Path("run"), {}, None, [], ClientLoad()))
