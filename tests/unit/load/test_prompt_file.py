"""swarm.load.prompt_file: the custom workload's --prompt-file (JSONL or CSV), read with the dataset
reader's one bad-row policy (a bad row skipped and named in a warning, no usable row an error)."""

from __future__ import annotations

import logging
import random
from pathlib import Path

import pytest

from swarm.core.errors import UsageError
from swarm.load.prompt_file import load_prompt_file
from swarm.load.workloads import Knobs, build


def test_custom_jsonl(tmp_path: Path) -> None:
    f = tmp_path / "p.jsonl"
    f.write_text(
        '{"prompt": "你好"}\n\n'
        '{"messages": [{"role": "system", "content": "be brief"}, {"role": "user", "content": "hi"}], '
        '"max_tokens": 12, "thinking": true}\n'
        '{"prompt": "x", "thinking": "off", "prompt_tokens": 9}\n',
        encoding="utf-8",
    )
    prompts = load_prompt_file(f)
    assert len(prompts) == 3
    assert prompts[0].messages == [{"role": "user", "content": "你好"}] and prompts[0].max_tokens is None
    assert prompts[1].max_tokens == 12 and prompts[1].thinking is True and len(prompts[1].messages) == 2
    assert prompts[2].thinking is False and prompts[2].prompt_tokens == 9
    w = build("custom", Knobs(prompt_file=str(f)))
    reqs = [w.next_request(random.Random(i)) for i in range(30)]
    assert {r.max_tokens for r in reqs} == {256, 12} and {r.workload for r in reqs} == {"custom"}


def test_custom_csv(tmp_path: Path) -> None:
    f = tmp_path / "p.csv"
    f.write_text('prompt,max_tokens,thinking\n"line one\nline two",8,yes\nhello,,\n', encoding="utf-8")
    prompts = load_prompt_file(f)
    assert prompts[0].messages[0]["content"] == "line one\nline two"
    assert (prompts[0].max_tokens, prompts[0].thinking) == (8, True)
    assert (prompts[1].max_tokens, prompts[1].thinking) == (None, None)
    g = tmp_path / "m.csv"
    g.write_text('messages\n"[{""role"": ""user"", ""content"": ""hi""}]"\n', encoding="utf-8")
    assert load_prompt_file(g)[0].messages == [{"role": "user", "content": "hi"}]


# (file name, a good row first, then bad rows, the reason the warning names, its FILE:LINE's line)
BAD_ROWS = [
    ("a.jsonl", '{"prompt": "ok"}\n{"prompt": \n', "not valid JSON", 2),
    ("a.jsonl", '{"prompt": "ok"}\n\n["x"]\n', "each line must be a JSON object", 3),
    ("a.jsonl", '{"prompt": "ok"}\n{"prompt": ""}\n', "needs a non-empty 'prompt'", 2),
    ("a.jsonl", '{"prompt": "ok"}\n{"prompt": "a", "max_tokens": 0}\n', "'max_tokens' must be a whole number", 2),
    ("a.jsonl", '{"prompt": "ok"}\n{"prompt": "a", "max_tokens": 2.5}\n', "'max_tokens' must be a whole", 2),
    ("a.jsonl", '{"prompt": "ok"}\n{"prompt": "a", "thinking": "maybe"}\n', "'thinking' must be true or false", 2),
    ("a.jsonl", '{"prompt": "ok"}\n{"prompt": "a", "prompt_tokens": -3}\n', "'prompt_tokens' must be a whole", 2),
    ("a.jsonl", '{"prompt": "ok"}\n{"prompt": "a", "temperature": 1}\n', "unknown field(s) ['temperature']", 2),
    ("a.jsonl", '{"prompt": "ok"}\n{"prompt": "a", "messages": [{"role": "user", "content": "b"}]}\n', "give either", 2),
    ("a.jsonl", '{"prompt": "ok"}\n{"messages": [{"content": "b"}]}\n', "message 1 needs a string 'role'", 2),
    ("a.jsonl", '{"prompt": "ok"}\n{"messages": []}\n', "'messages' must be a non-empty list", 2),
    ("a.csv", "prompt,max_tokens\nok,5\nbad,x\n", "'max_tokens' must be a whole number", 3),
    ("a.csv", 'prompt\nok\n"two\nlines"\n""\n', "needs a non-empty 'prompt'", 5),
    ("a.csv", "prompt\nok\nhello,world\n", "more fields than the header", 3),
    ("a.csv", "messages\n\"[{\"\"role\"\": \"\"user\"\", \"\"content\"\": \"\"hi\"\"}]\"\nnot json\n", "not valid JSON", 3),
]  # fmt: skip


@pytest.mark.parametrize(("name", "text", "reason", "line"), BAD_ROWS)
def test_a_bad_row_is_skipped_with_a_warning_naming_the_line(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, name: str, text: str, reason: str, line: int
) -> None:
    f = tmp_path / name
    f.write_text(text, encoding="utf-8")
    with caplog.at_level(logging.WARNING):
        prompts = load_prompt_file(f)
    assert len(prompts) == 1 + text.count('"two\nlines"')  # the good row(s) only
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1, warnings
    assert warnings[0].startswith(f"--prompt-file {f}: skipped {f}:{line}: ") and reason in warnings[0]


@pytest.mark.parametrize(("name", "text", "reason", "line"), BAD_ROWS)
def test_a_file_with_no_usable_row_is_one_line_error(
    tmp_path: Path, name: str, text: str, reason: str, line: int
) -> None:
    lines = text.splitlines(keepends=True)
    header = lines[:1] if name.endswith(".csv") else []
    good = 1 + text.count('"two\nlines"') * 2  # the good rows' lines after the header
    f = tmp_path / name
    f.write_text("".join(header + lines[len(header) + good :]), encoding="utf-8")
    with pytest.raises(UsageError) as e:
        load_prompt_file(f)
    message = str(e.value)
    assert "\n" not in message and message.startswith(f"--prompt-file {f}: no usable row (")
    assert f"first: {f}:" in message and reason in message


@pytest.mark.parametrize(
    ("name", "text", "message"),
    [
        ("a.csv", "text\nhello\n", ":1: the CSV header needs a 'prompt' or 'messages' column"),
        ("a.csv", "prompt,extra\nhello,1\n", ":1: unknown column(s) ['extra']"),
        ("a.jsonl", "\n\n", ": no usable row (0 bad)"),
    ],
)
def test_file_errors(tmp_path: Path, name: str, text: str, message: str) -> None:
    f = tmp_path / name
    f.write_text(text, encoding="utf-8")
    with pytest.raises(UsageError) as e:
        load_prompt_file(f)
    assert str(e.value).endswith(message) or message in str(e.value)
    assert str(e.value).startswith((f"{f}:1:", f"--prompt-file {f}:"))


def test_missing_or_unreadable_prompt_file(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="no such file"):
        load_prompt_file(tmp_path / "nope.jsonl")
    f = tmp_path / "latin1.jsonl"
    f.write_bytes('{"prompt": "caf\xe9"}\n'.encode("latin-1"))
    with pytest.raises(UsageError, match=r"cannot read it \('utf-8' codec"):
        load_prompt_file(f)
