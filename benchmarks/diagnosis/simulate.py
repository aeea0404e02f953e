"""One AgentLoopWorker's step as a timeline: its draws, changed by the step's plants.

The worker's requests are asyncio tasks started together after its preprocessing; each runs its turns
back to back: (preprocess) → engine call (before the engine → queue → prefill → decode = tokens × s/token
→ the answer back) → tool-call parsing → tool call → merge of the tool's answer, then its reward. The
worker ends a little after its last request. Times are seconds from the step's ``gen`` start, before any
stall; a stall (:meth:`WorkerTimeline.warp`) moves every moment after it by its length, so whatever was
in flight stretches and nothing happens meanwhile — except inside the engine, which is another process:
an engine span keeps its length and the answer waits (:meth:`WorkerTimeline.engine_window`).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from benchmarks.diagnosis.draws import RequestDraw, TurnDraw, WorkerDraw
from benchmarks.diagnosis.effects import RequestMods, WorkerMods
from benchmarks.diagnosis.shape import Shape


@dataclass(slots=True)
class TurnTimeline:
    start: float
    call_start: float
    arrival: float
    scheduled: float
    first_token: float
    last_token: float
    engine_end: float
    call_end: float
    parse_end: float
    post_end: float
    tool_end: float
    end: float
    """After the merge of the tool's answer (= ``post_end`` on the last turn)."""
    tokens: int
    prompt_tokens: int
    truncated: bool
    has_tool: bool
    draw: TurnDraw
    """The turn's draws (an extra turn a plant adds repeats an earlier turn's)."""


@dataclass(slots=True)
class RequestTimeline:
    draw: RequestDraw
    start: float
    turns: list[TurnTimeline]
    reward_start: float
    end: float
    truncated: bool

    @property
    def tokens(self) -> int:
        return sum(t.tokens for t in self.turns)


@dataclass(slots=True)
class WorkerTimeline:
    worker: int
    draw: WorkerDraw
    start: float
    """The worker span's start (its dispatch)."""
    first_request: float
    requests: list[RequestTimeline]
    finish: float
    stall_at: float
    """When its process paused (before warping); meaningful only when ``stall_s`` > 0."""
    stall_s: float

    def warp(self, t: float) -> float:
        return t + self.stall_s if self.stall_s and t >= self.stall_at else t

    def engine_window(self, turn: TurnTimeline) -> tuple[float, float]:
        """The engine span's (start, end) after the stall: the engine kept working through it."""
        start = self.warp(turn.arrival)
        return start, start + (turn.engine_end - turn.arrival)

    def request_ends(self) -> list[float]:
        return [self.warp(r.end) for r in self.requests]


def turn_draws(shape: Shape, draw: RequestDraw, extra: int) -> list[TurnDraw]:
    """The request's turns, with ``extra`` more before its last one (the policy calling its tool more often): each
    repeats an earlier tool-calling turn's draws (a one-turn request's tool call takes the run's median)."""
    if extra <= 0:
        return draw.turns
    earlier = draw.turns[:-1] or [replace(draw.turns[-1], tool=shape.tool_median, merge=0.015)]
    added = [earlier[i % len(earlier)] for i in range(extra)]
    return [*draw.turns[:-1], *added, draw.turns[-1]]


def _request(shape: Shape, draw: RequestDraw, start: float, mods: RequestMods, s_per_token: float) -> RequestTimeline:
    t = start + draw.pending
    turns: list[TurnTimeline] = []
    new_tokens = draw.prompt_tokens
    draws = turn_draws(shape, draw, mods.extra_turns)
    last_index = len(draws) - 1
    for i, td in enumerate(draws):
        turn_start = t
        pre = td.pre + (mods.pre if i == 0 else 0.0)
        call_start = turn_start + pre
        tokens = td.tokens
        if mods.tokens != 1.0:
            tokens = min(shape.max_tokens, max(1, round(tokens * mods.tokens)))
        if i == last_index and mods.last_tokens != 1.0:
            tokens = min(shape.max_tokens, round(tokens * mods.last_tokens))
        truncated = tokens >= shape.max_tokens
        arrival = call_start + td.before + mods.before
        queued = arrival + td.engine_other / 2
        scheduled = queued + td.queue * shape.queue_factor(draw.replica) + mods.queue
        first = scheduled + new_tokens * shape.prefill_s_per_token * td.prefill_jitter + mods.prefill
        last = first + tokens * s_per_token * td.rate * mods.decode
        engine_end = last + td.engine_other / 2
        call_end = engine_end + td.after
        parse_end = call_end + td.parse
        post_end = parse_end + td.post
        has_tool = td.tool is not None and not truncated
        tool_end = post_end + (td.tool * mods.tool_factor + mods.tool if has_tool else 0.0)  # type: ignore[operator]
        end = tool_end + (td.merge + mods.pre if has_tool else 0.0)
        turns.append(
            TurnTimeline(
                turn_start,
                call_start,
                arrival,
                scheduled,
                first,
                last,
                engine_end,
                call_end,
                parse_end,
                post_end,
                tool_end,
                end,
                tokens,
                new_tokens,
                truncated,
                has_tool,
                td,
            )
        )
        t = end
        new_tokens = tokens + td.tool_tokens
        if not has_tool:
            break
    reward_start = t
    end = reward_start + draw.reward + mods.reward + draw.finalization
    return RequestTimeline(draw, start, turns, reward_start, end, any(x.truncated for x in turns))


def simulate_worker(shape: Shape, worker: int, draw: WorkerDraw, mods: WorkerMods) -> WorkerTimeline:
    """The worker's timeline (seconds from the step's ``gen`` start) with ``mods`` applied."""
    start = draw.dispatch
    first = start + draw.start + mods.start
    s_per_token = shape.s_per_token * shape.concurrency_factor()
    requests = [
        _request(shape, rq, first + rq.submit, mods.request(worker, rq) if mods.plants else _NONE, s_per_token)
        for rq in draw.requests
    ]
    last = max(r.end for r in requests)
    stall_at = first + mods.stall_at * (last - first)
    return WorkerTimeline(worker, draw, start, first, requests, draw.finish + mods.finish, stall_at, mods.stall_s)


_NONE = RequestMods()
