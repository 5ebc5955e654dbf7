"""The client's CPU cost per request on the request path, without a server or a network.

    .venv/bin/python benchmarks/request_cost.py                    # CPU µs per request/chunk (~10 s)
    .venv/bin/python benchmarks/request_cost.py --callgrind        # + instructions per request (~1 min)
    .venv/bin/python benchmarks/request_cost.py --code DIR         # the swarm package found in DIR/swarm
    .venv/bin/python benchmarks/request_cost.py --code A --code B  # two trees, interleaved, B/A ratios

Fixed input: the first answer a fresh `swarm sim --profile instant` (seed 0) gives to the swarm's
request (chat, "Tell me a story about a cat.", max_tokens 64, ignore_eos, include_usage),
rendered at start by the simulator's own code (swarm/sim/server.py's seeded draws, then
swarm/sim/render.py), with `created` pinned: a role chunk, 64 token chunks, a usage chunk and
[DONE], sent with chunked transfer encoding as aiohttp sends it. The benchmark's own checkout
renders it, so every tree measured gets the same bytes.

Cases (each one request after another, in one process per tree and repetition):
  parts-events / parts-all  the per-chunk and per-request parts: SSEParser.feed -> orjson.loads ->
        StreamTally.feed per payload, then tally.fill + Aggregate.add + RecordWriter.add per request
        (what the worker's llm_request listener does); -events: one SSE event per read, -all: the
        body in one read.
  send-events / send-all    the real `LLMUser.send()`: request body, deadline timer, transport
        (geventhttpclient's parser, body reads), stream tally, fill, the swarm's `llm_request`
        event (listener: Aggregate.add + RecordWriter.add) and Locust's `request` event (its
        request stats), on a fake connection pool whose socket returns the fixed response:
        -events: one HTTP chunk holding one SSE event per recv(), -all: the whole response in
        one recv().

Time-dependent paths are pinned: the record writer flushes by count only (never, here) and
synchronously; `time.perf_counter` and `time.time` advance 1 ms a call in the send cases (read
times, hence ITL values and sketch bins, and Locust's per-second counts are the same every run);
before each case's loop the heap is collected and frozen (`gc.freeze()`), so the garbage
collections inside it cost what the request path allocates, not what start-up left. CPU time: `time.process_time()` around
N requests, after a warm-up request; the median over the repetitions, whose case order
rotates (and, with several trees, whose tree order alternates). Instructions (--callgrind):
`valgrind --tool=callgrind` on one process per tree, the main thread's (where the request path
runs) counted between `os.getppid()` markers around each case's loop (start-up and warm-up
excluded), with PYTHONHASHSEED=0. Valgrind starts with instrumentation off (`--instr-atstart=no`)
and the process switches it on (`callgrind_control -i on`) after its warm-up: start-up, which
no figure counts, runs about 5x faster than instrumented (an import of swarm.live.user, 35 s
instrumented, 7 s not). The counts are as reproducible (8 requests a case, twice: the same to the
instruction) and differ from an instrumented start-up's by at most 0.3% (parts-all +0.24%, others
under 0.1%: the heap is laid out otherwise), the same way for every tree of a run; figures taken
before this change are compared again at both revisions, not with old numbers. Reproducible to ~0.01% for the parts and to ~0.1-0.6% for
send (runs of one tree differ in dict and method-cache lookups: CPython hashes some keys by
object address); a change smaller than that needs several runs to show.
A chunk is one token chunk (64 a request), as `make bench`'s chunks/s counts them.
"""

from __future__ import annotations

import argparse
import gc
import inspect
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
CASES = ("parts-events", "parts-all", "send-events", "send-all")
MODEL = "sim-model"
MAX_TOKENS = 64
MESSAGES = [{"role": "user", "content": "Tell me a story about a cat."}]
CREATED = 1_795_428_714  # the `created` of every chunk (the simulator writes int(time.time()))
# aiohttp's headers on the simulator's streamed answer; the date is pinned
HTTP_HEAD = (
    b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream; charset=utf-8\r\nCache-Control: no-cache\r\n"
    b"x-request-id: %s\r\nTransfer-Encoding: chunked\r\nDate: Mon, 23 Nov 2026 10:11:54 GMT\r\n"
    b"Server: Python/3.11 aiohttp/3.14.5\r\n\r\n"
)


class BenchError(Exception):
    """A failure to report in one line (exit 1)."""


