"""How much `--enforce-eager` saves the test suite's own vLLM CPU servers (tests/helpers/vllm_fixture.py
`EAGER`): each way, the seconds until /health answers and the seconds one request takes to stream
2,000 tokens of the tiny model. Both servers in one run, one after the other, on the same machine.

    .venv/bin/python scripts/vllm_eager_start.py
"""

from __future__ import annotations

import json
import socket
import tempfile
import time
import urllib.request
from pathlib import Path

from swarm.orchestrate.targets import ensure_vllm_python, vllm_cpu_server


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main() -> None:
    python = ensure_vllm_python(quiet=True)
    with tempfile.TemporaryDirectory() as tmp:
        for name, extra in (("eager", ("--enforce-eager",)), ("compiled", ())):
            log = Path(tmp) / f"{name}.log"
            with vllm_cpu_server(_free_port(), log, python=python, max_num_seqs=4, extra=extra) as srv:
                body = {"model": srv.model, "prompt": "hello", "max_tokens": 2000, "ignore_eos": True}
                req = urllib.request.Request(
                    srv.url + "/v1/completions",
                    json.dumps(body).encode(),
                    {"Content-Type": "application/json"},
                )
                t0 = time.monotonic()
                with urllib.request.urlopen(req, timeout=600) as r:
                    r.read()
                print(f"{name}: up in {srv.startup_s:.1f} s; 2,000 tokens in {time.monotonic() - t0:.1f} s")


if __name__ == "__main__":
    main()
