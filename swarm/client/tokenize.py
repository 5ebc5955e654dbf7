"""Counting prompt tokens with the target's own tokenizer (over HTTP) or a local Hugging Face one.

- vLLM: `POST /tokenize` (REFERENCE.md §9). The chat form (`messages`, `add_generation_prompt`,
  `chat_template_kwargs`) goes through the renderer of `/v1/chat/completions`, so its `count`
  equals the request's `usage.prompt_tokens`; the prompt form adds special tokens as
  `/v1/completions` does. `POST /detokenize {"tokens"}` answers the ids' text (`{"prompt"}`).
- llama.cpp: `POST /apply-template {"messages"}` renders the chat template to text, then
  `POST /tokenize {"content", "add_special", "parse_special"}` answers the token ids (no count);
  `POST /detokenize {"tokens"}` answers `{"content"}`.
- A local `tokenizer.json` or tokenizer directory (the `tokenizers` library, no network): the
  chat template of its `tokenizer_config.json` is rendered with Jinja2 as transformers does
  (`add_generation_prompt=True`, the kwargs as template variables), then encoded without adding
  special tokens, as vLLM encodes a rendered chat prompt.

`open_tokenizer` picks one from `--tokenizer auto|server|pseudo|PATH`; these calls run only while
prompts are built, before the load starts, never on the request path.
"""

from __future__ import annotations

import json
import logging
import urllib.error
import urllib.request
from collections.abc import Mapping, Sequence
from functools import lru_cache
from pathlib import Path
from typing import Any

from swarm.core.apikey import BoundKey, origin
from swarm.core.errors import TargetError, UsageError
from swarm.core.tokenizer import Messages, PseudoTokenizer, Tokenizer

log = logging.getLogger(__name__)

HTTP_TIMEOUT_S = 30.0


class TokenizeUnavailable(TargetError):
    """The target has no tokenize endpoint we can use (`auto` falls back to the pseudo-tokenizer)."""


class Http:
    """Plain JSON POSTs to the target (prompt building only: not the request path). `api_key`: the
    key the caller's origin rule gave `base_url` (swarm/live/keyorigin.py); it goes to that origin
    only, and never onto a redirect (swarm/core/apikey.py `BoundKey.request`)."""

    def __init__(self, base_url: str, api_key: str | None, timeout: float = HTTP_TIMEOUT_S) -> None:
        self.base = base_url.rstrip("/")
        self.timeout = timeout
        self.headers = {"Content-Type": "application/json", "User-Agent": "llm-swarm"}
        self.key = BoundKey(api_key, origin(self.base))

    def get(self, path: str) -> tuple[int, bytes]:
        """A GET (for /v1/models discovery): status and body; raises OSError when nothing answers."""
        req = self.key.request(self.base + path, None, self.headers)
        try:
            with urllib.request.urlopen(req, timeout=self.timeout) as r:
                return r.status, r.read()
        except urllib.error.HTTPError as e:
            return e.code, e.read()

    def post(self, path: str, body: dict[str, Any]) -> Any:
        req = self.key.request(self.base + path, json.dumps(body).encode(), self.headers)
        try:
            with urllib.request.urlopen(req, timeout=self.timeout) as r:
                return json.loads(r.read())
        except urllib.error.HTTPError as e:
            text = e.read()[:300].decode("utf-8", "replace")
            if e.code in (404, 405, 501):
                raise TokenizeUnavailable(f"POST {path}: HTTP {e.code} {text}") from None
            raise TargetError(f"POST {self.base}{path}: HTTP {e.code} {text}") from None
        except (OSError, ValueError) as e:
            raise TokenizeUnavailable(f"POST {self.base}{path}: {type(e).__name__}: {e}") from None


def _count_field(answer: Any, path: str) -> int:
    if isinstance(answer, dict):
        if isinstance(answer.get("count"), int):
            return answer["count"]
        if isinstance(answer.get("tokens"), list):
            return len(answer["tokens"])
    raise TargetError(f"POST {path}: answer without a token count: {str(answer)[:200]}")


