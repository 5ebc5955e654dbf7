"""The dataset workload: ShareGPT as vLLM bench reads it, tabular files with a column mapping,
Hugging Face datasets saved on disk, bad rows named, and the shipped sample's generator."""

from __future__ import annotations

import json
import logging
import random
import subprocess
import sys

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from swarm.client.tokenize import LocalTokenizer
from swarm.core.errors import UsageError
from swarm.load.dataset import SHAREGPT_MAX_PROMPT, sharegpt_keep
from swarm.load.workloads import Knobs, build
from tests.helpers.support import REPO

TINY = REPO / "swarm" / "models" / "tiny-qwen2"
SAMPLE = REPO / "swarm" / "load" / "prompts" / "sharegpt_sample.json"


def dataset(spec: str, **kw):
    return build("dataset", Knobs(dataset=spec, **kw))


def test_the_shipped_sample_is_what_its_script_writes(tmp_path):
    script = REPO / "scripts" / "make_sharegpt_sample.py"
    code = f"import runpy,sys; m = runpy.run_path({str(script)!r}); sys.stdout.write(m['render']())"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out == SAMPLE.read_text(encoding="utf-8")


def test_sharegpt_keeps_what_vllm_bench_keeps(caplog):
    tok = LocalTokenizer(TINY)
    with caplog.at_level(logging.WARNING):
        w = dataset(f"sharegpt:{SAMPLE}", seed=1)
    assert any("(id swarm-one-turn): fewer than 2 turns" in r.getMessage() for r in caplog.records)
    w.prepare(tok, progress=lambda _: None)
    data = {e["id"]: e["conversations"] for e in json.loads(SAMPLE.read_text())}
    kept_ids = {r.where.rsplit("(id ", 1)[1].rstrip(")") for r in w.chosen}
    assert "swarm-short-answer" not in kept_ids and "swarm-long-prompt" not in kept_ids
    assert tok.count_prompt(data["swarm-long-prompt"][0]["value"]) > SHAREGPT_MAX_PROMPT
    for row in w.chosen:
        conv = data[row.where.rsplit("(id ", 1)[1].rstrip(")")]
        assert row.messages == [{"role": "user", "content": conv[0]["value"]}]
        assert row.output_tokens == tok.count_prompt(conv[1]["value"])
        assert sharegpt_keep(tok.count_prompt(conv[0]["value"]), row.output_tokens)
    reqs = [w.next_request(random.Random()) for _ in range(len(w.chosen))]
    assert all(r.ignore_eos and r.workload == "dataset" for r in reqs)
    assert sorted(r.max_tokens for r in reqs) == sorted(r.output_tokens for r in w.chosen)


def test_sharegpt_sample_is_seeded():
    tok = LocalTokenizer(TINY)
    picks = []
    for seed in (5, 5, 6):
        w = dataset(f"sharegpt:{SAMPLE}", seed=seed, dataset_sample=10)
        w.prepare(tok, progress=lambda _: None)
        picks.append([r.where for r in w.chosen])
    assert len(picks[0]) == 10 and picks[0] == picks[1] != picks[2]


def test_tabular_formats_with_a_column_mapping(tmp_path, caplog):
    rows = [
        {"question": "What is a KV cache?", "len": 40, "kind": "direct"},
        {"question": "", "len": 10, "kind": "direct"},  # bad: no text
        {"question": "Prove it.", "len": "many", "kind": "thinking"},  # bad: length
        {"question": "Explain paging.", "len": 12.0, "kind": "thinking"},
    ]
    jsonl = tmp_path / "d.jsonl"
    jsonl.write_text("\n".join(json.dumps(r) for r in rows) + "\n{oops\n")
    csv_file = tmp_path / "d.csv"
    csv_file.write_text(
        "question,len,kind\n" + "".join(f'"{r["question"]}",{r["len"]},{r["kind"]}\n' for r in rows)
    )
    parquet = tmp_path / "d.parquet"
    pq.write_table(pa.Table.from_pylist([{**r, "len": str(r["len"])} for r in rows]), parquet)
    cols = "prompt=question,output_tokens=len,class=kind"
    for spec in (f"jsonl:{jsonl}", f"csv:{csv_file}", f"parquet:{parquet}"):
        caplog.clear()
        with caplog.at_level(logging.WARNING):
            w = dataset(spec, dataset_columns=cols, seed=1)
        got = sorted((r.messages[0]["content"], r.output_tokens, r.klass) for r in w.chosen)
        assert got == [("Explain paging.", 12, "thinking"), ("What is a KV cache?", 40, "direct")], spec
        bad = [r.getMessage() for r in caplog.records]
        assert any("no text in column 'question'" in m for m in bad), bad
        assert any("column 'len' must be a whole number" in m for m in bad), bad
    assert any(f"{jsonl}:5: not valid JSON" in m for m in bad) is False  # (the last spec was parquet)
    with caplog.at_level(logging.WARNING):
        dataset(f"jsonl:{jsonl}", dataset_columns=cols)
    assert any(f"{jsonl}:5: not valid JSON" in r.getMessage() for r in caplog.records)
    assert any(f"{jsonl}:2: no text" in r.getMessage() for r in caplog.records)
    r = dataset(f"jsonl:{jsonl}", dataset_columns="prompt=question", max_tokens=33).next_request(
        random.Random()
    )
    assert r.max_tokens == 33 and not r.ignore_eos  # no output_tokens column: --max-tokens, EOS allowed


def test_hugging_face_datasets_saved_on_disk(tmp_path):
    datasets = pytest.importorskip("datasets")
    d = datasets.Dataset.from_dict({"q": ["one question", "another question"], "n": [5, 7]})
    d.save_to_disk(str(tmp_path / "plain"))
    datasets.DatasetDict({"test": d.select([0]), "train": d}).save_to_disk(str(tmp_path / "dict"))
    d.to_parquet(str(tmp_path / "pq" / "train-00000.parquet"))
    for sub in ("plain", "dict", "pq"):
        w = dataset(f"hf:{tmp_path / sub}", dataset_columns="prompt=q,output_tokens=n")
        assert sorted((r.messages[0]["content"], r.output_tokens) for r in w.chosen) == [
            ("another question", 7),
            ("one question", 5),
        ], sub


def test_unusable_datasets_are_one_usage_error(tmp_path):
    empty = tmp_path / "e.jsonl"
    empty.write_text('{"text": "x"}\n')
    with pytest.raises(
        UsageError, match=r"no usable row \(1 bad; first: .*e\.jsonl:1: no text in column 'prompt'"
    ):
        dataset(f"jsonl:{empty}")
    with pytest.raises(UsageError, match="no such file"):
        dataset(f"csv:{tmp_path / 'missing.csv'}")
    with pytest.raises(UsageError, match="KIND one of"):
        dataset(f"xml:{empty}")
    with pytest.raises(UsageError, match="KEY=COLUMN"):
        dataset(f"jsonl:{empty}", dataset_columns="text")
    with pytest.raises(UsageError, match="needs --dataset"):
        build("dataset", Knobs())
    (tmp_path / "s.json").write_text('{"not": "a list"}')
    with pytest.raises(UsageError, match="JSON array"):
        dataset(f"sharegpt:{tmp_path / 's.json'}")
    short = tmp_path / "short.json"
    short.write_text(
        json.dumps([{"conversations": [{"from": "human", "value": "hi"}, {"from": "gpt", "value": "ok"}]}])
    )
    w = dataset(f"sharegpt:{short}")
    with pytest.raises(UsageError, match="length filters"):
        w.prepare(LocalTokenizer(TINY), progress=lambda _: None)
