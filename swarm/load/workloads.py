"""Workloads: what each request asks for (prompt, max_tokens, thinking on/off).

A workload draws one `LLMRequest` at a time from a shipped prompt set (swarm/load/prompts/), with the
defaults of the seed documents (REFERENCE.md §1):

| name        | prompts                                          | max_tokens | thinking          |
|-------------|--------------------------------------------------|------------|-------------------|
| mixed       | general chat (direct) + reasoning tasks          | 1024       | 20% on (settable) |
| short_qa    | seed 000's 15 short-output prompts               | 50         | off               |
| chat        | general chat, Chinese and English                | 150-256    | off               |
| rag         | fixed preamble + template + retrieved passages   | 256        | off               |
| long_output | summarise a shipped document (~500 tokens)       | 512        | off               |
| translate   | one sentence zh->en / en->zh (~50 tokens)        | 64         | off               |
| custom      | the user's JSONL/CSV file (--prompt-file)        | 256 / row  | off / row         |

Several workloads mix with weights (`short_qa:3,chat:1`); the user draws one per request.
Prompt sizes are *targeted* with the pseudo-tokenizer of swarm.core.tokens (exact on the simulator,
an estimate elsewhere); the token counts the swarm reports always come from the server's usage.
"""

from __future__ import annotations

import bisect
import csv
import functools
import json
import math
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from swarm.core.errors import UsageError
from swarm.load.dists import MAX_TOKENS

Messages = list[dict[str, Any]]

# -- what one request asks for -------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class LLMRequest:
    workload: str
    messages: Messages
    max_tokens: int
    thinking: bool | None = None  # None: send no thinking switch (server default)
    ignore_eos: bool = False  # force the output to max_tokens (synthetic, datasets), besides --ignore-eos
    request_class: str | None = None  # None: "thinking" when thinking is on, else "direct"
    prompt_tokens: int | None = None  # the prompt's length as the server counts it, when known

    def prompt_text(self) -> str:
        """The prompt for /v1/completions: the message contents, blank-line separated."""
        return "\n\n".join(_content_text(m.get("content")) for m in self.messages)


def _content_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(
            p.get("text", "") for p in content if isinstance(p, dict) and isinstance(p.get("text"), str)
        )
    return ""


@dataclass(frozen=True)
class Knobs:
    """Workload knobs (Locust options); None = the workload's own default."""

    thinking_ratio: float | None = None  # share of requests with thinking on (mixed: 0.2, others: 0)
    max_tokens: int | None = None  # overrides every workload's max_tokens
    rag_passages: int = 4
    rag_prefix_share: float = 0.5  # share of each rag prompt that is a prefix common to all of them
    rag_tokens: tuple[int, int] = (2000, 3000)  # rag prompt size range (prompt tokens, estimated)
    prompt_file: str | None = None  # custom workload
    input_tokens: str = "1024"  # synthetic: DIST of prompt tokens (swarm/load/dists.py)
    output_tokens: str = "128"  # synthetic: DIST of output tokens
    seed: int | None = None  # synthetic: lengths and texts; None: drawn once per run by the master
    no_ignore_eos: bool = False  # synthetic: do not force output lengths
    shared_prefix_tokens: int = 0  # synthetic: tokens of the prefix shared within a group
    prefix_groups: int = 1  # synthetic: distinct shared prefixes
    dataset: str | None = None  # dataset: KIND:PATH (swarm/load/dataset.py)
    dataset_columns: str | None = None  # dataset: prompt=COL,output_tokens=COL,class=COL
    dataset_sample: int | None = None  # dataset: rows kept
    turns: str | None = None  # chat_session: DIST of turns per conversation (None: 4; a dataset's own)
    think_time: str = "0"  # chat_session: DIST of seconds between turns (swarm/load/dists.py, real)

    def __post_init__(self) -> None:
        if self.thinking_ratio is not None and not 0.0 <= self.thinking_ratio <= 1.0:
            raise UsageError(f"--thinking-ratio must be between 0 and 1 (got {self.thinking_ratio})")
        if self.max_tokens is not None and self.max_tokens < 1:
            raise UsageError(f"--max-tokens must be at least 1 (got {self.max_tokens})")
        if self.max_tokens is not None and self.max_tokens > MAX_TOKENS:
            raise UsageError(f"--max-tokens must be at most {MAX_TOKENS:,} (got {self.max_tokens:,})")
        if not 1 <= self.rag_passages <= 32:
            raise UsageError(f"--rag-passages must be 1-32 (got {self.rag_passages})")
        if not 0.0 <= self.rag_prefix_share <= 0.9:
            raise UsageError(f"--rag-prefix-share must be between 0 and 0.9 (got {self.rag_prefix_share})")
        if self.shared_prefix_tokens < 0:
            raise UsageError(f"--shared-prefix-tokens must be >= 0 (got {self.shared_prefix_tokens})")
        if self.shared_prefix_tokens > MAX_TOKENS:  # as --input-tokens: no server takes a longer prompt
            raise UsageError(
                f"--shared-prefix-tokens must be at most {MAX_TOKENS:,} (got {self.shared_prefix_tokens:,})"
            )
        if not 1 <= self.prefix_groups <= 100_000:
            raise UsageError(f"--prefix-groups must be 1-100000 (got {self.prefix_groups})")
        lo, hi = self.rag_tokens
        if not 200 <= lo <= hi <= 32000:
            raise UsageError(f"--rag-tokens must be N or MIN-MAX within 200-32000 (got {lo}-{hi})")


