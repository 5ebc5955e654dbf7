"""swarm compare: before/after raising --max-num-seqs (seed round 1 vs round 2), stage by stage; the
change's interval and mark; runs of another workload refused; several runs; a tune's configurations."""

from __future__ import annotations

import argparse
import re

import pytest

from swarm.analysis import compare
from swarm.core.errors import UsageError
from tests.helpers.sweep_run import SHORT_QA, images, make_run

# seed round 1 shape: QPS stuck once 64 sequences run (max-num-seqs=64)
ROUND_1 = [(10, 13.4, 0.168), (30, 28.1, 0.193), (64, 40.1, 0.30), (128, 40.3, 2.1), (200, 40.2, 3.9)]


def args(*argv: str) -> argparse.Namespace:
    p = argparse.ArgumentParser()
    compare.configure(p)
    return p.parse_args(list(argv))


def test_compare_matches_stages_by_users(tmp_path, capsys):
    a = make_run(tmp_path / "before", table=ROUND_1, kv_scale=0.25, cpu=False, cap=64)
    b = make_run(tmp_path / "after", table=SHORT_QA, cpu=False)
    table = compare.compare_table(compare.load_run(a), compare.load_run(b))
    assert list(table["users"]) == [10, 30, 64, 128, 200, 256]
    row = table.set_index("users").loc[200]
    assert (row["qps_a"], row["qps_b"]) == pytest.approx((40.2, 64.9))
    assert row["qps_delta"] == pytest.approx(64.9 / 40.2 - 1)
    last = table.set_index("users").loc[256]
    assert last["qps_a"] != last["qps_a"] and last["qps_b"] == pytest.approx(64.7)  # only in B: NaN in A

    with pytest.raises(UsageError, match=r"ran another workload .*stages .*--allow-different"):
        compare.main(args(str(a), str(b)))  # 256 users only in B: another stage plan
    assert compare.main(args(str(a), str(b), "--allow-different")) == 0
    out = capsys.readouterr().out
    assert re.search(r"^200 +QPS +40\.2 +64\.9 +\+61%", out, re.M), out
    assert "A = sweep-test" in out and "[baseline]" in out and "judged changes marked" in out
    assert "compare.html" in out
    assert re.search(r"^A: At 128 users running requests sat pinned at 64 .*--max-num-seqs", out, re.M)
    assert re.search(r"^B: Ceiling at 200 users", out, re.M)
    assert "compute" not in out  # the stage after A's ceiling shows the cap: not compute-bound
    assert re.search(r"^200 ", out, re.M)  # users as integers
    page = (b / "compare.html").read_text()
    assert len(images(page)) == 1 and not re.search(r"(src|href)=['\"]?https?:", page)
    assert "http://" not in page and "https://" not in page
    assert "+61%" in page and "#dff5df" in page  # QPS up (no interval: these records trend), by 2%+: better
    assert "id='chart-compare-qps'" in page and "id='chart-compare-ttft_p99'" in page  # drawn in the page


def test_compare_by_stage_index_without_users_and_bad_dirs(tmp_path):
    a = make_run(tmp_path / "a", table=SHORT_QA[:3], users_in_summary=False, records=False, server=False)
    b = make_run(tmp_path / "b", table=SHORT_QA[:2], users_in_summary=False, records=False, server=False)
    table = compare.compare_table(compare.load_run(a), compare.load_run(b))
    assert list(table["stage"]) == [1, 2, 3]  # indexes 0-2, numbered as every label numbers them
    out = tmp_path / "c.html"
    assert compare.main(args(str(a), str(b), "--html", str(out), "--allow-different")) == 0 and out.exists()
    with pytest.raises(UsageError, match="not a run directory"):
        compare.main(args(str(a), str(tmp_path / "missing")))
    with pytest.raises(UsageError, match="needs two runs or more"):
        compare.main(args(str(a)))


