"""Write synthetic seed logs: ``step_<n>/worker_<rank>.jsonl`` exactly as the seed's ``SGLangLogManager`` writes them.

Why: issue 25 needs import-legacy measured on ~273 MB of seed logs and a round trip checked field by
field; no real seed run is stored here. Event names, ``extra`` keys, key order and how often each event
is written follow the seed logger (PrinsYin/verl, branch ``multiturn_profile_log``,
``verl/workers/rollout/sglang_rollout/sglang_rollout.py``, ``_req_level_generate_sequences`` and
``_async_rollout_a_request``):

- once per worker-step: ``preprocessing_duration``, ``async_generate_duration``, ``sorting_duration``,
  ``barrier_wait_duration``, ``broadcast_duration``, ``data_extraction_duration``, ``padding_duration``,
  ``concatenation_duration``, ``batch_construction_duration``, ``cache_flush_duration``,
  ``final_construction_duration``, ``step_response_length_stats`` (no duration), ``total_step_duration``;
- per request: ``request_start`` (no duration), ``pending_state_handling``, ``tool_creation_pending_state``,
  per turn ``turn_start`` (no duration), ``turn_pre_process``, ``engine_generate_setup``,
  ``engine_async_generate_actual``, ``turn_engine_call``, ``turn_tool_parsing`` (tool turns),
  ``turn_post_process``, ``turn_end``, then ``tool_execution``, ``tool_response_processing``,
  ``tool_calling_state`` after a tool turn; ``main_loop``, ``reward_calculation``, ``finalization`` and
  ``async_rollout_request_complete`` with ``turn_timings`` and the summary fields.

Lines of concurrent requests interleave by their timestamp (the event's end), as the seed's
line-buffered appends do. Usage: ``python benchmarks/gen_seed_logs.py OUT [--mb 273]`` or
:func:`write_seed_logs`.
"""

from __future__ import annotations

import argparse
import json
import random
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

T0 = datetime(2025, 7, 13, 11, 4, 25, 706221)
FINISH = "FinishReasonTypeEnum."
BYTES_PER_REQUEST = 7_800
"""Mean bytes of one request's lines with the default turn mix (measured on this generator)."""
TURN_WEIGHTS: list[float] = [0.35, 0.35, 0.18, 0.08, 0.04]
"""Chance of a request having 1..5 turns (a benchmark may set another mix to vary the run's shape)."""


@dataclass(frozen=True)
class Plant:
    """Slowness planted in one request: a stall of its first engine call, a slow engine call of one turn
    index, a slow reward (seconds added; the random draws stay the same, so the rest of the run does too)."""

    stall: float = 0.0
    slow_turn: tuple[int, float] | None = None
    reward: float = 0.0

    def engine_extra(self, turn: int) -> float:
        extra = self.stall if turn == 0 else 0.0
        if self.slow_turn is not None and self.slow_turn[0] == turn:
            extra += self.slow_turn[1]
        return extra


class SeedLines:
    """A worker-step's log lines as (end time, line), in the seed logger's key order.

    ``warp``: maps a moment of the undisturbed timeline to the written one (a paused process: every moment
    after the pause moves later, a line in flight across it stretches); ``None`` writes the times as given."""

    def __init__(self, worker: int, step: int, warp: Callable[[float], float] | None = None) -> None:
        self.worker, self.step = worker, step
        self.warp = warp
        self.items: list[tuple[float, str]] = []
        self.start = self.barrier_at = 0.0
        """Worker-step start, and when its rollout ended and the barrier wait began."""
        self.lengths: list[int] = []
        self.actual: list[int] = []

    def log(self, end: float, event: str, duration: float | None = None, extra: dict[str, Any] | None = None) -> None:
        if self.warp is not None:
            start = None if duration is None else end - duration
            end = self.warp(end)
            if start is not None:
                duration = end - self.warp(start)
        entry: dict[str, Any] = {"timestamp": (T0 + timedelta(seconds=end)).isoformat(), "event": event}
        if duration is not None:
            entry["duration_sec"] = duration
        if extra is not None:
            entry["extra"] = extra
        entry["workid"] = self.worker
        entry["step"] = self.step
        self.items.append((end, json.dumps(entry)))

    def text(self) -> str:
        self.items.sort(key=lambda x: x[0])
        return "".join(line + "\n" for _, line in self.items)


