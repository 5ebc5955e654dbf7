"""GPU telemetry (swarm/analysis/gpu_metrics.py, gpu_diagnosis.py): dcgm-exporter text -> per-GPU
readings -> per-stage windows -> findings. The text is the stand-in's (tests/helpers/dcgm_standin.py:
dcgm-exporter's documented names and labels) or written out here."""

from __future__ import annotations

import re

import pytest

from swarm.analysis.finding import Finding, StageRow
from swarm.analysis.gpu_diagnosis import gpu_findings
from swarm.analysis.gpu_metrics import GpuSnapshot, gpu_stage_stats, parse_dcgm
from tests.helpers.dcgm_standin import FB_TOTAL_MIB, MODEL, exposition

URL = "http://10.0.0.7:9400/metrics"


def test_parse_the_documented_series_and_labels():
    snap = parse_dcgm(exposition("gpu-a", [100.0, 0.0], sm_active=True, scrape=1), ts=5.0, url=URL)
    assert [(g.host, g.gpu) for g in snap.gpus] == [("gpu-a", "0"), ("gpu-a", "1")]
    busy, idle = snap.gpus
    assert busy.util == pytest.approx(1.0) and idle.util == pytest.approx(0.0)
    assert busy.sm_active == pytest.approx(0.85)  # SM_ACTIVE preferred over GR_ENGINE_ACTIVE (0.97)
    assert busy.fb_used_mib + busy.fb_free_mib == pytest.approx(FB_TOTAL_MIB, abs=1)
    assert busy.power_w > idle.power_w and busy.temp_c > idle.temp_c
    assert busy.model == MODEL and busy.uuid.startswith("GPU-")
    assert GpuSnapshot.from_json(snap.to_json()) == snap


def test_gr_engine_active_stands_in_for_sm_active_and_order_does_not_matter():
    text = (
        'DCGM_FI_PROF_GR_ENGINE_ACTIVE{gpu="0",hostname="n1"} 0.5\n'
        'DCGM_FI_PROF_SM_ACTIVE{gpu="0",hostname="n1"} 0.25\n'
        'DCGM_FI_PROF_GR_ENGINE_ACTIVE{gpu="1",hostname="n1"} 0.75\n'
    )
    g0, g1 = parse_dcgm(text, 0.0, URL).gpus
    assert g0.host == "n1"  # lower-case `hostname` (dcgm-exporter's main) is read too
    assert g0.sm_active == 0.25 and g1.sm_active == 0.75


def test_host_falls_back_to_the_url_and_gpus_sort_numerically():
    text = "".join(f'DCGM_FI_DEV_GPU_UTIL{{gpu="{i}"}} {i}\n' for i in (10, 2, 1))
    snap = parse_dcgm(text, 0.0, URL)
    assert [g.gpu for g in snap.gpus] == ["1", "2", "10"]
    assert {g.host for g in snap.gpus} == {"10.0.0.7"}


@pytest.mark.parametrize("text", ["", "vllm:num_requests_running 3\n", "not prometheus {{{\n"])
def test_text_without_gpu_series_is_refused(text):
    with pytest.raises(ValueError):
        parse_dcgm(text, 0.0, URL)


def _snaps(utils_by_ts: dict[float, list[float]], host: str = "gpu-a") -> list[GpuSnapshot]:
    return [
        parse_dcgm(exposition(host, utils, sm_active=False, scrape=0), ts, URL)
        for ts, utils in utils_by_ts.items()
    ]


def test_stage_windows_take_the_scrapes_inside_them():
    snaps = _snaps({0.5: [10, 0], 1.5: [30, 0], 2.5: [90, 0], 3.5: [100, 0]})
    stats = gpu_stage_stats(snaps, [(0, 0.0, 2.0), (1, 2.0, 4.0), (2, 4.0, 5.0)])
    g0 = stats[0][0]
    assert g0.samples == 2
    assert g0.util_mean == pytest.approx(0.2) and g0.util_max == pytest.approx(0.3)
    assert stats[1][0].util_mean == pytest.approx(0.95)
    assert stats[1][0].fb_total_mib == pytest.approx(FB_TOTAL_MIB, abs=1)
    assert stats[2] == []


def _rows(qps: list[float], ttft_p99: list[float]) -> list[StageRow]:
    return [
        StageRow(stage=i, users=8 * 2**i, qps=q, ttft_p99=t)
        for i, (q, t) in enumerate(zip(qps, ttft_p99, strict=True))
    ]


def test_busy_gpus_at_the_ceiling_say_compute_bound():
    rows = _rows([10.0, 19.0, 19.2], [0.2, 0.3, 0.9])  # the ceiling: stage 1 (QPS +1% while TTFT p99 rose)
    gpus = gpu_stage_stats(
        _snaps({0.5: [60, 60], 1.5: [96, 97], 2.5: [99, 99]}), [(0, 0, 1), (1, 1, 2), (2, 2, 3)]
    )
    found = gpu_findings(rows, gpus)
    assert [(f.kind, f.stage) for f in found] == [("gpu_busy", 1)]
    assert "16 users (the ceiling)" in found[0].text
    assert re.search(r"2 GPUs at 9\d%-\d+% utilisation", found[0].text), found[0].text


def test_gpus_with_headroom_at_the_highest_load():
    rows = _rows([10.0, 20.0], [0.2, 0.25])  # no ceiling: judged at the last stage
    gpus = gpu_stage_stats(_snaps({0.5: [20, 22], 1.5: [40, 41]}), [(0, 0, 1), (1, 1, 2)])
    found = gpu_findings(rows, gpus)
    assert [(f.kind, f.stage) for f in found] == [("gpu_headroom", 1)]
    assert "highest load" in found[0].text
    assert re.search(r"2 GPUs at 4\d%-4\d% utilisation", found[0].text), found[0].text


def test_headroom_under_a_server_side_compute_bound_reading_says_it_is_unconfirmed():
    rows = _rows([10.0, 20.0], [0.2, 0.25])
    gpus = gpu_stage_stats(_snaps({0.5: [20, 22], 1.5: [40, 41]}), [(0, 0, 1), (1, 1, 2)])
    (found,) = gpu_findings(rows, gpus, [Finding("compute_bound", 1, "...")])
    assert found.text.endswith("(the server-side compute-bound reading is not confirmed by the GPUs).")
    (plain,) = gpu_findings(rows, gpus)
    assert plain.text.endswith("was not GPU compute.")


def test_an_idle_gpu_beside_busy_ones_is_named():
    rows = _rows([10.0, 20.0], [0.2, 0.25])
    snaps = _snaps({0.5: [95, 95, 2, 95], 1.5: [99, 99, 3, 99]}) + _snaps(
        {0.6: [95], 1.6: [95]}, host="gpu-b"
    )
    found = gpu_findings(rows, gpu_stage_stats(snaps, [(0, 0, 1), (1, 1, 2)]))
    kinds = [(f.kind, f.stage) for f in found]
    assert ("gpu_idle", 0) in kinds and not any(k == "gpu_busy" for k, _ in kinds)
    idle = next(f for f in found if f.kind == "gpu_idle")
    assert "gpu-a gpu 2" in idle.text and "GPU-5f6c3b1e-0000-4000-8000-000000000002" in idle.text
    assert "gpu-a gpu 0" not in idle.text and "4 others" in idle.text


def test_no_gpu_data_no_findings():
    assert gpu_findings(_rows([1.0], [0.1]), {}) == []
