"""The simulator speaks as a real vLLM does: the same requests go to both and the answers must agree.

- bad requests: status, the error JSON's `type`, `param`, `code` and fields, and the message
  (numbers aside);
- good requests: each stream event's and whole body's structure (keys in order, kinds of value);
- /metrics: every vllm: family the simulator exposes has vLLM's type, label names and buckets,
  and all that swarm/analysis/server_metrics.py reads is in both.

The real vLLM is the session's `vllm_target` (vLLM's CPU build with the tiny model, or the
server at $SWARM_TARGET_URL, which must run with `--reasoning-parser`, as tests/helpers/vllm_fixture.py
asks); the simulator is started with the same model name and context length. Messages are held
to the vLLM that runs here (0.32); numbers in them differ, since the simulator's tokenizer is not
the model's. Each pair of answers is printed in the "real vLLM reconciliation" section.
"""

from __future__ import annotations

import http.client
import json
import re
import urllib.request
from dataclasses import dataclass
from urllib.parse import urlparse

import pytest
from prometheus_client.parser import text_string_to_metric_families

from swarm.core.server_families import VLLM
from tests.helpers.support import sim_server

pytestmark = [pytest.mark.serial, pytest.mark.integration, pytest.mark.slow]

MSGS = [{"role": "user", "content": "hello"}]
CHAT = "/v1/chat/completions"
COMPLETIONS = "/v1/completions"


@dataclass(frozen=True)
class Answer:
    status: int
    error: dict | None  # the "error" object of the body, if the body is one
    body: bytes

    @property
    def shape(self) -> tuple:
        e = self.error or {}
        return self.status, e.get("type"), e.get("param"), e.get("code"), tuple(sorted(e))


def ask(url: str, path: str, body: bytes | dict) -> Answer:
    u = urlparse(url)
    conn = http.client.HTTPConnection(u.hostname, u.port, timeout=60)
    try:
        data = body if isinstance(body, bytes) else json.dumps(body).encode()
        conn.request("POST", path, body=data, headers={"Content-Type": "application/json"})
        r = conn.getresponse()
        raw = r.read()
    finally:
        conn.close()
    try:
        error = json.loads(raw).get("error")
    except (ValueError, AttributeError):
        error = None
    return Answer(r.status, error if isinstance(error, dict) else None, raw)


def cases(model: str, max_model_len: int) -> dict[str, tuple[str, bytes | dict]]:
    chat = {"model": model, "messages": MSGS, "max_tokens": 8}
    return {
        "malformed JSON": (CHAT, b"{not json"),
        "a list body": (CHAT, b"[1, 2]"),
        "missing messages": (CHAT, {"model": model}),
        "messages not a list": (CHAT, {"model": model, "messages": "hi"}),
        "empty messages": (CHAT, {**chat, "messages": []}),
        "unknown model": (CHAT, {**chat, "model": "no-such-model"}),
        "negative max_tokens": (CHAT, {**chat, "max_tokens": -5}),
        "zero max_tokens": (CHAT, {**chat, "max_tokens": 0}),
        "min_tokens over max_tokens": (CHAT, {**chat, "min_tokens": 10}),
        "temperature not a number": (CHAT, {**chat, "temperature": "hot"}),
        "stream_options without stream": (
            CHAT,
            {**chat, "stream": False, "stream_options": {"include_usage": True}},
        ),
        "max_tokens past max_model_len": (CHAT, {**chat, "max_tokens": max_model_len + 1}),
        "chat prompt past the context": (
            CHAT,
            {**chat, "messages": [{"role": "user", "content": "hello " * max_model_len}]},
        ),
        "completion prompt past the context": (
            COMPLETIONS,
            {"model": model, "prompt": "hello " * max_model_len, "max_tokens": 8},
        ),
    }


def same_words(a: str, b: str) -> bool:
    """Equal but for numbers (token counts differ: the simulator's tokenizer is not the model's)."""
    return re.sub(r"\d+", "N", a) == re.sub(r"\d+", "N", b)


@pytest.fixture(scope="module")
def sim_like_target(vllm_target, tmp_path_factory):
    info = json.loads(vllm_target.get("/v1/models"))["data"][0]
    with sim_server(
        tmp_path_factory.mktemp("sim"),
        "--profile",
        "instant",
        "--max-model-len",
        str(info["max_model_len"]),
        "--enable-prompt-tokens-details",  # as the vLLM target runs (swarm/orchestrate/targets.py)
        model=vllm_target.model,
        trace=False,
    ) as sim:
        yield sim, info["max_model_len"]


