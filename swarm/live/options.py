"""The swarm's options inside Locust: registered from the one table (swarm/core/options.py), and
the user's share of them validated into `LLMOptions`.

Registration happens at import (Locust's `init_command_line_parser`), so every locustfile that
imports the swarm gets them on its command line, from the environment, in config files and in
the web UI's start form (the API key never: it is marked secret).
"""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass, field
from typing import Any

from locust import events

from swarm.client.dialects import ENDPOINTS, get_dialect, ignore_eos_dialects
from swarm.core.errors import UsageError, exit_code, one_line
from swarm.core.options import (
    BALANCE_NAMES,
    BY_DEST,
    DEFAULT_REQUEST_DEADLINE_S,
    DEFAULT_REQUEST_TIMEOUT_S,
    DEFAULT_STOP_TIMEOUT_S,
    DEFAULT_WEB_HOST,
    GROUP_TITLES,
    OPTIONS,
)
from swarm.core.units import parse_duration
from swarm.load.models import ModelSplit, parse_models
from swarm.load.workloads import WORKLOADS, Knobs, parse_token_range


@events.init_command_line_parser.add_listener
def register(parser: Any) -> None:
    """Every option of the table, with Locust's own keywords (web UI, secrets, environment)."""
    groups = {key: parser.add_argument_group(title) for key, title in GROUP_TITLES.items()}
    for opt in OPTIONS:
        kw = opt.argparse_kwargs(WORKLOADS)
        if opt.env_var:
            kw["env_var"] = opt.env_var
        if opt.secret:
            kw["is_secret"] = True
        # (argument groups do not take Locust's include_in_web_ui keyword: web-UI options go on the parser)
        target = parser if opt.web_ui else groups[opt.group]
        if opt.web_ui or opt.secret:
            kw["include_in_web_ui"] = opt.web_ui
            target = parser
        target.add_argument(opt.flag, **kw)
    # A graceful stop by default: in-flight requests get DEFAULT_STOP_TIMEOUT_S to finish (an
    # explicit --stop-timeout, LOCUST_STOP_TIMEOUT or config value still rules, 0 included).
    # The web UI on loopback unless --web-host (flag, LOCUST_WEB_HOST, config) says otherwise.
    parser.set_defaults(stop_timeout=str(DEFAULT_STOP_TIMEOUT_S), web_host=DEFAULT_WEB_HOST)


def exit_on_usage_error(exc: UsageError, prog: str = "locust") -> None:
    """Bad options at start-up: one line on stderr and the usage exit code, before anything starts."""
    sys.stderr.write(one_line(prog, exc) + "\n")
    sys.stderr.flush()
    sys.exit(exit_code(exc))


@dataclass(frozen=True)
class LLMOptions:
    """The user's options, validated."""

    workload: str | None = None  # None: the user class's default
    model: str | None = None  # the (first) model of --model; None: the first of /v1/models
    api_key: str | None = None
    endpoint: str = "chat"
    dialect: str = "auto"
    request_timeout: float = DEFAULT_REQUEST_TIMEOUT_S
    ignore_eos: bool = False
    knobs: Knobs = field(default_factory=Knobs)
    request_deadline: float = DEFAULT_REQUEST_DEADLINE_S  # 0: none
    tokenizer: str = "auto"  # auto, server, pseudo or a PATH (swarm/client/tokenize.py)
    models: ModelSplit | None = None  # --model parsed: one name, or a weighted split a:3,b:1
    session_header: str | None = None  # chat_session: header carrying each turn's session id
    balance: str = "round-robin"  # --balance: over several endpoints (swarm/live/balance.py)

    def _model_text(self) -> str | None:
        return str(self.models) if self.models is not None else None

    @property
    def split(self) -> ModelSplit | None:
        """The split when --model names several models (each request draws one), else None."""
        return self.models if self.models is not None and self.models.split else None

    def __repr__(self) -> str:  # never show the key
        return (
            f"LLMOptions(workload={self.workload!r}, model={self._model_text()!r}, endpoint={self.endpoint!r}, "
            f"dialect={self.dialect!r}, request_timeout={self.request_timeout!r}, "
            f"request_deadline={self.request_deadline!r}, knobs={self.knobs!r})"
        )

    @classmethod
    def from_parsed(cls, opts: Any) -> LLMOptions:
        """From Locust's parsed options (values may be strings when set in the web UI)."""
        if opts is None:
            return cls()
        read = Parsed(opts)
        endpoint = read.get("endpoint")
        if endpoint not in ENDPOINTS:
            raise UsageError(f"--endpoint must be one of {', '.join(ENDPOINTS)} (got {endpoint!r})")
        dialect = read.get("dialect")
        if dialect != "auto":
            get_dialect(dialect)
        timeout, deadline = _timeouts(read)
        ignore_eos = read.flag("ignore_eos")
        if ignore_eos and dialect != "auto" and not get_dialect(dialect).ignore_eos:
            raise UsageError(
                f"--ignore-eos is not supported by the {dialect} dialect (only by {ignore_eos_dialects()})"
            )
        knobs = _knobs(read)
        models = parse_models(read.get("model"))  # ("" is unset: the web UI's empty field)
        workload = read.get("workload")
        _check_workload_fits(workload, knobs, dialect)
        return cls(
            workload=workload,
            model=models.names[0] if models is not None else None,
            api_key=read.get("api_key"),
            endpoint=endpoint,
            dialect=dialect,
            request_timeout=timeout,
            ignore_eos=ignore_eos,
            knobs=knobs,
            request_deadline=deadline,
            tokenizer=str(read.get("tokenizer")),
            models=models,
            session_header=_header_name(read.get("session_header")),
            balance=_balance(read.get("balance")),
        )


