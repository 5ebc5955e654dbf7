"""The GPU check (scripts/gpu-check.sh, issue 42) proven here before a GPU minute is spent.

- `make gpu-bundle`'s script fits what a GPU machine may carry (64 MiB with the working tree) and its
  llama.cpp source, trimmed, still configures a server build;
- the whole check runs on this machine with the CUDA build switched off (`GPU_CHECK_CPU=1`: the
  CPU llama-server of `make llama-server`, a 5M-parameter GGUF from make_tiny_gguf.py --params,
  short searches) and leaves each step's outputs: the search's answer, a tune row for each -np x
  -ctk, the twin's prediction beside the tune's measurement, the archive of run directories.

The dry run drives the real llama-server, so it runs alone (docs/testing.md); it judges no speed (a
search's answer is whatever this machine gives), only that every step ran and said what it found.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tarfile

import pytest

from tests.helpers.support import REPO
from tests.helpers.vllm_fixture import or_fail

pytestmark = [pytest.mark.integration]

NP_GRID = ("1", "4")
# the server build's options (scripts/llama-server-build.sh's), without CUDA: no nvcc here
CMAKE_OPTIONS = ("-DCMAKE_BUILD_TYPE=Release", "-DLLAMA_CURL=OFF", "-DLLAMA_OPENSSL=OFF")
CMAKE_OPTIONS += ("-DLLAMA_BUILD_TESTS=OFF", "-DLLAMA_BUILD_EXAMPLES=OFF", "-DLLAMA_BUILD_SERVER=ON")
CTK_GRID = ("f16", "q8_0")
# the tune's stages: 3 s (2 s measured after the 1 s warm-up) instead of the dry run's 5 s; the tune's
# four configurations are most of the check's time, and nothing here judges their figures
TUNE_STAGE = "3s"


@pytest.mark.timeout(600)
def test_the_bundle_fits_and_its_source_configures(tmp_path):
    bundle = tmp_path / "bundle"
    p = subprocess.run(
        [sys.executable, str(REPO / "scripts" / "gpu_bundle.py"), "--out", str(bundle)],
        capture_output=True,
        text=True,
        timeout=540,
    )
    assert p.returncode == 0, p.stdout + p.stderr
    m = re.search(r"= ([0-9.]+) MiB: ([0-9.]+) MiB under the 64 MiB", p.stdout)
    assert m, p.stdout
    assert float(m[1]) + float(m[2]) == pytest.approx(64.0, abs=0.11), p.stdout
    wheels = {w.name.split("-")[0].lower() for w in (bundle / "wheels").glob("*.whl")}
    assert {"locust", "orjson", "ddsketch", "sseclient_py", "gevent"} <= wheels, wheels
    assert not wheels & {"numpy", "pandas", "torch", "aiohttp"}, wheels  # the machine has those
    (tarball,) = bundle.glob("llama.cpp-*.tar.gz")
    src = tmp_path / "src"
    src.mkdir()
    with tarfile.open(tarball) as tar:
        names = tar.getnames()
        assert not [n for n in names if n.startswith(("docs/", "models/", "ggml/src/ggml-vulkan/"))]
        assert "ggml/src/ggml-cuda/CMakeLists.txt" in names and "gguf-py/gguf/__init__.py" in names
        tar.extractall(src, filter="data")
    cfg = subprocess.run(
        ["cmake", "-S", str(src), "-B", str(tmp_path / "build"), "-G", "Ninja", *CMAKE_OPTIONS],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert cfg.returncode == 0, cfg.stdout[-3000:] + cfg.stderr[-3000:]


@pytest.mark.serial
@pytest.mark.slow
@pytest.mark.timeout(600)
def test_the_check_runs_end_to_end_on_the_cpu(tmp_path):
    from swarm.orchestrate.llamacpp import ensure_llama_server

    or_fail("llama-server could not be built", ensure_llama_server, quiet=True)
    out = tmp_path / "out"
    env = {
        **os.environ,
        "OUT": str(out),
        "GPU_CHECK_CPU": "1",
        "GPU_CHECK_PYTHON": sys.executable,
        "GPU_CHECK_NP_GRID": ",".join(NP_GRID),
        "GPU_CHECK_CTK_GRID": ",".join(CTK_GRID),
        "GPU_CHECK_STAGE": TUNE_STAGE,
        "TMPDIR": str(tmp_path),
    }
    p = subprocess.run(
        ["bash", str(REPO / "scripts" / "gpu-check.sh")], capture_output=True, text=True, env=env, timeout=540
    )
    assert p.returncode == 0, p.stdout[-6000:] + p.stderr[-3000:]
    assert sorted(f.name for f in out.iterdir()) == [
        "gpu-check.log",
        "runs.tar.gz",
        "summary.md",
        "tune-table.txt",
    ]
    summary = (out / "summary.md").read_text()
    for step in ("wheels", "build", "model", "search", "tune", "twin"):
        assert re.search(rf"^\| {step} \| [0-9.]+ \| ok \|$", summary, re.M), summary
    assert "CPU dry run" in summary and "llama 0.01B parameters float16" in summary, summary
    # the search's headline, whatever this machine's answer (a busy one may spend the budget first)
    assert re.search(r"^- max concurrency meeting the SLO: .*$", summary, re.M), summary
    table = (out / "tune-table.txt").read_text()
    for np in NP_GRID:
        for ctk in CTK_GRID:
            row = rf"^np={np} cache-type-k={ctk} cache-type-v={ctk}( \*)?\s+ok\s"
            assert re.search(row, table, re.M), table
    for np in NP_GRID:  # the twin's answer beside the tune's, and the error between them
        assert re.search(
            rf"^\| {np}( \(fitted\))? \| .+ \| [0-9.]+ \| [0-9.]+ \| [+-]\d+% \|$", summary, re.M
        ), summary
    with tarfile.open(out / "runs.tar.gz") as tar:
        names = set(tar.getnames())
    for name in (
        "./search/summary.json",
        "./tune/tune.json",
        "./twin/tune.json",
        "./twin.toml",
        "./steps.tsv",
    ):
        assert name in names, sorted(names)[:40]
    assert not [n for n in names if n.endswith(".gguf")]