# -- the fixed response (parent: the benchmark's own checkout) ------------------------------------


def render_response() -> tuple[bytes, bytes]:
    """(HTTP head, SSE body) of the simulator's first answer to the benchmark's request."""
    sys.path.insert(0, str(REPO))
    from swarm.client.dialects import get_dialect
    from swarm.sim.profile import load_profile
    from swarm.sim.protocol import load_body, parse_chat
    from swarm.sim.render import DONE, StreamRenderer
    from swarm.sim.server import SimConfig, SimServer

    raw = get_dialect("vllm").body(
        endpoint="chat",
        model=MODEL,
        messages=MESSAGES,
        prompt=None,
        max_tokens=MAX_TOKENS,
        thinking=None,
        ignore_eos=True,
    )
    sim = SimServer(SimConfig(profile=load_profile("instant"), model=MODEL))
    p = sim.profile
    req = parse_chat(load_body(raw), p.max_model_len)
    rid = f"chatcmpl-{sim.rng.getrandbits(128):032x}"  # _generate's seeded draws, in its order
    if sim.cfg.faults.draw(sim.rng) is not None:
        raise BenchError("the simulator drew a fault without a fault plan")
    out, _thinking = sim._plan(req, rid)
    out.created = CREATED
    r = StreamRenderer(
        sim.tape,
        out,
        MODEL,
        "chat",
        req.continuous_usage,
        p.merge_reasoning,
        p.reports_reasoning_tokens,
        req.include_usage,
    )
    parts = [r.role_chunk()]
    r.tokens(0, out.target_tokens, parts)
    if req.include_usage:
        parts.append(r.usage_chunk(out.target_tokens))
    parts.append(DONE)
    return HTTP_HEAD % rid.encode(), b"".join(parts)


def sse_events(body: bytes) -> list[bytes]:
    return [e + b"\n\n" for e in body.split(b"\n\n") if e]


def describe(body: bytes) -> dict[str, int]:
    """What the fixed response holds (counted from its bytes, not by the code measured)."""
    events = sse_events(body)
    payloads = [json.loads(e[len(b"data: ") :]) for e in events if e != b"data: [DONE]\n\n"]
    tokens = sum(1 for p in payloads if p["choices"] and "role" not in p["choices"][0]["delta"])
    return {"bytes": len(body), "sse_events": len(events), "token_chunks": tokens}


# -- one measuring process (child: the tree under test) -----------------------------------------


def check_tree(swarm_dir: Path) -> None:
    """Every loaded swarm module must come from the selected tree (an editable install elsewhere
    would otherwise answer `import swarm.x` for a module the tree lacks)."""
    bad = sorted(
        f"{name} ({mod.__file__})"
        for name, mod in list(sys.modules.items())
        if (name == "swarm" or name.startswith("swarm."))
        and getattr(mod, "__file__", None)
        and not Path(mod.__file__).resolve().is_relative_to(swarm_dir)
    )
    if bad:
        raise BenchError(f"swarm modules loaded from outside {swarm_dir}: {', '.join(bad[:5])}")


class FakeSock:
    """A connected socket that returns the fixed response, one list item per recv()."""

    def __init__(self, pieces: list[bytes]) -> None:
        self.pieces = pieces
        self.i = 0

    def recv(self, n: int) -> bytes:
        if self.i >= len(self.pieces):
            return b""
        p = self.pieces[self.i]
        self.i += 1
        if len(p) > n:
            raise BenchError(f"a {len(p)}-byte read does not fit recv({n})")
        return p

    def settimeout(self, t: float | None) -> None:
        pass

    def sendall(self, data: bytes) -> None:
        pass

    def setsockopt(self, *args: Any) -> None:
        raise OSError("fake socket: no SO_TIMESTAMPNS")  # the transport falls back to recv()

    def close(self) -> None:
        pass


class FakePool:
    """geventhttpclient's connection pool, as the transport uses it."""

    def __init__(self, pieces: list[bytes]) -> None:
        self.pieces = pieces

    def get_socket(self) -> FakeSock:
        return FakeSock(self.pieces)

    def release_socket(self, sock: FakeSock) -> None:
        pass

    def return_socket(self, sock: FakeSock) -> None:
        pass


