"""swarm/live/provenance.py: the master's reads at the edge, each against its ground truth (the
file's bytes, git, the GPU scrape file), and nothing that fails there fails the run."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
from pathlib import Path

from swarm.live import provenance
from swarm.stats.provenance import UNKNOWN


def test_file_checksums_are_the_files_sha256_and_unknown_where_unreadable(tmp_path):
    data = tmp_path / "d.jsonl"
    data.write_bytes(b'{"prompt": "hi"}\n' * 100_000)  # over one read chunk
    got = provenance.file_checksums(
        {"dataset": str(data), "prompt_file": str(tmp_path / "nope"), "x": str(tmp_path)}
    )
    assert got["dataset"] == {"path": str(data), "sha256": hashlib.sha256(data.read_bytes()).hexdigest()}
    assert got["prompt_file"]["sha256"] == UNKNOWN and "not read" in got["prompt_file"]["note"]
    assert got["x"]["sha256"] == UNKNOWN and "directory" in got["x"]["note"]


def test_the_swarm_s_commit_is_the_checkout_s():
    root = Path(provenance.__file__).resolve().parents[2]
    info = provenance.swarm_version()
    if not (root / ".git").exists():
        assert info["commit"] == UNKNOWN
        return
    head = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True)
    assert info["commit"] == head.stdout.strip() and isinstance(info["dirty"], bool)


def test_the_machine_is_this_one():
    m = provenance.machine()
    assert m["cores"] == os.cpu_count() and m["memory_bytes"] > 0 and m["cpu_model"]
    assert m["python"].split()[-1].count(".") == 2


def test_first_gpus_from_the_first_scrape_and_none_without_one(tmp_path):
    path = tmp_path / "gpu_metrics.jsonl"
    first = {
        "ts": 1.0,
        "url": "u",
        "gpus": [{"host": "h", "gpu": "0", "uuid": "GPU-a", "model": "H200", "util": 0.5}],
    }
    second = {"ts": 2.0, "url": "u", "gpus": [{"host": "h", "gpu": "1"}]}
    path.write_text(json.dumps(first) + "\n" + json.dumps(second) + "\n")
    assert provenance.first_gpus(path) == [{"host": "h", "gpu": "0", "uuid": "GPU-a", "model": "H200"}]
    assert provenance.first_gpus(tmp_path / "none.jsonl") == []
    (tmp_path / "bad.jsonl").write_text("not json\n")
    assert provenance.first_gpus(tmp_path / "bad.jsonl") == []
