"""The run's options parsed once per process (swarm/live/settings.py): the table's defaults where none
was given, every duration, list and spec parsed into its typed field, the web UI's empty fields
unset, and a bad value one UsageError at build time."""

from __future__ import annotations

import argparse
import ast
from pathlib import Path

import pytest

from swarm.core.errors import UsageError
from swarm.core.options import BY_DEST, OPTIONS
from swarm.core.runfiles import SUMMARY, SUMMARY_PART
from swarm.live.settings import FIRST_USERS, RunSettings

SWARM = Path(__file__).resolve().parents[3] / "swarm"


def settings(**kw) -> RunSettings:
    return RunSettings.from_parsed(argparse.Namespace(**kw))


def test_the_defaults_are_the_tables():
    for s in (RunSettings.from_parsed(None), settings(), settings(**dict.fromkeys(BY_DEST, ""))):
        assert s.stage_s == 30.0 == float(BY_DEST["stage_time"].default[:-1])
        assert (s.warmup_s, s.min_stage_s, s.saturation_guard_s) == (0.0, 5.0, 20.0)
        assert s.arrivals == BY_DEST["arrivals"].default == "poisson"
        assert s.plan.levels == s.plan.rates == () and not s.open_loop
        assert s.trace is None and s.search is None and s.objectives is None and s.goodput is None
        assert s.abort_on == () and s.out_dir is None and s.prometheus_port is None
        assert s.llm.endpoint == BY_DEST["endpoint"].default and s.llm.knobs.rag_passages == 4


def test_every_option_is_parsed_into_its_field():
    s = settings(
        sweep="2,4,8",
        stage_time="1m",
        warmup="10s",
        min_stage_time="8s",
        saturation_guard="0",
        arrivals="constant",
        slo="ttft_p99<=800ms,error_rate<=1%",
        goodput=" ttft<=500ms ",
        abort_on="error_rate>50%/10s",
        swarm_out="/tmp/run",
        prometheus_port="9646",
        num_users=4,
        spawn_rate="2",
        run_time=120,
        seed="7",
        headless=True,
        model="base:3,lora:1",
    )
    assert s.plan.levels == (2, 4, 8) and (s.plan.stage_s, s.plan.warmup_s) == (60.0, 10.0)
    assert (s.stage_s, s.warmup_s, s.min_stage_s, s.saturation_guard_s) == (60.0, 10.0, 8.0, 0.0)
    assert s.arrivals == "constant" and s.users == 4 and s.spawn_rate == 2.0 and s.run_time_s == 120
    assert [o.metric for o in s.objectives] == ["ttft_p99", "error_rate"] and s.slo_text.startswith(
        "ttft_p99"
    )
    assert s.goodput.text == "ttft<=500ms" and [(c.objective.metric, c.window_s) for c in s.abort_on] == [
        ("error_rate", 10.0)
    ]
    assert s.out_dir == Path("/tmp/run") and s.prometheus_port == 9646 and s.seed == 7 and s.headless
    assert s.model_text == "base:3,lora:1" and s.llm.split is not None


def test_a_search_takes_its_first_load_from_users_or_the_first_rate():
    s = settings(search="concurrency", slo="ttft_p99<=1s")
    assert s.search.start == FIRST_USERS and s.objectives is None  # judged per stage, not at the end
    assert settings(search="knee", num_users=32).search.start == 32
    assert settings(search="rate", slo="e2e_p99<=5s", rate="3,9").search.start == 3.0
    assert settings(search="rate", slo="e2e_p99<=5s").search.start == 1.0


def test_the_summary_goes_to_summary_json_or_under_swarm_run_to_the_part_it_completes():
    assert settings().summary_path is None  # no --swarm-out: no file
    assert settings(swarm_out="/o").summary_path == Path("/o") / SUMMARY
    assert settings(swarm_out="/o", summary_part=True).summary_path == Path("/o") / SUMMARY_PART


def test_the_stages_and_the_search_read_the_same_stage_time_and_warmup():
    s = settings(sweep="4,8", stage_time="1m", warmup="10s")
    assert (s.stage_s, s.warmup_s) == (s.plan.stage_s, s.plan.warmup_s) == (60.0, 10.0)
    assert settings(search="concurrency", slo="ttft_p99<=1s", stage_time="1m").stage_s == 60.0  # no plan