def http_reads(head: bytes, body: bytes, mode: str) -> list[bytes]:
    """The HTTP response as the socket returns it: `all` in one piece (one HTTP chunk, as the
    instant simulator writes it), `events` one HTTP chunk per SSE event per read."""
    if mode == "all":
        return [head + b"%x\r\n" % len(body) + body + b"\r\n0\r\n\r\n"]
    out = [head] + [b"%x\r\n" % len(e) + e + b"\r\n" for e in sse_events(body)]
    out[-1] += b"0\r\n\r\n"
    return out


class Sinks:
    """What the worker's `llm_request` listener does with a record (swarm/live/worker.py)."""

    def __init__(self, tmp: Path) -> None:
        from swarm.live import recorder
        from swarm.stats.aggregate import Aggregate

        recorder.FLUSH_INTERVAL_S = 1e12  # flush by count only ...
        recorder.FLUSH_EVERY = 10**12  # ... never, here
        self.aggregate = Aggregate()
        self.writer = recorder.RecordWriter(tmp / "records", "bench", background=False)
        # a tree from before completion windows (Aggregate.add(record) only) can be measured too
        self.windowed = "window" in inspect.signature(Aggregate.add).parameters

    def on_record(self, record: Any, **_: Any) -> None:
        if self.windowed:
            self.aggregate.add(record, record.stage)
        else:
            self.aggregate.add(record)
        self.writer.add(record)


def parts_runner(head: bytes, body: bytes, mode: str, tmp: Path) -> Any:
    import orjson

    from swarm.client.dialects import get_dialect
    from swarm.client.sse import DONE_BYTES, SSEParser
    from swarm.client.tally import StreamTally
    from swarm.core.records import Outcome, RequestRecord

    reads = sse_events(body) if mode == "events" else [body]
    dialect = get_dialect("vllm")
    sinks = Sinks(tmp)
    loads = orjson.loads

    def one(i: int) -> int:
        record = RequestRecord(
            workload="custom", start_wall_s=1.7e9 + i, send_lag_s=None, stage=0, warmup=False
        )
        tally = StreamTally(dialect, True)
        parse = SSEParser().feed
        feed = tally.feed
        t0 = t = 100.0 + i
        done = False
        for buf in reads:
            t += 0.001
            for payload in parse(buf):
                if payload == DONE_BYTES:
                    done = True
                    break
                feed(loads(payload), t)
        if not done:
            raise BenchError("parts: no [DONE] in the fixed response")
        tally.fill(record, t0, t)
        record.request_id = tally.response_id
        record.http_status = 200
        record.outcome = Outcome.OK
        sinks.on_record(record)
        return len(record.itl_s) + 1  # token chunks timed

    return one


def send_runner(head: bytes, body: bytes, mode: str, tmp: Path) -> Any:
    ticks = iter(range(10**12))  # the request path's clocks: 1 ms a call each
    time.perf_counter = lambda: 1000.0 + next(ticks) * 0.001
    wall = iter(range(10**12))  # (the record's start and Locust's per-second request counts)
    time.time = lambda: 1.7e9 + next(wall) * 0.001

    from locust.env import Environment

    from swarm.client.dialects import get_dialect
    from swarm.client.discovery import ServedModel
    from swarm.client.transport import Transport
    from swarm.core.records import Outcome
    from swarm.live.options import LLMOptions
    from swarm.live.state import swarm_state
    from swarm.live.user import LLMUser

    try:
        from swarm.load.request import LLMRequest
    except ImportError:  # a tree from before swarm/load/request.py, measured with --code
        from swarm.load.workloads import LLMRequest

    class U(LLMUser):
        host = "http://127.0.0.1:1"

    env = Environment(user_classes=[U])
    env.create_local_runner()  # Locust's request stats listen to `request`
    opts = LLMOptions(model=MODEL, dialect="vllm", ignore_eos=True)
    state = swarm_state(env)
    state.options = opts
    served = ServedModel(MODEL, get_dialect("vllm"), True)
    if hasattr(state, "served_at"):  # one per endpoint (--host URL1,URL2; older trees: one)
        state.served_at["http://127.0.0.1:1"] = served
    else:
        state.served = served
    # LLMUser.__init__ without FastHttpUser's session: the transport gets the fake pool
    u = object.__new__(U)
    u.environment = env
    u.state = state
    u.opts = opts
    u._secret = None
    u._chat = True
    u._prefix = ""
    u._url = "http://127.0.0.1:1/v1/chat/completions"
    u.split = getattr(opts, "split", None)  # (attributes __init__ sets; older trees ignore the new ones)
    u.rng = random.Random(0)
    u._failures, u._pause_s, u._jitter = 0, 0.0, random.Random(1)  # the backoff's state
    u._session_header = None
    u._cancel, u._bust, u._bust_tag, u._bust_n = None, False, "", 0  # no --cancel, no --prefix-cache bust
    try:
        from swarm.client.transport import CutPoint

        u._cut = CutPoint()
    except ImportError:  # a tree from before --cancel
        pass
    last_header = "Content-Length: "
    try:  # the swarm's own X-Request-Id per request: the head ends before it
        from swarm.client.request_ids import RequestIds

        u._ids = RequestIds("bench")
        last_header = "X-Request-Id: "
    except ImportError:  # a tree from before swarm/client/request_ids.py
        pass
    common = "Host: 127.0.0.1:1\r\nUser-Agent: llm-swarm\r\n"
    req_head = (
        f"POST /v1/chat/completions HTTP/1.1\r\n{common}Accept: text/event-stream\r\n"
        f"Content-Type: application/json\r\n{last_header}"
    ).encode("latin-1")
    pool = FakePool(http_reads(head, body, mode))
    transport = Transport(pool, req_head, common, opts.request_timeout, opts.request_deadline or None)
    try:  # several endpoints: one transport each, and the process's balancer over them
        from swarm.live.endpoints import Endpoint

        u.endpoints = (Endpoint("http://127.0.0.1:1", "", u._url, transport),)
        u.balancer = state.balancer(("http://127.0.0.1:1",), "round-robin")
    except ImportError:  # a tree from before swarm/live/endpoints.py: one transport
        u.transport = transport
    sinks = Sinks(tmp)
    state.llm_request.add_listener(sinks.on_record)
    req = LLMRequest("custom", MESSAGES, MAX_TOKENS)

    def one(i: int) -> int:
        r = u.send(req)
        if r.outcome is not Outcome.OK or r.output_tokens != MAX_TOKENS:
            raise BenchError(f"send: {r.outcome} {r.error} ({r.output_tokens} tokens)")
        return len(r.itl_s) + 1

    return one


