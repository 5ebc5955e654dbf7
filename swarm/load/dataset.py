"""The `dataset` workload: prompts (and output lengths) from a dataset file, as `--dataset` names it.

| `--dataset`          | rows                                                                       |
|----------------------|----------------------------------------------------------------------------|
| `sharegpt:FILE.json` | `vllm bench serve`'s ShareGPT handling (REFERENCE.md §9): a JSON array of   |
|                      | `{"id", "conversations": [{"from", "value"}]}`; turn 0 is the prompt, the   |
|                      | token length of turn 1 is `max_tokens` (with ignore_eos); kept when prompt  |
|                      | >= 4, output >= 4, prompt <= 1024 and prompt + output <= 2048 tokens         |
| `jsonl:FILE`         | one JSON object per line                                                   |
| `csv:FILE`           | a header row, then rows                                                    |
| `parquet:FILE`       | a Parquet file                                                             |
| `hf:DIR`             | a Hugging Face dataset saved on disk (`save_to_disk`: Arrow files; a        |
|                      | DatasetDict's `train` split) or a directory of its Parquet files           |

The tabular forms map columns with `--dataset-columns prompt=COL,output_tokens=COL,class=COL`
(or `messages=COL` for an OpenAI message list); defaults are the names themselves. A row with
`output_tokens` is sent with that `max_tokens` and ignore_eos; without, with `--max-tokens` (256).
A bad row is skipped and named (`FILE:LINE` / `FILE:row N`, with the reason) in one warning
line each (the first 20, then a count); a dataset with no usable row is one UsageError.
`--dataset-sample N` keeps N rows, drawn as vLLM draws them (shuffled under the seed, filtered
in that order until N are kept). ShareGPT's token lengths are counted with the run's tokenizer
(`--tokenizer`) before the load, like vLLM bench's `tokenizer(prompt).input_ids`.
"""

from __future__ import annotations

import csv
import json
import logging
import random
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from swarm.core.errors import UsageError
from swarm.core.tokenizer import Tokenizer
from swarm.load.request import LLMRequest

log = logging.getLogger(__name__)

DATASET_KINDS = ("sharegpt", "jsonl", "csv", "parquet", "hf")
COLUMN_KEYS = ("prompt", "messages", "output_tokens", "class")
SHAREGPT_MIN_LEN = 4  # vLLM bench's is_valid_sequence defaults
SHAREGPT_MAX_PROMPT = 1024
SHAREGPT_MAX_TOTAL = 2048
BAD_ROWS_SHOWN = 20
DEFAULT_MAX_TOKENS = 256
USER_ROLES = ("human", "user")  # ShareGPT's `from` of a user turn


@dataclass(frozen=True, slots=True)
class Row:
    where: str  # FILE:LINE or FILE:row N
    messages: list[dict[str, Any]]
    output_tokens: int | None = None  # None: --max-tokens, no ignore_eos
    klass: str | None = None
    reference: str | None = None  # ShareGPT: the reference answer (its token length is max_tokens)
    user_turns: tuple[str, ...] = ()  # every user message of the conversation, in order (chat_session)


def parse_spec(spec: str) -> tuple[str, Path]:
    kind, sep, path = str(spec).partition(":")
    if not sep or kind not in DATASET_KINDS or not path:
        raise UsageError(
            f"bad --dataset {spec!r}: give KIND:PATH with KIND one of {', '.join(DATASET_KINDS)}"
        )
    p = Path(path)
    if not p.exists():
        raise UsageError(f"--dataset {spec}: no such file or directory")
    return kind, p


def parse_columns(text: str | None) -> dict[str, str]:
    """`prompt=question,output_tokens=len` -> {key: column}; the keys not given map to themselves."""
    cols = {k: k for k in COLUMN_KEYS}
    for item in (text or "").split(","):
        if not item.strip():
            continue
        key, sep, col = (s.strip() for s in item.partition("="))
        if not sep or key not in COLUMN_KEYS or not col:
            raise UsageError(
                f"bad --dataset-columns item {item.strip()!r}: use KEY=COLUMN with KEY in {', '.join(COLUMN_KEYS)}"
            )
        cols[key] = col
    return cols


