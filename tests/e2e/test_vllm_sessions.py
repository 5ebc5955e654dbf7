"""`chat_session` against the real vLLM CPU build: each turn resends the history, so from turn 2 on
vLLM's own prefix cache hits the previous turn's prompt (`vllm:prefix_cache_hits` / `queries`).

Uses the session's `vllm_target` (tests/e2e/conftest.py) and the helpers of
tests/e2e/test_vllm_real.py (one `swarm run`, counters scraped before and after).
"""

from __future__ import annotations

import pytest

from tests.e2e.test_vllm_real import assert_reconciled, swarm_run

pytestmark = pytest.mark.serial

# prefix-cache hits come in whole KV blocks: 16 tokens on GPUs, up to 128 on the CPU build; counting
# 128-token blocks bounds the hits from below either way, so turn 1 holds one at least
IN, OUT, BLOCK = 160, 8, 128


@pytest.mark.integration
@pytest.mark.slow
@pytest.mark.timeout(900)
def test_later_turns_hit_vllms_prefix_cache(vllm_target, vllm_report, tmp_path):
    run = swarm_run(
        vllm_target,
        tmp_path / "sessions",
        "--workload",
        "chat_session",
        "-u",
        "2",
        "-t",
        "8s",  # 348 requests in 88 four-turn conversations took 20 s (later turns need only one)
        locust=(
            "--tokenizer",
            "server",
            "--turns",
            "4",
            "--input-tokens",
            str(IN),
            "--output-tokens",
            str(OUT),
        ),
    )
    got = assert_reconciled(run, max_tokens=OUT)
    df = run.records.sort_values(["session_id", "turn"])
    assert df.session_id.notna().all() and df.turn.max() >= 2, df.turn.value_counts()
    assert (df[df.turn == 1].prompt_tokens == IN).all()  # the first message alone: exact, as synthetic
    # each later prompt holds the previous one (its full blocks are in the cache, unless evicted:
    # vLLM also caches the answer's blocks, so its hits may be more, never fewer)
    floor = 0
    for _, conv in df.groupby("session_id"):
        prompts = list(conv.prompt_tokens)
        assert prompts == sorted(prompts) and len(set(prompts)) == len(prompts), prompts
        floor += sum(BLOCK * (p // BLOCK) for p in prompts[:-1])
    hits, queries = run.delta("prefix_hits"), run.delta("prefix_queries")
    assert queries == got["prompt"] and hits >= floor > 0, (hits, floor, queries)
    sessions = run.summary["sessions"]
    assert sessions["started"] == df.session_id.nunique()
    by_turn = df.groupby("turn").prompt_tokens.mean()
    vllm_report.add(
        f"chat_session {IN}/{OUT} x4 turns: {got['requests']} requests in {sessions['started']} conversations; "
        f"vLLM prefix cache {hits:.0f} hits / {queries:.0f} queried ({hits / queries:.0%}; previous prompts' "
        f"full blocks {floor}); mean prompt tokens by turn "
        + ", ".join(f"{t}: {v:.0f}" for t, v in by_turn.items())
    )
