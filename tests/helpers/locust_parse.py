"""Locust's own argument parser (with the swarm plugin's options, registered by importing the
locustfile) run on a command line and an environment, in a process of its own (importing Locust
monkey-patches the standard library). Shared by the compose and Kubernetes manifest tests."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

_PARSE_LOCUST = """
import importlib.util, json, sys
import locust  # noqa: F401  (gevent first)
from locust.argument_parser import get_parser
spec = importlib.util.spec_from_file_location("locustfile", sys.argv[1])
spec.loader.exec_module(importlib.util.module_from_spec(spec))
opts = get_parser(default_config_files=[]).parse_args(sys.argv[2:])
print(json.dumps({k: v for k, v in vars(opts).items() if isinstance(v, str | int | float | bool | None)}))
"""


def parse_locust(locustfile: Path, args: list[str], env: dict[str, str], cwd: Path) -> dict:
    """The parsed options (scalars only) of `locust -f locustfile *args` under `env` (added to this
    process's environment less any LOCUST_*/SWARM_* of its own); asserts the parser accepted them."""
    full = {k: v for k, v in os.environ.items() if not k.startswith(("LOCUST_", "SWARM_"))}
    full.update(env)
    r = subprocess.run(
        [sys.executable, "-c", _PARSE_LOCUST, str(locustfile), *args],
        cwd=cwd,
        env=full,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode == 0, r.stderr[-3000:]
    return json.loads(r.stdout.strip().splitlines()[-1])