def _set_stage(run, stage, qps, ci):
    import json

    path = run / "summary.json"
    s = json.loads(path.read_text())
    total = s["stages"][stage]["total"]
    total["qps"], total["ci"]["qps"] = qps, ci
    path.write_text(json.dumps(s))


def test_compare_marks_significant_changes_from_the_summarys_intervals(tmp_path, capsys):
    a = make_run(tmp_path / "a", table=SHORT_QA[:2], records=False, server=False)
    b = make_run(tmp_path / "b", table=SHORT_QA[:2], records=False, server=False)
    _set_stage(a, 0, 10.0, [9.0, 11.0])
    _set_stage(b, 0, 11.0, [10.0, 12.0])  # +10%: the difference's interval holds 0
    _set_stage(a, 1, 20.0, [19.0, 21.0])
    _set_stage(b, 1, 22.0, [21.0, 23.0])  # +10%, intervals just touching: beyond 0 (overlap would say not)
    table = compare.compare_table(compare.load_run(a), compare.load_run(b)).set_index("users")
    users = list(table.index)
    assert table.loc[users[0], "qps_sig"] == False  # noqa: E712
    assert table.loc[users[1], "qps_sig"] == True  # noqa: E712
    assert table.loc[users[1], "qps_low"] > 0
    assert compare.main(args(str(a), str(b))) == 0
    out = capsys.readouterr().out
    assert re.search(r"QPS +10\.0 +11\.0 +\+10% \[-\d+(\.\d)?%, \+\d+%\]$", out, re.M), out
    assert re.search(r"QPS +20\.0 +22\.0 +\+10% \[\+\d+(\.\d)?%, \+\d+%\] \*$", out, re.M), out
    assert re.search(r"1 of \d+ judged changes marked; were nothing changed, about 0\.\d would", out)


def test_compare_several_runs_and_a_tunes_configurations(tmp_path, capsys):
    import json

    tune = tmp_path / "tune"
    runs = [
        make_run(tune / "configs" / n, table=SHORT_QA[:2], server=False)
        for n in ("base", "seqs-64", "seqs-256")
    ]
    (tune / "tune.json").write_text(
        json.dumps(
            {
                "configs": [
                    {"name": n, "run_dir": str(r)} for n, r in zip(("base", "s64", "s256"), runs, strict=True)
                ]
            }
        )
    )
    assert compare.main(args(str(tune))) == 0  # all three configurations, the first the baseline
    out = capsys.readouterr().out
    assert "C = sweep-test" in out and "C vs A" in out and "B vs A" in out
    assert compare.main(args(f"{tune}:s256", f"{tune}:base")) == 0
    assert f"A = sweep-test ({runs[2]})" in capsys.readouterr().out
    with pytest.raises(UsageError, match="no configuration 'nope'"):
        compare.main(args(f"{tune}:nope", str(runs[0])))


def _provenance(run, workload, version):
    import json

    path = run / "summary.json"
    s = json.loads(path.read_text())
    s["provenance"] = {
        "options": {"workload": workload, "seed": 1},
        "targets": {"t": {"family": "vllm", "version": version}},
        "files": {"dataset": {"path": "d.jsonl", "sha256": "ab"}},
    }
    path.write_text(json.dumps(s))


def test_another_workload_is_refused_and_the_server_difference_comes_first(tmp_path, capsys):
    a = make_run(tmp_path / "a", table=SHORT_QA[:2], server=False)
    b = make_run(tmp_path / "b", table=SHORT_QA[:2], server=False)
    _provenance(a, "short_qa", "0.9.0")
    _provenance(b, "long_qa", "0.9.0")
    with pytest.raises(UsageError, match=r"another workload .*--workload short_qa vs long_qa"):
        compare.main(args(str(a), str(b)))
    _provenance(b, "short_qa", "0.10.1")  # the same workload on another server version
    assert compare.main(args(str(a), str(b))) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "B vs A provenance differs:" and out[1] == "! targets.t.version: 0.9.0 -> 0.10.1", out[
        :3
    ]
    assert out[2].startswith("A = ")  # before the table
