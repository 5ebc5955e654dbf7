"""`swarm tune`'s options (swarm/tune/command.py): swarm run's options handed on as written and
checked up front with swarm run's own parser; tune's own checks, each one UsageError."""

from __future__ import annotations

import argparse
import json

import pytest

from swarm.core.errors import UsageError
from swarm.tune.command import _better, check_run_argv, configure, plan_from_args

SIM = "python -m swarm sim --profile instant"


def parse(*argv: str) -> argparse.Namespace:
    p = argparse.ArgumentParser()
    configure(p)
    return p.parse_args(list(argv))


def test_run_options_are_handed_on_as_written_in_order():
    args = parse(
        "--serve-cmd", SIM, "--out", "d", "--sweep", "4", "--ignore-eos", "-t", "5s", "--workload", "chat"
    )
    assert args.run_argv == ["--sweep", "4", "--ignore-eos", "-t", "5s", "--workload", "chat"]
    assert args.serve_cmd == SIM and args.out == "d"


def test_tune_sets_host_and_out_itself():
    p = argparse.ArgumentParser()
    configure(p)
    strings = {s for a in p._actions for s in a.option_strings}
    assert "--host" not in strings and "--sim-arg" not in strings and "--overwrite" not in strings
    assert "--out" in strings  # tune's own


def test_plan_from_a_grid(tmp_path):
    plan = plan_from_args(
        parse("--serve-cmd", SIM, "--grid", "max-num-seqs=2,8", "--out", str(tmp_path / "t"), "--sweep", "4")
    )
    assert plan.configs == [{"--max-num-seqs": "2"}, {"--max-num-seqs": "8"}]
    assert plan.ctx.serve_cmd == ["python", "-m", "swarm", "sim", "--profile", "instant"]
    assert plan.ctx.run_argv == ["--sweep", "4"] and plan.search is None and not plan.guided


def test_guided_starts_from_the_grids_first_values(tmp_path):
    plan = plan_from_args(
        parse(
            "--serve-cmd", SIM, "--guided", "--grid", "max-num-seqs=64,256", "--out", str(tmp_path / "t"),
            "--search", "concurrency", "--slo", "ttft_p99<=800ms", "--search-precision", "10%",
        )
    )  # fmt: skip
    assert plan.configs == [{"--max-num-seqs": "64"}]
    assert plan.search == "concurrency" and plan.precision == pytest.approx(0.10)


def test_configs_file(tmp_path):
    f = tmp_path / "serve.json"
    f.write_text(json.dumps([{"max-num-seqs": 2}, {"max-num-seqs": 8}]))
    plan = plan_from_args(parse("--serve-cmd", SIM, "--configs", str(f), "--out", str(tmp_path / "t")))
    assert [c["--max-num-seqs"] for c in plan.configs] == ["2", "8"]


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--out", "X"], "--serve-cmd is required"),
        (["--serve-cmd", SIM], "--out DIR is required"),
        (["--serve-cmd", SIM, "--out", "X", "--grid", "max-num-seqs"], "bad --grid"),
        (["--serve-cmd", SIM, "--out", "X", "--grid", "np=1", "--configs", "c.json"], "give one"),
        (["--serve-cmd", SIM, "--out", "X", "--guided"], "--guided needs --search"),
        (
            ["--serve-cmd", SIM, "--out", "X", "--guided", "--sweep", "4,8"],
            "--guided with a --sweep needs --slo",
        ),
        (["--serve-cmd", SIM, "--out", "X", "--gpus", "0"], ">= 1"),
        (["--serve-cmd", SIM, "--out", "X", "--search", "concurrency"], "needs a criterion"),
        (["--serve-cmd", SIM, "--out", "X", "--sweep", "a,b"], "--sweep"),
        (["--serve-cmd", SIM, "--out", "X", "--health-timeout", "soon"], "--health-timeout"),
        (["--serve-cmd", SIM, "--out", "X", "--grid", "max-num-seqs=4,4"], "the value 4 is given twice"),
        (
            ["--serve-cmd", SIM, "--out", "X", "--grid", "x=a/b,a_b"],
            "'x=a/b' and 'x=a_b' would share one run directory",
        ),
        (["--serve-cmd", SIM, "--out", "X", "--grid", "np=1,2", "--budget", "2"], "--budget caps --guided"),
        (["--serve-cmd", SIM, "--out", "X", "--resume-anyway"], "--resume-anyway goes with --resume"),
    ],
)
def test_bad_input_is_one_usage_error(tmp_path, monkeypatch, argv, message):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(UsageError, match=message):
        plan_from_args(parse(*argv))


def test_a_configs_file_giving_one_configuration_twice_is_refused(tmp_path):
    f = tmp_path / "serve.json"
    f.write_text(json.dumps([{"max-num-seqs": 4}, {"max_num_seqs": "4"}]))
    with pytest.raises(UsageError, match=r"serve\.json: the configuration 'max-num-seqs=4' is given twice"):
        plan_from_args(parse("--serve-cmd", SIM, "--configs", str(f), "--out", str(tmp_path / "t")))


def test_a_tune_directory_is_not_reused_without_resume(tmp_path):
    (tmp_path / "tune.json").write_text("{}")
    with pytest.raises(UsageError, match="--resume"):
        plan_from_args(parse("--serve-cmd", SIM, "--out", str(tmp_path)))


