"""The rollout of the real-size load test (benchmarks/bench_real_size.py): a trainer and W AgentLoopWorker
processes, as verl runs them, with generated trajectories driven through otel_verl's own wrappers.

Trainer process: ``verl.step`` and its phases through otel_verl's timer wrapper (verl's ``_timer`` seam), the
rollout through the manager wrapper (the carrier and each chunk's share of the step's trace beside it) and
the ``DataProto.concat`` wrapper (the barriers). Worker processes: each chunk through the chunk wrapper, each
trajectory through the trajectory wrapper, every turn through the GENERATING-state, engine-client, tool-parse,
tool and preprocess wrappers, the end through the postprocess wrapper: the same recorder, trace placement,
sampling, hold, delivery and exporters as under verl. What is generated is only what verl's agent loop
would compute (token ids, tool calls) and the engine's and tools' latency (sleeps).

``traced=False`` runs the same code with the wrappers left out: the untraced twin the added CPU and memory
are measured against.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import random
import time
from collections.abc import Iterator
from dataclasses import dataclass
from multiprocessing.connection import Connection
from types import SimpleNamespace
from typing import Any

MODEL_PATH = "/models/Qwen2.5-7B-Instruct"


@dataclass(frozen=True)
class Shape:
    steps: int
    workers: int
    prompts: int
    """Prompts per step; each rolled out ``n`` times (a sample group)."""
    n: int
    turns: int
    """Assistant turns of every trajectory (each but the last calls a tool)."""
    engine_s: float = 0.05
    """Median engine round trip (lognormal)."""
    tool_s: float = 0.01
    """Median tool call."""
    tokens: int = 160
    """Median response tokens per turn."""

    @property
    def trajectories(self) -> int:
        return self.prompts * self.n


def _worker_instance(shape: Shape) -> Any:
    multi_turn = SimpleNamespace(max_assistant_turns=shape.turns)
    return SimpleNamespace(rollout_config=SimpleNamespace(multi_turn=multi_turn, response_length=shape.turns * 4096))


def _client() -> Any:
    rollout = SimpleNamespace(name="vllm")
    model = SimpleNamespace(path=MODEL_PATH)
    return SimpleNamespace(config=SimpleNamespace(actor_rollout_ref=SimpleNamespace(rollout=rollout, model=model)))


class HermesToolParser:
    """Named like verl's parser: the tool-parse span records the parser's class name."""


class ToolAgentLoop:
    pass


class Trajectory:
    """One generated trajectory: verl's calls in verl's order, each through its wrapper when traced."""

    def __init__(self, shape: Shape, rng: random.Random, traced: bool, client: Any) -> None:
        self.shape, self.rng, self.traced, self.client = shape, rng, traced, client
        if traced:
            from otel_verl.instrumentation import llm_server, tools
            from otel_verl.instrumentation.rollout import events, trajectory

            self.w_generating = events.generating_state_wrapper
            self.w_initial = events.preprocess_wrapper("initial_prompt")
            self.w_merge = events.preprocess_wrapper("merge_context")
            self.w_parse = events.tool_parse_wrapper
            self.w_generate = llm_server.client_generate_wrapper
            self.w_tool = tools.call_tool_wrapper
            self.w_post = trajectory.postprocess_wrapper

    def _call(self, wrapper_name: str, fn: Any, instance: Any, *args: Any, **kwargs: Any) -> Any:
        if not self.traced:
            return fn(*args, **kwargs)
        return getattr(self, wrapper_name)(fn, instance, args, kwargs)

    # -- what verl's agent loop awaits
    async def _tokens(self, n: int) -> list[int]:
        await asyncio.sleep(0)
        return list(range(n))

    async def _engine(self, request_id: str, prompt_ids: list[int], sampling_params: dict, **_: Any) -> Any:
        shape, rng = self.shape, self.rng
        await asyncio.sleep(rng.lognormvariate(0.0, 0.5) * shape.engine_s)
        tokens = max(1, int(rng.lognormvariate(0.0, 0.6) * shape.tokens))
        return SimpleNamespace(token_ids=list(range(tokens)), stop_reason="stop", num_preempted=0)

    async def _extract(self, text: str) -> tuple[str, list[Any]]:
        await asyncio.sleep(0)
        return text, ([] if text == "final" else [SimpleNamespace(name="python", tool_call_id="c", arguments="{}")])

    async def _tool(self, tool_call: Any, tools_kwargs: dict) -> tuple[Any, float, dict]:
        await asyncio.sleep(self.rng.lognormvariate(0.0, 0.5) * self.shape.tool_s)
        return SimpleNamespace(text="42"), 0.0, {}

    async def _generating(self, request_id: str, prompt: list[int], last: bool) -> int:
        params = {"temperature": 1.0}
        output = await self._call("w_generate", self._engine, self.client, request_id=request_id, prompt_ids=prompt,
                                  sampling_params=params)  # fmt: skip
        _text, calls = await self._call("w_parse", self._extract, HermesToolParser(), "final" if last else "call")
        if calls:
            await self._call("w_tool", self._tool, ToolAgentLoop(), calls[0], {})
            await self._call("w_merge", self._tokens, None, 64)
        return len(output.token_ids)

    async def run(self, sampling_params: dict, trajectory: dict, *, agent_name: str, **_: Any) -> Any:
        """verl's ``_run_agent_loop(sampling_params, trajectory, *, agent_name, ...)``."""
        request_id = f"{trajectory['step']:04d}-{trajectory['sample_index']:05d}-{trajectory['rollout_n']}"
        prompt = await self._call("w_initial", self._tokens, None, 256)
        response = 0
        for turn in range(self.shape.turns):
            last = turn == self.shape.turns - 1
            response += await self._call("w_generating", self._generating, None, request_id, prompt, last)
        output = SimpleNamespace(prompt_ids=prompt, response_ids=range(response), reward_score=1.0)
        return await self._call("w_post", self._postprocess, None, output)

    async def _postprocess(self, output: Any) -> Any:
        return output