def _ids_field(answer: Any, path: str) -> list[int]:
    ids = answer.get("tokens") if isinstance(answer, dict) else None
    if isinstance(ids, list) and all(isinstance(i, int) and not isinstance(i, bool) for i in ids):
        return ids
    raise TargetError(f"POST {path}: answer without token ids: {str(answer)[:200]}")


def _text_field(answer: Any, key: str, path: str) -> str:
    text = answer.get(key) if isinstance(answer, dict) else None
    if isinstance(text, str):
        return text
    raise TargetError(f"POST {path}: answer without a {key!r} text: {str(answer)[:200]}")


class VllmTokenizer:
    """vLLM's `/tokenize`: the chat form counts exactly what `usage.prompt_tokens` will say."""

    def __init__(self, base_url: str, model: str | None, api_key: str | None = None) -> None:
        self.http = Http(base_url, api_key)
        self.model = model
        self.name = f"server:vllm:{model}"

    def _body(self, **fields: Any) -> dict[str, Any]:
        return {"model": self.model, **fields} if self.model else fields

    def count_chat(self, messages: Messages, template_kwargs: Mapping[str, Any] | None = None) -> int:
        body = self._body(messages=list(messages), add_generation_prompt=True)
        if template_kwargs:
            body["chat_template_kwargs"] = dict(template_kwargs)
        return _count_field(self.http.post("/tokenize", body), "/tokenize")

    def count_prompt(self, text: str) -> int:
        body = self._body(prompt=text, add_special_tokens=True)
        return _count_field(self.http.post("/tokenize", body), "/tokenize")

    def encode(self, text: str) -> list[int]:
        body = self._body(prompt=text, add_special_tokens=False)
        return _ids_field(self.http.post("/tokenize", body), "/tokenize")

    def decode(self, ids: Sequence[int]) -> str:
        body = self._body(tokens=list(ids))
        return _text_field(self.http.post("/detokenize", body), "prompt", "/detokenize")


class LlamaCppTokenizer:
    """llama.cpp: `/apply-template` renders the chat, `/tokenize` counts it (special tokens parsed)."""

    def __init__(self, base_url: str, model: str | None, api_key: str | None = None) -> None:
        self.http = Http(base_url, api_key)
        self.name = f"server:llamacpp:{model}"

    def count_chat(self, messages: Messages, template_kwargs: Mapping[str, Any] | None = None) -> int:
        body: dict[str, Any] = {"messages": list(messages)}
        if template_kwargs:
            body["chat_template_kwargs"] = dict(template_kwargs)
        answer = self.http.post("/apply-template", body)
        prompt = answer.get("prompt") if isinstance(answer, dict) else None
        if not isinstance(prompt, str):
            raise TargetError(f"POST /apply-template: answer without a prompt: {str(answer)[:200]}")
        # the chat prompt is tokenized as the server tokenizes a rendered chat: specials parsed, BOS added
        return self._tokens(prompt)

    def count_prompt(self, text: str) -> int:
        return self._tokens(text)

    def _tokens(self, text: str) -> int:
        body = {"content": text, "add_special": True, "parse_special": True}
        return _count_field(self.http.post("/tokenize", body), "/tokenize")

    def encode(self, text: str) -> list[int]:
        body = {"content": text, "add_special": False, "parse_special": False}
        return _ids_field(self.http.post("/tokenize", body), "/tokenize")

    def decode(self, ids: Sequence[int]) -> str:
        return _text_field(self.http.post("/detokenize", {"tokens": list(ids)}), "content", "/detokenize")


