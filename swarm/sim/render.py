"""Token text and the bytes vLLM sends for it: SSE chunks and non-streaming bodies.

Text comes from a seeded "tape" of pre-rendered tokens (Chinese characters, ASCII word pieces,
punctuation, and empty-text tokens at the `--utf8-split` rate); a request reads the tape from
its own offset, so rendering a chunk is a few byte concatenations. The chunk layout is vLLM's:
chat chunks as `model_dump_json(exclude_unset=True)` writes them (`stop_reason` only on the
finish chunk), completion chunks with `stop_reason` on every chunk.

A stop ends with the EOS token, which decodes to nothing, so its chunk carries empty text.
With `merge` (vLLM's reasoning parser), tokens with empty text send no chunk of their own; the
next chunk carries them in its running `usage`, and an empty final token becomes `delta: {}`.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass

import orjson

from swarm.sim.tool_calls import ToolPlan, token_chunks

TAPE_BITS = 14
TAPE_MASK = (1 << TAPE_BITS) - 1

_CJK = (
    "的一是在不了有和人这中大为上个国我以要他时来用们生到作地于出就分对成会可主发年动同工也能下过子说产种面而方后多定"
    "行学法所民得经十三之进着等部度家电力里如水化高自二理起小物现实加量都两体制机当使点从业本去把性好应开它合还因由其"
    "些然前外天政四日那社义事平形相全表间样与关各重新线内数正心反你明看原又么利比或但质气第向道命此变条只没结解问意建"
    "月公无系军很情者最立代想已通并提直题党程展五果料象员革位入常文总次品式活设及管特件长求老头基资边流路级少图山统接"
)
# fmt: off
_ASCII = (" the", " and", " of", " to", "ing", " in", " is", "tion", " for", " on", " with", " that", " this",
          " model", " data", " you", " we", "ed", "er", "ly", " GPU", " API", "s", " 1", "2", "0", ".", ",")
# fmt: on
_PUNCT = ("，", "。", "、", "：", "？", "！", "\n", "\n\n")


@dataclass(frozen=True)
class Tape:
    """Seeded token texts with their JSON renderings for every place a token can appear."""

    text: tuple[str, ...]
    empty: tuple[bool, ...]
    content: tuple[bytes, ...]  # {"content":"x"}
    reasoning: tuple[bytes, ...]  # {"reasoning":"x"} or {"reasoning_content":"x"}
    plain: tuple[bytes, ...]  # "x" (completions' text field)

    @classmethod
    def build(cls, seed: int, utf8_split: float, reasoning_field: str) -> Tape:
        rng = random.Random(f"tape:{seed}")
        texts = []
        for _ in range(TAPE_MASK + 1):
            r = rng.random()
            if r < utf8_split:
                texts.append("")  # a token ending inside a multi-byte character
                continue
            r = rng.random()
            if r < 0.75:
                texts.append(rng.choice(_CJK))
            elif r < 0.92:
                texts.append(rng.choice(_ASCII))
            else:
                texts.append(rng.choice(_PUNCT))
        rf = reasoning_field.encode()
        plain = tuple(orjson.dumps(t) for t in texts)
        return cls(
            text=tuple(texts),
            empty=tuple(t == "" for t in texts),
            content=tuple(b'{"content":' + p + b"}" for p in plain),
            reasoning=tuple(b'{"' + rf + b'":' + p + b"}" for p in plain),
            plain=plain,
        )


DONE = b"data: [DONE]\n\n"


def usage_object(prompt: int, completion: int) -> bytes:
    """An OpenAI usage object in the order TGI and Ollama write it (prompt, completion, total)."""
    return b'{"prompt_tokens":%d,"completion_tokens":%d,"total_tokens":%d}' % (
        prompt,
        completion,
        prompt + completion,
    )


_USAGE = b',"usage":{"prompt_tokens":%d,"total_tokens":%d,"completion_tokens":%d}'
# vLLM with a reasoning parser (chat): how many of the completion tokens so far were reasoning
_USAGE_DETAILS = (
    b',"usage":{"prompt_tokens":%d,"total_tokens":%d,"completion_tokens":%d,'
    b'"completion_tokens_details":{"reasoning_tokens":%d}}'
)
_END = b"}\n\n"
_ROLE_END = b',"prompt_token_ids":null,"prompt_text":null}\n\n'
SYSTEM_FINGERPRINT = "vllm-swarm-sim"
_FINGERPRINT_END = b',"system_fingerprint":"%s"}\n\n' % SYSTEM_FINGERPRINT.encode()
_EMPTY_CONTENT = b'{"content":""}'


@dataclass(frozen=True)
class PromptDetails:
    """vLLM's `usage.prompt_tokens_details` (`--enable-prompt-tokens-details`, 0.32): `cached_tokens`,
    the request's prefix-cache hit when first scheduled (0 included); on chat also
    `created_cache_tokens`, the prompt tokens its prefill wrote to the prefix cache (the full
    blocks of the prompt, less the hit; 0 without prefix caching)."""

    block_size: int
    caching: bool

    def of(self, seq: object, chat: bool) -> dict[str, int]:
        prompt, cached = seq.prompt_tokens, seq.cached_tokens  # type: ignore[attr-defined]
        out = {"cached_tokens": cached}
        if chat:
            full = prompt // self.block_size * self.block_size if self.caching else 0
            out["created_cache_tokens"] = max(0, min(full, prompt) - cached)
        return out


@dataclass(slots=True)
class Output:
    """What one request produces: its size split and how it ends."""

    id: str
    created: int
    prompt_tokens: int
    target_tokens: int
    reasoning_tokens: int  # the first this-many tokens are reasoning
    finish_reason: str  # stop | length | tool_calls
    offset: int  # where this request reads the tape
    tool_plan: ToolPlan | None = None  # an answer of tool calls (swarm/sim/tool_calls.py): no text


class StreamRenderer:
    """SSE bytes for one request (chat or completions)."""

    def __init__(
        self,
        tape: Tape,
        out: Output,
        model: str,
        endpoint: str,
        continuous: bool,
        merge: bool,
        details: bool = False,
        usage_chunk: bool = True,
        prompt_details: PromptDetails | None = None,
    ) -> None:
        """`details`: usage carries `completion_tokens_details.reasoning_tokens` (chat only), as
        vLLM's does when it runs a reasoning parser. `usage_chunk`: a usage chunk ends the stream
        (include_usage); vLLM puts `system_fingerprint` on the last chunk, that one or the finish.
        `prompt_details` (vLLM's --enable-prompt-tokens-details): the usage chunk's
        `prompt_tokens_details`, read from the engine's sequence when the chunk is written."""
        self.tape = tape
        self.prompt_details = prompt_details
        self.final_end = _END if usage_chunk else _FINGERPRINT_END
        self.out = out
        self.continuous = continuous
        self.chat = endpoint == "chat"
        self.merge = merge and self.chat
        self.details = details and self.chat
        obj = b"chat.completion.chunk" if self.chat else b"text_completion"
        self.prefix = (
            b'data: {"id":"'
            + out.id.encode()
            + b'","object":"'
            + obj
            + b'","created":%d' % out.created
            + b',"model":'
            + orjson.dumps(model)
        )
        self.head = self.prefix + (
            b',"choices":[{"index":0,"delta":' if self.chat else b',"choices":[{"index":0,"text":'
        )
        # the fields vLLM (0.32) writes, in its order, null ones included
        finish = out.finish_reason.encode()
        if self.chat:
            self.role_mid = b',"logprobs":null,"finish_reason":null}]'
            self.mid = b',"logprobs":null,"finish_reason":null,"token_ids":null}]'
            self.final_mid = (
                b',"logprobs":null,"finish_reason":"%s","stop_reason":null,"token_ids":null}]' % finish
            )
        else:
            tail = b',"prompt_token_ids":null,"token_ids":null}]'
            self.role_mid = b""
            self.mid = b',"logprobs":null,"finish_reason":null,"stop_reason":null' + tail
            self.final_mid = b',"logprobs":null,"finish_reason":"%s","stop_reason":null' % finish + tail

    def _usage(self, completion: int) -> bytes:
        p = self.out.prompt_tokens
        if self.details:
            return _USAGE_DETAILS % (
                p,
                p + completion,
                completion,
                min(completion, self.out.reasoning_tokens),
            )
        return _USAGE % (p, p + completion, completion)

    def role_chunk(self) -> bytes:
        usage = self._usage(0) if self.continuous else b""
        return self.head + b'{"role":"assistant","content":""}' + self.role_mid + usage + _ROLE_END

    def tokens(self, start: int, end: int, parts: list[bytes]) -> None:
        """Append the chunks of tokens [start, end) to `parts`."""
        tape, out = self.tape, self.out
        off, last, r_end = out.offset, out.target_tokens - 1, out.reasoning_tokens
        head, mid, continuous, merge = self.head, self.mid, self.continuous, self.merge
        if self.chat:
            content, reasoning = tape.content, tape.reasoning
        else:
            content = reasoning = tape.plain
        empty = tape.empty
        for k in range(start, end):
            i = (off + k) & TAPE_MASK
            if k == last:
                parts.append(self._final(k, i))
                continue
            if merge and empty[i]:
                continue
            delta = reasoning[i] if k < r_end else content[i]
            if continuous:
                parts.append(head + delta + mid + self._usage(k + 1) + _END)
            else:
                parts += (head, delta, mid, _END)

    def _final(self, k: int, i: int) -> bytes:
        tape, out = self.tape, self.out
        eos = out.finish_reason == "stop"  # EOS decodes to no text
        if self.chat:
            if self.merge and (eos or tape.empty[i]):
                delta = b"{}"
            elif eos:
                delta = _EMPTY_CONTENT
            else:
                delta = tape.reasoning[i] if k < out.reasoning_tokens else tape.content[i]
        else:
            delta = b'""' if eos else tape.plain[i]
        usage = self._usage(k + 1) if self.continuous else b""
        return self.head + delta + self.final_mid + usage + self.final_end

    def closing(self, completion: int, seq: object = None) -> bytes:
        """What follows the last token chunk: the usage chunk when include_usage asked for it."""
        return self.usage_chunk(completion, seq) if self.final_end is _END else b""

    def usage_chunk(self, completion: int, seq: object = None) -> bytes:
        usage = self._usage(completion)
        if self.prompt_details is not None and seq is not None:
            # vLLM 0.32 writes the final usage with exclude_none: prompt_tokens_details after
            # completion_tokens, before completion_tokens_details; a running usage never has it
            d = b',"prompt_tokens_details":' + orjson.dumps(self.prompt_details.of(seq, self.chat))
            at = usage.find(b',"completion_tokens_details"')
            usage = usage[:at] + d + usage[at:] if at >= 0 else usage[:-1] + d + b"}"
        return self.prefix + b',"choices":[]' + usage + _FINGERPRINT_END

    def bad_chunk(self) -> bytes:
        """An event whose JSON is cut short (injected fault)."""
        return self.head + b'{"content":\n\n'

    @staticmethod
    def error_event(message: str, code: int = 500) -> bytes:
        # vLLM writes stream errors with json.dumps (spaces after separators)
        err = {"error": {"message": message, "type": "InternalServerError", "param": None, "code": code}}
        return b"data: " + json.dumps(err).encode() + b"\n\n"


class ToolStreamRenderer(StreamRenderer):
    """SSE bytes of an answer of tool calls (chat): one chunk a token, each a `tool_calls` delta
    (swarm/sim/tool_calls.py); the last token's chunk carries the finish."""

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        assert self.out.tool_plan is not None
        self.deltas = token_chunks(self.out.tool_plan)

    def tokens(self, start: int, end: int, parts: list[bytes]) -> None:
        deltas, last, head, mid = self.deltas, self.out.target_tokens - 1, self.head, self.mid
        for k in range(start, end):
            usage = self._usage(k + 1) if self.continuous else b""
            if k == last:
                parts.append(head + deltas[k] + self.final_mid + usage + self.final_end)
            elif usage:
                parts.append(head + deltas[k] + mid + usage + _END)
            else:
                parts += (head, deltas[k], mid, _END)


def token_texts(tape: Tape, out: Output, upto: int) -> tuple[str, str]:
    """(reasoning text, content text) of the first `upto` tokens, for non-streaming bodies."""
    texts = tape.text
    off, r_end = out.offset, out.reasoning_tokens
    last = out.target_tokens - 1
    reasoning: list[str] = []
    content: list[str] = []
    for k in range(upto):
        t = "" if (k == last and out.finish_reason == "stop") else texts[(off + k) & TAPE_MASK]
        (reasoning if k < r_end else content).append(t)
    return "".join(reasoning), "".join(content)


def full_body(
    tape: Tape,
    out: Output,
    model: str,
    endpoint: str,
    reasoning_field: str,
    thinking: bool,
    details: bool = False,
    prompt_details: dict[str, int] | None = None,
) -> bytes:
    """The non-streaming response body, with the fields vLLM (0.32) writes (`details`: as in
    `StreamRenderer`; `prompt_details`: `PromptDetails.of` the request, None without the flag)."""
    reasoning, content = token_texts(tape, out, out.target_tokens)
    usage = {
        "prompt_tokens": out.prompt_tokens,
        "total_tokens": out.prompt_tokens + out.target_tokens,
        "completion_tokens": out.target_tokens,
        "prompt_tokens_details": None,
        "completion_tokens_details": None,
    }
    if prompt_details is not None:  # the non-streaming body keeps None fields (no exclude_none)
        usage["prompt_tokens_details"] = {
            "cached_tokens": prompt_details["cached_tokens"],
            "created_cache_tokens": prompt_details.get("created_cache_tokens"),  # completions: null
            "multimodal_tokens": None,
        }
    if endpoint == "chat":
        if details:
            usage["completion_tokens_details"] = {"reasoning_tokens": out.reasoning_tokens}
        has_content = out.target_tokens > out.reasoning_tokens
        message = {
            "role": "assistant",
            "content": content if has_content else None,
            "refusal": None,
            "annotations": None,
            "audio": None,
            "function_call": None,
            reasoning_field: reasoning if thinking else None,
        }
        choice = {
            "index": 0,
            "message": message,
            "logprobs": None,
            "finish_reason": out.finish_reason,
            "stop_reason": None,
            "token_ids": None,
            "routed_experts": None,
        }
        obj = "chat.completion"
        after = {"prompt_logprobs": None, "prompt_token_ids": None, "prompt_text": None}
    else:
        choice = {
            "index": 0,
            "text": content,
            "logprobs": None,
            "finish_reason": out.finish_reason,
            "stop_reason": None,
            "token_ids": None,
            "prompt_logprobs": None,
            "prompt_token_ids": None,
            "routed_experts": None,
        }
        obj = "text_completion"
        after = {}
    return orjson.dumps(
        {
            "id": out.id,
            "object": obj,
            "created": out.created,
            "model": model,
            "choices": [choice],
            "service_tier": None,
            "system_fingerprint": SYSTEM_FINGERPRINT,
            "usage": usage,
            **after,
            "kv_transfer_params": None,
            "ec_transfer_params": None,
            "metrics": None,
        }
    )
