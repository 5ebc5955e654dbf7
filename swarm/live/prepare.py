"""Before the load starts, in each worker (or a local runner): build the prompts that need a tokenizer.

Workloads with `needs_tokenizer` (synthetic) count tokens while they build their prompts, with the
tokenizer `--tokenizer` names (swarm/client/tokenize.py): the target's own over HTTP, a local one,
or the pseudo-tokenizer. This runs on Locust's `test_start`, which a worker fires before it spawns
its users, so no request waits on it and nothing is tokenized on the request path. The master
builds nothing; it draws the run's seed when none was given, and Locust hands it to the workers
with the spawn message, so every worker builds the same shared prefixes.
"""

from __future__ import annotations

import logging
import random
from typing import Any
from urllib.parse import urlsplit

import orjson
from locust.runners import MasterRunner, WorkerRunner

from swarm.client.discovery import discover, require_model_served
from swarm.client.tokenize import Http, open_tokenizer
from swarm.core.errors import UsageError
from swarm.core.tokenizer import Tokenizer
from swarm.core.urls import endpoint_label, split_hosts
from swarm.live.keyorigin import key_for
from swarm.live.state import swarm_state

log = logging.getLogger(__name__)


def draw_seed(environment: Any) -> None:
    """Master / local runner: a seed for this test when the user gave none (workers get the master's)."""
    parsed = getattr(environment, "parsed_options", None)
    if parsed is None or isinstance(environment.runner, WorkerRunner):
        return
    state = swarm_state(environment)
    if state.seed_given is None:
        state.seed_given = getattr(parsed, "seed", None) is not None
    if not state.seed_given:
        parsed.seed = random.SystemRandom().getrandbits(31)


def endpoint_hosts(environment: Any, class_host: str) -> tuple[str, ...]:
    """The endpoints' base URLs: `--host` (or the user class's host) split (swarm/core/urls.py)."""
    host = getattr(environment, "host", None) or class_host
    return split_hosts(host) if host else ()


def target_base(host: str) -> tuple[str | None, str]:
    """One endpoint -> (scheme://host:port without credentials, or None; path prefix without /v1)."""
    parts = urlsplit(host)
    prefix = parts.path.rstrip("/")
    prefix = prefix[:-3] if prefix.endswith("/v1") else prefix
    return (f"{parts.scheme}://{parts.netloc.rpartition('@')[2]}" if parts.netloc else None), prefix


def check_models(environment: Any, user_classes: list[type]) -> None:
    """With `--model a:3,b:1`: every model of the split is served (UsageError naming what is), and
    the discovery is kept for the users; with one `--model` on a vLLM, that it is listed. At every
    endpoint (`--host URL1,URL2`). Not on a master."""
    if isinstance(getattr(environment, "runner", None), MasterRunner):
        return
    for host in endpoint_hosts(environment, next((c.host for c in user_classes if c.host), "")):
        _check_models_at(environment, host)


def _check_models_at(environment: Any, host: str) -> None:
    state = swarm_state(environment)
    opts = state.llm_options(environment)
    split = opts.split
    origin, prefix = target_base(host)
    if origin is None:
        return
    http = Http(origin, key_for(environment, origin))
    if split is None:
        if opts.model:  # one model: vLLM must list it (swarm.client.discovery.require_model_served)
            try:
                status, body = http.get(prefix + "/v1/models")
                listed = orjson.loads(body) if status == 200 else None
            except Exception as e:  # no model list: the users' discovery retries and says why
                log.info("GET /v1/models at test start failed (%s): --model %s not checked", e, opts.model)
                return
            if listed is not None:
                require_model_served(listed, (opts.model,), opts.model, split=False)
        return
    served = discover(http.get, prefix, opts.model, opts.dialect, opts.ignore_eos, split.names, str(split))
    if served.discovered:
        state.served_at[endpoint_label(host)] = served


def prompt_tokenizer(environment: Any, class_host: str, wants_eos: bool, what: str) -> Tokenizer:
    """The `--tokenizer` that builds prompts of exact lengths for `what` (the server's when it has one:
    the first endpoint's, with several); UsageError when `what` forces output lengths (`wants_eos`)
    and the target's dialect cannot."""
    opts = swarm_state(environment).llm_options(environment)
    origin, prefix = target_base(next(iter(endpoint_hosts(environment, class_host)), ""))
    base = origin + prefix if origin else None
    model, dialect = opts.model, opts.dialect
    if origin and opts.tokenizer in ("auto", "server"):
        http = Http(origin, key_for(environment, origin))
        served = discover(http.get, prefix, opts.model, opts.dialect, opts.ignore_eos)
        model, dialect = served.model, served.dialect.name
        if wants_eos and served.discovered and not served.dialect.ignore_eos:
            raise UsageError(
                f"the target speaks the {dialect} dialect, which cannot ignore EOS; {what} forces "
                "output lengths with ignore_eos: add --no-ignore-eos to send max_tokens alone"
            )
    key = key_for(environment, origin) if origin else None
    return open_tokenizer(opts.tokenizer, base_url=base, model=model, dialect=dialect, api_key=key)


def prepare_workloads(environment: Any, user_classes: list[type]) -> None:
    """Build the prompts of every workload mix that needs a tokenizer (not on a master)."""
    if isinstance(getattr(environment, "runner", None), MasterRunner):
        return
    state = swarm_state(environment)
    mixes = [(cls, state.mix(environment, cls.workload)) for cls in user_classes]
    mixes = [(cls, mix) for cls, mix in mixes if mix.needs_tokenizer]
    if not mixes:
        return
    opts = state.llm_options(environment)
    wants_eos = any(getattr(w, "ignore_eos", False) for _, mix in mixes for w, _ in mix.items)
    tok = prompt_tokenizer(environment, mixes[0][0].host or "", wants_eos, "synthetic")
    worker = getattr(environment.runner, "worker_index", 0) if environment.runner is not None else 0
    for cls, mix in mixes:
        log.info("building %s prompts (tokenizer %s) ...", opts.workload or cls.workload, tok.name)
        mix.prepare(tok, chat=opts.endpoint == "chat", worker=worker, progress=log.info)
