"""The diagnosis' vocabulary: `StageRow`, the client's numbers of one stage it reads, and `Finding`,
the sentence it says; `prose_seconds` / `prose_number`, the way its sentences write numbers.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from swarm.core.units import seconds_text, stage_name
from swarm.stats.summary import StageEntry


@dataclass
class StageRow:
    """Client-side numbers of one stage (a summary.json stage entry, flattened)."""

    stage: int  # 0-based index; labels say `stage_name(stage)` ("stage 1" for 0)
    users: int | None = None
    start_s: float | None = None
    end_s: float | None = None
    warmup_s: float = 0.0
    duration_s: float | None = None
    requests: int = 0
    failures: int = 0
    cancelled: int = 0  # cut by the swarm's own stop: neither ok nor failed
    cancelled_by_client: int = 0  # cut by their client on purpose (--cancel): neither ok nor failed
    qps: float | None = None
    output_tok_s: float | None = None
    prompt_tokens: int = 0
    output_tokens: int = 0
    ttft_p50: float | None = None
    ttft_p99: float | None = None
    e2e_p50: float | None = None
    e2e_p99: float | None = None
    tpot_p50: float | None = None
    itl_p99: float | None = None
    rate: float | None = None  # open loop: the requests per second the stage asked for
    send_lag_p50: float | None = None  # open loop: how late its requests left their schedule
    send_lag_p99: float | None = None
    send_lag_max: float | None = None
    # the raw stage entry ({"total": block, ...}) for SLOs; an older file's entry may differ
    entry: StageEntry | dict[str, Any] = field(default_factory=dict)

    @property
    def label(self) -> str:
        """What the stage asked of the server: its rate in open loop (the users there only cap the
        requests in flight), its users in closed loop."""
        if self.rate is not None:
            return f"{self.rate:g} req/s"
        return f"{self.users} users" if self.users is not None else stage_name(self.stage)

    @property
    def sent_rate(self) -> float | None:
        """The requests per second the stage sent (its records over its window): beside `rate`, the
        load the server got against the load asked for."""
        return self.requests / self.duration_s if self.duration_s else None


@dataclass(frozen=True)
class Finding:
    kind: str  # saturation | no_saturation | max_num_seqs_cap | kv_bound | compute_bound | client_bound | late_sends
    #            | slo_max_concurrency | client_vs_server | no_server_metrics | server_check_failed
    #            | server_counter_reset
    stage: int | None
    text: str
    trusted: bool = True


def prose_seconds(v: float | None) -> str:
    """A duration in prose: "85 ms", "12.3 s"."""
    return seconds_text(v, sep=" ")


def prose_number(v: float | None) -> str:
    """A rate in prose, to one decimal ("64.9"); "-" for none."""
    return "-" if v is None else f"{v:.1f}"
