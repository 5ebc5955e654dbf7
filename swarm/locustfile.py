"""The generic swarm locustfile (`swarm run` passes it to Locust): one LLMUser honouring --workload.

    locust -f swarm/locustfile.py --host http://127.0.0.1:8000 --workload short_qa:3,chat:1

It also carries the swarm's load shape (swarm/live/shape.py): plain -u/-r/-t runs, or --sweep stages.
"""

from swarm.live.shape import SwarmShape  # noqa: F401  (Locust picks the shape class up from this module)
from swarm.live.user import LLMUser


class SwarmUser(LLMUser):
    workload = "mixed"
