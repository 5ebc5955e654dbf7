"""`swarm target vllm-cpu` refuses bad options (the command runs): one line and exit 2, before
anything is installed or started."""

from __future__ import annotations

import subprocess

from tests.helpers.support import swarm_cmd


def test_swarm_target_refuses_bad_options(tmp_path):
    """One line and exit 2 before anything is installed or started."""
    import socket

    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        p = subprocess.run(
            swarm_cmd("target", "vllm-cpu", "--port", str(port)), capture_output=True, text=True, timeout=60
        )
    assert p.returncode == 2 and f"port {port} on 127.0.0.1 is in use" in p.stderr, p.stderr
    p = subprocess.run(
        swarm_cmd("target", "vllm-cpu", "--port", "1", "--vllm-arg=--host=0.0.0.0"),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert p.returncode == 2 and "binds to 127.0.0.1 only" in p.stderr, p.stderr
    p = subprocess.run(
        swarm_cmd("target", "vllm-cpu", "--model-dir", str(tmp_path)),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert p.returncode == 2 and "no config.json" in p.stderr, p.stderr


def test_swarm_target_llamacpp_refuses_bad_options(tmp_path):
    """llamacpp: one line and exit 2 before anything is built or started."""
    for args, message in (
        (("--parallel", "0"), "--parallel must be at least 1"),
        (("--parallel", "4", "--ctx-size", "128"), "--ctx-size must give each of the 4 slots"),
        (("--reasoning-format", "bogus"), "--reasoning-format must be one of"),
        (("--gguf", str(tmp_path / "none.gguf")), "--gguf"),
        (("--llama-arg=--host=0.0.0.0",), "binds to 127.0.0.1 only"),
    ):
        p = subprocess.run(
            swarm_cmd("target", "llamacpp", "--port", "1", *args), capture_output=True, text=True, timeout=60
        )
        assert p.returncode == 2 and message in p.stderr and len(p.stderr.strip().splitlines()) == 1, (
            args,
            p.stderr,
        )
