"""Separate user pools per output length (seed 003's "short / medium / long" scenario).

    locust -f locustfiles/pools.py --host URL -u 100

Each pool is its own user class with a Locust `weight`: of 100 users, 60 send short_qa, 30 chat
and 10 long_output, each user always the same kind (a pool), unlike `--workload
short_qa:6,chat:3,long_output:1`, where every user draws a workload per request. `--workload`
overrides all pools with one mix.
"""

from swarm import LLMUser


class ShortPool(LLMUser):
    workload = "short_qa"
    weight = 6


class MediumPool(LLMUser):
    workload = "chat"
    weight = 3


class LongPool(LLMUser):
    workload = "long_output"
    weight = 1
