"""swarm/sim/faults.py: --fault specs and the plan that draws a fault per request."""

from __future__ import annotations

import random

import pytest

from swarm.core.errors import UsageError
from swarm.sim.faults import FaultPlan, parse_fault


def test_fault_specs():
    assert parse_fault("cut=0.25") == ("cut", 0.25)
    for bad in ("cut", "nope=0.1", "cut=x", "cut=1.5"):
        with pytest.raises(UsageError):
            parse_fault(bad)
    with pytest.raises(UsageError, match="add up"):
        FaultPlan.from_specs(["cut=0.6", "stall=0.6"], 1.0)
    plan = FaultPlan.from_specs(["cut=0.5", "stall=0.5"], 1.0)
    rng = random.Random(0)
    kinds = [plan.draw(rng) for _ in range(1000)]
    assert set(kinds) == {"cut", "stall"} and 400 < kinds.count("cut") < 600
    assert FaultPlan().draw(rng) is None