# -- reading --------------------------------------------------------------------------------------


def _records(kind: str, path: Path) -> Iterator[tuple[str, Any]]:
    """(where, raw row) of a tabular dataset; a row that is not an object is yielded as it is."""
    if kind in ("jsonl", "csv"):
        yield from text_records(kind, path, _text(path))
    else:
        for i, row in enumerate(_arrow_rows(kind, path)):
            yield f"{path}:row {i}", row


def text_records(kind: str, path: Path, text: str) -> Iterator[tuple[str, Any]]:
    """(FILE:LINE, raw row) of a JSONL or CSV text; a line that cannot be a row is yielded as the
    ValueError that says why (`read_rows` skips it, named)."""
    if kind == "jsonl":
        for n, line in enumerate(text.splitlines(), 1):
            if line.strip():
                try:
                    yield f"{path}:{n}", json.loads(line)
                except json.JSONDecodeError as e:
                    yield f"{path}:{n}", ValueError(f"not valid JSON ({e.msg})")
    else:
        reader = csv.DictReader(text.splitlines(keepends=True))
        line = reader.line_num
        for row in reader:
            where = f"{path}:{line + 1}"
            line = reader.line_num
            yield where, (ValueError("more fields than the header has") if None in row else row)


def _text(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise UsageError(f"--dataset {path}: cannot read it ({e})") from None


def _arrow_rows(kind: str, path: Path) -> list[dict[str, Any]]:
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        if kind == "parquet":
            return pq.read_table(path).to_pylist()
        root = path
        if (root / "dataset_dict.json").is_file():  # a DatasetDict: its train split, else the first
            splits = json.loads((root / "dataset_dict.json").read_text())["splits"]
            root = root / ("train" if "train" in splits else splits[0])
        arrows = sorted(root.glob("*.arrow"))
        if arrows:
            tables = []
            for f in arrows:
                with pa.memory_map(str(f)) as src:
                    try:
                        tables.append(pa.ipc.open_stream(src).read_all())
                    except pa.ArrowInvalid:
                        tables.append(pa.ipc.open_file(src).read_all())
            return pa.concat_tables(tables).to_pylist()
        parquets = sorted(root.rglob("*.parquet"))
        if parquets:
            return pa.concat_tables([pq.read_table(f) for f in parquets]).to_pylist()
    except (OSError, ValueError, KeyError, pa.ArrowException) as e:
        raise UsageError(f"--dataset {kind}:{path}: cannot read it ({type(e).__name__}: {e})") from None
    raise UsageError(f"--dataset hf:{path}: no .arrow (save_to_disk) or .parquet files there")


def _row(where: str, raw: Any, cols: dict[str, str]) -> Row:
    """One tabular row mapped by the columns; raises ValueError with the reason."""
    if isinstance(raw, Exception):
        raise raw
    if not isinstance(raw, dict):
        raise ValueError("not an object")
    prompt, messages = raw.get(cols["prompt"]), raw.get(cols["messages"])
    if messages not in (None, ""):
        if isinstance(messages, str):
            messages = json.loads(messages)
        if not isinstance(messages, list) or not messages:
            raise ValueError(f"column {cols['messages']!r} is not a non-empty message list")
        for m in messages:
            if (
                not isinstance(m, dict)
                or not isinstance(m.get("role"), str)
                or not isinstance(m.get("content"), str)
            ):
                raise ValueError(
                    f"column {cols['messages']!r}: every message needs a string role and content"
                )
        msgs = [{"role": m["role"], "content": m["content"]} for m in messages]
    elif isinstance(prompt, str) and prompt.strip():
        msgs = [{"role": "user", "content": prompt}]
    else:
        raise ValueError(f"no text in column {cols['prompt']!r} (nor a {cols['messages']!r} list)")
    out = raw.get(cols["output_tokens"])
    n = None
    if out not in (None, ""):
        n = _whole(out)
        if n is None:
            raise ValueError(f"column {cols['output_tokens']!r} must be a whole number >= 1 (got {out!r})")
    klass = raw.get(cols["class"])
    return Row(where, msgs, n, None if klass in (None, "") else str(klass))


def _whole(value: Any) -> int | None:
    """A whole number >= 1 from an int, an integral float or its text; None otherwise."""
    if isinstance(value, bool):
        return None
    if isinstance(value, float):
        n = int(value) if value.is_integer() else 0
    else:
        try:
            f = float(str(value).strip())
        except ValueError:
            return None
        n = int(f) if f.is_integer() else 0
    return n if n >= 1 else None


def _sharegpt(path: Path) -> Iterator[tuple[str, Any]]:
    try:
        data = json.loads(_text(path))
    except json.JSONDecodeError as e:
        raise UsageError(f"--dataset sharegpt:{path}: not valid JSON ({e.msg} at line {e.lineno})") from None
    if not isinstance(data, list):
        raise UsageError(f"--dataset sharegpt:{path}: a ShareGPT file is a JSON array of conversations")
    for i, entry in enumerate(data):
        where = f"{path}:entry {i}" + (
            f" (id {entry.get('id')})" if isinstance(entry, dict) and entry.get("id") else ""
        )
        conv = entry.get("conversations") if isinstance(entry, dict) else None
        if not isinstance(conv, list) or len(conv) < 2:
            yield where, ValueError("fewer than 2 turns")
            continue
        try:
            prompt, answer = str(conv[0]["value"]), str(conv[1]["value"])
        except (KeyError, TypeError):
            yield where, ValueError("a turn without 'value'")
            continue
        users = tuple(
            str(t["value"])
            for t in conv
            if isinstance(t, dict) and t.get("from") in USER_ROLES and "value" in t
        )
        yield where, Row(where, [{"role": "user", "content": prompt}], None, None, answer, users)


def read_dataset(spec: str, columns: str | None = None) -> tuple[str, list[Row]]:
    """(kind, usable rows); bad rows are logged, one line each. UsageError when none is usable."""
    kind, path = parse_spec(spec)
    cols = parse_columns(columns)
    source = _sharegpt(path) if kind == "sharegpt" else _records(kind, path)

    def parse(where: str, raw: Any) -> Row:
        return raw if isinstance(raw, Row) else _row(where, raw, cols)

    return kind, read_rows(f"--dataset {spec}", source, parse)


T = TypeVar("T")


def read_rows(label: str, source: Iterable[tuple[str, Any]], parse: Callable[[str, Any], T]) -> list[T]:
    """The rows `parse` takes, of (where, raw row) pairs: the one bad-row policy of every file of
    rows (datasets, the custom workload's --prompt-file). A row `parse` refuses (ValueError or
    TypeError) is skipped and named in one warning line (`label: skipped FILE:LINE: reason`; the
    first BAD_ROWS_SHOWN, then a count); no usable row is one UsageError."""
    rows: list[T] = []
    bad: list[str] = []
    for where, raw in source:
        try:
            rows.append(parse(where, raw))
        except (ValueError, TypeError) as e:
            bad.append(f"{where}: {e}")
    report_bad(label, bad)
    if not rows:
        first = f"; first: {bad[0]}" if bad else ""
        raise UsageError(f"{label}: no usable row ({len(bad)} bad{first})")
    return rows


def report_bad(label: str, bad: list[str]) -> None:
    for line in bad[:BAD_ROWS_SHOWN]:
        log.warning("%s: skipped %s", label, line)
    if len(bad) > BAD_ROWS_SHOWN:
        log.warning("%s: skipped %d more bad rows", label, len(bad) - BAD_ROWS_SHOWN)


def sharegpt_keep(prompt_len: int, output_len: int) -> bool:
    """vLLM bench's is_valid_sequence with its defaults."""
    return (
        prompt_len >= SHAREGPT_MIN_LEN
        and output_len >= SHAREGPT_MIN_LEN
        and prompt_len <= SHAREGPT_MAX_PROMPT
        and prompt_len + output_len <= SHAREGPT_MAX_TOTAL
    )


# -- the workload ---------------------------------------------------------------------------------


class DatasetWorkload:
    """Rows of a dataset in a per-worker shuffled order (the same order under the same seed)."""

    name = "dataset"

    def __init__(
        self,
        spec: str,
        *,
        columns: str | None = None,
        sample: int | None = None,
        seed: int | None = None,
        max_tokens: int | None = None,
    ) -> None:
        if sample is not None and sample < 1:
            raise UsageError(f"--dataset-sample must be >= 1 (got {sample})")
        self.spec = spec
        self.kind, self.rows = read_dataset(spec, columns)
        self.sample = sample
        self.seed = seed
        self.max_tokens = max_tokens or DEFAULT_MAX_TOKENS
        self.needs_tokenizer = self.kind == "sharegpt"
        self.chosen: list[Row] = []
        self._order: list[int] = []
        self._i = 0
        if not self.needs_tokenizer:
            self._choose(self.rows, random.Random(self._seed()), worker=0)

    def __repr__(self) -> str:
        return f"<DatasetWorkload {self.spec}>"

    def _seed(self) -> int:
        return self.seed if self.seed is not None else random.SystemRandom().getrandbits(62)

    def _choose(self, rows: list[Row], rng: random.Random, worker: int) -> None:
        if self.kind != "sharegpt":
            rows = list(rows)
            rng.shuffle(rows)
            rows = rows[: self.sample] if self.sample else rows
        self.chosen = rows
        order = list(range(len(rows)))
        random.Random(f"{self.seed}:order:{worker}").shuffle(order)
        self._order, self._i = order, 0

    def prepare(
        self,
        tok: Tokenizer,
        *,
        chat: bool = True,
        worker: int = 0,
        progress: Callable[[str], None] = log.info,
    ) -> None:
        """ShareGPT: count prompt and reference lengths, keep what vLLM bench keeps, sample."""
        if self.kind != "sharegpt":
            self._choose(self.rows, random.Random(self._seed()), worker)
            return
        rows = list(self.rows)
        random.Random(self._seed()).shuffle(rows)  # the same rows on every worker (the seed is the run's)
        kept: list[Row] = []
        filtered = 0
        for row in rows:
            prompt_len = tok.count_prompt(row.messages[0]["content"])
            output_len = tok.count_prompt(row.reference or "")
            if sharegpt_keep(prompt_len, output_len):
                kept.append(
                    Row(row.where, row.messages, output_len, row.klass, row.reference, row.user_turns)
                )
                if self.sample and len(kept) == self.sample:
                    break
            else:
                filtered += 1
        if not kept:
            raise UsageError(
                f"--dataset {self.spec}: no conversation passes vLLM's length filters (prompt and answer "
                f">= {SHAREGPT_MIN_LEN} tokens, prompt <= {SHAREGPT_MAX_PROMPT}, both <= {SHAREGPT_MAX_TOTAL})"
            )
        self._choose(kept, random.Random(0), worker)
        progress(
            f"dataset {self.spec}: {len(kept)} conversations kept, {filtered} filtered by length "
            f"(tokenizer {tok.name})"
        )

    def next_row(self) -> Row:
        """The next row in this worker's order (round and round)."""
        if not self.chosen:
            raise RuntimeError("DatasetWorkload.prepare() was not called before the load")
        row = self.chosen[self._order[self._i]]
        self._i = (self._i + 1) % len(self._order)
        return row

    def next_request(self, rng: random.Random) -> LLMRequest:
        row = self.next_row()
        out = row.output_tokens  # given: that length, forced with ignore_eos
        return LLMRequest(
            workload=self.name,
            messages=row.messages,
            max_tokens=self.max_tokens if out is None else out,
            ignore_eos=out is not None,
            request_class=row.klass,
        )
