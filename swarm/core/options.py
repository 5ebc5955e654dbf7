"""The swarm's options: one table that Locust's parser and `swarm run` both read.

Each `Option` is declared once here. swarm/live/options.py registers every one with Locust
(`init_command_line_parser`: command line, environment variable, config file, web UI), and
`swarm run` (swarm/orchestrate/run.py) adds those marked `run=True` to its own parser with the
same flag, meaning and help, then hands them on to its Locust processes; the others it accepts too
(before `--` as after it) and hands on as given (core/run_options.py). Validation of the
values lives with the code that uses them (live/options.py `LLMOptions`, load/stages.py
`StagePlan`, stats/slo.py); this table only names and describes.

Names of choices are declared here too (`ENDPOINT_NAMES`, `DIALECT_NAMES`, `ARRIVALS`): the
client and load layers implement them and import the names from here.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

ENDPOINT_NAMES = ("chat", "completions")
DIALECT_NAMES = ("auto", "vllm", "sglang", "trtllm", "llamacpp", "tgi", "ollama", "openai")
ARRIVALS = ("poisson", "constant")
BALANCE_NAMES = ("round-robin", "least-inflight")
"""--balance's choices: how a process spreads requests over several endpoints (swarm/live/balance.py)."""
PREFIX_CACHE_MODES = ("keep", "bust")
CACHE_SALT_DIALECTS = ("vllm",)
"""The dialects whose server takes a per-request `cache_salt` body field (vLLM's OpenAI server): the
way --prefix-cache bust makes a prefix unique there; every other dialect gets a unique leading text."""
"""--prefix-cache's choices: prompts as made, or every request's prefix unique (swarm/load/cache_bust.py)."""
TRACE_FORMATS = ("mooncake", "azure", "burstgpt", "jsonl")
SERVER_FAMILY_NAMES = ("auto", "vllm", "llamacpp", "sglang", "tgi", "trtllm", "none")
"""--server-family's choices: the metric families swarm/core/server_families.py reads, auto, none."""
DEFAULT_REQUEST_TIMEOUT_S = 60.0
DEFAULT_REQUEST_DEADLINE_S = 600.0
DEFAULT_STOP_TIMEOUT_S = 30
"""Locust's `--stop-timeout` when none is given (Locust's own default, 0, kills every request in
flight at the stop). 30 s lets a typical streamed answer finish (the seeds' `mixed` answers take
up to ~23 s end to end) while a Ctrl-C still ends a run promptly; whatever is still running then
is recorded as `cancelled`. An explicit --stop-timeout (flag, LOCUST_STOP_TIMEOUT, config file)
rules, 0 included."""
DEFAULT_WEB_HOST = "127.0.0.1"
"""Locust's `--web-host` when none is given (Locust's own default, "", is every interface): the web
UI starts runs and its start form picks the target, so by default only this machine reaches it.
`--web-host 0.0.0.0` (or $LOCUST_WEB_HOST, a config file) opens it, as containers need."""
FINAL_REPORT_WAIT_S = 5.0
"""At a stop, the master waits this long after --stop-timeout for the workers' last reports (a worker
that sends none by then is marked degraded); `swarm run` waits for the master accordingly."""
CUT_NOW_SIGNAL = "SIGUSR1"
"""The signal that ends a stop's grace on a worker (or a local runner): its requests in flight are cut
at once, each recorded as `cancelled`. `swarm run` sends it to its workers on a second Ctrl-C."""


@dataclass(frozen=True)
class Option:
    """One option. `help` may hold `{workloads}` (filled in with the workload names)."""

    flag: str
    help: str
    group: str  # "workload" (what to send), "stages" (when), "statistics" (what to keep)
    default: Any = None
    type: Any = None  # int, float; None: a string
    choices: tuple[str, ...] | None = None
    flag_action: bool = False  # a switch (store_true)
    env_var: str | None = None  # Locust reads it (swarm run passes values on explicitly)
    web_ui: bool = True  # shown in Locust's web UI start form
    secret: bool = False  # never shown (web UI, --help defaults, logs)
    metavar: str | None = None
    run: bool = False  # also an option of `swarm run`
    run_default: Any = None  # swarm run's default where it differs (None: the same)

    @property
    def dest(self) -> str:
        return self.flag.lstrip("-").replace("-", "_")

    def argparse_kwargs(self, workloads: Iterable[str] = (), *, for_run: bool = False) -> dict[str, Any]:
        """Keyword arguments of `parser.add_argument(self.flag, **...)` (plain argparse ones)."""
        default = self.run_default if for_run and self.run_default is not None else self.default
        kw: dict[str, Any] = {"help": self.help.format(workloads=", ".join(workloads))}
        if self.flag_action:
            kw.update(action="store_true", default=bool(default))
            return kw
        kw["default"] = default
        if self.type is not None:
            kw["type"] = self.type
        if self.choices is not None:
            kw["choices"] = list(self.choices)
        if self.metavar is not None:
            kw["metavar"] = self.metavar
        return kw