class Parsed:
    """Locust's parsed options as the checks read them: "" (the web UI's empty field) and an option
    not parsed at all (a bare Environment) are unset, and an unset option of the table
    (swarm/core/options.py) has the table's default; Locust's own options, None."""

    def __init__(self, opts: Any) -> None:
        self.opts = opts

    def get(self, name: str) -> Any:
        value = getattr(self.opts, name, None)
        if value is None or value == "":
            option = BY_DEST.get(name)
            return option.default if option is not None else None
        return value

    def number(self, name: str, kind: type, flag: str) -> Any:
        value = self.get(name)
        if value is None:
            return None
        try:
            return kind(value)
        except (TypeError, ValueError):
            raise UsageError(f"{flag} must be a number (got {value!r})") from None

    def flag(self, name: str) -> bool:
        return str(self.get(name)).lower() in ("true", "1", "yes", "on")


def _timeouts(read: Parsed) -> tuple[float, float]:
    """--request-timeout (finite, > 0) and --request-deadline (>= 0, 0 for none), in seconds."""
    timeout = parse_duration(read.get("request_timeout"), "--request-timeout")
    if not timeout > 0:
        raise UsageError(f"--request-timeout must be > 0 seconds (got {timeout})")
    if timeout == float("inf"):  # a stalled server would hold the user forever
        raise UsageError("--request-timeout must be a finite number of seconds (got inf)")
    deadline = parse_duration(read.get("request_deadline"), "--request-deadline")
    if not deadline >= 0 or deadline == float("inf"):
        raise UsageError(f"--request-deadline must be >= 0 seconds, 0 for none (got {deadline})")
    return timeout, deadline


def _knobs(read: Parsed) -> Knobs:
    """The workload options (load/workloads.py `Knobs`), each number checked."""
    return Knobs(
        thinking_ratio=read.number("thinking_ratio", float, "--thinking-ratio"),
        max_tokens=read.number("max_tokens", int, "--max-tokens"),
        rag_passages=read.number("rag_passages", int, "--rag-passages"),
        rag_prefix_share=read.number("rag_prefix_share", float, "--rag-prefix-share"),
        rag_tokens=parse_token_range(read.get("rag_tokens")),
        prompt_file=read.get("prompt_file"),
        input_tokens=str(read.get("input_tokens")),
        output_tokens=str(read.get("output_tokens")),
        seed=read.number("seed", int, "--seed"),
        no_ignore_eos=read.flag("no_ignore_eos"),
        shared_prefix_tokens=read.number("shared_prefix_tokens", int, "--shared-prefix-tokens"),
        prefix_groups=read.number("prefix_groups", int, "--prefix-groups"),
        dataset=read.get("dataset"),
        dataset_columns=read.get("dataset_columns"),
        dataset_sample=read.number("dataset_sample", int, "--dataset-sample"),
        turns=read.get("turns"),
        think_time=str(read.get("think_time")),
        agent_steps=str(read.get("agent_steps")),
        tools=str(read.get("tools")),
        tool_choice=str(read.get("tool_choice")),
        tool_result_tokens=str(read.get("tool_result_tokens")),
        tool_latency=str(read.get("tool_latency")),
    )


def _check_workload_fits(workload: str | None, knobs: Knobs, dialect: str) -> None:
    """Options that only some workloads read, refused where the workload would ignore them."""
    name = str(workload or "")
    if knobs.dataset and not any(w in name for w in ("dataset", "chat_session", "agent")):
        raise UsageError(
            "--dataset is read by the dataset, chat_session and agent workloads: add --workload dataset"
        )
    if (
        "synthetic" in name
        and not knobs.no_ignore_eos
        and dialect != "auto"
        and not get_dialect(dialect).ignore_eos
    ):
        raise UsageError(
            f"synthetic forces output lengths with ignore_eos, which the {dialect} dialect does not "
            "take; add --no-ignore-eos to send max_tokens alone"
        )


_HEADER_NAME = re.compile(r"^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")  # an HTTP token (RFC 9110)


def _balance(value: Any) -> str:
    """--balance (the web UI sends it as text)."""
    if str(value) not in BALANCE_NAMES:
        raise UsageError(f"--balance must be one of {', '.join(BALANCE_NAMES)} (got {value!r})")
    return str(value)


def _header_name(value: Any) -> str | None:
    if value is None:
        return None
    name = str(value).strip()
    if not _HEADER_NAME.match(name):
        raise UsageError(f"--session-header {value!r} is not an HTTP header name: use e.g. x-session-id")
    return name
