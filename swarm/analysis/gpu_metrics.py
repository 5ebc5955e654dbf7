"""GPU telemetry from NVIDIA's dcgm-exporter: scrape its /metrics, normalise per GPU, aggregate per stage.

`swarm run --gpu-metrics URL` (repeatable, or comma-separated: one exporter per host) polls each
exporter beside the target's /metrics (swarm/orchestrate/pollers.py `GpuPoller`, `ServerPoller`'s
thread and interval) into `DIR/gpu_metrics.jsonl`, one line per scrape per exporter.

dcgm-exporter's documented series (default counters CSV) and what a `GpuReading` keeps:

| field | series | unit |
|---|---|---|
| util | DCGM_FI_DEV_GPU_UTIL | % -> fraction |
| sm_active | DCGM_FI_PROF_SM_ACTIVE (custom counters CSV), else DCGM_FI_PROF_GR_ENGINE_ACTIVE | ratio |
| fb_used_mib / fb_free_mib | DCGM_FI_DEV_FB_USED / DCGM_FI_DEV_FB_FREE | MiB |
| power_w | DCGM_FI_DEV_POWER_USAGE | W |
| temp_c | DCGM_FI_DEV_GPU_TEMP | degrees C |

One GPU is named by its exporter's `Hostname` label (lower-case `hostname` on dcgm-exporter's main;
the URL's host when neither is there) and its `gpu` index; `UUID` and `modelName` ride along. On
Kubernetes the `pod`/`namespace`/`container` labels say which workload holds the GPU: kept as `pod`.

Pure functions: `parse_dcgm` (text -> `GpuSnapshot`), `gpu_stage_stats` (snapshots + stage windows
-> per-stage, per-GPU means and maxima); the scrapes themselves are swarm/orchestrate/pollers.py's.
"""

from __future__ import annotations

import json
import math
import urllib.parse
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

# field -> (series, preferred first; scale to the field's unit)
SERIES: dict[str, tuple[tuple[str, float], ...]] = {
    "util": (("DCGM_FI_DEV_GPU_UTIL", 0.01),),
    "sm_active": (("DCGM_FI_PROF_SM_ACTIVE", 1.0), ("DCGM_FI_PROF_GR_ENGINE_ACTIVE", 1.0)),
    "fb_used_mib": (("DCGM_FI_DEV_FB_USED", 1.0),),
    "fb_free_mib": (("DCGM_FI_DEV_FB_FREE", 1.0),),
    "power_w": (("DCGM_FI_DEV_POWER_USAGE", 1.0),),
    "temp_c": (("DCGM_FI_DEV_GPU_TEMP", 1.0),),
}
READINGS = tuple(SERIES)


@dataclass
class GpuReading:
    """One GPU in one scrape. None = the exporter does not expose that series."""

    host: str
    gpu: str
    uuid: str | None = None
    model: str | None = None
    pod: str | None = None
    util: float | None = None  # 0-1
    sm_active: float | None = None  # 0-1
    fb_used_mib: float | None = None
    fb_free_mib: float | None = None
    power_w: float | None = None
    temp_c: float | None = None

    @property
    def name(self) -> str:
        return f"{self.host} gpu {self.gpu}"

    def to_json(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in self.__dataclass_fields__}


@dataclass
class GpuSnapshot:
    """One scrape of one exporter."""

    ts: float
    url: str
    gpus: list[GpuReading] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {"ts": self.ts, "url": self.url, "gpus": [g.to_json() for g in self.gpus]}

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> GpuSnapshot:
        gpus = []
        for g in d.get("gpus") or []:
            known = {k: g.get(k) for k in GpuReading.__dataclass_fields__ if k in g}
            gpus.append(GpuReading(**known))
        return cls(ts=float(d["ts"]), url=str(d.get("url", "")), gpus=gpus)


def url_host(url: str) -> str:
    """The host part of an exporter URL: the GPU's host when the exporter names none."""
    return urllib.parse.urlsplit(url).hostname or url


