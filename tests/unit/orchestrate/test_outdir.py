"""The run directory: a run never writes into another run's directory, and never reports another
run's summary as its own (issue: a second run into the same --out printed 2,681 records under a
summary of 1,342; after a crash, the previous run's table was printed as this one's)."""

from __future__ import annotations

import json

import pytest

from swarm.core import runfiles
from swarm.core.errors import UsageError
from swarm.core.runfiles import SUMMARY, SUMMARY_PART
from swarm.orchestrate import outdir


def earlier_run(path, run_id="old-run"):
    (path / "records").mkdir(parents=True)
    (path / "records" / "worker-1-abc-00000.parquet").write_bytes(b"old")
    (path / "summary.json").write_text(json.dumps({"run_id": run_id}))
    (path / "master.log").write_text("old\n")
    return path


def test_a_new_or_empty_directory_is_claimed_with_the_run_id(tmp_path):
    for out in (tmp_path / "new" / "nested", tmp_path):
        outdir.claim(out, "r1", overwrite=False)
        assert json.loads((out / runfiles.RUN_MARKER).read_text())["run_id"] == "r1"


def test_another_runs_directory_is_refused_naming_that_run(tmp_path):
    out = earlier_run(tmp_path / "run")
    with pytest.raises(UsageError, match=r"already holds run old-run.*--overwrite"):
        outdir.claim(out, "r2", overwrite=False)
    assert (out / "records" / "worker-1-abc-00000.parquet").exists()  # untouched


@pytest.mark.parametrize("evidence", ["records", "requests.parquet", "master.log", "repeat.json"])
def test_a_run_without_summary_is_still_a_run(tmp_path, evidence):
    out = tmp_path / "run"
    out.mkdir()
    (out / evidence).mkdir() if evidence == "records" else (out / evidence).write_text("x")
    with pytest.raises(UsageError, match="already holds an earlier run"):
        outdir.claim(out, "r2", overwrite=False)


def test_overwrite_empties_a_runs_directory(tmp_path):
    out = earlier_run(tmp_path / "run")
    outdir.claim(out, "r2", overwrite=True)
    assert sorted(p.name for p in out.iterdir()) == [runfiles.RUN_MARKER]


def test_overwrite_never_removes_what_no_run_wrote(tmp_path):
    out = earlier_run(tmp_path / "run")
    (out / "prompts.py").write_text("mine")
    with pytest.raises(UsageError, match=r"files no run wrote \(prompts.py\)"):
        outdir.claim(out, "r2", overwrite=True)
    assert (out / "prompts.py").exists() and (out / "summary.json").exists()


def test_a_file_or_an_unwritable_path_is_one_usage_error(tmp_path):
    f = tmp_path / "afile"
    f.write_text("x")
    with pytest.raises(UsageError, match="is a file, not a directory"):
        outdir.claim(f, "r", overwrite=False)
    with pytest.raises(UsageError, match="cannot be written: Not a directory"):
        outdir.claim(f / "run", "r", overwrite=False)  # (unwritable, even for root)


def test_only_this_runs_summary_is_reported(tmp_path):
    (tmp_path / SUMMARY_PART).write_text(json.dumps({"run_id": "old-run", "total": {}}))
    assert outdir.master_summary(tmp_path, "r2") is None
    assert outdir.master_summary(tmp_path, "old-run") == {"run_id": "old-run", "total": {}}
    (tmp_path / SUMMARY_PART).write_text('{"run_id": "r2", "tot')  # truncated (a crash mid-write)
    assert outdir.master_summary(tmp_path, "r2") is None
    (tmp_path / SUMMARY).write_text(json.dumps({"run_id": "r2", "total": {}}))  # not the master's part
    assert outdir.master_summary(tmp_path, "r2") is None


def test_summary_json_is_the_masters_part_renamed_or_the_completed_summary(tmp_path):
    part = tmp_path / SUMMARY_PART
    part.write_text('{"run_id": "r", "x": 1.10}\n')  # (bytes a re-serialisation would change)
    outdir.publish_summary(tmp_path, {"run_id": "r", "x": 1.1}, completed=False)
    assert (tmp_path / SUMMARY).read_text() == '{"run_id": "r", "x": 1.10}\n' and not part.exists()
    part.write_text('{"run_id": "r"}\n')
    outdir.publish_summary(tmp_path, {"run_id": "r", "search": {"why": "w"}}, completed=True)
    assert json.loads((tmp_path / SUMMARY).read_text()) == {"run_id": "r", "search": {"why": "w"}}
    assert not part.exists()


def test_a_log_tail_is_printed_with_a_targets_escapes_written_out(tmp_path):
    from swarm.orchestrate.processes import Processes

    (tmp_path / "master.log").write_text("error body: \x1b]0;owned\x07 \x1b[2J\nnext line\n")
    tail = Processes(tmp_path).log_tail("master")
    assert "\x1b" not in tail and "\x07" not in tail
    assert tail == "error body: \\x1b]0;owned\\x07 \\x1b[2J\nnext line\n"
