"""swarm run's view of the option table: every table option in exactly one --help section, the
ones it reads itself vs the ones it hands on, and the handed-on ones rebuilt as Locust arguments."""

from __future__ import annotations

import argparse

from swarm.core.options import OPTIONS
from swarm.core.run_options import (
    RUN_GROUPS,
    RUN_SETS_ITSELF,
    add_run_options,
    passed_on,
    passed_on_args,
    run_group,
)


def test_every_table_option_has_a_run_section():
    for opt in OPTIONS:
        assert run_group(opt) in RUN_GROUPS, opt.flag


def test_handed_on_options_are_the_ones_swarm_run_does_not_read():
    for opt in OPTIONS:
        assert passed_on(opt) == (not opt.run and opt.flag not in RUN_SETS_ITSELF), opt.flag
    assert any(passed_on(o) for o in OPTIONS) and any(not passed_on(o) for o in OPTIONS)


def test_only_the_handed_on_options_given_come_back_as_locust_arguments():
    parser = argparse.ArgumentParser()
    add_run_options(parser, ["short_qa", "custom"])
    args = parser.parse_args(["--prompt-file", "p.jsonl", "--workload", "custom", "--ignore-eos"])
    out = passed_on_args(args)
    assert out[out.index("--prompt-file") + 1] == "p.jsonl" and "--ignore-eos" in out
    assert "--workload" not in out  # swarm run reads it itself
    assert passed_on_args(parser.parse_args([])) == []