@dataclass
class SeedTurn:
    """One turn's timings as the seed logs them, in seconds: ``gen`` is ``engine_async_generate_actual`` (the
    engine's own time), ``engine_tail`` the rest of ``turn_engine_call``, ``parse`` its ``turn_tool_parsing``
    (0 without a tool call), ``post`` the rest of ``turn_post_process``; ``finish`` the reason after
    :data:`FINISH`; ``tool`` None on the last turn; ``tool_tokens`` what the tool's answer adds."""

    pre: float
    setup: float
    gen: float
    tokens: int
    engine_tail: float
    parse: float
    finish: str
    post: float
    tool: float | None = None
    merge: float = 0.0
    tool_tokens: int = 0


@dataclass
class SeedRequest:
    """One ``_async_rollout_a_request``'s draws: everything :func:`log_request` writes."""

    request_id: str
    prompt_length: int
    sequence_length: int
    pending: float
    turns: list[SeedTurn]
    reward: float
    finalization: float
    actual_share: float
    """``actual_response_tokens`` / ``response_length``."""


def draw_request(rng: random.Random, plant: Plant | None = None) -> SeedRequest:
    """Random timings of one request (``plant``: extra seconds on its engine calls or reward)."""
    plant = plant or Plant()
    rid = str(uuid.UUID(int=rng.getrandbits(128), version=4))
    prompt = rng.randint(80, 400)
    pending = rng.uniform(0.001, 0.02)
    max_turns = rng.choices(range(1, len(TURN_WEIGHTS) + 1), TURN_WEIGHTS)[0]
    seq = rng.randint(100, 400)
    turns: list[SeedTurn] = []
    for turn in range(max_turns):
        pre = rng.uniform(1e-4, 2e-3)
        setup = rng.uniform(1e-5, 1e-4)
        gen = rng.lognormvariate(0.8, 0.6) + plant.engine_extra(turn)
        tokens = rng.randint(20, 600)
        tail = rng.uniform(1e-5, 1e-4)
        tool = turn < max_turns - 1
        parse = rng.uniform(1e-4, 3e-3) if tool else 0.0
        finish = "TOOL_CALL" if tool else rng.choice(["STOP", "STOP", "STOP", "LENGTH"])
        x = SeedTurn(pre, setup, gen, tokens, tail, parse, finish, rng.uniform(1e-4, 1e-3))
        if tool:
            x.tool = rng.lognormvariate(-1.5, 0.8)
            x.merge = rng.uniform(1e-4, 2e-3)
            x.tool_tokens = rng.randint(20, 80)
        turns.append(x)
    reward = rng.uniform(1e-3, 0.05) + plant.reward
    fin = rng.uniform(1e-4, 1e-3)
    return SeedRequest(rid, prompt, seq, pending, turns, reward, fin, rng.uniform(0.8, 1.0))


