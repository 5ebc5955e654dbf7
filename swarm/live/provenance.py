"""The run's provenance gathered on the master (or a local runner), once per test: the edge that
reads what swarm/stats/provenance.py puts together.

At a test's start (`RunProvenance.start`, in a greenlet, after every `test_start` listener, so the
seed the master drew is there) it reads the swarm's version and commit, the load machine, the
options as resolved, the workload files' SHA-256 (in gevent's thread pool: a large trace does not
stall the master's loop) and what each endpoint says about itself (swarm/client/server_info.py:
a few GETs, each bounded by TARGET_TIMEOUT_S). It never fails the run: what does not answer is
"unknown". Workers never read any of it. At the summary (`block`) it adds the workers' hosts and
the GPUs the GPU metrics named (the first scrape swarm run's poller wrote to gpu_metrics.jsonl).
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import logging
import os
import platform
import socket
import subprocess
from pathlib import Path
from typing import Any

import gevent

from swarm.client.server_info import read_target, target_facts
from swarm.client.tokenize import Http
from swarm.core.options import OPTIONS
from swarm.core.runfiles import GPU_METRICS
from swarm.core.urls import endpoint_label
from swarm.live.keyorigin import key_for
from swarm.live.prepare import endpoint_hosts, target_base
from swarm.live.state import run_settings
from swarm.stats import provenance
from swarm.stats.provenance import UNKNOWN, Provenance

log = logging.getLogger(__name__)

TARGET_TIMEOUT_S = 2.0  # each GET of a target's self-description
GIT_TIMEOUT_S = 2.0
WAIT_AT_END_S = 3.0  # how long the final summary waits for a gathering still under way
GPU_LINE_MAX = 1 << 20  # bytes of gpu_metrics.jsonl's first line read
SECRET_DESTS = tuple(o.dest for o in OPTIONS if o.secret)
TABLE_DESTS = tuple(o.dest for o in OPTIONS)


class RunProvenance:
    """This test's provenance: started at test start, read at every summary and /metrics scrape."""

    def __init__(self, environment: Any) -> None:
        self.environment = environment
        self.facts: dict[str, Any] = {}  # filled in as the gathering goes
        self._job: Any = None

    def start(self) -> None:
        if self._job is not None:
            self._job.kill(block=False)
        self.facts = {}
        self._job = gevent.spawn(self._gather)

    def wait(self, timeout: float = WAIT_AT_END_S) -> None:
        if self._job is not None:
            self._job.join(timeout=timeout)

    def _gather(self) -> None:
        try:
            gather(self.environment, self.facts)
        except Exception:  # provenance never takes the run down
            log.exception("swarm: the run's provenance could not be gathered in full")

    def block(self, worker_ids: list[str], out_dir: Path | None, local: bool) -> Provenance:
        f = self.facts
        hosts = [socket.gethostname()] if local else provenance.worker_hosts(worker_ids)
        return provenance.build(
            swarm=f.get("swarm") or {"version": UNKNOWN, "commit": UNKNOWN},
            options=f.get("options") or {},
            machine=f.get("machine") or {},
            workers=hosts,
            targets=f.get("targets") or {},
            target_command=f.get("target_command"),
            gpus=first_gpus(out_dir / GPU_METRICS) if out_dir is not None else [],
            files=f.get("files") or {},
            seed=f.get("seed"),
            secrets=f.get("secrets") or (),
        )

    def run_info(self) -> dict[str, str]:
        return provenance.run_info_labels(self.block([], None, local=True) if self.facts else None)


