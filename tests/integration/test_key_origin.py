"""The API key goes to its origin only, on every request `swarm run` makes (docs/security.md, "The
API key goes to one origin"; the rule: swarm/core/apikey.py).

Two recording servers on loopback (tests/helpers/fault_servers.py `recording`: each request's path and a
digest of its Authorization header logged) and one short `swarm run` per case, with every request
kind it makes: the model check before the run and the workers' discovery (GET /v1/models), the load
(POST /v1/chat/completions), the /metrics scrapes, and `--tokenizer server` (POST /tokenize, for the
synthetic workload's prompts). Origin by origin, the key is in the header there only when that
origin is the key's.
"""

from __future__ import annotations

import os
import secrets
import string
import subprocess
from pathlib import Path

import pytest

from tests.helpers.fault_servers import auth_digest, auths, fault_server
from tests.helpers.support import swarm_cmd

# serial: its servers answer at once, so its runs saturate both cores for seconds, and the parallel
# tier's short runs beside it got no answer (fresh-clone CI runs ci17 and ci19: 0 records in 2-4 s)
pytestmark = [pytest.mark.integration, pytest.mark.serial]

RUN = ["--workers", "1", "-u", "2", "-t", "2s", "--stop-timeout", "1s", "--workload", "synthetic"]
LOCUST = ["--", "--tokenizer", "server", "--max-tokens", "4", "--input-tokens", "40"]
KINDS = {"/v1/models", "/v1/chat/completions", "/metrics", "/tokenize"}  # every request kind of a run


def key() -> str:
    return "sk-" + "".join(secrets.choice(string.ascii_letters + string.digits) for _ in range(32))


def run(tmp_path: Path, args: list[str], env: dict[str, str]) -> None:
    clean = {k: v for k, v in os.environ.items() if k not in ("OPENAI_API_KEY", "SWARM_API_KEY_ORIGIN")}
    out = tmp_path / "run"
    p = subprocess.run(
        swarm_cmd("run", *args, *RUN, "--out", str(out), *LOCUST),
        env={**clean, "PYTHONUNBUFFERED": "1", **env},
        capture_output=True,
        text=True,
        timeout=90,
    )
    assert p.returncode == 0, (p.stdout + p.stderr)[-3000:]


def seen(log: Path) -> dict[str, set[str]]:
    """path (without its query) -> the Authorization digests the server got there."""
    by_path: dict[str, set[str]] = {}
    for path, digest in auths(log):
        by_path.setdefault(path.split("?")[0], set()).add(digest)
    return by_path


def test_a_key_bound_elsewhere_never_reaches_the_target(tmp_path):
    """`--host A` with OPENAI_API_KEY and SWARM_API_KEY_ORIGIN=B (the environment's form): A gets
    the model check, discovery, load, tokenizer and (its own /metrics) scrapes without any key; B,
    scraped as --server-metrics, gets the key."""
    secret = key()
    with fault_server(tmp_path, "recording") as (a, a_log), fault_server(tmp_path, "recording") as (b, b_log):
        run(
            tmp_path,
            ["--host", a, "--server-metrics", f"{b}/metrics"],
            {"OPENAI_API_KEY": secret, "SWARM_API_KEY_ORIGIN": b},
        )
    at_a, at_b = seen(a_log), seen(b_log)
    assert KINDS - {"/metrics"} <= set(at_a), at_a
    assert {d for digests in at_a.values() for d in digests} == {"-"}, at_a  # no key at A, any kind
    assert at_b.get("/metrics") == {auth_digest(f"Bearer {secret}")}, at_b  # the key's own origin


def test_with_two_endpoints_the_key_goes_to_the_one_named(tmp_path):
    """`--host A,B --api-key-origin A --api-key K` (the flags' form): A gets the key on the model
    check, discovery, load, tokenizer and its scrapes; B gets every one of its requests without it."""
    secret = key()
    with fault_server(tmp_path, "recording") as (a, a_log), fault_server(tmp_path, "recording") as (b, b_log):
        run(tmp_path, ["--host", f"{a},{b}", "--api-key", secret, "--api-key-origin", a], {})
    at_a, at_b = seen(a_log), seen(b_log)
    assert set(at_a) >= KINDS and set(at_b) >= KINDS - {"/tokenize"}, (at_a, at_b)  # the tokenizer: A's
    bearer = auth_digest(f"Bearer {secret}")
    assert all(at_a[kind] == {bearer} for kind in KINDS), at_a
    assert {d for digests in at_b.values() for d in digests} == {"-"}, at_b