def parse_token_range(text: str) -> tuple[int, int]:
    """`2500` or `2000-3000` -> (lo, hi). Raises UsageError."""
    try:
        parts = [int(p) for p in str(text).replace(" ", "").split("-")]
    except ValueError:
        parts = []
    if len(parts) == 1:
        return parts[0], parts[0]
    if len(parts) == 2 and parts[0] <= parts[1]:
        return parts[0], parts[1]
    raise UsageError(f"bad --rag-tokens {text!r}: give N or MIN-MAX, e.g. 2000-3000")


# -- workloads ------------------------------------------------------------------------------


class Workload:
    """Draws the next request. Subclasses set `name` and implement `next_request`."""

    name: str = ""
    needs_tokenizer: bool = False  # prepare() counts tokens with the run's tokenizer before the load

    def next_request(self, rng: random.Random) -> LLMRequest:
        raise NotImplementedError

    def prepare(self, tok: Any, *, chat: bool = True, worker: int = 0, progress: Any = None) -> Any:
        """Build what the workload needs before the load starts (default: nothing)."""
        return None

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name}>"


@dataclass(frozen=True, slots=True)
class Prompt:
    messages: Messages
    max_tokens: int | None = None  # None: the workload's
    thinking: bool | None = None  # None: the workload's ratio decides
    prompt_tokens: int | None = None  # the prompt's length as the server counts it, when known


class PromptSetWorkload(Workload):
    """Prompts drawn uniformly; a `thinking_prompts` pool serves the thinking share (mixed)."""

    def __init__(
        self,
        name: str,
        prompts: Sequence[Prompt],
        max_tokens: tuple[int, int],  # inclusive range; (n, n) for a fixed value
        thinking_ratio: float = 0.0,
        thinking_prompts: Sequence[Prompt] = (),
    ) -> None:
        self.name = name
        self.prompts = prompts
        self.max_tokens = max_tokens
        self.thinking_ratio = thinking_ratio
        self.thinking_prompts = thinking_prompts

    def next_request(self, rng: random.Random) -> LLMRequest:
        thinking = self.thinking_ratio > 0.0 and rng.random() < self.thinking_ratio
        pool = self.thinking_prompts if thinking and self.thinking_prompts else self.prompts
        p = pool[rng.randrange(len(pool))]
        lo, hi = self.max_tokens
        max_tokens = p.max_tokens or (lo if lo == hi else rng.randint(lo, hi))
        return LLMRequest(
            self.name,
            p.messages,
            max_tokens,
            thinking if p.thinking is None else p.thinking,
            prompt_tokens=p.prompt_tokens,
        )


