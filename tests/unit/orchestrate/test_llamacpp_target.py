"""`swarm target llamacpp` without starting it: the llama-server command line
(swarm/orchestrate/llamacpp.py). Against the real server: tests/e2e/test_llamacpp_real.py."""

from __future__ import annotations

from pathlib import Path

from swarm.orchestrate.llamacpp import server_command


def test_server_command_binds_loopback_with_metrics_and_slots():
    cmd = server_command(
        Path("/x/llama-server"),
        Path("/m/tiny.gguf"),
        8181,
        parallel=3,
        ctx_size=6144,
        reasoning_format="none",
    )
    opts = {flag: cmd[i + 1] for i, flag in enumerate(cmd[:-1]) if flag.startswith("--")}
    assert cmd[0] == "/x/llama-server" and "--metrics" in cmd
    assert opts["--host"] == "127.0.0.1" and opts["--port"] == "8181"
    assert (opts["--parallel"], opts["--ctx-size"], opts["--reasoning-format"]) == ("3", "6144", "none")
    assert opts["--model"] == "/m/tiny.gguf" and opts["--alias"] == "tiny-qwen2"
