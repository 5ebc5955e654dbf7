"""`--model NAME` / `--model a:3,b:1`: the spec's parsing, its errors, and the weighted draw."""

from __future__ import annotations

import random

import pytest

from swarm.core.errors import UsageError
from swarm.live.options import LLMOptions
from swarm.load.models import ModelSplit, parse_models


def test_a_plain_name_keeps_its_meaning():
    m = parse_models("Qwen/Qwen3-8B")
    assert m == ModelSplit(("Qwen/Qwen3-8B",), (1.0,)) and not m.split
    assert m.draw(random.Random(0)) == "Qwen/Qwen3-8B" and str(m) == "Qwen/Qwen3-8B"
    assert parse_models(None) is None


def test_a_split_with_weights():
    m = parse_models(" base:3 , sql-lora:1 ")
    assert m.names == ("base", "sql-lora") and m.weights == (3.0, 1.0) and m.split
    assert m.share("base") == 0.75 and str(m) == "base:3,sql-lora:1"
    assert parse_models("a,b").weights == (1.0, 1.0)  # no weight: 1
    assert parse_models("a:0.5,b:1.5").share("b") == 0.75
    assert parse_models("llama3:8b:1").names == ("llama3:8b",)  # a colon in the name: weight after it
    assert parse_models("llama3:8b").names == ("llama3:8b",)  # no number after the colon: all name
    assert parse_models("qwen:7b:3,llama3:8b").weights == (3.0, 1.0)


def test_the_draw_follows_the_weights():
    m = parse_models("a:3,b:1")
    rng = random.Random(42)
    draws = [m.draw(rng) for _ in range(40_000)]
    assert abs(draws.count("a") / len(draws) - 0.75) < 0.01
    assert [m.draw(random.Random(7)) for _ in range(3)] == [m.draw(random.Random(7)) for _ in range(3)]


@pytest.mark.parametrize(
    ("spec", "says"),
    [
        ("a:0", "weight '0' of 'a' is not a number > 0"),
        ("a:3,b:-1", "weight '-1' of 'b'"),
        ("a:inf", "weight 'inf'"),
        ("", "empty --model"),
        ("  ", "empty --model"),
        ("a:3,,b:1", "an empty item"),
        (":3", "has no model name"),
        ("a:1,a:2", "'a' is listed twice"),
    ],
)
def test_bad_specs_are_one_clear_error(spec, says):
    with pytest.raises(UsageError, match="--model") as e:
        parse_models(spec)
    assert says in str(e.value) and "\n" not in str(e.value)


def test_options_carry_the_split_and_its_first_model():
    class Parsed:
        model = "base:3,sql-lora:1"

    opts = LLMOptions.from_parsed(Parsed())
    assert opts.model == "base" and opts.split is not None and opts.split.names == ("base", "sql-lora")
    Parsed.model = "base"
    one = LLMOptions.from_parsed(Parsed())
    assert one.model == "base" and one.split is None
    Parsed.model = "a:0"
    with pytest.raises(UsageError):
        LLMOptions.from_parsed(Parsed())