def _tokens() -> tuple[Callable[[str], int], Callable[[Messages], int]]:
    from swarm.core.tokens import count_chat_tokens, count_tokens

    return count_tokens, count_chat_tokens


RAG_ZH_HEADER = "参考资料:"
RAG_QUESTION = {"zh": "问题:", "en": "Question: "}
PINNED_HEADER = "\n\n常用参考资料(置顶):\n"
NO_PREFIX_RULES = "请根据以上参考资料回答问题。Answer from the reference material above."
RAG_MIN_EXTRA_TOKENS = 40


class RagWorkload(Workload):
    """2-3k-token prompts: fixed system preamble + fixed template + retrieved passages + question.

    The system message is the fixed instructions followed by pinned reference notes, cut (at a
    sentence end) so that it is `prefix_share` of the prompt: that part is the same text in every
    request — a shorter cut is a prefix of a longer one — so prefix caching hits it. The user
    message holds `passages` retrieved documents (the one answering the question plus random
    others, each cut to an equal share of what is left; more documents when these are too short
    for the size) and the question. With prefix_share 0 the
    instructions move behind the passages: no common prefix at all.
    """

    name = "rag"

    def __init__(self, knobs: Knobs) -> None:
        self.passages = knobs.rag_passages
        self.share = knobs.rag_prefix_share
        self.size = knobs.rag_tokens
        self.max_tokens = knobs.max_tokens or 256
        self.thinking_ratio = knobs.thinking_ratio or 0.0
        self.count, self.count_chat = _tokens()
        preamble = _load_json("rag_preamble.json")
        self.instructions: str = preamble["instructions"]
        self.pinned: list[str] = preamble["pinned"]
        self.docs = _rag_docs()
        self._systems: dict[int, tuple[str, int]] = {}  # pinned count -> (text, tokens)
        # cumulative token counts of the system text with k pinned notes (k = 0..len)
        base = self.count(self.instructions + PINNED_HEADER)
        self._pinned_cum = [base]
        for s in self.pinned:
            self._pinned_cum.append(self._pinned_cum[-1] + self.count(s) + 1)

    def _system(self, target: int) -> tuple[str, int]:
        k = max(0, bisect.bisect_right(self._pinned_cum, target) - 1)
        if k not in self._systems:
            text = self.instructions + PINNED_HEADER + "\n".join(self.pinned[:k]) if k else self.instructions
            self._systems[k] = (text, self.count(text))
        return self._systems[k]

    def next_request(self, rng: random.Random) -> LLMRequest:
        lo, hi = self.size
        total = lo if lo == hi else rng.randint(lo, hi)
        docs = self.docs
        answer_doc = docs[rng.randrange(len(docs))]
        question = RAG_QUESTION[answer_doc.lang] + answer_doc.question
        messages: Messages = []
        used = 3  # reply primer (swarm.core.tokens.CHAT_TOKENS_REPLY_PRIMER)
        if self.share > 0:
            system, n = self._system(round(self.share * total) - 5)
            messages.append({"role": "system", "content": system})
            used += 5 + n  # CHAT_TOKENS_PER_MESSAGE + content
            tail = ""
        else:
            tail = "\n\n" + self.instructions + "\n" + NO_PREFIX_RULES
        # user message: header, "\n\n" + passage (one token of separator each), "\n\n" + question + tail
        used += 5 + self.count(RAG_ZH_HEADER) + 1 + self.count(question) + self.count(tail)
        order = rng.sample(range(len(docs)), len(docs))  # retrieval order: random
        picked = [docs[i] for i in order[: self.passages] if docs[i] is not answer_doc][: self.passages - 1]
        picked.insert(rng.randrange(len(picked) + 1), answer_doc)
        extra = (docs[i] for i in order[self.passages :] if docs[i] is not answer_doc)
        budget = total - used
        parts = [RAG_ZH_HEADER]
        while True:
            i = len(parts) - 1
            if i < len(picked):
                doc = picked[i]
                room = budget // (len(picked) - i)
            elif budget >= RAG_MIN_EXTRA_TOKENS:  # documents too short for the size: retrieve more
                doc = next(extra, None)
                if doc is None:
                    break
                room = budget
            else:
                break
            text, n = doc.cut(i + 1, room - 1, must_keep=1 if doc is answer_doc else 0)
            budget -= n + 1
            parts.append(text)
        user = "\n\n".join(parts) + "\n\n" + question + tail
        messages.append({"role": "user", "content": user})
        thinking = self.thinking_ratio > 0.0 and rng.random() < self.thinking_ratio
        return LLMRequest(self.name, messages, self.max_tokens, thinking)


