"""The `custom` workload's `--prompt-file`: the user's prompts, a JSONL or CSV file of rows.

JSONL: one object per line with `prompt` (text) or `messages` (OpenAI list), optional
`max_tokens`, `thinking` and `prompt_tokens` (the prompt's length as the server counts it: a
request the run's stop cancels is then recorded with it). CSV: a header row with the same column
names (`messages` as a JSON string). The file is read by the dataset reader
(swarm/load/dataset.py `text_records`, `read_rows`) with its one bad-row policy: a bad row is
skipped and named (`FILE:LINE: reason`) in a warning line; a file with no usable row is one
UsageError. A CSV header without a prompt column, or with a column of no meaning here, is the
file's error (every row would be bad).
"""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

from swarm.core.errors import UsageError
from swarm.load.dataset import read_rows, text_records
from swarm.load.request import Messages, Prompt

PROMPT_FIELDS = ("prompt", "messages", "max_tokens", "thinking", "prompt_tokens")  # of a prompt file's rows
JSONL_SUFFIXES = (".jsonl", ".json", ".ndjson")
_TRUE = {"1", "true", "yes", "on", "y", "t"}
_FALSE = {"0", "false", "no", "off", "n", "f"}


def load_prompt_file(path: str | Path) -> tuple[Prompt, ...]:
    """The usable prompts of a custom prompt file (JSONL or CSV); bad rows are skipped, each named
    in a warning. Raises UsageError when the file cannot be read or has no usable row."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise UsageError(f"--prompt-file {path}: no such file") from None
    except (OSError, UnicodeDecodeError) as e:
        raise UsageError(f"--prompt-file {path}: cannot read it ({e})") from None
    suffix = p.suffix.lower()
    is_csv = suffix == ".csv" or (suffix not in JSONL_SUFFIXES and not text.lstrip().startswith("{"))
    if is_csv:
        _check_header(path, text)
    noun = "column" if is_csv else "field"

    def parse(where: str, raw: Any) -> Prompt:
        return _row_prompt(raw, noun)

    return tuple(
        read_rows(f"--prompt-file {path}", text_records("csv" if is_csv else "jsonl", p, text), parse)
    )


def _check_header(path: str | Path, text: str) -> None:
    cols = set(next(csv.reader(text.splitlines(keepends=True)), []))
    if not cols & {"prompt", "messages"}:
        raise UsageError(
            f"{path}:1: the CSV header needs a 'prompt' or 'messages' column (got {sorted(cols)})"
        )
    unknown = cols - set(PROMPT_FIELDS)
    if unknown:
        raise UsageError(f"{path}:1: unknown column(s) {sorted(unknown)}; use {', '.join(PROMPT_FIELDS)}")


def _row_prompt(row: Any, noun: str) -> Prompt:
    """One row as a Prompt; raises ValueError with the reason (the reader names the line)."""
    if isinstance(row, Exception):  # the reader's: not valid JSON, more fields than the header
        raise row
    if not isinstance(row, dict):
        raise ValueError("each line must be a JSON object")
    unknown = set(row) - set(PROMPT_FIELDS)
    if unknown:
        raise ValueError(f"unknown {noun}(s) {sorted(unknown)}; use {', '.join(PROMPT_FIELDS)}")
    messages, prompt = row.get("messages"), row.get("prompt")
    if messages not in (None, "") and prompt not in (None, ""):
        raise ValueError("give either 'messages' or 'prompt', not both")
    if messages not in (None, ""):
        msgs = _parse_messages(messages)
    elif isinstance(prompt, str) and prompt.strip():
        msgs = [{"role": "user", "content": prompt}]
    else:
        raise ValueError("needs a non-empty 'prompt' (text) or 'messages' (list)")
    return Prompt(
        messages=msgs,
        max_tokens=_parse_count(row.get("max_tokens"), "max_tokens"),
        thinking=_parse_bool(row.get("thinking")),
        prompt_tokens=_parse_count(row.get("prompt_tokens"), "prompt_tokens"),
    )


def _parse_bool(value: Any) -> bool | None:
    if value is None or value == "":
        return None
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in _TRUE:
        return True
    if text in _FALSE:
        return False
    raise ValueError(f"'thinking' must be true or false (got {value!r})")


def _parse_count(value: Any, key: str) -> int | None:
    """A whole number >= 1 from a row's `key` column; None when absent or empty."""
    if value is None or value == "":
        return None
    if isinstance(value, bool):
        raise ValueError(f"'{key}' must be a whole number >= 1 (got {value!r})")
    try:
        n = int(str(value).strip()) if not isinstance(value, int) else value
    except ValueError:
        n = 0
    if isinstance(value, float) or n < 1:
        raise ValueError(f"'{key}' must be a whole number >= 1 (got {value!r})")
    return n


def _parse_messages(value: Any) -> Messages:
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except json.JSONDecodeError as e:
            raise ValueError(f"'messages' is not valid JSON ({e.msg})") from None
    if not isinstance(value, list) or not value:
        raise ValueError("'messages' must be a non-empty list of {role, content} objects")
    for i, m in enumerate(value, 1):
        if not isinstance(m, dict) or not isinstance(m.get("role"), str):
            raise ValueError(f"message {i} needs a string 'role'")
        if not isinstance(m.get("content"), (str, list)):
            raise ValueError(f"message {i} needs 'content' (a string or a list of parts)")
    return value


__all__ = ["PROMPT_FIELDS", "load_prompt_file"]