def gather(environment: Any, into: dict[str, Any]) -> None:
    """Every fact read at the test's start into `into`, the quick local ones first."""
    settings = run_settings(environment)
    key = settings.llm.api_key
    secrets = (key,) if key else ()
    into["secrets"] = secrets
    parsed = getattr(environment, "parsed_options", None)
    values = vars(parsed) if parsed is not None else {}
    into["options"] = provenance.resolved_options(values, SECRET_DESTS, secrets, TABLE_DESTS)
    into["seed"] = values.get("seed")
    into["target_command"] = values.get("target_command") or None
    into["swarm"] = swarm_version()
    into["machine"] = machine()
    paths = provenance.file_paths(values)
    into["files"] = gevent.get_hub().threadpool.apply(file_checksums, (paths,)) if paths else {}
    targets: dict[str, Any] = {}
    into["targets"] = targets
    classes = getattr(environment, "user_classes", None) or []
    for host in endpoint_hosts(environment, next((c.host for c in classes if c.host), "")):
        origin, prefix = target_base(host)
        if origin is None:
            continue
        http = Http(origin, key_for(environment, origin), timeout=TARGET_TIMEOUT_S)
        family, answers = read_target(http.get, prefix, settings.llm.dialect)
        model = settings.llm.model if settings.llm.split is None else None
        targets[endpoint_label(host)] = target_facts(family, answers, model)


def swarm_version() -> dict[str, Any]:
    """The installed swarm's version; the commit (and whether files differ from it) of the checkout
    the running code is in, when it is one."""
    try:
        version = importlib.metadata.version("llm-swarm")
    except importlib.metadata.PackageNotFoundError:
        version = UNKNOWN
    out: dict[str, Any] = {"version": version, "commit": UNKNOWN}
    root = Path(__file__).resolve().parents[2]
    if not (root / ".git").exists():
        return out
    try:
        commit = _git(root, "rev-parse", "HEAD")
        dirty = _git(root, "status", "--porcelain", "--untracked-files=no")
    except (OSError, subprocess.SubprocessError):
        return out
    return {**out, "commit": commit or UNKNOWN, "dirty": bool(dirty)}


def _git(root: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", "-C", str(root), *args], capture_output=True, text=True, timeout=GIT_TIMEOUT_S, check=True
    )
    return done.stdout.strip()


def machine() -> dict[str, Any]:
    """The load machine (the master's; the workers' hosts are named apart)."""
    try:
        memory: Any = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        memory = UNKNOWN
    return {
        "hostname": socket.gethostname(),
        "cpu_model": cpu_model(),
        "cores": os.cpu_count() or UNKNOWN,
        "memory_bytes": memory,
        "os": platform.platform(),
        "python": f"{platform.python_implementation()} {platform.python_version()}",
    }


def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.partition(":")[2].strip() or UNKNOWN
    except OSError:
        pass
    return platform.processor() or UNKNOWN


def file_checksums(paths: dict[str, str]) -> dict[str, dict[str, Any]]:
    """option -> {path, sha256 (UNKNOWN for what is not a readable file, a directory saying so)}."""
    out: dict[str, dict[str, Any]] = {}
    for name, path in paths.items():
        p = Path(path)
        entry: dict[str, Any] = {"path": path, "sha256": UNKNOWN}
        if p.is_dir():
            entry["note"] = "a directory: not summed"
        else:
            try:
                digest = hashlib.sha256()
                with p.open("rb") as f:
                    for chunk in iter(lambda: f.read(1 << 20), b""):
                        digest.update(chunk)
                entry["sha256"] = digest.hexdigest()
            except OSError as e:
                entry["note"] = f"not read: {e.strerror or e}"
        out[name] = entry
    return out


def first_gpus(path: Path) -> list[dict[str, Any]]:
    """The GPUs of the first scrape in gpu_metrics.jsonl (host, gpu, uuid, model); [] without one."""
    try:
        with path.open("rb") as f:
            line = f.readline(GPU_LINE_MAX)
        gpus = json.loads(line).get("gpus") or []
        return [{k: g.get(k) for k in ("host", "gpu", "uuid", "model")} for g in gpus if isinstance(g, dict)]
    except (OSError, ValueError, AttributeError):
        return []
