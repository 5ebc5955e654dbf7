"""Prompt tokens reconciled with the server's cache counters (llama.cpp: processed prompt tokens,
exactly; vLLM: cached tokens vs prefix-cache hits, exactly), and the cache-hit share in the
table and the report."""

from __future__ import annotations

from swarm.analysis import table
from swarm.analysis.prompt_cache import prompt_cache_vs_server
from swarm.analysis.server_metrics import StageServerStats


def server(source: str, prompt: float, hits: float | None) -> StageServerStats:
    # prompt_tokens as server_metrics normalises it: every prompt token, cached ones included
    return StageServerStats(
        stage=-1, samples=10, duration_s=10.0, prompt_tokens=prompt, prefix_hits=hits, source=source
    )


def client(prompt: int, cached: int, requests: int = 40, reported: int = 40, cancelled: int = 0) -> dict:
    return {
        "requests": requests,
        "cancelled": cancelled,
        "failures": {"timeout": 0},
        "prompt_tokens": prompt,
        "prompt_cache": {"requests": reported, "cached_tokens": cached, "prompt_tokens": prompt,
                         "hit_share": cached / prompt},
    }  # fmt: skip


def test_llamacpp_processed_prompt_tokens_reconcile_exactly():
    (f,) = prompt_cache_vs_server(server("llamacpp", 40_200, 38_428), client(40_200, 38_428))
    assert f.text.startswith("Processed prompt tokens reconcile exactly")
    assert "1,772, the increase of llamacpp:prompt_tokens_total" in f.text and "95.6%" in f.text
    # one token off is no reconciliation: the cause is named
    (g,) = prompt_cache_vs_server(
        server("llamacpp", 40_260, 38_428), client(40_200, 38_428, requests=42, cancelled=2)
    )
    assert g.text.startswith("Processed prompt tokens differ") and "grew by 1,832 (+60)" in g.text
    assert "2 requests were cut or failed before their usage arrived" in g.text
    (h,) = prompt_cache_vs_server(server("llamacpp", 40_200, 38_428), client(40_200, 38_428), missed_end=1.5)
    assert "the last scrape came 1.5 s before" not in h.text  # exact: no cause needed


def test_vllm_cached_tokens_reconcile_with_prefix_cache_hits():
    (f,) = prompt_cache_vs_server(server("vllm", 10_000, 4_096), client(10_000, 4_096))
    assert f.text.startswith("Cached prompt tokens reconcile exactly") and "4,096 of their 10,000" in f.text
    (g,) = prompt_cache_vs_server(server("vllm", 10_000, 4_160), client(10_000, 4_096, reported=39))
    assert g.text.startswith("Cached prompt tokens differ") and "(+64)" in g.text
    assert "1 OK requests did not say" in g.text
    (k,) = prompt_cache_vs_server(server("vllm", 10_000, 4_000), client(10_000, 4_096))
    assert "KV connector" in k.text


def test_sglang_and_trtllm_cached_tokens_name_their_own_counter():
    (f,) = prompt_cache_vs_server(server("sglang", 10_000, 4_096), client(10_000, 4_096))
    assert "SGLang's prefix cache served 4,096" in f.text and "sglang:cached_tokens_total." in f.text
    (g,) = prompt_cache_vs_server(server("trtllm", 10_000, 4_000), client(10_000, 4_096))
    assert "trtllm_prompt_cached_tokens_total grew by 4,000 (-96)" in g.text and "vllm" not in g.text
    assert "the counter missed some the responses said" in g.text


def test_vllm_without_the_flag_says_how_to_get_it():
    no_cache = {"requests": 40, "prompt_tokens": 10_000, "prompt_cache": None}
    (f,) = prompt_cache_vs_server(server("vllm", 10_000, 4_096), no_cache)
    assert "--enable-prompt-tokens-details" in f.text and "41.0%" in f.text
    assert prompt_cache_vs_server(server("vllm", 10_000, 0), no_cache) == []
    assert prompt_cache_vs_server(server("unknown", 10_000, None), no_cache) == []


def _block(share_of: tuple[int, int] | None) -> dict:
    if share_of is None:
        return {"prompt_cache": None}
    cached, prompt = share_of
    return {
        "prompt_cache": {
            "requests": 3,
            "cached_tokens": cached,
            "prompt_tokens": prompt,
            "hit_share": cached / prompt,
        }
    }


def test_table_shows_the_share_per_workload_and_stage():
    summary = {
        "workloads": ["rag", "short_qa"],
        "total": _block((500, 2000)),
        "rag": _block((500, 1000)),
        "short_qa": _block(None),
        "stages": [
            {"stage": 0, "total": _block((100, 800)), "rag": _block((100, 400)), "short_qa": _block(None)},
            {"stage": 1, "total": _block((400, 1200)), "rag": _block((400, 600))},
        ],
    }
    head, rows = table.prompt_cache_table(summary)
    assert head == ["workload", "run", "stage 1", "stage 2"]
    assert rows == [
        ["rag", "50.0%", "25.0%", "66.7%"],
        ["short_qa", "-", "-", "-"],
        ["total", "25.0%", "12.5%", "33.3%"],
    ]
    lines = table.prompt_cache_lines(summary)
    assert "500 of 2,000 tokens, 3 requests" in lines[0]
    # nothing reported: no table at all
    assert table.prompt_cache_table({**summary, "total": _block(None)}) is None


def test_llamacpp_prints_6_significant_digits_and_the_reconciliation_allows_for_it():
    from swarm.analysis.server_metrics import printed_error, window_stats
    from swarm.analysis.server_parse import parse_metrics

    assert printed_error(999_999) == 0.0 and printed_error(1_234_567) == 5.0
    assert printed_error(12_345_678) == 50.0 and printed_error(1_234_567, source="vllm") == 0.0

    def scrape(ts: float, processed: str, cached: str):
        text = (
            f"# TYPE llamacpp:prompt_tokens_total counter\nllamacpp:prompt_tokens_total {processed}\n"
            f"# TYPE llamacpp:prompt_tokens_cached_total counter\nllamacpp:prompt_tokens_cached_total {cached}\n"
        )
        return parse_metrics(text, ts=ts)

    # true counts 900,000 -> 1,234,567 processed: llama-server printed the second as 1.23457e+06
    run = window_stats([scrape(0.0, "900000", "10"), scrape(10.0, "1.23457e+06", "20")], -1, 0.0, 10.0)
    assert run.source == "llamacpp" and run.processed_error == 5.0 and run.prefix_hits == 10
    block = client(334_567 + 10, 10)
    (f,) = prompt_cache_vs_server(run, block)
    assert f.text.startswith("Processed prompt tokens reconcile to llama.cpp's printed precision"), f.text
    # 10 more: beyond what the printing explains
    (g,) = prompt_cache_vs_server(run, client(334_567 + 10 + 10, 10))
    assert g.text.startswith("Processed prompt tokens differ")