def test_bad_requests_get_the_answers_vllm_gives(vllm_target, sim_like_target, vllm_report):
    sim, max_model_len = sim_like_target
    differ = []
    for name, (path, body) in cases(vllm_target.model, max_model_len).items():
        real, ours = ask(vllm_target.url, path, body), ask(sim.url, path, body)
        vllm_report.add(f"error conformance, {name}: vLLM {real.shape[:4]} / sim {ours.shape[:4]}")
        assert real.error is not None, f"{name}: vLLM's body is not an error object: {real.body[:300]!r}"
        real_msg, our_msg = real.error.get("message", ""), (ours.error or {}).get("message", "")
        if real.shape != ours.shape or not same_words(real_msg, our_msg):
            differ.append(
                f"{name}: vLLM {real.shape} {real_msg[:300]!r}\n"
                f"      sim  {ours.shape} {our_msg[:300] or ours.body[:200]!r}"
            )
    assert not differ, "\n".join(differ)


def test_max_tokens_past_what_the_context_leaves_is_cut_alike(vllm_target, sim_like_target, vllm_report):
    """Both serve a max_tokens that fits max_model_len but not beside the prompt, cut to the room left."""
    sim, max_model_len = sim_like_target
    body = {
        "model": vllm_target.model,
        "messages": MSGS,
        "max_tokens": max_model_len,
        "ignore_eos": True,
        "chat_template_kwargs": {"enable_thinking": False},
    }
    for who, url in (("vLLM", vllm_target.url), ("sim", sim.url)):
        r = ask(url, CHAT, body)
        assert r.status == 200, (who, r.body[:300])
        reply = json.loads(r.body)
        usage = reply["usage"]
        vllm_report.add(
            f"cut to the context, {who}: prompt {usage['prompt_tokens']} + completion "
            f"{usage['completion_tokens']} = {usage['total_tokens']} of {max_model_len}"
        )
        assert usage["total_tokens"] == max_model_len and reply["choices"][0]["finish_reason"] == "length", (
            who
        )
        assert usage["completion_tokens_details"] == {"reasoning_tokens": 0}, who


# ---- what a good request gets: the same fields, in the same order, with the same kinds of value

VALUES_KEPT = {"object", "finish_reason", "stop_reason", "role"}  # compared by value, the rest by kind


def shape(v, key: str = ""):
    """A JSON value's structure: keys in order, the kind of each value (a few by value)."""
    if isinstance(v, dict):
        return [(k, shape(x, k)) for k, x in v.items()]
    if isinstance(v, list):
        return ["list", *(shape(x) for x in v[:1])]
    if key in VALUES_KEPT:
        return v
    return type(v).__name__


def events(url: str, path: str, body: dict) -> list:
    r = ask(url, path, body)
    assert r.status == 200, r.body[:300]
    out = []
    for block in r.body.decode().split("\n\n"):
        if block.startswith("data: ") and block != "data: [DONE]":
            out.append(json.loads(block[6:]))
    assert r.body.decode().rstrip().endswith("data: [DONE]")
    return out


def good_requests(model: str) -> dict[str, tuple[str, dict]]:
    # greedy: sampling the tiny model's random weights may draw </think> or half a character,
    # which would change the event kinds from one run to the next
    chat = {"model": model, "messages": MSGS, "max_tokens": 4, "ignore_eos": True, "temperature": 0}
    off = {"chat_template_kwargs": {"enable_thinking": False}}
    on = {"chat_template_kwargs": {"enable_thinking": True}}
    usage = {"stream": True, "stream_options": {"include_usage": True}}
    running = {"stream": True, "stream_options": {"include_usage": True, "continuous_usage_stats": True}}
    comp = {"model": model, "prompt": "hello", "max_tokens": 4, "ignore_eos": True, "temperature": 0}
    return {
        "chat stream, usage, thinking off": (CHAT, {**chat, **usage, **off}),
        "chat stream, running usage, thinking on": (CHAT, {**chat, **running, **on}),
        "chat stream, no stream_options": (CHAT, {**chat, "stream": True, **off}),
        "completions stream, usage": (COMPLETIONS, {**comp, **usage}),
        "completions stream, running usage": (COMPLETIONS, {**comp, **running}),
        "completions stream, no stream_options": (COMPLETIONS, {**comp, "stream": True}),
    }


def kind(event: dict) -> str:
    """role | token | finish | usage: what one stream event is."""
    if not event["choices"]:
        return "usage"
    choice = event["choices"][0]
    if choice.get("finish_reason") is not None:
        return "finish"
    return "role" if "role" in choice.get("delta", {}) else "token"