UNDER_CALLGRIND = "REQUEST_COST_UNDER_CALLGRIND"  # set by run_child for a child valgrind runs


def instrument_now() -> None:
    """Have callgrind instrument this process from now on (it started with --instr-atstart=no).
    `callgrind_control` reaches valgrind through vgdb; this process polls instead of blocking in a
    wait, so valgrind's scheduler reads the command without vgdb's ptrace (which Yama's
    ptrace_scope 1 forbids for a process that is not the caller's descendant)."""
    ctl = subprocess.Popen(
        ["callgrind_control", "--instr=on", str(os.getpid())],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    deadline = time.monotonic() + 60
    while ctl.poll() is None and time.monotonic() < deadline:
        pass  # busy: valgrind takes vgdb's command between basic blocks, not inside a syscall
    if ctl.poll() is None:
        ctl.kill()
    said = ctl.communicate()[0]
    if ctl.returncode != 0 or "OK" not in said:
        raise SystemExit(f"callgrind_control could not switch instrumentation on: {said.strip()[-300:]}")


def child(args: argparse.Namespace) -> int:
    """Run the cases in this process (the tree PYTHONPATH selects); one JSON line on stdout."""
    import swarm

    swarm_dir = Path(swarm.__file__).resolve().parent
    data = json.loads(Path(args.child).read_text())
    head, body = data["head"].encode("latin-1"), data["body"].encode()
    tmp = Path(tempfile.mkdtemp(prefix="request-cost-"))
    try:
        makers = {"parts": parts_runner, "send": send_runner}
        runners = {}
        for case in CASES:
            kind, mode = case.split("-")
            runners[case] = one = makers[kind](head, body, mode, tmp)
            one(-1)  # warm-up: lazy imports, first-call caches
        check_tree(swarm_dir)
        if os.environ.get(UNDER_CALLGRIND):
            instrument_now()
        order = list(CASES[args.rotate % len(CASES) :] + CASES[: args.rotate % len(CASES)])
        result: dict[str, Any] = {"swarm": str(swarm_dir), "cases": {}}
        for case in order:
            one = runners[case]
            n = args.requests
            gc.collect()  # a collection in the loop scans the loop's objects only, whatever
            gc.freeze()  # start-up and the cases before left on the heap
            c0 = time.process_time()
            os.getppid()  # marker: callgrind --dump-before=getppid starts a new part here
            chunks = 0
            for i in range(n):
                chunks += one(i)
            os.getppid()  # marker: the part since the last one is this case's loop
            cpu = time.process_time() - c0
            result["cases"][case] = {"cpu_s": cpu, "requests": n, "chunks": chunks}
        result["order"] = order
        check_tree(swarm_dir)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print(json.dumps(result))
    return 0


# -- the parent: trees, repetitions, callgrind, the table ---------------------------------------


def run_child(
    code: Path, response: Path, requests: int, rotate: int, callgrind: Path | None = None
) -> dict[str, Any]:
    cmd = [sys.executable, str(Path(__file__).resolve()), "--child", str(response)]
    cmd += ["--requests", str(requests), "--rotate", str(rotate)]
    if callgrind is not None:
        valgrind = shutil.which("valgrind")
        if valgrind is None:
            raise BenchError("--callgrind needs valgrind on PATH (apt-get install valgrind)")
        cmd = [
            valgrind,
            "--tool=callgrind",
            "--separate-threads=yes",  # the main thread's counts: pyarrow's threads run when they will
            "--dump-before=getppid",
            "--instr-atstart=no",  # the child switches it on after its warm-up (instrument_now)
            f"--callgrind-out-file={callgrind}",
            *cmd,
        ]
    env = {**os.environ, "PYTHONPATH": str(code), "PYTHONHASHSEED": "0"}
    if callgrind is not None:
        env[UNDER_CALLGRIND] = "1"
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=code, timeout=1800)
    lines = proc.stdout.strip().splitlines()
    if proc.returncode != 0 or not lines:
        err = (proc.stderr.strip().splitlines() or ["(no output)"])[-1]
        raise BenchError(f"measuring {code} failed (exit {proc.returncode}): {err}")
    return json.loads(lines[-1])


