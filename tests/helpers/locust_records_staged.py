"""tests/helpers/locust_records.py plus the swarm's load shape, for staged runs (--sweep, --rate)."""

from swarm.live.shape import SwarmShape  # noqa: F401  (Locust picks the shape class up from this module)
from tests.helpers.locust_records import RecordedUser  # noqa: F401