def test_resume_needs_its_tune_json(tmp_path):
    with pytest.raises(UsageError, match=r"no tune\.json"):
        plan_from_args(parse("--serve-cmd", SIM, "--resume", str(tmp_path)))


def test_check_run_argv_refuses_a_bad_option_value():
    with pytest.raises(UsageError, match="swarm run option"):
        check_run_argv(["--endpoint", "nope"])


def test_better_needs_more_than_the_precision():
    assert _better(None, 10.0, 0.05)
    assert not _better(10.0, None, 0.05)
    assert not _better(100.0, 104.0, 0.05)
    assert _better(100.0, 106.0, 0.05)


def fake_measurements(monkeypatch, answers: dict[str, tuple[float | None, str]]) -> list[dict]:
    """measure() answering from `answers` (config name -> (answer, bottleneck)); the flags measured."""
    from swarm.tune import run as tune_run
    from swarm.tune.plan import config_name
    from swarm.tune.results import ConfigResult

    seen: list[dict] = []

    def measure(ctx, flags):
        seen.append(dict(flags))
        answer, bottleneck = answers[config_name(flags)]
        return ConfigResult(
            config_name(flags), dict(flags), ["vllm"], "ok", answer=answer, bottleneck=bottleneck
        )

    monkeypatch.setattr(tune_run, "measure", measure)
    monkeypatch.setattr("swarm.tune.command._finish", lambda plan, result: None)
    return seen


def test_guided_follows_the_diagnosis_until_the_answer_stops_improving(tmp_path, monkeypatch, capsys):
    from swarm.tune.command import main
    from swarm.tune.results import read_tune_json

    seen = fake_measurements(
        monkeypatch,
        {
            "base": (48.0, "max_num_seqs_cap"),
            "max-num-seqs=128": (150.0, "kv_bound"),
            "max-num-seqs=128 gpu-memory-utilization=0.92": (152.0, "kv_bound"),
        },
    )
    args = parse(
        "--serve-cmd", "vllm serve M --max-num-seqs 64", "--guided", "--out", str(tmp_path / "t"),
        "--search", "concurrency", "--slo", "ttft_p99<=800ms", "--budget", "4",
    )  # fmt: skip
    assert main(args) == 0
    assert seen == [
        {},
        {"--max-num-seqs": "128"},
        {"--max-num-seqs": "128", "--gpu-memory-utilization": "0.92"},
    ]
    out = capsys.readouterr().out
    assert "step 2: --max-num-seqs 64 -> 128:" in out and "answer 48 -> 150" in out
    assert "stop: the answer improved by less than the search's precision (5%)" in out
    steps = read_tune_json(tmp_path / "t" / "tune.json").steps
    assert [s.changed for s in steps][:3] == [
        None,
        "--max-num-seqs 64 -> 128",
        "--gpu-memory-utilization unset -> 0.92",
    ]


def test_guided_stops_when_no_flag_helps(tmp_path, monkeypatch, capsys):
    from swarm.tune.command import main

    seen = fake_measurements(monkeypatch, {"base": (10.0, "compute_bound")})
    args = parse(
        "--serve-cmd", "vllm serve M", "--guided", "--out", str(tmp_path / "t"),
        "--search", "concurrency", "--slo", "ttft_p99<=800ms",
    )  # fmt: skip
    assert main(args) == 0
    assert seen == [{}]
    assert "swarm tune: stop: " in capsys.readouterr().out


def test_guided_with_a_sweep_takes_any_higher_answer_as_a_step_up(tmp_path):
    plan = plan_from_args(
        parse(
            "--serve-cmd",
            SIM,
            "--guided",
            "--out",
            str(tmp_path / "t"),
            "--sweep",
            "48,96",
            "--slo",
            "ttft_p99<=1s",
        )
    )
    assert plan.search is None and plan.precision == 0.0
    assert _better(48.0, 96.0, plan.precision) and not _better(96.0, 96.0, plan.precision)


def test_guided_with_a_sweep_stops_when_no_higher_stage_is_reached(tmp_path, monkeypatch, capsys):
    from swarm.tune.command import main

    seen = fake_measurements(
        monkeypatch, {"base": (48.0, "max_num_seqs_cap"), "max-num-seqs=128": (48.0, "max_num_seqs_cap")}
    )
    args = parse(
        "--serve-cmd", "vllm serve M --max-num-seqs 64", "--guided", "--out", str(tmp_path / "t"),
        "--sweep", "48,96", "--slo", "ttft_p99<=800ms",
    )  # fmt: skip
    assert main(args) == 0
    assert len(seen) == 2
    assert "stop: the answer reached no higher sweep stage" in capsys.readouterr().out


def test_guided_stops_at_the_budget(tmp_path, monkeypatch, capsys):
    from swarm.tune.command import main

    seen = fake_measurements(
        monkeypatch, {"base": (10.0, "max_num_seqs_cap"), "max-num-seqs=128": (30.0, "max_num_seqs_cap")}
    )
    args = parse(
        "--serve-cmd", "vllm serve M --max-num-seqs 64", "--guided", "--budget", "2", "--out", str(tmp_path / "t"),
        "--search", "concurrency", "--slo", "ttft_p99<=800ms",
    )  # fmt: skip
    assert main(args) == 0
    assert len(seen) == 2
    out = capsys.readouterr().out
    said = "the budget (2 configurations) is spent; max-num-seqs=128 is held by max_num_seqs_cap; "
    assert f"stop: {said}next would be --max-num-seqs 256" in out
