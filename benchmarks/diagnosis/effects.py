"""Planted causes: what each one is (the ground truth the diagnosis is scored against) and what it changes.

A :class:`Plant` is one cause at one step: its kind (a cause kind of
:mod:`otel_verl.analysis.findings.common.kinds`), where it acts (``scope`` and the worker, replica, sample group,
request or phase) and one number, ``param``: seconds added to each span it touches, or (for the
multiplying kinds, :data:`MULTIPLYING`) the factor minus one. :class:`Effects` turns a step's plants into
the changes the simulation applies, per worker and per request.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from benchmarks.diagnosis.draws import RequestDraw
from otel_verl.analysis.findings.common import kinds as k

WHAT_IT_CHANGES: dict[str, str] = {
    k.SLOW_PHASE: "seconds added to one trainer phase",
    k.SLOW_START: "seconds added to a worker's preprocessing before its first request",
    k.SLOW_PREPROCESS: "seconds added to every preprocess span (initial prompt, each tool answer's merge)",
    k.ENGINE_WAIT: "seconds added before the engine receives each call",
    k.ENGINE_QUEUE: "seconds added to each call's queueing in the engine",
    k.SLOW_PREFILL: "seconds added to each call's prefill",
    k.SLOW_DECODE: "seconds per token multiplied",
    k.LONG_RESPONSE: "tokens of the request's last call multiplied (at the usual rate; capped at max_tokens)",
    k.SLOW_TOOL: "seconds added to each tool call",
    k.SLOW_REWARD: "seconds added to each request's reward",
    k.STALL: "the worker's process pauses: every span in flight stretches, everything later moves",
    k.SLOW_FINISH: "seconds added to a worker's post-processing after its last request",
}
"""The kinds planted, and how each one's ``param`` acts."""
MORE_TOKENS = "more_tokens"
"""Not a cause kind, a behaviour (the judgement classes, :mod:`.classes`): every call of the request decodes
``1 + param`` times the tokens, at the usual rate."""
MORE_TURNS = "more_turns"
"""Behaviour: ``round(param)`` more tool-calling turns per request."""
SLOWER_TOOL = "slower_tool"
"""Infrastructure: every tool call takes ``1 + param`` times as long."""
MULTIPLYING = frozenset({k.SLOW_DECODE, k.LONG_RESPONSE, MORE_TOKENS, SLOWER_TOOL})
ENGINE_SPAN_KINDS = frozenset({k.ENGINE_WAIT, k.ENGINE_QUEUE, k.SLOW_PREFILL})
"""Kinds only a run with the engine's own spans can show."""


@dataclass
class Plant:
    """One planted cause at one step, and (once sized) what it cost."""

    kind: str
    step: int
    scope: str
    workers: tuple[int, ...] = ()
    """Worker, request and sample plants: the worker it ran on; step and replica plants: empty."""
    replica: int | None = None
    sample_index: int | None = None
    request_ids: tuple[str, ...] = ()
    phase: str | None = None
    at: float = 0.0
    """Stall: where in the worker's busy time it starts (0-1)."""
    param: float = 0.0
    group: int = 0
    """Plants repeated over several steps share a group."""
    cost: float = 0.0
    """The step's duration with the plant minus without it (seconds)."""
    size: float = 0.0
    """``cost`` against the run's step-to-step spread."""
    target: float = 0.0
    """The size it was drawn to have (``size`` is what it got)."""
    meta: dict[str, Any] = field(default_factory=dict)

    def hits(self, worker: int, request: RequestDraw) -> bool:
        """Whether this plant acts on ``request`` of ``worker``."""
        if self.scope == k.SCOPE_STEP:
            return True
        if self.scope == k.SCOPE_WORKER:
            return worker in self.workers
        if self.scope == k.SCOPE_REPLICA:
            return request.replica == self.replica
        if self.scope == k.SCOPE_SAMPLE:
            return request.sample_index == self.sample_index
        if self.scope == k.SCOPE_REQUEST:
            return request.request_id in self.request_ids
        return False

    def on_worker(self, worker: int) -> bool:
        return self.scope in (k.SCOPE_STEP, k.SCOPE_REPLICA) or worker in self.workers

    def with_param(self, param: float) -> Plant:
        return Plant(**{**asdict(self), "param": param})

    def as_json(self) -> dict[str, Any]:
        return {key: list(v) if isinstance(v, tuple) else v for key, v in asdict(self).items()}


