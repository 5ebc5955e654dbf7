"""`swarm run` validates every option before starting anything: one line, exit 2, no traceback."""

import json
import subprocess

import pandas as pd
import pytest

from tests.helpers.support import free_port, swarm_cmd


@pytest.mark.parametrize(
    "args, words",
    [
        (["--workers", "0"], "--workers must be at least 1"),
        (["-u", "-5"], "-u/--users must be at least 1"),
        (["-t", "0s"], "-t/--run-time must be > 0"),
        (["-t", "ten"], "bad time 'ten'"),
        (["--host", "localhost:8000"], "is not a URL"),
        (["--workload", "nosuch"], "nosuch"),
        (["--slo", "ttft_p99<=fast"], "bad SLO"),
        (["-r", "0"], "-r/--spawn-rate must be > 0"),
        (["--run-id", "a b"], "--run-id"),
        (["--goodput", "ttft<=fast"], "--goodput: cannot read"),
        (["--goodput", "itl<=5ms"], "unknown metric"),
        (["--repeat", "0"], "--repeat must be at least 1"),
    ],
)
def test_bad_options_give_one_line_and_exit_2(args, words, tmp_path):
    p = subprocess.run(
        swarm_cmd("run", "--out", str(tmp_path / "o"), *args), capture_output=True, text=True, timeout=60
    )
    assert p.returncode == 2, p.stderr
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1, p.stderr
    assert words in lines[0]
    assert "Traceback" not in p.stderr
    assert not (tmp_path / "o").exists()  # nothing started, nothing written


def test_unreachable_host_fails_fast_with_one_line(tmp_path):
    port = free_port()  # nothing listens there
    p = subprocess.run(
        swarm_cmd("run", "--host", f"http://127.0.0.1:{port}", "--out", str(tmp_path / "o"), "-t", "5s"),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert p.returncode == 1
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and f"target http://127.0.0.1:{port} is unreachable" in lines[0], p.stderr


@pytest.mark.integration
def test_custom_prompt_file_works_before_dashdash(tmp_path):
    """`swarm run --workload custom --prompt-file F` without `--`: every request is F's one prompt
    (thousands of tokens, where every built-in prompt is far shorter) with F's max_tokens."""
    f = tmp_path / "prompts.jsonl"
    f.write_text(json.dumps({"prompt": " ".join(["alpha beta gamma delta"] * 500), "max_tokens": 3}) + "\n")
    out = tmp_path / "o"
    cmd = swarm_cmd("run", "--workload", "custom", "--prompt-file", str(f), "-u", "2", "-t", "4s",
                    "--sim-profile", "instant", "--out", str(out))  # fmt: skip
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=180)
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-2000:]
    df = pd.read_parquet(out / "requests.parquet")
    assert len(df) > 0 and set(df.workload) == {"custom"} and set(df.outcome) == {"ok"}
    assert df.prompt_tokens.nunique() == 1 and df.prompt_tokens.min() > 2000, df.prompt_tokens.describe()
    assert df.output_tokens.max() <= 3


@pytest.mark.integration
def test_the_embedded_simulator_as_ollama_is_found_ready(tmp_path):
    """`--sim-arg=--server=ollama`: Ollama has no /health, so readiness asked only /health and the
    run said the simulator "did not start" while it served (issue 41); its /v1/models answers."""
    out = tmp_path / "o"
    p = subprocess.run(
        swarm_cmd("run", "--sim-arg=--server=ollama", "--sim-profile", "instant", "--workload", "short_qa",
                  "--max-tokens", "4", "-t", "2s", "-u", "1", "--workers", "1", "--stop-timeout", "1s",
                  "--out", str(out)),
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-2000:]
    total = json.loads((out / "summary.json").read_text())["total"]
    assert total["requests"] > 0 and not sum(total["failures"].values()), total