@dataclass(frozen=True, slots=True)
class RagDoc:
    id: str
    lang: str
    title: str
    question: str
    sentences: tuple[str, ...]
    cum_tokens: tuple[int, ...]  # tokens of the first k sentences joined (k = 0..n), title line excluded

    def cut(self, number: int, budget: int, must_keep: int = 0) -> tuple[str, int]:
        """`[number] title` + as many leading sentences as fit in `budget` tokens (estimate)."""
        head = f"[{number}] {self.title}\n"
        room = budget - _count(head)
        k = max(must_keep, bisect.bisect_right(self.cum_tokens, room) - 1)
        k = max(0, min(k, len(self.sentences)))
        sep = "" if self.lang == "zh" else " "
        return head + sep.join(self.sentences[:k]), _count(head) + self.cum_tokens[k]


def _count(text: str) -> int:
    return _tokens()[0](text)


@functools.cache
def _rag_docs() -> tuple[RagDoc, ...]:
    count = _tokens()[0]
    docs = []
    for d in _load_jsonl("rag_corpus.jsonl"):
        cum = [0]  # the joining space of English text merges into the next token: no separator tokens
        for s in d["sentences"]:
            cum.append(cum[-1] + count(s))
        docs.append(RagDoc(d["id"], d["lang"], d["title"], d["question"], tuple(d["sentences"]), tuple(cum)))
    return tuple(docs)


SUMMARY_INSTRUCTION = {
    "zh": "请用约 500 字总结下面这份资料的要点:\n\n",
    "en": "Summarize the key points of the following document in about 400 words:\n\n",
}


@functools.cache
def _summary_prompts() -> tuple[Prompt, ...]:
    out = []
    for d in _rag_docs():
        sep = "" if d.lang == "zh" else " "
        text = SUMMARY_INSTRUCTION[d.lang] + d.title + "\n" + sep.join(d.sentences)
        out.append(Prompt([{"role": "user", "content": text}]))
    return tuple(out)


# -- shipped prompt sets ---------------------------------------------------------------------


def _data_path(name: str) -> Any:
    return resources.files("swarm.load.prompts").joinpath(name)


def _load_json(name: str) -> Any:
    return json.loads(_data_path(name).read_text(encoding="utf-8"))


def _load_jsonl(name: str) -> list[dict[str, Any]]:
    return [
        json.loads(line) for line in _data_path(name).read_text(encoding="utf-8").splitlines() if line.strip()
    ]


@functools.cache
def prompt_set(name: str) -> tuple[Prompt, ...]:
    """A shipped single-turn prompt set: short_qa, chat, thinking, translate."""
    return tuple(Prompt([{"role": "user", "content": row["prompt"]}]) for row in _load_jsonl(f"{name}.jsonl"))


# -- custom prompts from the user's file ------------------------------------------------------

_TRUE = {"1", "true", "yes", "on", "y", "t"}
_FALSE = {"0", "false", "no", "off", "n", "f"}


def _parse_bool(value: Any, where: str) -> bool | None:
    if value is None or value == "":
        return None
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in _TRUE:
        return True
    if text in _FALSE:
        return False
    raise UsageError(f"{where}: 'thinking' must be true or false (got {value!r})")


def _parse_max_tokens(value: Any, where: str) -> int | None:
    return _parse_count(value, "max_tokens", where)


