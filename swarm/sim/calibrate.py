"""Closed-loop runs of a profile on a virtual clock: tune a profile in seconds, not minutes.

`python -m swarm.sim.calibrate --profile rtx5090x4-qwen3.6-27b` replays seed 000's two
closed-loop tests (N clients, each sending its next request as soon as the last one ends)
against the engine alone, with time advanced step by step instead of slept, and prints QPS,
mean running sequences and KV usage per level next to the seed's QPS. The real-time check
over HTTP is tests/integration/test_sim_calibration.py.
"""

from __future__ import annotations

import argparse
import heapq
import random
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from swarm.core.tokens import chat_prompt_tokens
from swarm.sim.engine import Engine, Sequence, prompt_block_hashes
from swarm.sim.profile import Profile, load_profile

# seed 000, /tmp/short_output_test.py and /tmp/realistic_test.py
SHORT_QA_PROMPTS = (
    "1+1=?",
    "中国首都是哪里",
    "今天周几",
    "你好",
    "Python 怎么读取文件",
    "翻译: cat",
    "什么是 GPU",
    "JavaScript 缩写",
    "圆周率前 5 位",
    "推荐一本书",
    "周末快乐怎么说",
    "Hello",
    "1024 是 2 的几次方",
    "HTTP 默认端口",
    "微信英文是",
)
CHAT_PROMPTS = (
    "今天天气怎么样?",
    "推荐一首歌",
    "你好",
    "帮我翻译: hello world",
    "讲个笑话",
    "什么是 Python?",
    "1+1 等于几",
    "北京有什么景点",
    "怎么减肥",
    "明天会下雨吗",
)
SEED_SHORT_QA = {10: 13.4, 30: 28.1, 64: 45.2, 128: 60.2, 200: 64.9, 256: 64.7}
SEED_CHAT = {10: 4.7, 30: 15.1, 64: 22.9, 128: 29.1, 200: 32.2}
CLIENT_GAP_S = 0.003  # between one response's end and the next request's arrival
# a request drawn by a workload: (the prompt's pseudo-tokens, chat template included; its max_tokens)
Draw = Callable[[random.Random], tuple[list[str], int]]


@dataclass
class LevelResult:
    concurrency: int
    qps: float
    mean_running: float
    max_kv: float
    mean_kv: float
    preemptions: int
    mean_output_tokens: float
    ttft_p99: float | None = None  # of the requests sent after warm-up that finished in the window
    ttft_share_above: float | None = None  # ... the share of them whose TTFT exceeds `ttft_limit_s`
    output_tok_s: float = 0.0  # output tokens of the requests finished in the window, per second
    tpot_mean: float | None = None  # their mean time per output token after the first


class _Clients:
    """`concurrency` clients in a closed loop on the engine's virtual clock: each sends a prompt
    drawn from `prompts` (or by `draw`) CLIENT_GAP_S after its last answer ended (`send_again`)."""

    def __init__(
        self,
        profile: Profile,
        prompts: tuple[str, ...],
        max_tokens: int,
        concurrency: int,
        seed: int,
        draw: Draw | None = None,
        gap_s: float = CLIENT_GAP_S,
    ):
        self.profile, self.prompts, self.max_tokens = profile, prompts, max_tokens
        self.draw, self.gap_s = draw, gap_s
        self.rng = random.Random(seed)
        self.engine = Engine(profile)
        self.finished: list[Sequence] = []  # since the last step
        self.engine.on_finish = self.finished.append
        self.arrivals: list[tuple[float, int]] = [(0.0, i) for i in range(concurrency)]  # (time, tie-break)
        self.counter = concurrency

    def busy(self) -> bool:
        return bool(self.arrivals or self.engine.running or self.engine.waiting)

    def step(self, t: float) -> tuple[float, bool]:
        """Admit the requests due by `t` and run one engine step: (the time after it, True), or
        (the next arrival's time, False) when nothing could be scheduled."""
        self.finished.clear()
        profile, rng = self.profile, self.rng
        while self.arrivals and self.arrivals[0][0] <= t:
            at, _ = heapq.heappop(self.arrivals)
            if self.draw is None:
                pieces = chat_prompt_tokens([{"role": "user", "content": rng.choice(self.prompts)}])
                max_tokens = self.max_tokens
            else:
                pieces, max_tokens = self.draw(rng)
            total, _, _ = profile.draw_output(rng, max_tokens, thinking=False)
            hashes = prompt_block_hashes(pieces, profile.block_size) if profile.prefix_caching else ()
            self.engine.add(Sequence(f"r{self.counter}", len(pieces), total, hashes, at))
            self.counter += 1
        plan = self.engine.schedule(t)
        if plan is None:
            return self.arrivals[0][0], False
        t += self.engine.step_seconds(plan)
        self.engine.complete(plan, t)
        return t, True

    def send_again(self, t: float) -> None:
        heapq.heappush(self.arrivals, (t + self.gap_s, self.counter))
        self.counter += 1


