"""swarm.load.request: the request a workload draws, and the one protocol every workload kind satisfies."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from swarm.core.tokenizer import PseudoTokenizer
from swarm.load.request import LLMRequest, Workload
from swarm.load.workloads import WORKLOADS, Knobs, build


def test_prompt_text_joins_the_message_contents() -> None:
    r = LLMRequest(
        workload="custom",
        messages=[
            {"role": "system", "content": "be brief"},
            {
                "role": "user",
                "content": [{"type": "text", "text": "a"}, {"type": "image_url"}, {"text": "b"}],
            },
            {"role": "user", "content": None},
        ],
        max_tokens=8,
    )
    assert r.prompt_text() == "be brief\n\nab\n\n"
    assert (r.thinking, r.ignore_eos, r.request_class, r.prompt_tokens) == (None, False, None, None)


@pytest.mark.parametrize("name", list(WORKLOADS))
def test_every_workload_kind_satisfies_the_protocol(tmp_path: Path, name: str) -> None:
    rows = tmp_path / "rows.jsonl"
    rows.write_text('{"prompt": "hello there"}\n{"prompt": "and again"}\n', encoding="utf-8")
    knobs = Knobs(prompt_file=str(rows), dataset=f"jsonl:{rows}", seed=1)
    w = build(name, knobs)
    assert isinstance(w, Workload)
    if w.needs_tokenizer:
        w.prepare(PseudoTokenizer(), chat=True, worker=0, progress=lambda _: None)
    r = w.next_request(random.Random(0))
    assert isinstance(r, LLMRequest) and r.workload == name and r.max_tokens >= 1