class Worker:
    """One AgentLoopWorker process: its chunks, run on one event loop."""

    def __init__(self, rank: int, shape: Shape, traced: bool) -> None:
        self.rank, self.shape, self.traced = rank, shape, traced
        self.instance = _worker_instance(shape)
        self.client = _client()
        self.loop = asyncio.new_event_loop()
        if traced:
            from otel_verl.export import provider
            from otel_verl.instrumentation.rollout import chunk, trajectory

            provider.setup_tracing("agent_loop_worker", worker_rank=rank)
            self.w_chunk, self.w_run = chunk.generate_sequences_wrapper, trajectory.run_agent_loop_wrapper

    async def _dispatch(self, batch: Any) -> Any:
        shape, step = self.shape, batch.meta_info["global_steps"]
        per_worker = shape.prompts // shape.workers
        rng = random.Random(step * 1000 + self.rank)
        tasks = []
        for p in range(per_worker):
            sample = self.rank * per_worker + p
            for n in range(shape.n):
                trajectory = {"step": step, "sample_index": sample, "rollout_n": n, "validate": False}
                run = Trajectory(shape, random.Random(rng.getrandbits(32)), self.traced, self.client).run
                args, kwargs = ({"temperature": 1.0}, trajectory), {"agent_name": "tool_agent"}
                call = self.w_run(run, self.instance, args, kwargs) if self.traced else run(*args, **kwargs)
                tasks.append(asyncio.ensure_future(call))
        await asyncio.gather(*tasks)
        return SimpleNamespace(meta_info={})

    def step(self, step: int, carrier: dict[str, Any] | None) -> dict[str, Any]:
        """One chunk; then (traced) its spans released, exported and flushed, as between verl's steps."""
        from otel_verl.instrumentation import ray_carrier

        cpu0, t0 = time.process_time(), time.perf_counter()
        meta: dict[str, Any] = {"global_steps": step}
        if carrier:
            meta[_carrier_key()] = carrier
        batch = SimpleNamespace(meta_info=meta)
        if self.traced:
            out = self.loop.run_until_complete(self.w_chunk(self._dispatch, self.instance, (batch,), {}))
        else:
            out = self.loop.run_until_complete(self._dispatch(batch))
        rollout_s = time.perf_counter() - t0
        if self.traced:
            from otel_verl.export import flush

            flush.flush()
        return {
            "info": out.meta_info.get(ray_carrier.WORKER_INFO_KEY),
            "cpu_s": time.process_time() - cpu0,
            "rollout_s": rollout_s,
            "rss_mib": _rss_mib(),
            "maxrss_mib": peak_rss_mib(),
        }

    def close(self) -> None:
        if self.traced:
            from otel_verl.export import provider

            provider.shutdown_tracing()