class LocalTokenizer:
    """A Hugging Face tokenizer from disk (`tokenizer.json`, or a directory holding it)."""

    def __init__(self, path: str | Path) -> None:
        from tokenizers import Tokenizer as HFTokenizer

        p = Path(path)
        file = p / "tokenizer.json" if p.is_dir() else p
        if not file.is_file():
            raise UsageError(
                f"--tokenizer {path}: no tokenizer.json there (give pseudo, server, auto or a PATH)"
            )
        try:
            self.tok = HFTokenizer.from_file(str(file))
        except Exception as e:  # the library's own parse error, named
            raise UsageError(f"--tokenizer {path}: cannot load {file.name} ({e})") from None
        self.name = f"local:{file.resolve()}"
        self.config = _tokenizer_config(file.parent / "tokenizer_config.json")
        self._template = _chat_template(self.config)

    def count_chat(self, messages: Messages, template_kwargs: Mapping[str, Any] | None = None) -> int:
        if self._template is None:
            raise UsageError(
                f"--tokenizer {self.name[6:]}: no chat_template in tokenizer_config.json; "
                "use --endpoint completions or another tokenizer"
            )
        text = self._template.render(
            messages=list(messages),
            add_generation_prompt=True,
            bos_token=_special(self.config.get("bos_token")),
            eos_token=_special(self.config.get("eos_token")),
            **dict(template_kwargs or {}),
        )
        return len(self.tok.encode(text, add_special_tokens=False).ids)

    def count_prompt(self, text: str) -> int:
        return len(self.tok.encode(text, add_special_tokens=True).ids)

    def encode(self, text: str) -> list[int]:
        return list(self.tok.encode(text, add_special_tokens=False).ids)

    def decode(self, ids: Sequence[int]) -> str:
        return str(self.tok.decode(list(ids), skip_special_tokens=False))


def _tokenizer_config(path: Path) -> dict[str, Any]:
    if not path.is_file():
        return {}
    try:
        config = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise UsageError(f"--tokenizer: cannot read {path} ({e})") from None
    return config if isinstance(config, dict) else {}


def _special(value: Any) -> str:
    if isinstance(value, dict):
        return str(value.get("content", ""))
    return "" if value is None else str(value)


def _chat_template(config: Mapping[str, Any]) -> Any:
    """The config's chat template compiled as transformers compiles it (sandboxed, trim/lstrip blocks)."""
    source = config.get("chat_template")
    if isinstance(source, list):  # named templates: the default one
        named = {t.get("name"): t.get("template") for t in source if isinstance(t, dict)}
        source = named.get("default") or next(iter(named.values()), None)
    if not isinstance(source, str):
        return None
    from jinja2.exceptions import TemplateError
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    def raise_exception(message: str) -> None:
        raise TemplateError(message)

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
    env.filters["tojson"] = lambda x, indent=None, **_: json.dumps(x, ensure_ascii=False, indent=indent)
    env.globals["raise_exception"] = raise_exception
    return env.from_string(source)


def server_tokenizer(dialect: str, base_url: str, model: str | None, api_key: str | None) -> Tokenizer:
    """The target's tokenizer over HTTP, checked with one call. Raises TokenizeUnavailable."""
    if dialect == "vllm":
        tok: Tokenizer = VllmTokenizer(base_url, model, api_key)
    elif dialect == "llamacpp":
        tok = LlamaCppTokenizer(base_url, model, api_key)
    else:
        raise TokenizeUnavailable(f"the {dialect} dialect has no tokenize endpoint")
    tok.count_chat([{"role": "user", "content": "hello"}])  # answers, and in the shape we read
    return tok


def open_tokenizer(
    mode: str, *, base_url: str | None, model: str | None, dialect: str, api_key: str | None = None
) -> Tokenizer:
    """`--tokenizer`: pseudo, PATH (local), server (the target's, or an error), auto (server, else
    pseudo with one warning line)."""
    if mode == "pseudo":
        return PseudoTokenizer()
    if mode not in ("auto", "server"):
        return _local(mode)
    try:
        if not base_url:
            raise TokenizeUnavailable("no --host to ask")
        return server_tokenizer(dialect, base_url, model, api_key)
    except TokenizeUnavailable as e:
        if mode == "server":
            raise TargetError(f"--tokenizer server: the target cannot count tokens ({e})") from None
        log.warning("--tokenizer auto: the target cannot count tokens (%s); using the pseudo-tokenizer", e)
        return PseudoTokenizer()


@lru_cache(maxsize=8)
def _local(path: str) -> LocalTokenizer:
    return LocalTokenizer(path)
