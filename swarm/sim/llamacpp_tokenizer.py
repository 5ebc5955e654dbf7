"""llama-server's tokenizer endpoints (`swarm sim --server llamacpp`): /tokenize (`content`,
`with_pieces`), /detokenize and /apply-template in llama.cpp's shapes: /apply-template +
/tokenize count exactly what a chat request's usage says."""

from __future__ import annotations

import re
from typing import Any

from swarm.core.tokens import chat_prompt_tokens, tokenize
from swarm.sim.llamacpp import LlamaError
from swarm.sim.protocol import ApiError, detokenize_text, piece_ids

# The chat template's special pieces, each one token when /tokenize parses special tokens
_SPECIAL = re.compile(r"(<\|im_start\|>)([^\n<]*)(\n)|(<\|im_end\|>)")


def apply_template(messages: list[dict[str, Any]]) -> str:
    """The chat prompt as text (the pseudo-template of swarm.core.tokens, ChatML-like)."""
    return "".join(chat_prompt_tokens(messages))


def template_pieces(text: str, parse_special: bool = True) -> list[str]:
    """Pseudo-tokens of `text`; with `parse_special` a template marker, and a role after
    `<|im_start|>`, are one token each, so a rendered chat counts what the chat request counts."""
    if not parse_special:
        return tokenize(text)
    pieces: list[str] = []
    pos = 0
    for m in _SPECIAL.finditer(text):
        pieces += tokenize(text[pos : m.start()])
        pieces += [g for g in m.groups() if g is not None]
        pos = m.end()
    return pieces + tokenize(text[pos:])


def tokenize_answer(body: dict[str, Any]) -> dict[str, Any]:
    """/tokenize: `{"tokens": [id, ...]}`, or `[{"id", "piece"}, ...]` with `with_pieces`."""
    content = body.get("content")
    if not isinstance(content, str):
        raise LlamaError(400, '"content" must be provided')
    pieces = template_pieces(content, body.get("parse_special", True) is not False)
    ids = piece_ids(pieces)
    if body.get("with_pieces") is True:
        return {"tokens": [{"id": i, "piece": p} for i, p in zip(ids, pieces, strict=True)]}
    return {"tokens": ids}


def detokenize_answer(body: dict[str, Any]) -> dict[str, Any]:
    """/detokenize: `{"tokens"}` -> `{"content"}` (ids that /tokenize answered)."""
    try:
        return {"content": detokenize_text(body.get("tokens"))}
    except ApiError as e:
        raise LlamaError(400, e.message) from None