def _parse_count(value: Any, key: str, where: str) -> int | None:
    """A whole number >= 1 from a row's `key` column; None when absent or empty."""
    if value is None or value == "":
        return None
    if isinstance(value, bool):
        raise UsageError(f"{where}: '{key}' must be a whole number >= 1 (got {value!r})")
    try:
        n = int(str(value).strip()) if not isinstance(value, int) else value
    except ValueError:
        n = 0
    if isinstance(value, float) or n < 1:
        raise UsageError(f"{where}: '{key}' must be a whole number >= 1 (got {value!r})")
    return n


def _parse_messages(value: Any, where: str) -> Messages:
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except json.JSONDecodeError as e:
            raise UsageError(f"{where}: 'messages' is not valid JSON ({e.msg})") from None
    if not isinstance(value, list) or not value:
        raise UsageError(f"{where}: 'messages' must be a non-empty list of {{role, content}} objects")
    for i, m in enumerate(value, 1):
        if not isinstance(m, dict) or not isinstance(m.get("role"), str):
            raise UsageError(f"{where}: message {i} needs a string 'role'")
        if not isinstance(m.get("content"), (str, list)):
            raise UsageError(f"{where}: message {i} needs 'content' (a string or a list of parts)")
    return value


PROMPT_FIELDS = ("prompt", "messages", "max_tokens", "thinking", "prompt_tokens")  # of a prompt file's rows


def _row_prompt(row: dict[str, Any], where: str) -> Prompt:
    messages, prompt = row.get("messages"), row.get("prompt")
    if messages not in (None, "") and prompt not in (None, ""):
        raise UsageError(f"{where}: give either 'messages' or 'prompt', not both")
    if messages not in (None, ""):
        msgs = _parse_messages(messages, where)
    elif isinstance(prompt, str) and prompt.strip():
        msgs = [{"role": "user", "content": prompt}]
    else:
        raise UsageError(f"{where}: needs a non-empty 'prompt' (text) or 'messages' (list)")
    return Prompt(
        msgs,
        _parse_max_tokens(row.get("max_tokens"), where),
        _parse_bool(row.get("thinking"), where),
        _parse_count(row.get("prompt_tokens"), "prompt_tokens", where),
    )


def load_prompt_file(path: str | Path) -> tuple[Prompt, ...]:
    """Read a custom prompt file (JSONL or CSV) and validate every row.

    JSONL: one object per line with `prompt` (text) or `messages` (OpenAI list), optional
    `max_tokens`, `thinking` and `prompt_tokens` (the prompt's length as the server counts it: a
    request the run's stop cancels is then recorded with it). CSV: a header row with the same column names (`messages` as a
    JSON string). Raises UsageError naming the file and line of the first bad row.
    """
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise UsageError(f"--prompt-file {path}: no such file") from None
    except (OSError, UnicodeDecodeError) as e:
        raise UsageError(f"--prompt-file {path}: cannot read it ({e})") from None
    is_csv = p.suffix.lower() == ".csv" or (
        p.suffix.lower() not in (".jsonl", ".json", ".ndjson") and not text.lstrip().startswith("{")
    )
    prompts: list[Prompt] = []
    if is_csv:
        reader = csv.DictReader(text.splitlines(keepends=True))
        cols = set(reader.fieldnames or [])
        if not cols & {"prompt", "messages"}:
            raise UsageError(
                f"{path}:1: the CSV header needs a 'prompt' or 'messages' column (got {sorted(cols)})"
            )
        unknown = cols - set(PROMPT_FIELDS)
        if unknown:
            raise UsageError(f"{path}:1: unknown column(s) {sorted(unknown)}; use {', '.join(PROMPT_FIELDS)}")
        line = reader.line_num
        for row in reader:
            where = f"{path}:{line + 1}"
            line = reader.line_num
            if None in row:
                raise UsageError(f"{where}: more fields than the header has")
            prompts.append(_row_prompt(row, where))
    else:
        for n, raw in enumerate(text.splitlines(), 1):
            if not raw.strip():
                continue
            where = f"{path}:{n}"
            try:
                row = json.loads(raw)
            except json.JSONDecodeError as e:
                raise UsageError(f"{where}: not valid JSON ({e.msg})") from None
            if not isinstance(row, dict):
                raise UsageError(f"{where}: each line must be a JSON object")
            unknown = set(row) - set(PROMPT_FIELDS)
            if unknown:
                raise UsageError(
                    f"{where}: unknown field(s) {sorted(unknown)}; use {', '.join(PROMPT_FIELDS)}"
                )
            prompts.append(_row_prompt(row, where))
    if not prompts:
        raise UsageError(f"--prompt-file {path}: no prompts in it")
    return tuple(prompts)


