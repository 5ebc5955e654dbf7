"""The swarm's own X-Request-Id (swarm/client/request_ids.py): unique per process and across
processes, header-safe whatever the run id says, short."""

from __future__ import annotations

import re

from swarm.client.request_ids import RUN_CHARS, RequestIds


def test_ids_are_unique_safe_and_carry_the_run():
    ids = RequestIds("tune 7/ä\r\nx")
    got = [ids.next() for _ in range(1000)]
    assert len(set(got)) == 1000
    assert all(re.fullmatch(rb"tune_7____x-[0-9a-f]{8}-\d+", i) for i in got), got[0]
    assert got[0].endswith(b"-1") and got[-1].endswith(b"-1000")
    other = RequestIds("tune 7/ä\r\nx")  # another process of the same run
    assert other.prefix != ids.prefix
    assert RequestIds(None).prefix.startswith("swarm-")
    assert len(RequestIds("r" * 500).next()) < RUN_CHARS + 20
