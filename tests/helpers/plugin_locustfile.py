"""Test-only locustfile: users that fire `swarm.core.events.llm_request` with synthetic records.

No network: each task builds a RequestRecord from a seeded RNG, fires the event (as LLMUser
does) and appends what it sent to $SWARM_TEST_SENT/<pid>.jsonl, so a test can check that the
master's summary equals the sum of what every process generated.
Knobs (env): SWARM_TEST_TTFT_S (median TTFT, default 0.2), SWARM_TEST_WAIT_S (pause between
records per user, default 0.02), SWARM_TEST_FAIL_RATE (default 0.05).
"""

from __future__ import annotations

import json
import math
import os
import random
import time
from pathlib import Path

from locust import User, constant, task

import swarm.live.plugin  # noqa: F401  (registers the swarm's listeners, as swarm/live/user.py does)
from swarm.core import events as swarm_events
from swarm.core.records import OUTCOMES, Outcome, RequestRecord

TTFT_S = float(os.environ.get("SWARM_TEST_TTFT_S", "0.2"))
WAIT_S = float(os.environ.get("SWARM_TEST_WAIT_S", "0.02"))
FAIL_RATE = float(os.environ.get("SWARM_TEST_FAIL_RATE", "0.05"))
WORKLOADS = ("short_qa", "chat")
_sent_file = None


def _sent():
    global _sent_file
    if _sent_file is None and os.environ.get("SWARM_TEST_SENT"):
        d = Path(os.environ["SWARM_TEST_SENT"])
        d.mkdir(parents=True, exist_ok=True)
        _sent_file = open(d / f"{os.getpid()}.jsonl", "a", buffering=1)  # noqa: SIM115 - lives with the process
    return _sent_file


class SyntheticLLMUser(User):
    wait_time = constant(WAIT_S)

    def on_start(self) -> None:
        self.rng = random.Random(hash((os.getpid(), id(self))))

    @task
    def request(self) -> None:
        rng = self.rng
        outcome = Outcome.OK if rng.random() >= FAIL_RATE else rng.choice([o for o in OUTCOMES if o.failed])
        ttft = rng.lognormvariate(math.log(TTFT_S), 0.5)
        tokens = rng.randint(2, 60)
        itl = [rng.lognormvariate(math.log(0.015), 0.3) for _ in range(tokens - 1)]
        e2e = ttft + sum(itl)
        record = RequestRecord(
            workload=rng.choice(WORKLOADS),
            start_wall_s=time.time() - e2e,
            outcome=outcome,
            stage=int(getattr(self.environment, "swarm_stage", 0) or 0),
            ttft_s=ttft,
            ttfa_s=ttft * 1.5,
            e2e_s=e2e,
            tpot_s=(e2e - ttft) / (tokens - 1),
            itl_s=itl,
            prompt_tokens=rng.randint(10, 500),
            output_tokens=tokens,
            reasoning_tokens=rng.randint(0, tokens),
            error="sk-test-secret-key rejected" if outcome.failed else None,
        )
        swarm_events.llm_request.fire(record=record)
        f = _sent()
        if f is not None:
            f.write(json.dumps({**record.to_dict(), "sent_at": time.time()}) + "\n")