OPTIONS: tuple[Option, ...] = (
    # -- workload: what each request is
    Option(
        "--workload",
        "workload NAME or a weighted mix NAME:W,NAME:W (e.g. short_qa:3,chat:1); names: {workloads}. "
        "Default: the locustfile's",
        "workload",
        run=True,
        run_default="mixed",
    ),
    Option(
        "--model",
        "model name sent in requests (default: the first model of /v1/models), or a weighted split "
        "over served models, e.g. base:3,my-lora:1 (LoRA adapters): each request draws one",
        "workload",
        run=True,
    ),
    Option(
        "--api-key",
        "API key sent as 'Authorization: Bearer' (default: $OPENAI_API_KEY); never printed",
        "workload",
        env_var="OPENAI_API_KEY",
        web_ui=False,
        secret=True,
        run=True,
    ),
    Option(
        "--api-key-origin",
        "the origins (scheme://host:port, comma-separated) the API key is sent to (default: each "
        "--host endpoint given at start); every request to any other origin (load, model list, "
        "/metrics, tokenizer), e.g. a host typed into the web UI, carries no key",
        "workload",
        env_var="SWARM_API_KEY_ORIGIN",
        web_ui=False,
        metavar="URL",
    ),
    Option(
        "--endpoint",
        "chat = /v1/chat/completions, completions = /v1/completions (default chat)",
        "workload",
        default="chat",
        choices=ENDPOINT_NAMES,
    ),
    Option(
        "--balance",
        "with several endpoints (--host URL1,URL2,...): round-robin (default: each in turn) or "
        "least-inflight (the one with the fewest of this process's requests in flight, ties in turn). "
        "An endpoint whose last 3 requests all failed to connect is passed over for 1 s, doubling up to "
        "16 s while it stays down, then tried again; every request is still sent and recorded once, "
        "with its endpoint and, on the dead one, connect_error and its reason",
        "workload",
        default="round-robin",
        choices=BALANCE_NAMES,
        run=True,
    ),
    Option(
        "--dialect",
        "server dialect (default auto: from /v1/models owned_by)",
        "workload",
        "auto",
        None,
        DIALECT_NAMES,
    ),
    Option(
        "--request-timeout",
        "how long without a byte from the server before a request ends as 'timeout', e.g. 60s, 500ms "
        f"(default {DEFAULT_REQUEST_TIMEOUT_S:g}s)",
        "workload",
        f"{DEFAULT_REQUEST_TIMEOUT_S:g}s",
        metavar="DURATION",
    ),
    Option(
        "--request-deadline",
        "how long a whole request may take before it ends as 'timeout', even while bytes trickle "
        f"in, e.g. 10m (default {DEFAULT_REQUEST_DEADLINE_S:g}s; 0: none)",
        "workload",
        f"{DEFAULT_REQUEST_DEADLINE_S:g}s",
        metavar="DURATION",
    ),
    Option(
        "--ignore-eos",
        "send ignore_eos so every answer runs to max_tokens (vLLM, llama.cpp)",
        "workload",
        False,
        flag_action=True,
    ),
    Option(
        "--thinking-ratio",
        "share of requests with thinking on (default: mixed 0.2, other workloads 0)",
        "workload",
        type=float,
    ),
    Option("--max-tokens", "override every workload's max_tokens", "workload", type=int),
    Option("--rag-passages", "rag: retrieved passages per prompt (default 4)", "workload", 4, int),
    Option(
        "--rag-prefix-share",
        "rag: share of each prompt that is a prefix common to all prompts, 0-0.9 (default 0.5)",
        "workload",
        0.5,
        float,
    ),
    Option(
        "--rag-tokens",
        "rag: prompt size in tokens, N or MIN-MAX (default 2000-3000)",
        "workload",
        "2000-3000",
    ),
    Option(
        "--tokenizer",
        "how prompt tokens are counted when prompts are built: server (the target's /tokenize), "
        "pseudo (the built-in estimate, exact on the simulator), a PATH to a tokenizer.json or "
        "tokenizer directory, or auto (server, else pseudo with a warning; default)",
        "workload",
        "auto",
        metavar="auto|server|pseudo|PATH",
    ),
    Option(
        "--input-tokens",
        "synthetic: prompt tokens per request as the server counts them: N, MIN-MAX, MEAN:SD or "
        "lognormal:MEDIAN:SIGMA (default 1024)",
        "workload",
        "1024",
        metavar="DIST",
    ),
    Option(
        "--output-tokens",
        "synthetic: output tokens per request (max_tokens with ignore_eos), same forms (default 128)",
        "workload",
        "128",
        metavar="DIST",
    ),
    Option(
        "--no-ignore-eos",
        "synthetic: do not send ignore_eos (outputs may end before max_tokens)",
        "workload",
        False,
        flag_action=True,
    ),
    Option(
        "--shared-prefix-tokens",
        "synthetic: tokens of a prefix shared by the requests of a group (prefix-cache studies; default 0)",
        "workload",
        0,
        int,
    ),
    Option(
        "--prefix-groups",
        "synthetic: number of distinct shared prefixes; each request picks one (default 1)",
        "workload",
        1,
        int,
    ),
    Option(
        "--seed",
        "synthetic: seed of lengths and texts (same seed, same prompts); default: a random one per run",
        "workload",
        type=int,
    ),
    Option(
        "--dataset",
        "dataset workload: sharegpt:FILE.json (as vllm bench serve reads it), jsonl:FILE, csv:FILE, "
        "parquet:FILE or hf:DIR (a Hugging Face dataset saved on disk, or its parquet files); "
        "chat_session: its conversations; agent: each task's first messages",
        "workload",
        metavar="KIND:PATH",
    ),
    Option(
        "--dataset-columns",
        "dataset: column mapping, e.g. prompt=question,output_tokens=len,class=kind "
        "(keys prompt, messages, output_tokens, class; default: the keys themselves)",
        "workload",
        metavar="MAP",
    ),
    Option("--dataset-sample", "dataset: rows to keep (vLLM's sampling; default all)", "workload", type=int),
    Option(
        "--turns",
        "chat_session: turns per conversation, a DIST (N, MIN-MAX, MEAN:SD, lognormal:MEDIAN:SIGMA; "
        "default 4; with --dataset: the conversation's own, capped by this)",
        "workload",
        metavar="DIST",
    ),
    Option(
        "--think-time",
        "chat_session: how long a user thinks between turns, a DIST of durations (2s, 500ms-3s, "
        "lognormal:2s:0.5; a bare number is seconds; default 0; not counted as load)",
        "workload",
        "0",
        metavar="DIST",
    ),
    Option(
        "--agent-steps",
        "agent: the most steps a task takes, a DIST (default 4); the last one asks for the answer "
        "(tool_choice none), a step answered without a call ends the task",
        "workload",
        "4",
        metavar="DIST",
    ),
    Option(
        "--tools",
        "agent: the functions offered: builtin (4 functions) or a JSON file of OpenAI tools",
        "workload",
        "builtin",
        metavar="builtin|FILE",
    ),
    Option(
        "--tool-choice",
        "agent: auto, required or a function's NAME (default required)",
        "workload",
        "required",
        metavar="auto|required|NAME",
    ),
    Option(
        "--tool-result-tokens",
        "agent: tokens of each mocked tool result, a DIST (default 64)",
        "workload",
        "64",
        metavar="DIST",
    ),
    Option(
        "--tool-latency",
        "agent: the mocked tools' time per step, a DIST of durations (default 0; in the task's "
        "time, not any request's)",
        "workload",
        "0",
        metavar="DIST",
    ),
    Option(
        "--session-header",
        "chat_session: send each turn's session id in this header (routers with session affinity, "
        "e.g. x-session-id)",
        "workload",
        metavar="NAME",
    ),
    Option(
        "--prompt-file",
        "custom: JSONL/CSV file with prompt or messages, optional max_tokens and thinking per row",
        "workload",
    ),
    Option(
        "--cancel",
        "clients that hang up: RATE[@WHEN], e.g. 20%%@first-token, 5%%@2s, 10%%@tokens:16 (WHEN: a "
        "duration after sending, first-token (default) or tokens:N); the cut requests, drawn from "
        "the run's --seed, are recorded as cancelled_by_client, apart from latencies and failures",
        "workload",
        metavar="RATE[@WHEN]",
    ),
    Option(
        "--prefix-cache",
        "keep: send prompts as the workload makes them (default); bust: make every request's prefix "
        "unique (vLLM's per-request cache_salt, else a unique leading text of a few tokens)",
        "workload",
        "keep",
        choices=PREFIX_CACHE_MODES,
    ),
    Option(
        "--reset-prefix-cache",
        "empty the server's prefix cache before each stage where it offers that (vLLM's POST "
        "/reset_prefix_cache, served with VLLM_SERVER_DEV_MODE=1)",
        "workload",
        False,
        flag_action=True,
    ),
    # -- stages: when requests are sent
    Option("--sweep", "closed-loop concurrency stages, e.g. 10,30,64,128,200,256", "stages", "", run=True),
    Option(
        "--rate",
        "open-loop stages: requests/s, e.g. 5,10,20 (each lasts --stage-time; -u caps in-flight)",
        "stages",
        "",
        run=True,
    ),
    Option(
        "--arrivals",
        "open-loop arrival process (default poisson)",
        "stages",
        "poisson",
        None,
        ARRIVALS,
        run=True,
    ),
    Option(
        "--stage-time", "duration of each stage (default 30s)", "stages", "30s", run=True, metavar="DURATION"
    ),
    Option(
        "--warmup",
        "time at the start of each stage whose requests are excluded from its statistics (e.g. 10s)",
        "stages",
        "0s",
        run=True,
        metavar="DURATION",
    ),
    # -- statistics: what is kept and where
    Option(
        "--swarm-out",
        "write summary.json (master/local) and per-request records (workers) under DIR",
        "statistics",
        env_var="SWARM_OUT",
        web_ui=False,
        metavar="DIR",
    ),
    Option(
        "--summary-part",
        "swarm run sets it: the master writes its summary under --swarm-out as a part, which swarm run "
        "completes (the search's why) into summary.json, written once",
        "statistics",
        False,
        flag_action=True,
        web_ui=False,
    ),
    Option(
        "--prometheus-port",
        "serve the master's /metrics on this port (the web UI serves it at /metrics too)",
        "statistics",
        type=int,
        env_var="SWARM_PROMETHEUS_PORT",
        web_ui=False,
        metavar="PORT",
        run=True,
    ),
    Option(
        "--prometheus-host",
        "the interface --prometheus-port listens on (default: every one, as a Prometheus in another "
        "container or machine needs; swarm run: 127.0.0.1, give 0.0.0.0 to open it)",
        "statistics",
        env_var="SWARM_PROMETHEUS_HOST",
        web_ui=False,
        metavar="HOST",
    ),
    Option(
        "--slo",
        'objectives checked at the end, e.g. "ttft_p99<=800ms,e2e_p99<=5s,error_rate<=1%%"; '
        "the exit code is non-zero when one fails",
        "statistics",
        env_var="SWARM_SLO",
        web_ui=False,
        metavar="SPEC",
        run=True,
    ),
    Option(
        "--abort-on",
        "circuit breaker: end the run when a condition holds over the last seconds, e.g. "
        '"error_rate>50%%/10s" or "error_rate>90%%/30s,ttft_p99>30s/1m" ([WORKLOAD.]METRIC OP VALUE/WINDOW, '
        "the --slo metrics); the exit code is 3 and summary.json says why (default: off)",
        "statistics",
        env_var="SWARM_ABORT_ON",
        web_ui=False,
        metavar="COND",
        run=True,
    ),
    Option(
        "--goodput",
        "per-request SLOs that must all hold for a request to count as good, e.g. "
        '"ttft<=500ms,tpot<=50ms,e2e<=10s" (metrics ttft ttfa tpot e2e): goodput (good req/s) and '
        "the share of requests meeting them, per stage, workload, class and model",
        "statistics",
        env_var="SWARM_GOODPUT",
        web_ui=False,
        metavar="SPEC",
        run=True,
    ),
    Option(
        "--server-family",
        "whose metric names the target's /metrics is read with: auto (detected from the names; default), "
        "vllm, llamacpp, sglang, tgi, trtllm (its default URL is /prometheus/metrics), or none (not "
        "scraped: the diagnosis uses the client's own signals only)",
        "statistics",
        "auto",
        None,
        SERVER_FAMILY_NAMES,
        web_ui=False,
        run=True,
    ),
    Option(
        "--run-id",
        "run id for /metrics labels and summary.json (default: generated)",
        "statistics",
        env_var="SWARM_RUN_ID",
        web_ui=False,
        metavar="ID",
        run=True,
    ),
    Option(
        "--target-command",
        "the command line the target server was started with, kept in summary.json's provenance "
        "(swarm tune sets it to each configuration's command); values of secret-named flags masked",
        "statistics",
        web_ui=False,
        metavar="CMD",
    ),
    # -- stages: trace replay (swarm/load/trace.py, swarm/live/replay.py)
    Option(
        "--trace-replay",
        "replay a trace FILE open loop at its own timestamps, each row sent once across all workers "
        "(-u caps in flight)",
        "stages",
        "",
        metavar="FILE",
        run=True,
    ),
    Option("--trace-format", "format of --trace-replay", "stages", "mooncake", None, TRACE_FORMATS, run=True),
    Option(
        "--time-scale", "trace replay speed: 2 = twice as fast (default 1)", "stages", 1.0, float, run=True
    ),
    Option(
        "--trace-start",
        "trace replay: start this far into the trace (its own time, e.g. 10m)",
        "stages",
        "0s",
        run=True,
    ),
    Option(
        "--trace-duration",
        "trace replay: replay this much of the trace (its own time)",
        "stages",
        "",
        run=True,
    ),
    Option(
        "--trace-block-size",
        "trace replay: tokens per hash id (default 512, Mooncake's)",
        "stages",
        512,
        int,
        run=True,
    ),
    Option(
        "--trace-max-lag",
        "trace replay: a request sent later than this behind its schedule marks its worker as behind "
        "(e.g. 100ms, 1s)",
        "stages",
        "1s",
        run=True,
    ),
    # -- search: the master picks each next stage (swarm/live/search.py)
    Option(
        "--search",
        "find the load the server takes: concurrency|rate (the most meeting --slo or --goodput-min) or knee "
        "(where QPS stops growing); stages adapt, --stage-time is the longest, -u the first load",
        "stages",
        None,
        None,
        ("concurrency", "rate", "knee"),
        web_ui=False,
        run=True,
    ),
    Option(
        "--search-precision",
        "stop the search when the answer is known to this share (default 5%%)",
        "stages",
        "5%",
        web_ui=False,
        run=True,
    ),
    Option(
        "--search-budget", "the search's longest time (default 10m)", "stages", "10m", web_ui=False, run=True
    ),
    Option(
        "--min-stage-time",
        "a search stage (or a guarded stage) runs at least this long after its warm-up (default 5s)",
        "stages",
        "5s",
        web_ui=False,
        run=True,
    ),
    Option(
        "--goodput-min",
        "search criterion: at least this share of requests meets --goodput, e.g. 95%%",
        "stages",
        web_ui=False,
        run=True,
    ),
    Option(
        "--saturation-guard",
        "end an open-loop stage early when waiting requests and TTFT grow for this long (default 20s; 0: off)",
        "stages",
        "20s",
        web_ui=False,
        run=True,
    ),
)
BY_FLAG: dict[str, Option] = {o.flag: o for o in OPTIONS}
BY_DEST: dict[str, Option] = {o.dest: o for o in OPTIONS}
"""Each option by its attribute name in parsed options (`--stage-time`: `stage_time`)."""
GROUP_TITLES = {
    "workload": "llm-swarm workload",
    "stages": "llm-swarm stages",
    "statistics": "llm-swarm statistics",
}
