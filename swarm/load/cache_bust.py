"""`--prefix-cache bust`: every request's prefix unique, so no request is served from the server's
prefix cache.

Where the server takes vLLM's per-request `cache_salt` body field (the dialects in
swarm/core/options.py `CACHE_SALT_DIALECTS`), the request carries a unique salt and its text is
untouched: vLLM mixes the salt into the first block's hash, so not one block matches another
request's. Elsewhere the request's text starts with a unique tag of a few tokens (`[bust TAG]`
and a blank line, before the first message's content or the prompt): the first block differs, and
with it every block after it. That tag adds those few tokens to each prompt, which a workload of
exact prompt lengths cannot absorb where the length is the point: a trace replay (its hash ids
say which blocks are shared) on a dialect known to take no salt is refused.
"""

from __future__ import annotations

from typing import Any

from swarm.core.errors import UsageError
from swarm.core.options import CACHE_SALT_DIALECTS, PREFIX_CACHE_MODES

TAG_FORMAT = "[bust {tag}]\n\n"
"""The leading text of a busted prompt without a salt: a few tokens, unique per request."""


def check_bust(mode: Any, dialect: str, *, trace: bool = False) -> bool:
    """`--prefix-cache MODE` -> whether to bust. Raises UsageError (one line) on a bad mode, or on a
    bust no server of `dialect` can take (no salt, and a text prefix the workload cannot hold)."""
    mode = str(mode or "keep")
    if mode not in PREFIX_CACHE_MODES:
        raise UsageError(f"--prefix-cache must be one of {', '.join(PREFIX_CACHE_MODES)} (got {mode!r})")
    if mode != "bust":
        return False
    if trace and dialect != "auto" and dialect not in CACHE_SALT_DIALECTS:
        raise UsageError(
            f"--prefix-cache bust: the {dialect} dialect takes no cache_salt, and a trace replay's prompts "
            "have exact lengths and shared blocks that a unique leading text would change; drop one of them"
        )
    return True


def bust(
    messages: list[dict[str, Any]] | None, prompt: str | None, tag: str, takes_salt: bool
) -> tuple[list[dict[str, Any]] | None, str | None, str | None]:
    """One request's (messages, prompt, cache_salt) with its prefix unique: the salt `tag` where the
    server `takes_salt`, else the text led by the tag (chat: the first message; completions: the prompt)."""
    if takes_salt:
        return messages, prompt, tag
    if messages is not None:
        return busted_messages(messages, tag), prompt, None
    return messages, busted_prompt(prompt or "", tag), None


def busted_messages(messages: list[dict[str, Any]], tag: str) -> list[dict[str, Any]]:
    """`messages` with the first one's text led by the unique tag (a new list; the rest shared)."""
    if not messages:
        return messages
    first = dict(messages[0])
    content = first.get("content")
    lead = TAG_FORMAT.format(tag=tag)
    if isinstance(content, list):
        first["content"] = [{"type": "text", "text": lead}, *content]
    else:
        first["content"] = lead + (content or "")
    return [first, *messages[1:]]


def busted_prompt(prompt: str, tag: str) -> str:
    """A /v1/completions prompt led by the unique tag."""
    return TAG_FORMAT.format(tag=tag) + prompt


__all__ = ["TAG_FORMAT", "bust", "busted_messages", "busted_prompt", "check_bust"]
