"""The simulator's llama.cpp face (`swarm sim --server llamacpp`) answers as a real llama-server does.

The same requests go to both (the session's `llamacpp_target`: llama-server built here, the tiny
GGUF, 2 slots; and a simulator with the same model name, slot count and per-slot context):
- bad requests: status, the error object's keys and `type`, and the message (numbers aside);
- good requests: every kind of stream event (role, token, finish, usage) and the whole bodies have
  the same structure: keys in order, kinds of value, nested alike;
- /metrics: the same `llamacpp:` families with the same types, and all that
  swarm/analysis/server_metrics.py reads from llama.cpp is in both;
- /v1/models, /tokenize and /apply-template in the same shapes, and the swarm detects both as
  llama.cpp; both close the connection after a streamed answer.
Each pair of answers is printed in the "real llama.cpp reconciliation" section.
"""

from __future__ import annotations

import http.client
import json
import re
from typing import Any
from urllib.parse import urlparse

import pytest
from prometheus_client.parser import text_string_to_metric_families

from swarm.core.server_families import LLAMACPP
from tests.e2e.test_vllm_conformance import ask
from tests.helpers.support import sim_server

pytestmark = [pytest.mark.serial, pytest.mark.integration, pytest.mark.slow, pytest.mark.timeout(600)]

CHAT = "/v1/chat/completions"
COMPLETIONS = "/v1/completions"
MSGS = [{"role": "user", "content": "hello"}]
NO_THINKING = {"chat_template_kwargs": {"enable_thinking": False}}


@pytest.fixture(scope="module")
def llama_sim(llamacpp_target, tmp_path_factory):
    with sim_server(
        tmp_path_factory.mktemp("llama-sim"),
        "--server",
        "llamacpp",
        "--profile",
        "instant",
        "--max-num-seqs",
        str(llamacpp_target.max_num_seqs),
        "--max-model-len",
        str(llamacpp_target.ctx_per_slot),
        model=llamacpp_target.model,
        trace=False,
    ) as sim:
        yield sim


def shape(v: Any) -> Any:
    """The structure of a JSON value: keys in order with their shapes, the first item of a list,
    and the kind of a scalar (int and float apart, as llama.cpp writes them)."""
    if isinstance(v, dict):
        return tuple((k, shape(x)) for k, x in v.items())
    if isinstance(v, list):
        return ("list", shape(v[0]) if v else None)
    return type(v).__name__


def events(url: str, path: str, body: dict) -> list[dict]:
    a = ask(url, path, body)
    assert a.status == 200, a.body[:300]
    text = a.body.decode()
    assert text.rstrip().endswith("data: [DONE]"), text[-300:]
    return [json.loads(b[6:]) for b in text.split("\n\n") if b.startswith("data: ") and b != "data: [DONE]"]


def kind(event: dict) -> str:
    choices = event.get("choices")
    if not choices:
        return "usage"
    c = choices[0]
    if c.get("finish_reason"):
        return "finish"
    delta = c.get("delta", {})
    return "role" if "role" in delta else "token"


def by_kind(evs: list[dict]) -> dict[str, Any]:
    """Each kind of event's shape (every event of one kind must share it)."""
    out: dict[str, Any] = {}
    for e in evs:
        k, s = kind(e), shape(e)
        assert out.setdefault(k, s) == s, f"two shapes of {k} events: {out[k]} / {s}"
    return out


def error_cases(model: str, n_ctx: int) -> dict[str, tuple[str, bytes | dict]]:
    chat = {"model": model, "messages": MSGS, "max_tokens": 4}
    return {
        "malformed JSON": (CHAT, b"{not json"),
        "missing messages": (CHAT, {"model": model, "max_tokens": 2}),
        "messages not a list": (CHAT, {**chat, "messages": "hi"}),
        "negative max_tokens": (CHAT, {**chat, "max_tokens": -5}),
        "temperature not a number": (CHAT, {**chat, "temperature": "hot"}),
        "completion without a prompt": (COMPLETIONS, {"model": model, "max_tokens": 2}),
        "chat prompt past a slot's context": (
            CHAT,
            {**chat, "messages": [{"role": "user", "content": "hello " * n_ctx}]},
        ),
        "completion prompt past a slot's context": (
            COMPLETIONS,
            {"model": model, "prompt": "hello " * n_ctx, "max_tokens": 4},
        ),
    }


