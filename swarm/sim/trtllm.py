"""The simulator speaking as `trtllm-serve` (`swarm sim --server trtllm`): its request schema,
from `tensorrt_llm/serve/openai_protocol.py` (NVIDIA/TensorRT-LLM at 0076e939; docs/server-families.md).

- every request model is an `OpenAIBaseModel` with `extra="forbid"`: a field the server does not
  declare is refused (where vLLM ignores it), as a schema error: `{"error": "<text>"}`, 400
  (`validation_exception_handler` in `openai_server.py`); `model` is required.
- `StreamOptions`: `include_usage` defaults to true, `continuous_usage_stats` to false, so a
  streamed answer ends with usage unless the request says `include_usage: false`.

Its metrics are swarm/sim/trtllm_metrics.py; its errors and listing are in swarm/sim/faces.py.
"""

from __future__ import annotations

from typing import Any

import orjson

from swarm.sim.protocol import ApiError, GenRequest

# CompletionRequest's and ChatCompletionRequest's fields (the chat's max_completion_tokens is
# also read as max_tokens, its validation alias)
COMPLETION_FIELDS = frozenset(
    [
        "model",
        "prompt",
        "best_of",
        "echo",
        "frequency_penalty",
        "logit_bias",
        "logprobs",
        "max_tokens",
        "n",
        "presence_penalty",
        "seed",
        "stop",
        "stream",
        "stream_options",
        "suffix",
        "temperature",
        "top_p",
        "user",
        "lora_request",
        "prompt_ignore_length",
        "use_beam_search",
        "top_k",
        "top_p_min",
        "min_p",
        "repetition_penalty",
        "length_penalty",
        "early_stopping",
        "stop_token_ids",
        "include_stop_str_in_output",
        "ignore_eos",
        "min_tokens",
        "skip_special_tokens",
        "spaces_between_special_tokens",
        "truncate_prompt_tokens",
        "return_context_logits",
        "detokenize",
        "thinking_token_budget",
        "add_special_tokens",
        "response_format",
        "disaggregated_params",
        "priority",
        "conversation_params",
    ]
)
CHAT_FIELDS = frozenset(
    [
        "messages",
        "prompt_token_ids",
        "prompt_token_ids_b64",
        "model",
        "frequency_penalty",
        "logit_bias",
        "logprobs",
        "top_logprobs",
        "max_completion_tokens",
        "max_tokens",
        "n",
        "presence_penalty",
        "response_format",
        "seed",
        "stop",
        "stream",
        "stream_options",
        "temperature",
        "top_p",
        "tools",
        "tool_choice",
        "parallel_tool_calls",
        "user",
        "reasoning_effort",
        "thinking",
        "thinking_token_budget",
        "prompt_ignore_length",
        "best_of",
        "use_beam_search",
        "top_k",
        "top_p_min",
        "min_p",
        "repetition_penalty",
        "length_penalty",
        "early_stopping",
        "stop_token_ids",
        "include_stop_str_in_output",
        "ignore_eos",
        "min_tokens",
        "skip_special_tokens",
        "spaces_between_special_tokens",
        "truncate_prompt_tokens",
        "lora_request",
        "echo",
        "add_generation_prompt",
        "add_special_tokens",
        "documents",
        "chat_template",
        "chat_template_kwargs",
        "injected_chat_template_kwargs",
        "media_io_kwargs",
        "disaggregated_params",
        "conversation_params",
        "cache_salt",
        "priority",
        "agent_hierarchy",
        "mm_processor_kwargs",
    ]
)


class SchemaError(ApiError):
    """`validation_exception_handler`: `{"error": "<text>"}`, status 400."""

    def body(self) -> bytes:
        return orjson.dumps({"error": self.message})


def check_fields(body: dict[str, Any], endpoint: str) -> None:
    """Refuse what the request model does not declare (`extra="forbid"`), and a missing `model`."""
    known = CHAT_FIELDS if endpoint == "chat" else COMPLETION_FIELDS
    if "model" not in body:
        raise SchemaError(
            400,
            "1 validation error:\n  {'type': 'missing', 'loc': ('body', 'model'), 'msg': 'Field required'}",
        )
    extra = sorted(k for k in body if k not in known)
    if extra:
        raise SchemaError(
            400,
            f"{len(extra)} validation error{'s' if len(extra) > 1 else ''}:\n"
            + "\n".join(
                f"  {{'type': 'extra_forbidden', 'loc': ('body', {k!r}), 'msg': 'Extra inputs are not permitted'}}"
                for k in extra
            ),
        )


def usage_defaults(body: dict[str, Any], req: GenRequest) -> None:
    """`StreamOptions`' defaults on a parsed request: usage on unless `include_usage` is false."""
    opts = body.get("stream_options")
    opts = opts if isinstance(opts, dict) else {}
    req.include_usage = req.stream and opts.get("include_usage", True) is not False
    req.continuous_usage = req.include_usage and opts.get("continuous_usage_stats") is True