def test_a_trace_replay_and_its_options():
    t = settings(trace_replay="t.jsonl", trace_start="1m", trace_duration="30s", trace_max_lag="100ms").trace
    assert (t.path, t.format, t.time_scale, t.block_size) == ("t.jsonl", "mooncake", 1.0, 512)
    assert (t.start_s, t.duration_s, t.max_lag_s) == (60.0, 30.0, 0.1)
    assert settings(trace_replay="t.jsonl", trace_duration="").trace.duration_s is None


@pytest.mark.parametrize(
    ("kw", "match"),
    [
        ({"stage_time": "soon"}, r"^--stage-time: bad time 'soon'"),
        ({"saturation_guard": "1500ms"}, r"--saturation-guard: '1500ms' is not a whole number of seconds"),
        ({"sweep": "2,4", "rate": "5"}, r"exclude each other"),
        ({"sweep": "4", "warmup": "30s"}, r"--warmup \(30s\) must be shorter than --stage-time \(30s\)"),
        ({"search": "concurrency"}, r"needs a criterion"),
        ({"slo": "ttft<=1s"}, r"^bad SLO 'ttft<=1s'"),
        ({"goodput": "fast"}, r"goodput"),
        ({"abort_on": "error_rate>50%/soon"}, r"abort-on"),
        ({"prometheus_port": "web"}, r"^--prometheus-port must be a number"),
        ({"trace_replay": "t.jsonl", "rate": "5"}, r"--trace-replay sets its own schedule"),
        ({"trace_replay": "t.jsonl", "trace_max_lag": "later"}, r"^--trace-max-lag: bad time"),
    ],
)
def test_a_bad_value_is_one_usage_error_at_build_time(kw, match):
    with pytest.raises(UsageError, match=match):
        settings(**kw)


def test_no_module_reads_an_option_of_the_table_but_the_settings():
    """Options parsed once: outside live/options.py and live/settings.py no module of the live layer
    reads a table option off Locust's parsed options (`parsed_options.stage_time`,
    `getattr(opts, "rate", ...)`); they read `RunSettings`. (keyorigin.py hands the key's origin on
    to the workers through them, and prepare.py the drawn seed: each writes its one option.)"""
    names = {o.dest for o in OPTIONS}
    allowed = {"options.py", "settings.py"}
    writers = {"keyorigin.py": {"api_key_origin", "api_key"}, "prepare.py": {"seed"}, "user.py": {"api_key"}}
    found = []
    for path in sorted((SWARM / "live").glob("*.py")):
        if path.name in allowed:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Attribute):
                base, name = node.value, node.attr
            elif isinstance(node, ast.Call) and ast.unparse(node.func) == "getattr" and len(node.args) >= 2:
                base, name = node.args[0], getattr(node.args[1], "value", None)
            else:
                continue
            text = ast.unparse(base)
            locust_options = "parsed_options" in text
            if locust_options and name in names and name not in writers.get(path.name, set()):
                found.append(f"{path.name}:{node.lineno} {name}")
    assert not found, found


def test_cancel_and_the_prefix_cache_options():
    s = settings(cancel="20%@tokens:4", prefix_cache="bust", reset_prefix_cache=True)
    assert (s.cancel.share, s.cancel.after_tokens, s.cancel.after_s) == (0.2, 4, None)
    assert s.bust_prefix and s.reset_prefix_cache
    d = settings()
    assert d.cancel is None and not d.bust_prefix and not d.reset_prefix_cache
    assert settings(prefix_cache="bust", dialect="vllm", trace_replay="t.jsonl").bust_prefix


@pytest.mark.parametrize(
    ("kw", "match"),
    [
        ({"cancel": "120%"}, r"^bad --cancel RATE '120%': must be above 0% and at most 100%$"),
        ({"cancel": "20%@never"}, r"^--cancel '20%@never': WHEN must be"),
        ({"prefix_cache": "smash"}, r"^--prefix-cache must be one of keep, bust"),
        (
            {"prefix_cache": "bust", "dialect": "llamacpp", "trace_replay": "t.jsonl"},
            r"^--prefix-cache bust: the llamacpp dialect takes no cache_salt",
        ),
    ],
)
def test_bad_cancel_or_prefix_cache_is_one_usage_error(kw, match):
    with pytest.raises(UsageError, match=match):
        settings(**kw)
