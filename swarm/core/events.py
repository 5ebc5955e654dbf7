"""Swarm-level event hooks (Locust style: extension by events, not subclassing).

`llm_request` fires once per finished request, on the process that sent it, with
`record=RequestRecord`. Aggregators, record writers and tests subscribe to it.
"""

from __future__ import annotations

from locust.event import EventHook

llm_request = EventHook()