def callgrind_parts(out_file: Path) -> list[int]:
    """The main thread's instructions in each callgrind dump, in order (`<file>.1-01`, ...)."""
    totals = []
    k = 1
    while (part := Path(f"{out_file}.{k}-01")).exists():
        for line in part.read_text().splitlines():
            if line.startswith("totals:") or line.startswith("summary:"):
                totals.append(int(line.split()[1]))
                break
        else:
            raise BenchError(f"{part}: no totals line")
        k += 1
    return totals


def commit_of(code: Path) -> str | None:
    proc = subprocess.run(
        ["git", "-C", str(code), "describe", "--always", "--dirty", "--abbrev=7"],
        capture_output=True,
        text=True,
    )
    return proc.stdout.strip() or None if proc.returncode == 0 else None


def measure(args: argparse.Namespace, codes: list[Path], response: Path, work: Path) -> list[dict[str, Any]]:
    trees: list[dict[str, Any]] = [
        {"code": str(c), "commit": commit_of(c), "cases": {k: {"cpu_s": [], "chunks": None} for k in CASES}}
        for c in codes
    ]
    for r in range(args.repeat):
        order = list(range(len(codes)))
        if r % 2:
            order.reverse()
        for t in order:
            res = run_child(codes[t], response, args.requests, r)
            for case, v in res["cases"].items():
                c = trees[t]["cases"][case]
                c["cpu_s"].append(v["cpu_s"])
                c["chunks"] = v["chunks"] / v["requests"]
    for t, tree in enumerate(trees):
        for c in tree["cases"].values():
            us = sorted(s / args.requests * 1e6 for s in c.pop("cpu_s"))
            c["us_per_request"] = statistics.median(us)
            c["us_per_request_runs"] = us
            c["us_per_chunk"] = c["us_per_request"] / c["chunks"]
            c["chunks_per_request"] = c.pop("chunks")
        if args.callgrind:
            out = work / f"callgrind-{t}.out"
            res = run_child(codes[t], response, args.callgrind_requests, 0, callgrind=out)
            parts = callgrind_parts(out)
            markers = 2 * len(CASES)
            # dumps: start-up, then per case its loop and the gap to the next case's start marker
            if len(parts) != markers:
                raise BenchError(
                    f"callgrind wrote {len(parts)} parts, the markers make {markers}: "
                    "something else called getppid()"
                )
            for k, case in enumerate(res["order"]):
                c = tree["cases"][case]
                instr = parts[2 * k + 1] / args.callgrind_requests
                c["instructions_per_request"] = instr
                c["instructions_per_chunk"] = instr / c["chunks_per_request"]
    return trees


def fmt(v: float | None, spec: str) -> str:
    return "-" if v is None else format(v, spec)