def words(message: str) -> str:
    """A message with numbers and what nlohmann::json echoes of the input ("last read: ...") blanked."""
    return re.sub(r"\d+", "N", re.sub(r"; last read: .*", "", message).split(" - ")[0])


def test_bad_requests_get_llamacpps_answers(llamacpp_target, llama_sim, llamacpp_report):
    differ = []
    for name, (path, body) in error_cases(llamacpp_target.model, llamacpp_target.ctx_per_slot).items():
        real, ours = ask(llamacpp_target.url, path, body), ask(llama_sim.url, path, body)
        assert real.error is not None, f"{name}: llama-server's answer is not an error: {real.body[:300]!r}"
        got = (ours.status, (ours.error or {}).get("type"), sorted(ours.error or {}))
        want = (real.status, real.error.get("type"), sorted(real.error))
        llamacpp_report.add(f"error conformance, {name}: llama-server {want[:2]} / sim {got[:2]}")
        real_msg, our_msg = real.error.get("message", ""), (ours.error or {}).get("message", "")
        if got != want or words(real_msg) != words(our_msg):
            differ.append(
                f"{name}: llama-server {want} {real_msg[:200]!r}\n      sim {got} {our_msg[:200]!r}"
            )
    assert not differ, "\n".join(differ)


def test_unknown_model_and_path_are_answered_alike(llamacpp_target, llama_sim):
    body = {"model": "no-such-model", "messages": MSGS, "max_tokens": 2, **NO_THINKING}
    real, ours = ask(llamacpp_target.url, CHAT, body), ask(llama_sim.url, CHAT, body)
    assert real.status == ours.status == 200
    assert json.loads(real.body)["model"] == json.loads(ours.body)["model"] == llamacpp_target.model
    real, ours = ask(llamacpp_target.url, "/v1/no-such-path", {}), ask(llama_sim.url, "/v1/no-such-path", {})
    assert (real.status, real.error) == (ours.status, ours.error) == (404, real.error)


@pytest.mark.parametrize(
    ("path", "extra"),
    [
        (CHAT, {"stream_options": {"include_usage": True}}),
        (CHAT, {}),
        (CHAT, {"chat_template_kwargs": {"enable_thinking": True}}),
        (COMPLETIONS, {"stream_options": {"include_usage": True}}),
        (COMPLETIONS, {}),
    ],
    ids=["chat+usage", "chat", "chat+thinking", "completions+usage", "completions"],
)
def test_stream_events_have_llamacpps_shapes(llamacpp_target, llama_sim, llamacpp_report, path, extra):
    body: dict[str, Any] = {
        "model": llamacpp_target.model,
        "max_tokens": 12,
        "ignore_eos": True,
        "stream": True,
    }
    body.update(extra)
    if path == CHAT:
        body = {"messages": MSGS, **NO_THINKING, **body}  # (extra may turn thinking on)
    else:
        body["prompt"] = "Explain prefix caching."
    real = events(llamacpp_target.url, path, body)
    ours = events(llama_sim.url, path, body)
    real_kinds, our_kinds = by_kind(real), by_kind(ours)
    llamacpp_report.add(
        f"stream conformance {path} {extra or ''}: llama-server {len(real)} events {[kind(e) for e in real][:4]}..."
        f"{[kind(e) for e in real][-2:]}, sim {len(ours)} events"
    )
    # llama-server drops the role event when the first token ends inside a UTF-8 character (the
    # simulator too): the other kinds must match, and the role event's shape where both sent one
    if "role" not in real_kinds or "role" not in our_kinds:
        real_kinds.pop("role", None)
        our_kinds.pop("role", None)
    assert list(real_kinds) == list(our_kinds)  # the same kinds, in the same order of first appearance
    for k in real_kinds:
        assert real_kinds[k] == our_kinds[k], f"{k} events differ:\nreal {real_kinds[k]}\nsim  {our_kinds[k]}"
    assert [kind(e) for e in real][-2:] == [kind(e) for e in ours][-2:]
    for evs in (real, ours):  # the numbers agree with each other as llama.cpp's do
        last = evs[-1]
        if "usage" in last:
            t, u = last["timings"], last["usage"]
            assert u["completion_tokens"] == t["predicted_n"] == 12
            assert u["prompt_tokens"] == t["prompt_n"] + t["cache_n"]