def closed_loop(
    profile: Profile,
    prompts: tuple[str, ...],
    max_tokens: int,
    concurrency: int,
    warmup_s: float,
    duration_s: float,
    seed: int = 0,
    ttft_limit_s: float | None = None,
    draw: Draw | None = None,
    gap_s: float = CLIENT_GAP_S,
) -> LevelResult:
    """`concurrency` clients in a closed loop on the virtual clock; QPS over `duration_s` after
    warm-up, and the steady TTFT p99 (the engine's time to first token: the client and HTTP add
    about a millisecond on the real-time simulator). `draw`, when given, draws each request
    instead of `prompts` and `max_tokens`; `gap_s` is each request's time outside the engine (from one
    answer's end to the next request's arrival: client, HTTP, API server)."""
    clients = _Clients(profile, prompts, max_tokens, concurrency, seed, draw, gap_s)
    engine = clients.engine
    t = 0.0
    end = warmup_s + duration_s
    done_in_window = 0
    tokens_in_window = 0
    running_sum = kv_sum = 0.0
    samples = 0
    max_kv = 0.0
    preempt_start = 0
    ttfts: list[float] = []
    tpots: list[float] = []
    while t < end:
        t, stepped = clients.step(t)
        if not stepped:
            continue
        if t >= warmup_s:
            if preempt_start == 0:
                preempt_start = engine.counters.preemptions or -1
            running_sum += len(engine.running)
            kv = engine.kv_cache_usage
            kv_sum += kv
            max_kv = max(max_kv, kv)
            samples += 1
        for seq in clients.finished:
            if warmup_s <= t < end:
                done_in_window += 1
                tokens_in_window += seq.generated
                if seq.first_token_time is not None and seq.generated > 1:
                    tpots.append((t - seq.first_token_time) / (seq.generated - 1))
                if seq.arrival_time >= warmup_s and seq.first_token_time is not None:
                    ttfts.append(seq.first_token_time - seq.arrival_time)
            clients.send_again(t)
    preemptions = engine.counters.preemptions - max(preempt_start, 0)
    return LevelResult(
        concurrency=concurrency,
        qps=done_in_window / duration_s,
        mean_running=running_sum / max(samples, 1),
        max_kv=max_kv,
        mean_kv=kv_sum / max(samples, 1),
        preemptions=preemptions,
        mean_output_tokens=tokens_in_window / max(done_in_window, 1),
        ttft_p99=float(np.quantile(ttfts, 0.99)) if ttfts else None,
        ttft_share_above=(
            float(np.mean(np.asarray(ttfts) > ttft_limit_s)) if ttfts and ttft_limit_s is not None else None
        ),
        output_tok_s=tokens_in_window / duration_s,
        tpot_mean=float(np.mean(tpots)) if tpots else None,
    )


def seed_script(
    profile: Profile,
    prompts: tuple[str, ...],
    max_tokens: int,
    concurrency: int,
    duration_s: float = 30.0,
    seed: int = 0,
) -> float:
    """QPS exactly as seed 000's script counts it: fresh start, loops stop sending at `duration_s`,
    every request sent before then counts once it ends, divided by `duration_s`. Each loop's last
    request ends after the deadline, so this is about steady QPS + concurrency / duration_s."""
    clients = _Clients(profile, prompts, max_tokens, concurrency, seed)
    t = 0.0
    done = 0
    while clients.busy():
        t, stepped = clients.step(t)
        if not stepped:
            continue
        for _ in clients.finished:
            done += 1
            if t + CLIENT_GAP_S < duration_s:
                clients.send_again(t)
    return done / duration_s


def report(
    profile: Profile,
    name: str,
    prompts: tuple[str, ...],
    max_tokens: int,
    seed_qps: dict[int, float],
    warmup_s: float,
    duration_s: float,
) -> None:
    print(f"{name}: max_tokens={max_tokens}, {duration_s:.0f} s per level after {warmup_s:.0f} s warm-up")
    print("  conc  steady  +N/30  script   seed   diff  running  kv_mean  kv_max  preempt  out_tok")
    for conc, want in seed_qps.items():
        r = closed_loop(profile, prompts, max_tokens, conc, warmup_s, duration_s)
        script = seed_script(profile, prompts, max_tokens, conc)
        print(
            f"  {conc:4d} {r.qps:7.1f} {r.qps + conc / 30:6.1f} {script:7.1f} {want:6.1f} "
            f"{100 * (script / want - 1):+5.0f}% {r.mean_running:8.1f} "
            f"{r.mean_kv:8.2f} {r.max_kv:7.2f} {r.preemptions:8d} {r.mean_output_tokens:8.1f}"
        )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--profile", default="rtx5090x4-qwen3.6-27b")
    ap.add_argument("--warmup", type=float, default=10.0)
    ap.add_argument("--duration", type=float, default=30.0)
    args = ap.parse_args()
    profile = load_profile(args.profile)
    report(profile, "short QA", SHORT_QA_PROMPTS, 50, SEED_SHORT_QA, args.warmup, args.duration)
    report(profile, "general chat", CHAT_PROMPTS, 150, SEED_CHAT, args.warmup, args.duration)


if __name__ == "__main__":
    main()
