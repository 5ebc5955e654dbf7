"""The run-time pollers: plain threads (no gevent) that scrape the target's /metrics and each
dcgm-exporter during `swarm run`, one JSON line per scrape into the run directory.

`ServerPoller` writes `DIR/server_metrics.jsonl` (parsed by swarm/analysis/server_metrics.py),
`GpuPoller` / `start_gpu_pollers` write `DIR/gpu_metrics.jsonl` (swarm/analysis/gpu_metrics.py).
The parsing and the per-stage statistics are analysis/'s; the threads and the HTTP are here.
"""

from __future__ import annotations

import json
import sys
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from swarm.analysis.gpu_metrics import GpuSnapshot, parse_dcgm
from swarm.analysis.server_metrics import ServerSnapshot, unobservable_path
from swarm.analysis.server_parse import parse_metrics
from swarm.core.apikey import NO_KEY, BoundKey
from swarm.core.runfiles import GPU_METRICS
from swarm.core.server_families import family as family_of
from swarm.core.terminal import printable


class FamilyMismatch(ValueError):
    """A scrape with none of the forced family's names (`swarm run --server-family`)."""


class JsonMetrics(ValueError):
    """A JSON /metrics (TensorRT-LLM's iteration stats): its Prometheus text is at /prometheus/metrics."""


TRTLLM_PROMETHEUS_PATH = "/prometheus/metrics"
MAX_SCRAPE_BYTES = 16 * 2**20
"""The most one scrape may send: a vLLM /metrics is some 100 KB (a few per model and engine), and a
larger body is read no further (at most this + 1 bytes, so a runaway or hostile /metrics costs
neither the run's memory nor its time) and dropped, said once."""