def log_request(out: SeedLines, t: float, batch_id: int, req: SeedRequest) -> tuple[float, int, int]:
    """Write one request's lines from ``t``; returns (end time, response length, actual response tokens)."""
    rid = req.request_id
    start = t
    out.log(t, "request_start", extra={"request_id": rid, "initial_prompt_length": req.prompt_length})
    main_start = t
    d = req.pending
    out.log(t + d * 0.8, "tool_creation_pending_state", d * 0.8, {"request_id": rid})
    t += d
    out.log(t, "pending_state_handling", d, {"request_id": rid})
    timings: list[dict[str, Any]] = []
    seq = req.sequence_length
    response = 0
    for turn, x in enumerate(req.turns):
        turn_start = t
        out.log(t, "turn_start", extra={"request_id": rid, "turn": turn, "current_sequence_length": seq})
        t += x.pre
        out.log(t, "turn_pre_process", x.pre, {"request_id": rid, "turn": turn, "generation_prompt_length": seq})
        out.log(t + x.setup, "engine_generate_setup", x.setup, {"request_id": rid})
        out.log(t + x.setup + x.gen, "engine_async_generate_actual", x.gen, {"request_id": rid})
        engine = x.setup + x.gen + x.engine_tail
        t += engine
        out.log(
            t,
            "turn_engine_call",
            engine,
            {"request_id": rid, "turn": turn, "generated_tokens": x.tokens, "output_text_length": x.tokens * 4},
        )
        response += x.tokens
        seq += x.tokens
        tool = x.tool is not None
        post_start = t
        if tool:
            t += x.parse
            out.log(
                t,
                "turn_tool_parsing",
                x.parse,
                {"request_id": rid, "turn": turn, "raw_tool_calls": 1, "parsed_tool_calls": 1},
            )
        finish = FINISH + x.finish
        t += x.post
        post = t - post_start
        fields = {"request_id": rid, "turn": turn, "has_tool_calls": tool, "parsed_tool_calls": int(tool)}
        out.log(t, "turn_post_process", post, {**fields, "finish_reason": finish, "tool_parsing_duration": x.parse})
        total = t - turn_start
        timing = {
            "turn": turn,
            "total_duration": total,
            "pre_process_duration": x.pre,
            "engine_call_duration": engine,
            "post_process_duration": post,
            "tool_parsing_duration": x.parse,
            "has_tool_calls": tool,
            "finish_reason": finish,
        }
        timings.append(timing)
        out.log(
            t,
            "turn_end",
            total,
            {
                "request_id": rid,
                **{k: v for k, v in timing.items() if k not in ("total_duration",)},
                "engine_call_pct": round(engine / total * 100, 2),
                "post_process_pct": round(post / total * 100, 2),
            },
        )
        if x.tool is not None:
            calling_start = t
            t += x.tool
            out.log(t, "tool_execution", x.tool, {"request_id": rid, "turn": turn + 1})
            t += x.merge
            out.log(t, "tool_response_processing", x.merge, {"request_id": rid, "turn": turn + 1})
            out.log(t, "tool_calling_state", t - calling_start, {"request_id": rid, "turn": turn + 1})
            seq += x.tool_tokens
    out.log(t, "main_loop", t - main_start, {"request_id": rid})
    t += req.reward
    out.log(t, "reward_calculation", req.reward, {"request_id": rid})
    t += req.finalization
    out.log(t, "finalization", req.finalization, {"request_id": rid})
    t += 1e-5
    total = t - start
    engine = sum(x["engine_call_duration"] for x in timings)
    post = sum(x["post_process_duration"] for x in timings)
    n = len(timings)
    actual = int(response * req.actual_share)
    out.log(
        t,
        "async_rollout_request_complete",
        total,
        {
            "request_id": rid,
            "batch_data_id": batch_id,
            "finish_reason": timings[-1]["finish_reason"],
            "turns": n,
            "user_turns": 0,
            "turns_with_tools": sum(x["has_tool_calls"] for x in timings),
            "response_length": response,
            "actual_response_tokens": actual,
            "total_sequence_length": seq,
            "avg_turn_duration": round(sum(x["total_duration"] for x in timings) / n, 4),
            "avg_engine_call_duration": round(engine / n, 4),
            "avg_post_process_duration": round(post / n, 4),
            "total_engine_time": round(engine, 4),
            "total_post_process_time": round(post, 4),
            "engine_time_pct": round(engine / total * 100, 2),
            "post_process_time_pct": round(post / total * 100, 2),
            "turn_timings": timings,
        },
    )
    return t, response, actual


@dataclass
class SeedWorkerStep:
    """One worker's ``_req_level_generate_sequences`` draws: what :func:`log_worker_step` writes."""

    preprocessing: float
    requests: list[tuple[float, SeedRequest]]
    """(submission offset after the preprocessing, the request) each."""
    finish: float
    """From the last request's end to the end of ``async_generate_duration``."""
    sorting: float


def draw_worker_step(requests: int, rng: random.Random, plant: Plant | None = None) -> SeedWorkerStep:
    """Random timings of one worker-step (``plant``: slowness of its first request)."""
    pre = rng.uniform(0.5, 2.0)
    reqs = [(rng.uniform(0, 0.05), draw_request(rng, plant if i == 0 else None)) for i in range(requests)]
    return SeedWorkerStep(pre, reqs, rng.uniform(0.01, 0.05), rng.uniform(1e-5, 1e-4))


def log_worker_step(
    worker: int,
    step: int,
    start: float,
    draws: SeedWorkerStep,
    warp: Callable[[float], float] | None = None,
    batch_ids: list[int] | None = None,
) -> SeedLines:
    """The lines of one worker-step up to its barrier wait (:func:`close_step` writes the rest); ``batch_ids``:
    each request's ``batch_data_id`` (its prompt's index; default its position)."""
    out = SeedLines(worker, step, warp)
    out.start = t = start
    t += draws.preprocessing
    out.log(t, "preprocessing_duration", draws.preprocessing)
    gen_start = t
    ends = []
    for i, (offset, req) in enumerate(draws.requests):
        end, length, act = log_request(out, gen_start + offset, batch_ids[i] if batch_ids else i, req)
        ends.append(end)
        out.lengths.append(length)
        out.actual.append(act)
    t = max(ends) + draws.finish
    out.log(t, "async_generate_duration", t - gen_start)
    out.log(t + draws.sorting, "sorting_duration", draws.sorting)
    out.barrier_at = t + draws.sorting
    if warp is not None:
        out.start, out.barrier_at = warp(out.start), warp(out.barrier_at)
    return out


