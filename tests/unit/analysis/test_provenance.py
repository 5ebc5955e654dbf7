"""swarm/analysis/provenance.py: the report's provenance lines and compare's side by side, the
differing fields highlighted and the server's version and flags first."""

from __future__ import annotations

from swarm.analysis import provenance
from swarm.stats.provenance import UNKNOWN


def _summary(version="0.11.0", flags=None, cores=2):
    return {
        "provenance": {
            "swarm": {"version": "0.2.0", "commit": "0123456789abcdef", "dirty": True},
            "options": {"workload": "chat", "run_id": "r1"},
            "machine": {"hostname": "lg", "cpu_model": "EPYC", "cores": cores, "memory_bytes": 2**33},
            "workers": ["lg"],
            "targets": {
                "http://s:8000": {
                    "family": "vllm",
                    "version": version,
                    "model": "m",
                    "root": "/models/m",
                    "max_model_len": 4096,
                    "launch_flags": flags if flags is not None else UNKNOWN,
                }
            },
            "target_command": "vllm serve m",
            "gpus": [{"host": "s", "gpu": "0", "uuid": "GPU-1", "model": "H200"}],
            "files": {"dataset": {"path": "/d.json", "sha256": "ab" * 32}},
            "seed": 42,
        }
    }


def test_header_lines_say_what_the_run_was():
    text = "\n".join(provenance.header_lines(_summary()))
    assert "swarm 0.2.0, commit 0123456789ab (with local changes)" in text
    assert "target http://s:8000: vllm 0.11.0, model m (root /models/m), max_model_len 4096" in text
    assert "launch flags unknown" in text and "target command: vllm serve m" in text
    assert "EPYC, 2 cores, 8.0 GiB" in text and "s gpu 0 H200" in text
    assert "dataset /d.json sha256 abababababababab; seed 42" in text


def test_a_run_from_before_provenance_says_so():
    assert provenance.header_lines({}) == [f"provenance: {provenance.NOT_RECORDED}"]
    assert "B not recorded" in provenance.compare_lines(_summary(), {})[0]


def test_compare_lists_the_server_s_version_and_flags_first_and_highlights_them():
    a, b = _summary(), _summary(version="0.12.0", flags={"max_num_seqs": 64}, cores=4)
    b["provenance"]["options"]["run_id"] = "r2"
    lines = provenance.compare_lines(a, b)
    assert lines[0] == "provenance differs:"
    assert [line.strip() for line in lines[1:]] == [
        "targets.http://s:8000.launch_flags: unknown -> -",  # A's server said no flags
        "targets.http://s:8000.launch_flags.max_num_seqs: - -> 64",
        "targets.http://s:8000.version: 0.11.0 -> 0.12.0",
        "machine.cores: 2 -> 4",
    ]
    page = provenance.compare_html(a, b)
    assert page.count(provenance.DIFFER) == 4
    assert page.index("0.12.0") < page.index("machine.cores") < page.index("options.workload")
    assert provenance.compare_lines(a, _summary())[0].startswith("provenance: the same")


def test_the_report_html_escapes_what_the_target_said():
    s = _summary(version="<script>x</script>")
    page = provenance.report_html(s)
    assert "<script>" not in page and "&lt;script&gt;" in page and "<details>" in page