@pytest.mark.parametrize("path", [CHAT, COMPLETIONS])
def test_whole_bodies_have_llamacpps_shape(llamacpp_target, llama_sim, path):
    body: dict[str, Any] = {"model": llamacpp_target.model, "max_tokens": 6, "ignore_eos": True}
    if path == CHAT:
        body.update(messages=MSGS, **NO_THINKING)
    else:
        body["prompt"] = "Explain prefix caching."
    real, ours = ask(llamacpp_target.url, path, body), ask(llama_sim.url, path, body)
    assert real.status == ours.status == 200
    assert shape(json.loads(real.body)) == shape(json.loads(ours.body))


def families(text: str) -> dict[str, str]:
    return {f.name: f.type for f in text_string_to_metric_families(text)}


def test_metrics_have_llamacpps_families(llamacpp_target, llama_sim, llamacpp_report):
    real = families(llamacpp_target.get("/metrics").decode())
    ours = families(llama_sim.get("/metrics").decode())
    llamacpp_report.add(
        f"/metrics: llama-server {len(real)} families, sim {len(ours)}; only real: {sorted(set(real) - set(ours))}"
    )
    assert ours == {name: real[name] for name in ours}, (
        "a family the simulator exposes differs from llama.cpp's"
    )
    read = {n for names in (*LLAMACPP.counters.values(), *LLAMACPP.gauges.values()) for n in names}
    read.add(LLAMACPP.cached)
    for name in read:
        base = name.removesuffix("_total")
        if base in real or name in real:  # (what this llama.cpp build has of all the swarm can read)
            assert base in ours or name in ours, f"{name}: llama-server has it, the simulator does not"


def test_models_tokenize_and_template_have_llamacpps_shapes(llamacpp_target, llama_sim):
    from swarm.client.dialects import detect_dialect

    real = json.loads(llamacpp_target.get("/v1/models"))
    ours = json.loads(llama_sim.get("/v1/models"))
    assert list(real) == list(ours)
    assert [k for k in real["data"][0]] == [k for k in ours["data"][0]]
    assert detect_dialect(real) == detect_dialect(ours) == "llamacpp"
    for url in (llamacpp_target.url, llama_sim.url):
        prompt = json.loads(ask(url, "/apply-template", {"messages": MSGS, **NO_THINKING}).body)["prompt"]
        tokens = json.loads(ask(url, "/tokenize", {"content": prompt, "add_special": False}).body)["tokens"]
        pieces = json.loads(ask(url, "/tokenize", {"content": "hello", "with_pieces": True}).body)["tokens"]
        assert all(set(p) == {"id", "piece"} for p in pieces)
        body = {"model": llamacpp_target.model, "messages": MSGS, "max_tokens": 2, **NO_THINKING}
        assert json.loads(ask(url, CHAT, body).body)["usage"]["prompt_tokens"] == len(tokens), url


def test_both_close_the_connection_after_a_streamed_answer(llamacpp_target, llama_sim):
    body = json.dumps({"messages": MSGS, "max_tokens": 2, "stream": True, **NO_THINKING})
    for url in (llamacpp_target.url, llama_sim.url):
        u = urlparse(url)
        conn = http.client.HTTPConnection(u.hostname, u.port, timeout=60)
        try:
            conn.request("POST", CHAT, body, {"Content-Type": "application/json"})
            r = conn.getresponse()
            r.read()
            assert r.getheader("Keep-Alive") == "timeout=5, max=100"
            with pytest.raises((http.client.RemoteDisconnected, ConnectionError)):
                conn.request("POST", CHAT, body, {"Content-Type": "application/json"})
                conn.getresponse().read()
        finally:
            conn.close()