# -- registry ---------------------------------------------------------------------------------


def _fixed(n: int, knobs: Knobs) -> tuple[int, int]:
    return (knobs.max_tokens, knobs.max_tokens) if knobs.max_tokens else (n, n)


def _mixed(k: Knobs) -> Workload:
    ratio = 0.2 if k.thinking_ratio is None else k.thinking_ratio
    return PromptSetWorkload("mixed", prompt_set("chat"), _fixed(1024, k), ratio, prompt_set("thinking"))


def _short_qa(k: Knobs) -> Workload:
    return PromptSetWorkload("short_qa", prompt_set("short_qa"), _fixed(50, k), k.thinking_ratio or 0.0)


def _chat(k: Knobs) -> Workload:
    mt = (k.max_tokens, k.max_tokens) if k.max_tokens else (150, 256)
    return PromptSetWorkload("chat", prompt_set("chat"), mt, k.thinking_ratio or 0.0)


def _long_output(k: Knobs) -> Workload:
    return PromptSetWorkload("long_output", _summary_prompts(), _fixed(512, k), k.thinking_ratio or 0.0)


def _translate(k: Knobs) -> Workload:
    return PromptSetWorkload("translate", prompt_set("translate"), _fixed(64, k), k.thinking_ratio or 0.0)


def _custom(k: Knobs) -> Workload:
    if not k.prompt_file:
        raise UsageError("workload 'custom' needs --prompt-file FILE (JSONL or CSV)")
    return PromptSetWorkload(
        "custom", load_prompt_file(k.prompt_file), _fixed(256, k), k.thinking_ratio or 0.0
    )


def _synthetic(k: Knobs) -> Workload:
    from swarm.load.dists import parse_dist
    from swarm.load.synthetic import SyntheticWorkload

    return SyntheticWorkload(  # type: ignore[return-value]  (a Workload by duck type: no import cycle)
        parse_dist(k.input_tokens, "--input-tokens", most=MAX_TOKENS),
        parse_dist(k.output_tokens, "--output-tokens", most=MAX_TOKENS),
        seed=k.seed,
        ignore_eos=not k.no_ignore_eos,
        shared_prefix_tokens=k.shared_prefix_tokens,
        prefix_groups=k.prefix_groups,
        request=LLMRequest,
    )


def _dataset(k: Knobs) -> Workload:
    from swarm.load.dataset import DatasetWorkload

    if not k.dataset:
        raise UsageError("workload 'dataset' needs --dataset KIND:PATH (sharegpt, jsonl, csv, parquet, hf)")
    return DatasetWorkload(  # type: ignore[return-value]  (a Workload by duck type: no import cycle)
        k.dataset,
        columns=k.dataset_columns,
        sample=k.dataset_sample,
        seed=k.seed,
        max_tokens=k.max_tokens,
        request=LLMRequest,
    )


def _chat_session(k: Knobs) -> Workload:
    from swarm.load.dists import parse_dist
    from swarm.load.sessions import ChatSessionWorkload

    return ChatSessionWorkload(  # type: ignore[return-value]  (a Workload by duck type: no import cycle)
        parse_dist(k.turns or "4", "--turns"),
        parse_dist(k.think_time, "--think-time", real=True),
        _dataset(k) if k.dataset else _synthetic(k),
        turns_given=k.turns is not None,
        max_tokens=k.max_tokens or 256,
        request=LLMRequest,
    )


