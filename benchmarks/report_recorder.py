"""The swarm's locustfile plus a recorder: on the master, every worker report (Locust's `stats`
message data, the swarm's `WorkerReport` under data["swarm"] included) is appended, msgpack'd,
to $SWARM_BENCH_RECORD. benchmarks/master_scale.py records a real run with it, then replays the
reports from hundreds of light fake workers.
"""

from __future__ import annotations

import os
from typing import Any

import msgpack
from locust import events

from swarm.locustfile import SwarmShape, SwarmUser  # noqa: F401  (Locust picks them up from here)

_PATH = os.environ.get("SWARM_BENCH_RECORD")


@events.worker_report.add_listener
def _record(client_id: str, data: dict[str, Any], **_: Any) -> None:
    if _PATH:
        with open(_PATH, "ab") as f:
            f.write(msgpack.packb(data))