def print_table(args: argparse.Namespace, response: dict[str, int], trees: list[dict[str, Any]]) -> None:
    print(
        f"== request path cost, no server, no network: {args.requests} requests x {args.repeat} repetitions"
        + (f", callgrind {args.callgrind_requests} requests" if args.callgrind else "")
        + f"; fixed response {response['bytes']:,} bytes, {response['sse_events']} SSE events, "
        f"{response['token_chunks']} token chunks =="
    )
    base = trees[0]
    for i, tree in enumerate(trees):
        print(f"[{i}] {tree['code']} ({tree['commit'] or 'not a git checkout'})")
    head = f"{'case':13} {'tree':>4} {'CPU µs/req':>11} {'min':>8} {'µs/chunk':>9} {'instr/req':>12} {'instr/chunk':>12}"
    if len(trees) > 1:
        head += f" {'CPU ratio':>10} {'instr ratio':>11}"
    print(head)
    for case in CASES:
        for i, tree in enumerate(trees):
            c, b = tree["cases"][case], base["cases"][case]
            row = (
                f"{case:13} {i:>4} {c['us_per_request']:11.1f} {c['us_per_request_runs'][0]:8.1f} "
                f"{c['us_per_chunk']:9.2f} {fmt(c.get('instructions_per_request'), ',.0f'):>12} "
                f"{fmt(c.get('instructions_per_chunk'), ',.0f'):>12}"
            )
            if len(trees) > 1:
                ir = c.get("instructions_per_request")
                row += f" {c['us_per_request'] / b['us_per_request']:10.3f}"
                row += f" {fmt(ir and ir / b['instructions_per_request'], '.4f'):>11}"
            print(row)


def parse_args(argv: list[str]) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    ap.add_argument(
        "--code",
        type=Path,
        action="append",
        metavar="DIR",
        help="measure the swarm package in DIR/swarm (repeat to compare trees; default: this checkout)",
    )
    ap.add_argument(
        "--requests",
        "-n",
        type=int,
        default=512,
        help="requests per case and repetition (512; a multiple of 256, the record writer's "
        "batch, counts its Arrow conversions exactly)",
    )
    ap.add_argument("--repeat", type=int, default=5, help="repetitions, in rotating order (5)")
    ap.add_argument("--callgrind", action="store_true", help="also count instructions per request (valgrind)")
    ap.add_argument(
        "--callgrind-requests", type=int, default=256, help="requests per case under callgrind (256)"
    )
    ap.add_argument("--json", type=Path, metavar="FILE", help="write the figures to FILE")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    ap.add_argument("--rotate", type=int, default=0, help=argparse.SUPPRESS)
    return ap.parse_args(argv)


def usage_error(msg: str) -> int:
    print(f"request_cost.py: {msg}", file=sys.stderr)
    return 2


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    if args.child:
        return child(args)
    if args.requests < 1 or args.repeat < 1 or args.callgrind_requests < 1:
        return usage_error("--requests, --repeat and --callgrind-requests must be >= 1")
    codes = [c.resolve() for c in (args.code or [REPO])]
    for c in codes:
        if not (c / "swarm" / "__init__.py").is_file():
            return usage_error(f"--code {c}: no swarm package there (expected {c}/swarm/__init__.py)")
    if args.callgrind and shutil.which("valgrind") is None:
        return usage_error("--callgrind needs valgrind on PATH (apt-get install valgrind)")
    t0 = time.monotonic()
    head, body = render_response()
    response = describe(body)
    with tempfile.TemporaryDirectory(prefix="request-cost-") as work:
        path = Path(work) / "response.json"
        path.write_text(json.dumps({"head": head.decode("latin-1"), "body": body.decode()}))
        trees = measure(args, codes, path, Path(work))
    print_table(args, response, trees)
    print(f"({time.monotonic() - t0:.0f} s; command: {' '.join(['benchmarks/request_cost.py', *argv])})")
    if args.json:
        args.json.write_text(
            json.dumps(
                {
                    "command": " ".join(["benchmarks/request_cost.py", *argv]),
                    "requests": args.requests,
                    "repeat": args.repeat,
                    "callgrind_requests": args.callgrind_requests if args.callgrind else None,
                    "response": response,
                    "trees": trees,
                },
                indent=2,
            )
            + "\n"
        )
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv[1:]))
    except BenchError as e:
        print(f"request_cost.py: {e}", file=sys.stderr)
        sys.exit(1)
