"""Test-only locustfile: swarm.LLMUser plus a listener that writes every record as a JSON line.

The file is $SWARM_TEST_RECORDS (one per process); the default workload is $SWARM_TEST_WORKLOAD
(`--workload` overrides it). Used by tests/integration/test_user_*.py; no dependency on the aggregation.
"""

import os

import orjson

from swarm.core.events import llm_request
from swarm.live.user import LLMUser

_out = open(os.environ["SWARM_TEST_RECORDS"], "ab")  # noqa: SIM115 - lives as long as the process


@llm_request.add_listener
def _write(record, **_kwargs):
    _out.write(orjson.dumps(record.to_dict()) + b"\n")
    _out.flush()


class RecordedUser(LLMUser):
    workload = os.environ.get("SWARM_TEST_WORKLOAD", "short_qa")