class ServerPoller:
    """Scrapes `url` every `interval_s` in a plain thread, one JSON line per scrape into `out_path`.

    `start()` returns at once; `stop()` takes a last scrape (so counters cover the run's end),
    then joins. A target without /metrics (404, connection refused, not Prometheus text, a JSON
    list as TensorRT-LLM's /metrics) is said once through `log` ("server side not observable
    (<reason>): ...") and written beside the JSONL (`<stem>_unobservable.txt`) for the diagnosis;
    the run goes on and later scrapes keep trying quietly. A server that was scraped and then stops
    answering (it went down mid-run) is not unobservable: that is its own once-said line, and the
    scrapes it gave stay the diagnosis' evidence. `samples` counts the lines written,
    `error` holds the first failure. The first good scrape's raw text is kept beside the JSONL as
    `<stem>_sample.txt` for checking metric names.

    A JSON `/metrics` (TensorRT-LLM's iteration stats) under `auto` or `trtllm` moves the poller to
    the same origin's `/prometheus/metrics`, where trtllm-serve writes its Prometheus text, once.

    `family` (`swarm run --server-family`): `auto` detects the server's family from the names; a
    family's name reads every scrape with that family's names, and a scrape holding none of them
    is a failure like the others (one line naming the family the names look like), never a
    snapshot of empty fields; `none` scrapes nothing and says so. Under `auto`, a scrape holding
    the names of several families is read as the first one's and said once (the diagnosis then
    names no server-side cause).

    A scrape of more than `max_bytes` (`MAX_SCRAPE_BYTES`) is dropped unread, said once
    (`oversized` counts them).
    """

    def __init__(
        self,
        url: str,
        out_path: Path,
        interval_s: float = 1.0,
        model: str | None = None,
        key: BoundKey = NO_KEY,
        timeout_s: float = 5.0,
        log: Callable[[str], None] | None = None,
        family: str = "auto",
        max_bytes: int = MAX_SCRAPE_BYTES,
    ) -> None:
        self.url = url
        self.max_bytes = max_bytes
        self.oversized = 0  # scrapes dropped for their size
        self.mixed_said = False
        self.family = family
        self.out_path = Path(out_path)
        self.interval_s = interval_s
        self.model = model
        self.key = key  # Authorization only at the key's origins (swarm/core/apikey.py)
        self.timeout_s = timeout_s
        self.log = log or (lambda msg: print(msg, file=sys.stderr, flush=True))
        self.samples = 0
        self.error: str | None = None
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._loop, name="server-metrics", daemon=True)
        self.sample_path = self.out_path.with_name(self.out_path.stem + "_sample.txt")

    what = "server metrics"  # in the once-said failure line

    def parse(self, text: str, ts: float) -> Any:
        """One scrape's text -> the snapshot written (anything with `to_json`). ValueError: unusable."""
        if text.lstrip().startswith(("[", "{")):
            raise JsonMetrics(
                "JSON, not Prometheus text: TensorRT-LLM serves its Prometheus metrics at "
                "/prometheus/metrics with return_perf_metrics on (or give --server-metrics URL)"
            )
        snap = parse_metrics(text, ts=ts, model=self.model, family=self.family)
        if snap.source == "unknown":
            raise ValueError("none of the vLLM, llama.cpp, SGLang, TGI or TensorRT-LLM metric names in it")
        if self.family != "auto" and _empty(snap):
            seen = parse_metrics(text, ts=ts).source
            looks = f"the names are {seen}'s" if seen != "unknown" else "the names are of no known family"
            title = family_of(self.family).title
            raise FamilyMismatch(f"--server-family {self.family}: none of {title}'s metric names, {looks},")
        if snap.families and not self.mixed_said:
            self.mixed_said = True
            titles = " and ".join(family_of(f).title for f in snap.families)
            self.log(
                f"swarm: {self.what} at {self.url} hold the metric names of {titles}: read as "
                f"{family_of(snap.source).title}'s (the first family the names match), and the diagnosis "
                "names no server-side cause from them; give --server-family to choose (said once)"
            )
        return snap

    def start(self) -> ServerPoller:
        self.out_path.parent.mkdir(parents=True, exist_ok=True)
        if self.family == "none":
            self._failed("--server-family none")
            return self
        self._thread.start()
        return self

    def stop(self) -> None:
        if not self._thread.is_alive():
            return
        self._stop.set()
        self._thread.join(timeout=self.timeout_s + 5)

    def scrape_once(self) -> Any:
        """One scrape; appends it to out_path. None (and one log line, the first time) on failure."""
        req = self.key.request(self.url)
        try:
            with urllib.request.urlopen(req, timeout=self.timeout_s) as r:
                body = r.read(self.max_bytes + 1)
            if len(body) > self.max_bytes:
                return self._too_large()
            text = body.decode("utf-8", errors="replace")
            snap = self.parse(text, time.time())
        except urllib.error.HTTPError as e:
            return self._failed(f"HTTP {e.code}", answered=True)
        except (urllib.error.URLError, OSError) as e:
            return self._failed(str(getattr(e, "reason", e)), answered=False)
        except JsonMetrics as e:
            if self._to_trtllm_prometheus():
                return self.scrape_once()
            return self._failed(f"not usable Prometheus text ({e})", answered=True)
        except FamilyMismatch as e:
            return self._failed(str(e), answered=True)
        except ValueError as e:
            return self._failed(f"not usable Prometheus text ({e})", answered=True)
        with self._lock, open(self.out_path, "a") as out:
            out.write(json.dumps(snap.to_json()) + "\n")
            if self.samples == 0:
                self.sample_path.write_text(text)
                if self.error is not None:  # the first scrapes failed, this one did not
                    self.log(
                        f"swarm: {self.what} at {self.url} answered a usable scrape after all: the "
                        "diagnosis uses the scrapes it could read"
                    )
            self.samples += 1
        return snap

    def _to_trtllm_prometheus(self) -> bool:
        """A JSON /metrics: scrape the origin's /prometheus/metrics instead (once; False: already there)."""
        parts = urllib.parse.urlsplit(self.url)
        if self.family not in ("auto", "trtllm") or parts.path.endswith(TRTLLM_PROMETHEUS_PATH):
            return False
        self.url = urllib.parse.urlunsplit((parts.scheme, parts.netloc, TRTLLM_PROMETHEUS_PATH, "", ""))
        return True

    def _too_large(self) -> None:
        """A scrape over the cap, dropped: said once (and left as the reason the server side was not
        observable, where no scrape was read yet)."""
        self.oversized += 1
        if self.oversized == 1:
            why = f"a scrape of more than {self.max_bytes:,} bytes (the cap per scrape) at {self.url}"
            self.log(
                f"swarm: {self.what}: {why} was dropped unread, as every one that large will be (said once)"
            )
            if self.samples == 0:
                self.leave_reason(why)
        return None

    def leave_reason(self, why: str) -> None:
        """Why the server side was not observable, beside the JSONL for the diagnosis."""
        self.out_path.parent.mkdir(parents=True, exist_ok=True)
        unobservable_path(self.out_path).write_text(why + "\n")

    def _failed(self, reason: str, answered: bool = False) -> None:
        """A failed scrape, said once. `answered`: the server answered, with text that could not be
        used (an HTTP error, not Prometheus text), rather than not at all."""
        reason = printable(reason)  # it may quote the target (a /metrics line, a status line)
        if self.error is None:
            self.error = reason
            self.log(self.failure_line(reason) if self.samples == 0 else self.stopped_line(reason, answered))
        return None

    def stopped_line(self, reason: str, answered: bool = False) -> str:
        """The once-said line of a server that answered scrapes and then stopped (down mid-run), or
        (`answered`) sent one that could not be used: left out, the others kept."""
        if answered:
            return (
                f"swarm: {self.what} at {self.url}: a scrape after {self.samples} usable scrape(s) could not "
                f"be used ({reason}): each such scrape is left out, the others stay in the diagnosis"
            )
        return (
            f"swarm: {self.what} at {self.url} stopped answering after {self.samples} scrapes ({reason}): "
            "the figures after it are missing, the ones before stay in the diagnosis"
        )

    def failure_line(self, reason: str) -> str:
        """The once-said line of the first failure (the server's reason also left for the diagnosis)."""
        why = reason if self.family == "none" else f"{reason} at {self.url}"
        self.leave_reason(why)
        return f"swarm: server side not observable ({why}): the diagnosis uses the client's own signals only"

    def _loop(self) -> None:
        self.scrape_once()
        while not self._stop.wait(self.interval_s):
            self.scrape_once()
        self.scrape_once()


