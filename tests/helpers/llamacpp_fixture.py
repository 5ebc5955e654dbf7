"""A real llama.cpp for the e2e tests: `llama-server` built here with the tiny GGUF model, once per session.

`llamacpp_target` (session scope) builds llama-server when needed (scripts/llama-server-build.sh:
about 23 minutes the first time on a 2-core machine, then a check of well under a second; `make
test` runs it before pytest as `make llama-server`, since a cold build inside the fixture would
run into the test's timeout), makes the tiny GGUF
(scripts/make_tiny_gguf.py, seconds, once), starts `swarm.orchestrate.llamacpp.llamacpp_server`
on a free loopback port with SLOTS slots and stops it at the end of the session. A build or
start-up failure FAILS the tests that use it, with the builder's output or the server's log tail.

tests/e2e/conftest.py imports `llamacpp_target_fixture` and `llamacpp_report_fixture`; a test
module must not import them itself. The report is printed in pytest's terminal summary
(section "real llama.cpp reconciliation") whether the tests pass or fail.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import pytest

from swarm.orchestrate.llamacpp import LlamaBuild
from tests.helpers.support import free_port
from tests.helpers.vllm_fixture import RealTarget, Report, or_fail

SLOTS = 2  # below the sweep's top stage: the rest are deferred
CTX_SIZE = 4096  # all slots together: 2048 tokens each


@dataclass
class LlamaTarget(RealTarget):
    build: LlamaBuild | None = None
    ctx_per_slot: int = CTX_SIZE // SLOTS


@pytest.fixture(scope="session", name="llamacpp_report")
def llamacpp_report_fixture(request) -> Report:
    report = Report(title="real llama.cpp reconciliation")
    request.config.pluginmanager.register(report, "llm-swarm-llamacpp-report")
    return report


@pytest.fixture(scope="session", name="llamacpp_target")
def llamacpp_target_fixture(tmp_path_factory, llamacpp_report):
    from swarm.orchestrate.llamacpp import ensure_llama_server, ensure_tiny_gguf, llamacpp_server

    t0 = time.monotonic()
    build = or_fail("llama-server could not be built", ensure_llama_server, quiet=True)
    model = or_fail("the tiny GGUF could not be made", ensure_tiny_gguf, build)
    ready_s = time.monotonic() - t0
    log = tmp_path_factory.mktemp("llamacpp") / "llama-server.log"
    server = llamacpp_server(free_port(), log, build=build, model=model, parallel=SLOTS, ctx_size=CTX_SIZE)
    srv = or_fail("llama-server did not start", server.__enter__)
    built = "" if build.build_s is None else f" (its build took {build.build_s:.0f} s)"
    llamacpp_report.add(
        f"target: llama-server {build.server} at {srv.url}, model {srv.model} ({model}), {SLOTS} slots, "
        f"ctx-size {CTX_SIZE}; binary and model ready in {ready_s:.0f} s{built}, server up in "
        f"{srv.startup_s:.1f} s; log {log}"
    )
    try:
        yield LlamaTarget(
            srv.url, srv.model, cpu=True, startup_s=srv.startup_s, log=log, max_num_seqs=SLOTS, build=build
        )
    finally:
        server.__exit__(None, None, None)