def parse_dcgm(text: str, ts: float, url: str = "") -> GpuSnapshot:
    """dcgm-exporter's Prometheus text -> one reading per GPU. ValueError: not Prometheus text, or
    no DCGM_FI_* GPU series in it."""
    from prometheus_client.parser import text_string_to_metric_families

    wanted = {name: (fieldname, scale) for fieldname, cands in SERIES.items() for name, scale in cands}
    rank = {name: i for cands in SERIES.values() for i, (name, _) in enumerate(cands)}
    gpus: dict[tuple[str, str], GpuReading] = {}
    chosen: dict[tuple[tuple[str, str], str], int] = {}  # (gpu, field) -> rank of the series used
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            if s.name not in wanted or "gpu" not in s.labels or math.isnan(s.value):
                continue
            lab = s.labels
            host = lab.get("Hostname") or lab.get("hostname") or url_host(url)
            key = (host, lab["gpu"])
            g = gpus.get(key)
            if g is None:
                g = gpus[key] = GpuReading(host, lab["gpu"], lab.get("UUID"), lab.get("modelName"))
            g.pod = g.pod or lab.get("pod") or None
            fieldname, scale = wanted[s.name]
            r = rank[s.name]
            if chosen.get((key, fieldname), len(rank)) < r:
                continue  # a preferred series already gave this field
            chosen[(key, fieldname)] = r
            setattr(g, fieldname, float(s.value) * scale)
    if not gpus:
        raise ValueError("no dcgm-exporter GPU series (DCGM_FI_*{gpu=...}) in it")
    return GpuSnapshot(ts, url, sorted(gpus.values(), key=lambda g: (g.host, _index(g.gpu))))


def _index(gpu: str) -> tuple[int, str]:
    return (int(gpu), "") if gpu.isdigit() else (1 << 30, gpu)


def read_gpu_snapshots(path: Path) -> list[GpuSnapshot]:
    """`gpu_metrics.jsonl` -> snapshots (a torn last line from a killed run is skipped)."""
    out: list[GpuSnapshot] = []
    if not Path(path).exists():
        return out
    for line in Path(path).read_text().splitlines():
        try:
            out.append(GpuSnapshot.from_json(json.loads(line)))
        except (ValueError, KeyError, TypeError):
            continue
    return out


# ---------------------------------------------------------------------------------------- per stage


@dataclass
class GpuWindow:
    """One GPU over one stage window: means and maxima of the scrapes inside it."""

    host: str
    gpu: str
    uuid: str | None = None
    model: str | None = None
    samples: int = 0
    util_mean: float | None = None
    util_max: float | None = None
    sm_active_mean: float | None = None
    fb_used_max_mib: float | None = None
    fb_total_mib: float | None = None  # used + free at the scrape of the maximum
    power_mean_w: float | None = None
    power_max_w: float | None = None
    temp_max_c: float | None = None

    @property
    def name(self) -> str:
        return f"{self.host} gpu {self.gpu}"

    def to_json(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in self.__dataclass_fields__}


def _mean(values: list[float]) -> float | None:
    return math.fsum(values) / len(values) if values else None


def gpu_window(readings: Sequence[GpuReading]) -> GpuWindow:
    """Means/maxima of one GPU's readings (non-empty, same GPU)."""
    first = readings[0]
    out = GpuWindow(first.host, first.gpu, first.uuid, first.model, samples=len(readings))

    def vals(attr: str) -> list[float]:
        return [v for r in readings if (v := getattr(r, attr)) is not None]

    util, power = vals("util"), vals("power_w")
    out.util_mean, out.util_max = _mean(util), max(util, default=None)
    out.sm_active_mean = _mean(vals("sm_active"))
    out.power_mean_w, out.power_max_w = _mean(power), max(power, default=None)
    out.temp_max_c = max(vals("temp_c"), default=None)
    used = [r for r in readings if r.fb_used_mib is not None]
    if used:
        top = max(used, key=lambda r: r.fb_used_mib or 0.0)
        out.fb_used_max_mib = top.fb_used_mib
        if top.fb_free_mib is not None:
            out.fb_total_mib = (top.fb_used_mib or 0.0) + top.fb_free_mib
    return out


def gpu_stage_stats(
    snapshots: Iterable[GpuSnapshot], windows: Iterable[tuple[int, float, float]]
) -> dict[int, list[GpuWindow]]:
    """Per stage (index, start wall s, end wall s: scrapes in [start, end)), one `GpuWindow` per GPU
    seen, ordered by host and index. A stage without scrapes maps to []."""
    snaps = sorted(snapshots, key=lambda s: s.ts)
    out: dict[int, list[GpuWindow]] = {}
    for stage, start, end in windows:
        per_gpu: dict[tuple[str, str], list[GpuReading]] = {}
        for snap in snaps:
            if start <= snap.ts < end:
                for g in snap.gpus:
                    per_gpu.setdefault((g.host, g.gpu), []).append(g)
        out[stage] = [
            gpu_window(rs) for _, rs in sorted(per_gpu.items(), key=lambda kv: (kv[0][0], _index(kv[0][1])))
        ]
    return out