@dataclass(slots=True)
class RequestMods:
    """What the step's plants change in one request (additions in seconds, factors)."""

    pre: float = 0.0
    before: float = 0.0
    queue: float = 0.0
    prefill: float = 0.0
    decode: float = 1.0
    last_tokens: float = 1.0
    tokens: float = 1.0
    """Every call's tokens multiplied (the policy's answers grew)."""
    extra_turns: int = 0
    """Tool-calling turns added before the last one (the policy calls its tool more often)."""
    tool: float = 0.0
    tool_factor: float = 1.0
    reward: float = 0.0


NO_MODS = RequestMods()


@dataclass(slots=True)
class WorkerMods:
    start: float = 0.0
    finish: float = 0.0
    stall_at: float = 0.0
    stall_s: float = 0.0
    plants: tuple[Plant, ...] = ()
    """The step's plants that act on some of this worker's requests."""

    def request(self, worker: int, request: RequestDraw) -> RequestMods:
        mods = NO_MODS
        for plant in self.plants:
            if not plant.hits(worker, request):
                continue
            if mods is NO_MODS:
                mods = RequestMods()
            p = plant.param
            if plant.kind == k.SLOW_PREPROCESS:
                mods.pre += p
            elif plant.kind == k.ENGINE_WAIT:
                mods.before += p
            elif plant.kind == k.ENGINE_QUEUE:
                mods.queue += p
            elif plant.kind == k.SLOW_PREFILL:
                mods.prefill += p
            elif plant.kind == k.SLOW_DECODE:
                mods.decode *= 1 + p
            elif plant.kind == k.LONG_RESPONSE:
                mods.last_tokens *= 1 + p
            elif plant.kind == k.SLOW_TOOL:
                mods.tool += p
            elif plant.kind == k.SLOW_REWARD:
                mods.reward += p
            elif plant.kind == MORE_TOKENS:
                mods.tokens *= 1 + p
            elif plant.kind == MORE_TURNS:
                mods.extra_turns += round(p)
            elif plant.kind == SLOWER_TOOL:
                mods.tool_factor *= 1 + p
        return mods


_WORKER_LEVEL = frozenset({k.SLOW_START, k.SLOW_FINISH, k.STALL, k.SLOW_PHASE})


class Effects:
    """One step's plants, looked up per worker and per trainer phase."""

    def __init__(self, plants: Sequence[Plant] = ()) -> None:
        self.plants = tuple(plants)

    def worker(self, worker: int) -> WorkerMods:
        mods = WorkerMods()
        for plant in self.plants:
            if plant.kind == k.SLOW_PHASE or not plant.on_worker(worker):
                continue
            if plant.kind == k.SLOW_START:
                mods.start += plant.param
            elif plant.kind == k.SLOW_FINISH:
                mods.finish += plant.param
            elif plant.kind == k.STALL:
                mods.stall_at, mods.stall_s = plant.at, mods.stall_s + plant.param
        mods.plants = tuple(p for p in self.plants if p.kind not in _WORKER_LEVEL and p.on_worker(worker))
        return mods

    def phase_extra(self, name: str) -> float:
        return sum(p.param for p in self.plants if p.kind == k.SLOW_PHASE and p.phase == name)

    def touches(self, worker: int) -> bool:
        """Whether any plant of the step can change this worker's timeline."""
        return any(p.kind != k.SLOW_PHASE and p.on_worker(worker) for p in self.plants)
