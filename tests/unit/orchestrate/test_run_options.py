"""`swarm run`'s options (swarm/orchestrate/run.py `configure`) and the time spans they take; their
checks: tests/unit/orchestrate/test_plan.py, and (one line, exit 2, no traceback) running the command:
tests/integration/test_run_options.py."""

import pytest

from swarm.core.errors import UsageError
from swarm.core.units import parse_timespan


@pytest.mark.parametrize(
    "text, seconds", [("20", 20), ("20s", 20), ("3m", 180), ("1h20m", 4800), ("1m30s", 90)]
)
def test_timespan(text, seconds):
    assert parse_timespan(text) == seconds


@pytest.mark.parametrize("text", ["", "abc", "10x", "1500ms", "-3s", "s"])
def test_bad_timespan(text):
    with pytest.raises(UsageError):
        parse_timespan(text)


def _args(*argv: str):
    import argparse

    from swarm.orchestrate.run import configure

    p = argparse.ArgumentParser()
    configure(p)
    return p, p.parse_args(list(argv))


def test_help_is_grouped_in_the_six_sections():
    from swarm.core.run_options import RUN_GROUPS

    p, _ = _args()
    titles = [g.title for g in p._action_groups]
    assert [t for t in titles if t in RUN_GROUPS.values()] == list(RUN_GROUPS.values())
    by_title = {g.title: {o for a in g._group_actions for o in a.option_strings} for g in p._action_groups}
    assert "--prompt-file" in by_title[RUN_GROUPS["workload"]]
    assert "--search" in by_title[RUN_GROUPS["search/SLO"]] and "--sweep" in by_title[RUN_GROUPS["load"]]
    assert "--host" in by_title[RUN_GROUPS["target"]] and "--out" in by_title[RUN_GROUPS["outputs"]]
    assert "--gpu-metrics" in by_title[RUN_GROUPS["observability"]]


def test_workload_options_before_dashdash_are_handed_on_as_after_it(tmp_path):
    from swarm.orchestrate.plan import plan_from_args
    from swarm.orchestrate.run import run_options

    f = tmp_path / "p.jsonl"
    f.write_text('{"prompt": "hi"}\n')
    _, args = _args("--workload", "custom", "--prompt-file", str(f), "--max-tokens", "8", "--ignore-eos",
                    "--", "--seed", "3")  # fmt: skip
    plan = plan_from_args(args, run_options())
    assert plan.extra == ["--ignore-eos", "--max-tokens", "8", "--prompt-file", str(f), "--seed", "3"]
    _, args = _args("--workload", "custom", "--", "--prompt-file", str(f))
    assert plan_from_args(args, run_options()).extra == ["--prompt-file", str(f)]  # after --: as before


def test_a_workload_option_both_before_and_after_dashdash_is_refused(tmp_path):
    from swarm.orchestrate.plan import plan_from_args
    from swarm.orchestrate.run import run_options

    _, args = _args("--max-tokens", "8", "--", "--max-tokens=9")
    with pytest.raises(UsageError, match="--max-tokens is given both before and after --"):
        plan_from_args(args, run_options())


def test_demo_help_lists_only_what_it_changes():
    import argparse

    from swarm.orchestrate import demo

    p = argparse.ArgumentParser()
    demo.configure(p)
    text = p.format_help()
    assert "--users" in text and "[demo: 128]" in text and "every other swarm run option" in text
    assert "--prompt-file" not in text and "--gpu-metrics" not in text
    assert p.parse_args(["--prompt-file", "x"]).prompt_file == "x"  # still accepted