def test_streams_have_vllms_fields(vllm_target, sim_like_target, vllm_report):
    """The same kinds of event in the same order, each kind with vLLM's structure. How many token
    events a stream has is not compared: a busy vLLM puts several tokens in one event."""
    sim, _ = sim_like_target
    differ = []
    for name, (path, body) in good_requests(vllm_target.model).items():
        real, ours = events(vllm_target.url, path, body), events(sim.url, path, body)
        vllm_report.add(
            f"stream conformance, {name}: vLLM {[kind(e) for e in real]} / sim {[kind(e) for e in ours]}"
        )
        order = [[k for k in map(kind, evs) if k != "token"] for evs in (real, ours)]
        if order[0] != order[1]:
            differ.append(f"{name}: vLLM sends {order[0]}, the simulator {order[1]} (token events aside)")
        shapes = [{}, {}]
        for side, evs in zip(shapes, (real, ours), strict=True):
            for e in evs:
                side.setdefault(kind(e), (shape(e), e))
        for k in shapes[0].keys() & shapes[1].keys():
            if shapes[0][k][0] != shapes[1][k][0]:
                differ.append(
                    f"{name}, {k} event:\n  vLLM {json.dumps(shapes[0][k][1])[:600]}\n"
                    f"  sim  {json.dumps(shapes[1][k][1])[:600]}"
                )
        # every token event of one stream has the same structure
        for who, evs in (("vLLM", real), ("sim", ours)):
            if len({json.dumps(shape(e)) for e in evs if kind(e) == "token"}) > 1:
                differ.append(f"{name}: {who}'s token events differ in structure")
    assert not differ, "\n".join(differ)


@pytest.mark.parametrize("thinking", [True, False])
def test_whole_bodies_have_vllms_fields(vllm_target, sim_like_target, thinking):
    sim, _ = sim_like_target
    body = {
        "model": vllm_target.model,
        "messages": MSGS,
        "max_tokens": 4,
        "ignore_eos": True,
        "temperature": 0,
        "chat_template_kwargs": {"enable_thinking": thinking},
    }
    comp = {
        "model": vllm_target.model,
        "prompt": "hello",
        "max_tokens": 4,
        "ignore_eos": True,
        "temperature": 0,
    }
    for path, b in ((CHAT, body), (COMPLETIONS, comp)):
        real, ours = ask(vllm_target.url, path, b), ask(sim.url, path, b)
        assert real.status == ours.status == 200
        assert shape(json.loads(ours.body)) == shape(json.loads(real.body)), (
            real.body[:900],
            ours.body[:900],
        )


# ---- /metrics: the simulator's vllm: families are vLLM's, with vLLM's types, labels and buckets


def families(text: str) -> dict[str, tuple[str, frozenset, tuple]]:
    """name -> (type, label names but `le`, histogram bucket bounds) for each vllm: family."""
    out = {}
    for fam in text_string_to_metric_families(text):
        if not fam.name.startswith("vllm:"):
            continue
        labels = frozenset(k for s in fam.samples for k in s.labels if k != "le")
        bounds = tuple(sorted({float(s.labels["le"]) for s in fam.samples if s.name.endswith("_bucket")}))
        out[fam.name] = (fam.type, labels, bounds)
    return out


def test_sim_metrics_are_vllms(vllm_target, sim_like_target, vllm_report):
    sim, _ = sim_like_target
    ask(sim.url, CHAT, {"model": vllm_target.model, "messages": MSGS, "max_tokens": 4})  # some samples
    ask(vllm_target.url, CHAT, {"model": vllm_target.model, "messages": MSGS, "max_tokens": 4})
    real = families(vllm_target.get("/metrics").decode())
    with urllib.request.urlopen(sim.url + "/metrics", timeout=10) as r:
        ours = families(r.read().decode())
    assert ours, "the simulator exposes no vllm: family"
    real = {k: v for k, v in real.items() if not k.endswith("_created")}  # (the parser's, per counter)
    vllm_report.add(
        f"metrics conformance: the simulator exposes {len(ours)} of vLLM's {len(real)} vllm: families, "
        f"with vLLM's types, labels and buckets; not simulated: {', '.join(sorted(set(real) - set(ours)))}"
    )

    def same(name: str) -> bool:
        if name.endswith("_info"):  # an info gauge's labels are the whole config: the simulator's are a part
            return name in real and real[name][0] == ours[name][0] and ours[name][1] <= real[name][1]
        return real.get(name) == ours[name]

    wrong = [f"{name}: sim {ours[name]} / vLLM {real.get(name)}" for name in sorted(ours) if not same(name)]
    assert not wrong, "\n".join(wrong)
    # what the swarm reads (swarm/core/server_families.py: the preferred vLLM name of each figure) is in
    # both; speculative decoding aside (neither runs it here)
    read = [
        names[0].removesuffix("_total")
        for table in (VLLM.gauges, VLLM.counters, VLLM.histograms)
        for key, names in table.items()
        if not key.startswith("spec_")
    ]
    read.append(VLLM.success[0].removesuffix("_total"))
    assert [n for n in read if n not in real] == [], "vLLM lacks what the swarm reads"
    assert [n for n in read if n not in ours] == [], "the simulator lacks what the swarm reads"
