"""The synthetic workload's options, as Locust parses them: defaults, refusals, one line each."""

from __future__ import annotations

import argparse

import pytest

from swarm.core.errors import UsageError
from swarm.live.options import LLMOptions
from swarm.load.workloads import Mix


def opts(**kw) -> LLMOptions:
    return LLMOptions.from_parsed(argparse.Namespace(workload="synthetic", **kw))


def test_defaults_and_values_reach_the_knobs():
    o = opts()
    assert o.tokenizer == "auto" and o.knobs.input_tokens == "1024" and o.knobs.output_tokens == "128"
    assert o.knobs.seed is None and not o.knobs.no_ignore_eos
    o = opts(tokenizer="pseudo", input_tokens="10-20", seed="5", shared_prefix_tokens="8", prefix_groups="2")
    assert (o.tokenizer, o.knobs.input_tokens, o.knobs.seed) == ("pseudo", "10-20", 5)
    assert (o.knobs.shared_prefix_tokens, o.knobs.prefix_groups) == (8, 2)


def test_a_dialect_that_cannot_ignore_eos_is_refused_unless_asked():
    with pytest.raises(UsageError, match="--no-ignore-eos"):
        opts(dialect="openai")
    assert opts(dialect="openai", no_ignore_eos=True).knobs.no_ignore_eos
    o = opts(dialect="openai", no_ignore_eos=True, tokenizer="pseudo", input_tokens="30")
    w = Mix.from_spec("synthetic", o.knobs).items[0][0]
    assert w.ignore_eos is False


@pytest.mark.parametrize(
    ("kw", "match"),
    [
        ({"input_tokens": "10-5"}, "--input-tokens"),
        ({"output_tokens": "x"}, "--output-tokens"),
        ({"seed": "abc"}, "--seed"),
        ({"prefix_groups": "0"}, "--prefix-groups"),
        ({"shared_prefix_tokens": "-1"}, "--shared-prefix-tokens"),
    ],
)
def test_bad_values_name_their_option(kw, match):
    with pytest.raises(UsageError, match=match):
        Mix.from_spec("synthetic", opts(**kw).knobs)


def test_dataset_needs_the_dataset_workload():
    with pytest.raises(UsageError, match="--workload dataset"):
        opts(dataset="sharegpt:x.json")
    o = LLMOptions.from_parsed(
        argparse.Namespace(
            workload="dataset", dataset="jsonl:x", dataset_sample="3", dataset_columns="prompt=q"
        )
    )
    assert (o.knobs.dataset, o.knobs.dataset_sample, o.knobs.dataset_columns) == ("jsonl:x", 3, "prompt=q")