WORKLOADS: dict[str, tuple[Callable[[Knobs], Workload], str]] = {
    "mixed": (_mixed, "80% direct answers (thinking off) + 20% thinking, max_tokens 1024 (seed 000 round 1)"),
    "short_qa": (_short_qa, "seed 000's short-output prompts, max_tokens 50"),
    "chat": (_chat, "general chat prompts (zh/en), max_tokens 150-256"),
    "rag": (RagWorkload, "2-3k-token RAG prompts with a common prefix (prefix caching)"),
    "long_output": (_long_output, "summaries of shipped documents, ~500 output tokens"),
    "translate": (_translate, "one-sentence translations zh<->en, ~50 output tokens"),
    "custom": (_custom, "your prompts from --prompt-file (JSONL or CSV)"),
    "dataset": (_dataset, "rows of --dataset sharegpt:|jsonl:|csv:|parquet:|hf:PATH"),
    "synthetic": (_synthetic, "exact token lengths: --input-tokens DIST --output-tokens DIST, ignore_eos"),
    "chat_session": (
        _chat_session,
        "conversations: --turns DIST, --think-time DIST; each turn resends the history "
        "(user messages from --dataset, else synthetic)",
    ),
}


def build(name: str, knobs: Knobs | None = None) -> Workload:
    try:
        factory = WORKLOADS[name][0]
    except KeyError:
        raise UsageError(f"unknown workload {name!r}; choose from {', '.join(WORKLOADS)}") from None
    return factory(knobs or Knobs())


def parse_mix(spec: str, knobs: Knobs | None = None) -> list[tuple[Workload, float]]:
    """`NAME` or `NAME:W,NAME:W` -> [(workload, weight)]. Raises UsageError on bad input."""
    if not spec or not str(spec).strip():
        raise UsageError(f"empty --workload; choose from {', '.join(WORKLOADS)}")
    seen: set[str] = set()
    out: list[tuple[Workload, float]] = []
    for item in str(spec).split(","):
        item = item.strip()
        name, sep, w = item.partition(":")
        name = name.strip()
        if not name:
            raise UsageError(f"bad --workload {spec!r}: empty name; use e.g. short_qa:3,chat:1")
        if name not in WORKLOADS:
            raise UsageError(
                f"unknown workload {name!r} in --workload {spec!r}; choose from {', '.join(WORKLOADS)}"
            )
        if name in seen:
            raise UsageError(f"workload {name!r} is listed twice in --workload {spec!r}")
        seen.add(name)
        weight = 1.0
        if sep:
            try:
                weight = float(w)
            except ValueError:
                weight = -1.0
            if not math.isfinite(weight) or weight <= 0:
                raise UsageError(
                    f"bad weight {w.strip()!r} for workload {name!r}: use a number > 0, e.g. {name}:2"
                )
        out.append((build(name, knobs), weight))
    return out


class Mix:
    """Weighted draw over workloads (one draw per request)."""

    def __init__(self, items: list[tuple[Workload, float]]) -> None:
        self.items = items
        self._cum: list[float] = []
        total = 0.0
        for _, w in items:
            total += w
            self._cum.append(total)
        self._total = total

    @classmethod
    def from_spec(cls, spec: str, knobs: Knobs | None = None) -> Mix:
        return cls(parse_mix(spec, knobs))

    def draw(self, rng: random.Random) -> Workload:
        if len(self.items) == 1:
            return self.items[0][0]
        return self.items[bisect.bisect_right(self._cum, rng.random() * self._total)][0]

    def next_request(self, rng: random.Random) -> LLMRequest:
        return self.draw(rng).next_request(rng)

    @property
    def needs_tokenizer(self) -> bool:
        return any(w.needs_tokenizer for w, _ in self.items)

    def prepare(self, tok: Any, *, chat: bool = True, worker: int = 0, progress: Any = None) -> None:
        """Prepare every workload of the mix (before the load; see Workload.prepare)."""
        for w, _ in self.items:
            if w.needs_tokenizer:
                w.prepare(tok, chat=chat, worker=worker, progress=progress or _log_progress)


def _log_progress(line: str) -> None:
    import logging

    logging.getLogger(__name__).info("%s", line)