class GpuPoller(ServerPoller):
    """Scrapes one dcgm-exporter into `gpu_metrics.jsonl`, like `ServerPoller` (same loop, same once-said
    failure line). Several exporters share the file through one `lock`."""

    what = "GPU metrics"

    def __init__(self, url: str, out_path: Path, lock: threading.Lock | None = None, **kw: Any) -> None:
        super().__init__(url, out_path, **kw)
        if lock is not None:
            self._lock = lock
        netloc = urllib.parse.urlsplit(url).netloc.replace(":", "_") or "exporter"
        self.sample_path = self.out_path.with_name(f"{self.out_path.stem}_sample_{netloc}.txt")

    def parse(self, text: str, ts: float) -> GpuSnapshot:
        return parse_dcgm(text, ts, self.url)

    def leave_reason(self, why: str) -> None:
        """(The diagnosis reads no reason for the GPUs: the once-said line is all.)"""

    def failure_line(self, reason: str) -> str:
        return (
            f"swarm: {self.what} unavailable at {self.url}: {reason} (said once; the "
            "client-side numbers are still reported)"
        )


def _empty(snap: ServerSnapshot) -> bool:
    """A snapshot with no field, histogram or success count: the scrape held none of its family's names."""
    fields = (snap.running, snap.waiting, snap.kv_usage, snap.prompt_tokens, snap.generation_tokens)
    return all(v is None for v in fields) and not snap.histograms and not snap.request_success


def start_gpu_pollers(urls: Sequence[str], out_dir: Path, interval_s: float = 1.0) -> list[GpuPoller]:
    """One poller per exporter URL, all writing `out_dir/gpu_metrics.jsonl`."""
    lock = threading.Lock()
    return [GpuPoller(u, Path(out_dir) / GPU_METRICS, lock=lock, interval_s=interval_s).start() for u in urls]
