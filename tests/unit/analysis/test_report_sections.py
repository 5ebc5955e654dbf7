"""The report's sections from a loaded run: client vs server per stage, speculative decoding where
the server reported it, GPUs with an idle one beside busy ones marked."""

from __future__ import annotations

from swarm.analysis.gpu_metrics import GpuWindow
from swarm.analysis.report_sections import agents_html, client_server_html, gpu_html
from swarm.analysis.rundir import load_run
from tests.helpers.sweep_run import SHORT_QA, make_run


def test_client_vs_server_has_a_row_per_stage_and_speculation_only_where_reported(tmp_path):
    data = load_run(make_run(tmp_path / "run"))  # the fixture's server reports speculative decoding
    text = client_server_html(data)
    table, spec = text.split("<h3>Speculative decoding</h3>")
    assert table.count("<tr>") == 1 + len(SHORT_QA) and "Times in ms" in table
    assert spec.count("<tr>") == 1 + len(SHORT_QA)
    for stats in data.server.values():
        stats.spec_acceptance_rate = None
    data.server[0].spec_acceptance_rate, data.server[0].spec_mean_acceptance_length = 0.7, 2.25
    spec = client_server_html(data).split("<h3>Speculative decoding</h3>")[1]
    assert spec.count("<tr>") == 2 and "<td>1</td><td>10</td><td>70%</td><td>2.25</td>" in spec
    for stats in data.server.values():
        stats.spec_acceptance_rate = None
    assert "Speculative decoding" not in client_server_html(data)


def test_an_idle_gpu_beside_a_busy_one_is_marked(tmp_path):
    data = load_run(make_run(tmp_path / "run", table=SHORT_QA[:1]))
    data.gpus = {
        0: [
            GpuWindow(
                "h1", "0", model="H100", samples=5, util_mean=0.9, fb_used_max_mib=40960, fb_total_mib=81920
            ),
            GpuWindow("h1", "1", samples=5, util_mean=0.01),
        ]
    }
    text = gpu_html(data)
    assert text.count('<tr class="untrusted">') == 1 and "h1 gpu 1" in text.split('class="untrusted"')[1]
    assert "40.0 of 80" in text


def test_a_figure_the_family_lacks_is_shown_absent_never_0(tmp_path):
    from swarm.analysis.report_sections import stage_html

    data = load_run(make_run(tmp_path / "run", table=SHORT_QA[:1]))
    assert "absent" not in stage_html(data, []) + client_server_html(data)  # vLLM: every figure there
    for snap in data.snapshots:
        snap.source = "tgi"  # no preemption or prefix-cache counter, no TTFT or ITL histogram
    data.ttft_pairs = {}
    stages = stage_html(data, [])
    assert stages.count("<td>absent</td>") == 2  # preempt, prefix hit
    row = client_server_html(data).split("<tr>")[2]
    # TTFT: the client's side not compared, the server's absent (mean, gap, p50, p99); ITL and finish reasons
    assert row.count("<td>absent</td>") == 6 and "<td>-</td><td>-</td><td>absent</td><td>absent</td>" in row


def test_agents_section_reads_the_tools_block_and_is_empty_without_one():
    tools = {"steps": 12, "tasks": 4, "calls": 9, "valid": 8, "invalid": 1, "none_when_required": 0,
             "reasons": {"missing_required": 1}, "task_goodput": {"bound_s": 2.0, "met": 3, "tasks": 4, "share": 0.75}}  # fmt: skip
    block = {
        "tools": tools,
        "task_s": {"p50": 1.5, "p90": 2.5, "p99": 3.0},
        "ttftc_s": {"p50": 0.05, "p99": 0.2},
    }
    out = agents_html({"workloads": ["agent"], "total": block, "agent": block})
    assert out.count("<td>agent</td>") == 1 and "<td>total</td>" not in out  # one workload: its row only
    for cell in (
        "<td>4</td><td>12</td><td>3.0</td><td>1500</td><td>2500</td>",
        "missing_required=1",
        "<td>75%</td>",
    ):
        assert cell in out, out
    assert agents_html({"workloads": ["chat"], "total": {}, "chat": {}}) == ""