def _carrier_key() -> str:
    from otel_verl import semconv

    return semconv.CARRIER_KEY


def _status_mib(field: str) -> float:
    with open(f"/proc/{os.getpid()}/status") as fh:
        for line in fh:
            if line.startswith(field):
                return int(line.split()[1]) / 1024
    return 0.0


def _rss_mib() -> float:
    return _status_mib("VmRSS:")


def peak_rss_mib() -> float:
    """This process's peak RSS (``VmHWM``; ``ru_maxrss`` would count the parent's memory from before the
    spawn's ``exec``)."""
    return _status_mib("VmHWM:")


def worker_main(rank: int, shape: Shape, traced: bool, conn: Connection) -> None:
    """Entry of a spawned worker process: a step per message until ``None``."""
    worker = Worker(rank, shape, traced)
    conn.send({"rss_mib": _rss_mib()})
    while True:
        message = conn.recv()
        if message is None:
            break
        conn.send(worker.step(*message))
    worker.close()
    conn.send({"cpu_s": time.process_time(), "maxrss_mib": peak_rss_mib()})


class Trainer:
    """The trainer process's side: steps, phases, the manager's rollout call and its barriers."""

    PHASES = ("reward", "old_log_prob", "ref", "adv", "update_actor", "update_weights")

    def __init__(self, shape: Shape, traced: bool, conns: list[Connection], phase_s: float = 0.2) -> None:
        self.shape, self.traced, self.conns, self.phase_s = shape, traced, conns, phase_s
        self.global_steps = 0
        self.manager = SimpleNamespace(agent_loop_workers=[None] * shape.workers)
        self.worker_reports: list[list[dict[str, Any]]] = []
        if traced:
            from otel_verl.export import provider
            from otel_verl.instrumentation import trainer

            provider.setup_tracing("trainer")
            trainer.track_trainer(self)

    @contextlib.contextmanager
    def timer(self, name: str, timing: dict[str, float]) -> Iterator[None]:
        def _timer(name: str, timing: dict[str, float]) -> Iterator[None]:  # verl's ``_timer`` generator
            t0 = time.perf_counter()
            yield
            timing[name] = time.perf_counter() - t0

        if self.traced:
            from otel_verl.instrumentation import trainer

            gen = trainer.timer_wrapper(_timer, None, (name, timing), {})
        else:
            gen = _timer(name, timing)
        next(gen)
        try:
            yield
        finally:
            next(gen, None)

    def _rollout(self, batch: Any) -> Any:
        carrier = batch.meta_info.get(_carrier_key())
        for conn in self.conns:
            conn.send((self.global_steps, carrier))
        reports = [conn.recv() for conn in self.conns]
        self.worker_reports.append(reports)
        outputs = [SimpleNamespace(meta_info={_worker_info_key(): r["info"]}) for r in reports if r["info"]]
        if self.traced:
            from otel_verl.instrumentation.rollout import manager

            manager.concat_wrapper(lambda data: data, None, (outputs,), {})
        return SimpleNamespace(meta_info={})

    def step(self) -> dict[str, float]:
        self.global_steps += 1
        timing: dict[str, float] = {}
        with self.timer("step", timing):
            with self.timer("gen", timing):
                batch = SimpleNamespace(meta_info={"global_steps": self.global_steps})
                if self.traced:
                    from otel_verl.instrumentation.rollout import manager

                    manager.generate_sequences_wrapper(self._rollout, self.manager, (batch,), {})
                else:
                    self._rollout(batch)
            for phase in self.PHASES:
                with self.timer(phase, timing):
                    time.sleep(self.phase_s)
        return timing

    def close(self) -> None:
        if self.traced:
            from otel_verl.export import provider

            provider.shutdown_tracing()


def _worker_info_key() -> str:
    from otel_verl.instrumentation import ray_carrier

    return ray_carrier.WORKER_INFO_KEY
