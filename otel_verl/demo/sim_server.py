"""A simulated LLM server actor that behaves like one, for the CPU demo and tests.

It answers verl's ``server.generate.remote(request_id=, prompt_ids=, sampling_params=, ...)`` with a
``TokenOutput``, and models what makes real rollouts long-tailed:

- per-token decode time that grows with the number of requests decoding at once (shared capacity);
- heavy-tailed (log-normal) response lengths, capped at ``max_tokens`` → ``stop_reason="length"``;
- hermes-format ``<tool_call>`` JSON that verl's HermesToolParser really parses, fewer on later turns;
- over-sampling: once ``target`` requests of a step completed, the rest are aborted
  (``stop_reason="aborted"``) like SGLang's ``abort_request``;
- planted slowness (a stalled sample index, a slow turn) for the analyzer's tests.

As an engine it also plays vLLM's part in tracing: it pops the W3C carrier verl's client sent and,
when a request finishes, makes vLLM's ``llm_request`` span under it (``gen_ai.latency.*`` queue, prefill,
decode seconds from its own timeline; none for an aborted request, as vLLM): see
:mod:`otel_verl.demo.sim_engine_spans`. Requests beyond ``max_running`` wait in a queue (vLLM's
``max_num_seqs``); the demo can run several replicas behind verl's own load balancer.
"""

from __future__ import annotations

import asyncio
import math
import random
import re
import sys
import time
import zlib
from dataclasses import dataclass, field, replace
from typing import Any

from otel_verl import semconv
from otel_verl.demo import plants
from otel_verl.demo.sim_control import EngineControl
from otel_verl.demo.sim_engine_spans import EngineTimeline, record_llm_request

QUESTION_INDEX = re.compile(r"Question #(\d+)")
ASSISTANT_HEADER = "<|im_start|>assistant"
FILLER = "Thinking step by step. "


@dataclass
class SimServerConfig:
    """Knobs of the simulated engine (all times in seconds)."""

    seconds_per_token: float = 0.0004
    capacity: int = 32
    """Requests decoded at full speed together; beyond that each one slows down proportionally."""
    median_tokens: int = 60
    tail_sigma: float = 0.9
    tool_call_probability: float = 0.75
    tool_call_decay: float = 0.45
    """Per-turn factor on the tool-call probability (turn t: p * decay**t)."""
    prefill_seconds_per_token: float = 0.00001
    seed: int = 0
    stall: dict[int, float] = field(default_factory=dict)
    """sample index → seconds its first engine call stalls (a planted idle gap)."""
    slow_turn: dict[int, tuple[int, float] | tuple[int, float, str]] = field(default_factory=dict)
    """sample index → (turn index, extra seconds[, where]) for that turn's engine call; where the seconds go
    in the engine's own account: ``decode`` (default: a slow generation), ``queue`` (waiting in the engine's
    queue) or ``before`` (before the engine received the request: a slow Ray hop / load balancer)."""
    long_response: dict[int, int] = field(default_factory=dict)
    """sample index → tokens its first engine call decodes (a planted long response: its ``max_tokens`` cap
    is raised to that; the usual seconds per token)."""
    decode_factor: float = 1.0
    """Every engine call decodes at this multiple of ``seconds_per_token`` (a planted step-wide slowdown)."""
    max_running: int = 256
    """Requests the engine runs at once (vLLM's ``max_num_seqs``); the rest wait in its queue."""
    engine_spans: str = "llm_request"
    """The shape of the engine's own spans (:data:`otel_verl.demo.sim_engine_spans.STYLES`)."""
    trajectories_reported: bool = False
    """True when the reward actor reports every finished trajectory (``trajectory_done``, the demo);
    else a call that answers without a tool call or hits the length cap counts as one finished."""


def _verl_token_output(fields: dict[str, Any]) -> Any:
    """verl's ``TokenOutput`` of ``fields``: how a :class:`TokenReply` is unpickled."""
    from verl.workers.rollout.replica import TokenOutput

    return TokenOutput(**fields)


class TokenReply:
    """verl's ``TokenOutput`` as it travels: unpickled (in the AgentLoopWorker, which has verl loaded) as verl's own
    class. Why: importing verl in the simulated engine's actor (torch, tensordict) was a sixth of a small run's CPU on
    2 cores (docs/testing.md, docs/performance.md)."""

    __slots__ = ("fields",)

    def __init__(self, **fields: Any) -> None:
        self.fields = fields

    def __reduce__(self) -> tuple[Any, tuple[dict[str, Any]]]:
        return _verl_token_output, (self.fields,)


def token_output_class() -> Any:
    """verl's ``TokenOutput`` where verl is already loaded (a server called in-process, as the tests' harness and
    the benchmarks do); else :class:`TokenReply`, which becomes one where it is unpickled."""
    if "verl" not in sys.modules:
        return TokenReply
    from verl.workers.rollout.replica import TokenOutput

    return TokenOutput