def worker_step(
    worker: int, step: int, start: float, requests: int, rng: random.Random, plant: Plant | None = None
) -> SeedLines:
    """One worker's ``_req_level_generate_sequences`` (``plant``: slowness of its first request)."""
    return log_worker_step(worker, step, start, draw_worker_step(requests, rng, plant))


TAIL_EVENTS: tuple[tuple[str, float, float], ...] = (
    ("broadcast_duration", 0.01, 0.2),
    ("data_extraction_duration", 0.05, 0.4),
    ("padding_duration", 0.01, 0.05),
    ("concatenation_duration", 1e-3, 5e-3),
    ("batch_construction_duration", 1e-4, 1e-3),
    ("cache_flush_duration", 0.01, 0.1),
    ("final_construction_duration", 1e-3, 1e-2),
)
"""The worker-step's events after the barrier wait, each with the range its seconds are drawn from."""


def draw_tail(rng: random.Random) -> list[float]:
    """Seconds of each of :data:`TAIL_EVENTS`."""
    return [rng.uniform(lo, hi) for _, lo, hi in TAIL_EVENTS]


def close_step(out: SeedLines, barrier_end: float, tail: list[float]) -> None:
    """The worker-step lines from the barrier on: wait, tail phases (``tail``: seconds each), length stats, total."""
    lengths, actual = out.lengths, out.actual
    t = barrier_end
    out.log(t, "barrier_wait_duration", t - out.barrier_at)
    for (event, _, _), d in zip(TAIL_EVENTS, tail, strict=True):
        t += d
        out.log(t, event, d)
    s = sorted(lengths)
    out.log(
        t,
        "step_response_length_stats",
        extra={
            "response_lengths": lengths,
            "actual_response_tokens": actual,
            "response_length_mean": sum(s) / len(s),
            "response_length_median": float(s[len(s) // 2]),
            "response_length_p80": float(s[int(0.8 * (len(s) - 1))]),
            "response_length_p95": float(s[int(0.95 * (len(s) - 1))]),
            "response_length_max": s[-1],
            "response_length_min": s[0],
            "requests_over_500": sum(x > 500 for x in s),
            "requests_over_1000": sum(x > 1000 for x in s),
            "batch_size": len(s),
        },
    )
    out.log(t, "total_step_duration", t - out.start)


def write_seed_logs(
    out: str | Path,
    steps: int = 4,
    workers: int = 4,
    requests: int = 16,
    seed: int = 0,
    stall: dict[tuple[int, int], float] | None = None,
    plants: dict[tuple[int, int], Plant] | None = None,
) -> Path:
    """Write ``steps`` × ``workers`` files (steps numbered from 1) of ``requests`` trajectories each.

    ``stall``: ``{(step, worker): seconds}`` added to that worker's first request's first engine call;
    ``plants``: ``{(step, worker): Plant(...)}``, any planted slowness of that worker's first request.
    Steps follow each other (a step starts where the previous one's slowest worker finished + 20 s of training).
    """
    root = Path(out)
    rng = random.Random(seed)
    plan = {key: Plant(stall=sec) for key, sec in (stall or {}).items()} | (plants or {})
    t = 0.0
    for step in range(1, steps + 1):
        logs = [worker_step(w, step, t, requests, rng, plan.get((step, w))) for w in range(workers)]
        release = max(x.barrier_at for x in logs) + rng.uniform(1e-3, 1e-2)
        for w, lines in enumerate(logs):
            close_step(lines, release, draw_tail(rng))
            path = root / f"step_{step}" / f"worker_{w}.jsonl"
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(lines.text())
        t = release + 1.0 + 20.0
    return root


def size_for(mb: float, workers: int = 8, requests: int = 64) -> int:
    """Steps needed for about ``mb`` megabytes with ``workers`` × ``requests`` per step."""
    return max(1, round(mb * 1e6 / (BYTES_PER_REQUEST * workers * requests)))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out")
    ap.add_argument("--mb", type=float, default=273.0)
    ap.add_argument("--workers", type=int, default=8)
    ap.add_argument("--requests", type=int, default=64)
    args = ap.parse_args()
    steps = size_for(args.mb, args.workers, args.requests)
    write_seed_logs(args.out, steps, args.workers, args.requests)
    total = sum(p.stat().st_size for p in Path(args.out).rglob("*.jsonl"))
    print(f"{args.out}: {steps} steps × {args.workers} workers × {args.requests} requests, {total / 1e6:.1f} MB")


if __name__ == "__main__":
    main()
