"""swarm/tune/report.py: tune.html (self-contained) and pareto.png from a TuneResult."""

from __future__ import annotations

import re

from swarm.tune import report as tune_report
from swarm.tune.results import ConfigResult, GuidedStep, ProbePoint, TuneResult


def point(users, tok_s, per_user):
    return ProbePoint(users, None, tok_s / 30, tok_s, per_user, 0.3, 0.03, True)


def result(**kw):
    capped = ConfigResult(
        "max-num-seqs=64",
        {"--max-num-seqs": "64"},
        ["vllm", "serve", "M", "--max-num-seqs", "64", "--port", "8001"],
        "ok",
        answer=48.0,
        bracket=(44.0, 52.0),
        qps=8.7,
        output_tok_s=1500.0,
        ttft_p99_s=0.7,
        tpot_p99_s=0.03,
        bottleneck="max_num_seqs_cap",
        why="Running requests sat pinned at 64 <while> KV at 25%.",
        points=[point(16, 800.0, 40.0), point(48, 1500.0, 35.0)],
        cost_per_m_output_tokens=1.85,
        cost_per_k_requests=0.32,
    )
    raised = ConfigResult(
        "max-num-seqs=256",
        {"--max-num-seqs": "256"},
        ["vllm", "serve", "M", "--max-num-seqs", "256", "--port", "8002"],
        "ok",
        answer=212.0,
        bracket=(208.0, 216.0),
        qps=65.0,
        output_tok_s=6100.0,
        bottleneck="kv_bound",
        why="KV cache at 96%.",
        points=[point(64, 2500.0, 38.0), point(212, 6100.0, 30.0), point(256, 6000.0, 20.0)],
        cost_per_m_output_tokens=0.455,
    )
    failed = ConfigResult(
        "max-num-seqs=4096",
        {"--max-num-seqs": "4096"},
        ["vllm", "serve", "M", "--max-num-seqs", "4096", "--port", "8003"],
        "failed",
        reason="exited with code 1 at start",
        log_tail="torch.OutOfMemoryError: CUDA out of memory",
    )
    steps = [
        GuidedStep("max-num-seqs=64", None, "the starting point", None, 48.0),
        GuidedStep("max-num-seqs=256", "--max-num-seqs 64 -> 256", "capped at 64, KV at 25%", 48.0, 212.0),
    ]
    fields = {
        "serve_cmd": ["vllm", "serve", "M"],
        "search": "concurrency",
        "slo": "ttft_p99<=800ms",
        "gpus": 4,
        "gpu_hourly_cost": 2.5,
        "configs": [capped, raised, failed],
        "steps": steps,
        "best": "max-num-seqs=256",
    }
    return TuneResult(**(fields | kw))


def test_the_page_holds_the_configurations_the_best_command_the_journey_and_the_chart(tmp_path):
    path = tune_report.write_tune_report(tmp_path / "tune", result())
    assert path == tmp_path / "tune" / "tune.html"
    page = path.read_text()
    assert (tmp_path / "tune" / "pareto.png").read_bytes().startswith(b"\x89PNG")
    assert re.search(r'src="data:image/png;base64,[A-Za-z0-9+/=]{100,}"', page)  # embedded
    assert "http://" not in page and "https://" not in page  # self-contained: no host named
    assert not re.search(r"<script[^>]*\bsrc\b", page) and "id='chart-pareto'" in page  # the chart inline
    best = page[page.index("Best configuration") : page.index("<h2>Configurations")]
    assert "max-num-seqs=256" in best and "212 (208-216)" in best
    assert "<pre>vllm serve M --max-num-seqs 256 --port 8002</pre>" in best
    assert "$0.46 per million output tokens" in best
    for name in ("max-num-seqs=64", "max-num-seqs=4096"):
        assert name in page
    assert "exited with code 1 at start" in page and "CUDA out of memory" in page
    assert "&lt;while&gt;" in page  # the diagnosis' text escaped
    journey = page[page.index("Guided journey") :]
    assert "step 2: --max-num-seqs 64 -&gt; 256" in journey and "48 &rarr; 212" in journey
    assert not list((tmp_path / "tune").glob("*.tmp"))


def test_without_points_steps_or_cost(tmp_path):
    r = result(steps=[], gpu_hourly_cost=None, best=None)
    for c in r.configs:
        c.points = []
    page = tune_report.write_tune_report(tmp_path, r).read_text()
    assert "No probed point to draw" in page and not (tmp_path / "pareto.png").exists()
    assert "Guided journey" not in page and "$/M tok" not in page
    assert "<b>max-num-seqs=256</b>" in page  # the best is found when not named


def test_no_configuration_measured(tmp_path):
    r = result(best=None)
    r.configs = [c for c in r.configs if c.status == "failed"]
    assert "No configuration was measured" in tune_report.write_tune_report(tmp_path, r).read_text()


def test_pareto_points_are_per_gpu():
    pts = tune_report.pareto_points(result())
    assert ("max-num-seqs=256", 30.0, 6100.0 / 4) in pts
    assert len(pts) == 5