class SimLLMServer(EngineControl):
    """Ray actor (``ray.remote(SimLLMServer)``) standing in for SGLangHttpServer/vLLMHttpServer; the control
    surface verl's V1 trainers use (weight version, submission gate, weight sync) is :class:`EngineControl`."""

    def __init__(
        self,
        config: SimServerConfig,
        model_path: str,
        engine: str = "sglang",
        replica: str = "sim-0",
        sync_seconds: float = 0.0,
    ) -> None:
        from otel_verl.demo.model import EngineTokenizer

        self._token_output = token_output_class()
        self.config = config
        self.engine = engine
        self.replica = replica
        self.peers: list[Any] = []
        self.running = 0
        self._slot_freed: asyncio.Condition | None = None
        self.tokenizer = EngineTokenizer(model_path)
        self.active = 0
        self.turns_seen: dict[str, int] = {}
        self.step_target: int | None = None
        self.planted = True
        self.completed = 0
        self.abort_event = asyncio.Event()
        self.generated_tokens = 0
        self._init_control(sync_seconds)

    # -- over-sampling control (the demo trainer calls these around each step)
    def set_peers(self, peers: list[Any]) -> None:
        """The other replicas (several behind verl's load balancer): this one counts finished trajectories for
        all of them, and passes each step's settings and the over-sampling abort on."""
        self.peers = list(peers)

    def begin_step(self, target: int | None, planted: bool = True, plan: dict[str, Any] | None = None) -> None:
        """Called by the demo trainer before each step: over-sampling target, planted slowness on/off
        (``plan``: this step's own ``stall``/``slow_turn``/``long_response``/``step_slow_decode`` knobs,
        replacing the configured ones).
        Peers get theirs now, submitted before any request of the step exists."""
        self.step_target = target
        self.planted = planted
        if plan is not None:
            self.config = replace(
                self.config,
                stall=plan.get(plants.STALL, {}),
                slow_turn=plan.get(plants.SLOW_TURN, {}),
                long_response=plan.get(plants.LONG_RESPONSE, {}),
                decode_factor=float(plan.get(plants.STEP_SLOW_DECODE, 1.0)) * self._replica_factor(plan),
            )
        self.completed = 0
        self.abort_event = asyncio.Event()
        for peer in self.peers:
            peer.begin_step.remote(None, planted, plan)

    def _replica_factor(self, plan: dict[str, Any]) -> float:
        """This replica's planted decode slowdown (``slow_replica``: {replica rank: k}; the name is sim-<rank>)."""
        rank = self.replica.rsplit("-", 1)[-1]
        slow = plan.get(plants.SLOW_REPLICA, {})
        return float(slow.get(int(rank), 1.0)) if rank.isdigit() else 1.0

    def abort_now(self) -> None:
        """Over-sampling reached its target on the counting replica: abort what still runs here."""
        self.abort_event.set()

    def trajectory_done(self) -> None:
        """A trajectory finished (the reward actor reports each one): over-sampling counts trajectories,
        not engine calls, and aborts whatever is still running once ``target`` of them are done."""
        self.completed += 1
        if self.step_target is not None and self.completed >= self.step_target and not self.abort_event.is_set():
            self.abort_event.set()
            for peer in self.peers:
                peer.abort_now.remote()

    def stats(self) -> dict[str, Any]:
        return {"generated_tokens": self.generated_tokens, "completed": self.completed}

    # -- the generate contract of verl's rollout servers
    async def generate(
        self,
        prompt_ids: list[int],
        sampling_params: dict[str, Any],
        request_id: str,
        image_data: Any = None,
        video_data: Any = None,
        **kwargs: Any,
    ) -> Any:
        params = dict(sampling_params)
        carrier = params.pop(semconv.CARRIER_KEY, None)
        if not await self._admit():  # refused behind a closed gate (the replica left the rotation)
            return self._answer_output([], "aborted")
        timeline = EngineTimeline(arrival=time.time())
        output = await self._generate(prompt_ids, params, timeline)
        if carrier and output["stop_reason"] != "aborted":  # vLLM makes no llm_request for an aborted request
            record_llm_request(
                self.replica,
                carrier,
                timeline,
                request_id=request_id,
                prompt_tokens=len(prompt_ids),
                completion_tokens=output["produced"],
                params=params,
                style=self.config.engine_spans,
            )
        return self._answer_output(output["token_ids"], output["stop_reason"])

    def _answer_output(self, token_ids: list[int], stop_reason: str) -> Any:
        """verl's ``TokenOutput``, with the weight version that produced it (``extra_fields["global_steps"]``)."""
        return self._token_output(
            token_ids=token_ids,
            stop_reason=stop_reason,
            num_preempted=0,
            extra_fields={"global_steps": self.global_steps},
        )

    async def _generate(
        self, prompt_ids: list[int], params: dict[str, Any], timeline: EngineTimeline
    ) -> dict[str, Any]:
        cfg = self.config
        text = self.tokenizer.decode(prompt_ids)
        # one random stream per (seed, conversation so far): same trajectories for the same seed,
        # whatever order concurrent requests arrive in
        rng = random.Random(zlib.crc32(text.encode()) ^ cfg.seed)
        match = QUESTION_INDEX.search(text)
        index = int(match.group(1)) if match else -1
        turn = text.count(ASSISTANT_HEADER) - 1
        explicit = params.get("max_tokens") or params.get("max_new_tokens")
        max_tokens = int(explicit or 512)
        answer = self._answer(text, turn, rng)
        # heavy tail: log-normal length around the median, capped at max_tokens
        length = int(cfg.median_tokens * math.exp(rng.gauss(0.0, cfg.tail_sigma)))
        long = cfg.long_response.get(index) if self.planted and turn == 0 else None
        if long is not None:  # a planted long response: it ends by itself after that many tokens (what a
            # resumed partial rollout already decoded of it counts: the text after the last assistant header)
            done = len(text[text.rfind(ASSISTANT_HEADER) + len(ASSISTANT_HEADER) :].lstrip("\n"))
            length, max_tokens = max(1, int(long) - done), int(explicit or long + 1)
        length = max(len(answer) + 1, length)
        stop_reason = "completed"
        if length >= max_tokens:
            length, stop_reason = max_tokens, "length"
        extra, where = self._planted_turn(index, turn)
        if where == "before":  # the request reaches the engine late (a slow hop on the way)
            await asyncio.sleep(extra)
            timeline.arrival = time.time()
        timeline.queued = time.time()
        if where == "queue":  # waits in the queue without holding a running slot, as a queued request does
            await asyncio.sleep(extra)
        await self._take_slot()
        try:
            timeline.scheduled = time.time()
            await asyncio.sleep(cfg.prefill_seconds_per_token * len(prompt_ids))
            timeline.first_token = time.time()
            if self.planted and turn == 0 and index in cfg.stall:
                await asyncio.sleep(cfg.stall[index])
            if where == "decode":
                await asyncio.sleep(extra)
            produced, stop_reason = await self._decode(length, stop_reason)
            timeline.last_token = time.time()
        finally:
            await self._free_slot()
        self.generated_tokens += produced
        if (
            not cfg.trajectories_reported
            and stop_reason != "aborted"
            and (stop_reason == "length" or "<tool_call>" not in answer)
        ):
            self.trajectory_done()
        if stop_reason == "aborted":
            token_ids = self.tokenizer.encode(("…" * produced)[: max(produced, 0)], add_special_tokens=False)[:produced]
            return {"token_ids": token_ids, "stop_reason": "aborted", "produced": produced}
        filler = (FILLER * (1 + length // len(FILLER)))[: max(0, length - len(answer))]
        body = filler + answer
        token_ids = self.tokenizer.encode(body, add_special_tokens=False)
        if stop_reason == "length":
            token_ids = token_ids[:max_tokens]
        else:
            token_ids = [*token_ids, self.tokenizer.eos_token_id]
        return {"token_ids": token_ids, "stop_reason": stop_reason, "produced": len(token_ids)}

    def _planted_turn(self, index: int, turn: int) -> tuple[float, str]:
        """(extra seconds, where) planted on this sample's turn, else (0, "")."""
        plant = self.config.slow_turn.get(index) if self.planted else None
        if plant is None or plant[0] != turn:
            return 0.0, ""
        return float(plant[1]), (plant[2] if len(plant) > 2 else "decode")  # type: ignore[misc]

    async def _take_slot(self) -> None:
        """Wait in the engine's queue until fewer than ``max_running`` requests run."""
        if self._slot_freed is None:
            self._slot_freed = asyncio.Condition()
        async with self._slot_freed:
            await self._slot_freed.wait_for(lambda: self.running < self.config.max_running)
            self.running += 1

    async def _free_slot(self) -> None:
        assert self._slot_freed is not None
        async with self._slot_freed:
            self.running -= 1
            self._slot_freed.notify()

    async def _decode(self, length: int, stop_reason: str) -> tuple[int, str]:
        """Decode ``length`` tokens, slower when more than ``capacity`` decode at once; stop on an abort."""
        cfg = self.config
        self.active += 1
        produced = 0
        try:
            chunk = 16
            while produced < length:
                n = min(chunk, length - produced)
                slowdown = max(1.0, self.active / cfg.capacity) * (cfg.decode_factor if self.planted else 1.0)
                try:
                    await asyncio.wait_for(self.abort_event.wait(), timeout=n * cfg.seconds_per_token * slowdown)
                    stop_reason = "aborted"
                    break
                except asyncio.TimeoutError:
                    produced += n
        finally:
            self.active -= 1
        return produced, stop_reason

    def _answer(self, prompt_text: str, turn: int, rng: random.Random) -> str:
        cfg = self.config
        numbers = [int(x) for x in re.findall(r"(\d+) apples", prompt_text)][:2] or [2, 3]
        if rng.random() < cfg.tool_call_probability * (cfg.tool_call_decay**turn):
            expression = f"{numbers[0]}+{numbers[-1]}"
            return ' <tool_call>{"name": "calculator", "arguments": {"expression": "' + expression + '"}}</tool_call>'
        guess = sum(numbers) if rng.random() < 0.8 else sum(numbers) + 1
        return f" The answer is #### {guess}"
