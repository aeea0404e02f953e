"""Every seam otel_verl wraps, in one table: module, ``Class.method``, wrapper, parameters read, what it records.

Read it top to bottom as contrib's ``RedisInstrumentor._instrument``: trainer, rollout manager, rollout
worker, trajectory, turns and events, engine round trips, rewards, engines and servers, threads, Ray.
``reads`` uses Python's signature syntax without ``self`` (names before ``"*"`` are the leading
positional parameters in that order, names after it keyword parameters anywhere); a seam whose
installed signature no longer fits is left alone with one warning naming ``records``
(:mod:`otel_verl.wrapping.signatures`). ``kind`` says when the seam can record anything; which kinds a
process wraps is decided in :mod:`otel_verl.instrumentation.policy`, nowhere else.
"""

from __future__ import annotations

from collections.abc import Callable
from enum import Enum
from typing import Any, NamedTuple

from otel_verl.instrumentation import (
    engine_link,
    llm_server,
    metrics_logger,
    reward,
    submission_gate,
    tools,
    trainer,
    updates,
    vllm_tracing,
    weight_sync,
)
from otel_verl.instrumentation.rollout import chunk, events, group, manager, trajectory
from otel_verl.wrapping import ray_actors, threads
from otel_verl.wrapping.registry import alternatives
from otel_verl.wrapping.signatures import Expected, expect


class Kind(str, Enum):
    """When a seam can record anything (the policy's input)."""

    TRAINER = "trainer"
    """Step and phase spans: the process that runs verl's trainer."""
    CHUNK = "chunk"
    """Once per rollout chunk; also removes a carrier the other side sent: every detail level."""
    REQUEST = "request"
    """Once or more per trajectory: ``worker`` detail and up."""
    EVENT = "event"
    """Turns and events inside a trajectory: ``full`` detail only."""
    RECEIVER = "receiver"
    """A remote process's end of a carrier (server, engine, reward worker): every detail level."""
    THREADS = "threads"
    """Carries the current context into threads: every detail level."""
    RAY = "ray"
    """Ray's per-actor-class method copies get the seams above: every detail level."""
    LOGGER = "logger"
    """verl's metrics logger (``Tracking``): the live account's way into the user's tracker (its work handed in by
    :mod:`otel_verl.live.plug`); every detail level."""


class Target(NamedTuple):
    module: str
    method: str
    wrapper: Callable[[], Callable[..., Any]]
    """Makes the wrapper (called when the seam is applied)."""
    kind: Kind
    reads: tuple[str, ...] | None
    """The parameters the wrapper reads (None: it reads none)."""
    records: str
    alternative: str | None = None
    """The same seam's ``Class.method`` in other verl versions (one of the two exists; the other is not missed)."""


AGENT_LOOP = "verl.experimental.agent_loop.agent_loop"
TOOL_AGENT_LOOP = "verl.experimental.agent_loop.tool_agent_loop"
TOOL_PARSER = "verl.experimental.agent_loop.tool_parser"
LLM_SERVER = "verl.workers.rollout.llm_server"
VLLM_SERVER = "verl.workers.rollout.vllm_rollout.vllm_async_server"
_ROUND_TRIP = ("*", "request_id", "prompt_ids", "sampling_params")
_VLLM_INIT_TRACER = ("instrumenting_module_name", "otlp_traces_endpoint", "extra_attributes")
_VLLM_SPANS = "vLLM's engine spans (routed into otel_verl's exporters)"
_ENGINE_LINK = "links of the engine's own spans to the turn"
_TOOL_PARSERS = (
    "HermesToolParser",
    "GptOssToolParser",
    "Qwen3XMLToolParser",
    "GLMToolParser",
    "SeedToolParser",
    "MiniMaxToolParser",
    "KimiToolParser",
    "DeepSeekV4ToolParser",
    "Gemma4ToolParser",
)

TARGETS: tuple[Target, ...] = (
    # -- trainer (TaskRunner process): every marked_timer/simple_timer of both trainers goes through _timer
    Target("verl.utils.profiler.performance", "_timer", lambda: trainer.timer_wrapper, Kind.TRAINER,
           ("name",), "verl.step and verl.phase spans, and the V1 workers' barriers (the step's sync point)"),
    Target("verl.trainer.ppo.ray_trainer", "RayPPOTrainer.fit", lambda: trainer.fit_wrapper, Kind.TRAINER,
           None, "the step number of verl.step spans (trainer.global_steps)"),
    Target("verl.trainer.ppo.v1.trainer_base", "PPOTrainer.fit", lambda: trainer.fit_wrapper, Kind.TRAINER,
           None, "the step number of verl.step spans (trainer.global_steps)"),
    Target("verl.trainer.ppo.ray_trainer", "RayPPOTrainer._validate", lambda: trainer.validate_wrapper, Kind.TRAINER,
           None, "verl.validate spans (the validation rollout's parent)"),
    Target("verl.trainer.ppo.v1.trainer_base", "PPOTrainer._validate", lambda: trainer.validate_wrapper, Kind.TRAINER,
           None, "verl.validate spans (the validation rollout's parent)"),
    # -- verl's metrics logger (the trainer's process): each step's live account into the user's tracker
    Target(metrics_logger.TRACKING_MODULE, "Tracking.__init__", lambda: metrics_logger.init_wrapper, Kind.LOGGER,
           None, "the live account (otel_verl/* metrics in verl's logger)"),
    Target(metrics_logger.TRACKING_MODULE, "Tracking.log", lambda: metrics_logger.log_wrapper, Kind.LOGGER,
           ("data", "step"), "the live account (otel_verl/* metrics in verl's logger)"),
    Target(metrics_logger.TRACKING_MODULE, "Tracking.finish", lambda: metrics_logger.finish_wrapper, Kind.LOGGER,
           None, "the live account of the last steps", "Tracking.__del__"),
    Target(metrics_logger.TRACKING_MODULE, "Tracking.__del__", lambda: metrics_logger.finish_wrapper, Kind.LOGGER,
           None, "the live account of the last steps", "Tracking.finish"),  # verl's neo: no finish, __del__ ends
    # -- V1 inner updates (sample + train on a mini-batch; links to the consumed groups) and parameter syncs
    Target(*updates.STEP_ONCE, lambda: updates.step_once_wrapper, Kind.TRAINER,
           ("metrics", "timing_raw", "sample_batch_size"), "verl.update spans and their links to sample groups"),
    Target(*weight_sync.UPDATE_WEIGHTS, lambda: weight_sync.update_weights_wrapper, Kind.TRAINER,
           ("global_steps",), "verl.weight_sync spans"),
    # -- rollout manager (trainer process): carrier into each chunk, verl.barrier per worker after it (legacy)
    #    or the worker actors to tell each step's sync point (V1)
    Target(AGENT_LOOP, "AgentLoopManager.generate_sequences", lambda: manager.generate_sequences_wrapper, Kind.CHUNK,
           ("prompts",), "verl.barrier spans and the phase-to-worker parent links"),
    Target("verl.trainer.ppo.v1.agent_loop_tq", "AgentLoopManagerTQ.generate_sequences",
           lambda: manager.generate_sequences_wrapper, Kind.CHUNK,
           ("prompts",), "verl.barrier spans and the phase-to-worker parent links"),
    Target("verl.protocol", "DataProto.concat", lambda: manager.concat_wrapper, Kind.CHUNK,
           ("data",), "verl.barrier spans"),
    #    and on what `from verl import DataProto` gives: the same class up to 0.10, the NeoProto view on verl's neo
    #    (verl#7557; its concat never calls the old one); one wrapper per function, whichever seam comes first
    Target("verl", "DataProto.concat", lambda: manager.concat_wrapper, Kind.CHUNK,
           None, "verl.barrier spans (verl.DataProto)"),
    # -- rollout worker (AgentLoopWorker process): one verl.rollout.worker span per chunk
    Target(AGENT_LOOP, "AgentLoopWorker.generate_sequences", lambda: chunk.generate_sequences_wrapper, Kind.CHUNK,
           ("batch",), "verl.rollout.worker spans"),
    # -- V1 sample group (one prompt, its rollout.n samples): its own trace under the async trainers
    Target(*group.RUN_PROMPT, lambda: group.run_prompt_wrapper, Kind.CHUNK,
           ("prompt", "sampling_params", "trajectory"), "verl.rollout.group spans"),
    # -- trajectory: one verl.rollout.request per _run_agent_loop
    Target(AGENT_LOOP, "AgentLoopWorker._run_agent_loop", lambda: trajectory.run_agent_loop_wrapper, Kind.REQUEST,
           ("sampling_params", "trajectory", "*", "agent_name"),
           "verl.rollout.request spans and everything below them (turns, engine calls, tools, rewards)"),
    Target(AGENT_LOOP, "AgentLoopWorker._agent_loop_postprocess", lambda: trajectory.postprocess_wrapper,
           Kind.REQUEST, ("output",), "request token counts and the end of the last turn"),
    # -- turns and events inside a trajectory
    Target(TOOL_AGENT_LOOP, "ToolAgentLoop._handle_generating_state", lambda: events.generating_state_wrapper,
           Kind.EVENT, None, "verl.turn spans"),
    Target(AGENT_LOOP, "AgentLoopBase.ct_build_initial_tokens", lambda: events.preprocess_wrapper("initial_prompt"),
           Kind.EVENT, None, "verl.preprocess spans"),
    Target(AGENT_LOOP, "AgentLoopBase.ct_merge_assistant_token", lambda: events.preprocess_wrapper("merge_assistant"),
           Kind.EVENT, None, "verl.preprocess spans"),
    Target(AGENT_LOOP, "AgentLoopBase.ct_merge_context_msg", lambda: events.preprocess_wrapper("merge_context"),
           Kind.EVENT, None, "verl.preprocess spans", "AgentLoopBase.ct_merge_non_assistant_msg"),
    Target(AGENT_LOOP, "AgentLoopBase.ct_merge_non_assistant_msg",  # verl main (0.10): the same, renamed
           lambda: events.preprocess_wrapper("merge_context"), Kind.EVENT, None, "verl.preprocess spans",
           "AgentLoopBase.ct_merge_context_msg"),
    *(
        Target(TOOL_PARSER, f"{parser}.extract_tool_calls", lambda: events.tool_parse_wrapper, Kind.EVENT,
               None, "verl.tool.parse spans")
        for parser in _TOOL_PARSERS
    ),
    Target(TOOL_AGENT_LOOP, "ToolAgentLoop._call_tool", lambda: tools.call_tool_wrapper, Kind.EVENT,
           ("tool_call",), "execute_tool spans"),
    # -- engine round trips (client side, in the AgentLoopWorker): text_completion spans, carrier to the engine
    Target(LLM_SERVER, "LLMServerClient.generate", lambda: llm_server.client_generate_wrapper, Kind.REQUEST,
           _ROUND_TRIP, "text_completion (engine round trip) spans"),
    Target(LLM_SERVER, "FullyAsyncLLMServerClient.generate", lambda: llm_server.client_generate_wrapper,
           Kind.REQUEST, _ROUND_TRIP, "verl.generate spans (async round trips; their attempts are text_completion)"),
    # -- rewards: the reward event, and a request's carrier to a remote RewardLoopWorker
    Target(AGENT_LOOP, "AgentLoopWorker._compute_score", lambda: reward.compute_score_wrapper, Kind.REQUEST,
           ("outputs",), "verl.reward and verl.reward.compute spans"),
    Target("verl.protocol", "DataProto.__post_init__", lambda: reward.dataproto_post_init_wrapper, Kind.REQUEST,
           None, "the parent link of verl.reward.compute spans"),
    Target("verl", "DataProto.__post_init__", lambda: reward.dataproto_post_init_wrapper, Kind.REQUEST,
           None, "the parent link of verl.reward.compute spans (verl.DataProto)"),
    # -- the receiving ends: server actors, engines, the RewardLoopWorker
    Target("verl.workers.rollout.sglang_rollout.async_sglang_server", "SGLangHttpServer.generate",
           lambda: engine_link.server_generate_wrapper, Kind.RECEIVER, ("prompt_ids", "sampling_params"), _ENGINE_LINK),
    Target(VLLM_SERVER, "vLLMHttpServer.generate", lambda: engine_link.server_generate_wrapper, Kind.RECEIVER,
           ("prompt_ids", "sampling_params", "request_id"), _ENGINE_LINK + "; the engine span of an aborted request"),
    Target(*submission_gate.GATE, lambda: submission_gate.park_wrapper, Kind.RECEIVER, ("request_id",),
           "verl.submission_hold spans (a request held at the server's gate while a weight sync drains)"),
    Target("sglang.srt.managers.tokenizer_manager", "TokenizerManager.generate_request",
           lambda: engine_link.sglang_generate_request_wrapper, Kind.RECEIVER, ("obj",), _ENGINE_LINK),
    Target("vllm.v1.engine.async_llm", "AsyncLLM.generate", lambda: engine_link.vllm_generate_wrapper, Kind.RECEIVER,
           ("*", "trace_headers"), _ENGINE_LINK),
    # -- vLLM's own tracing, in the server's process: its provider/endpoint replaced by otel_verl's exporters
    #    (whichever initialises first), and the disable_log_stats check before verl launches the engine
    Target("vllm.v1.engine.async_llm", "init_tracer", lambda: vllm_tracing.init_tracer_wrapper, Kind.RECEIVER,
           _VLLM_INIT_TRACER, _VLLM_SPANS),
    Target("vllm.v1.engine.llm_engine", "init_tracer", lambda: vllm_tracing.init_tracer_wrapper, Kind.RECEIVER,
           _VLLM_INIT_TRACER, _VLLM_SPANS),
    Target("vllm.tracing.otel", "init_otel_tracer", lambda: vllm_tracing.init_tracer_wrapper, Kind.RECEIVER,
           _VLLM_INIT_TRACER, _VLLM_SPANS),
    Target("vllm.v1.engine.output_processor", "instrument_manual", lambda: vllm_tracing.instrument_manual_wrapper,
           Kind.RECEIVER, ("span_name", "start_time", "end_time", "attributes", "context", "kind"),
           "vLLM's llm_request spans"),
    Target(VLLM_SERVER, "vLLMHttpServer.launch_server", lambda: vllm_tracing.launch_server_wrapper, Kind.RECEIVER,
           (), "the disable_log_stats warning"),
    Target("verl.experimental.reward_loop.reward_loop", "RewardLoopWorker.compute_score",
           lambda: reward.reward_worker_wrapper, Kind.RECEIVER, ("data",), "verl.reward.compute spans"),
    # -- threads: the current context follows work into executor and threading threads. Thread subclasses
    #    overriding run keep their own behaviour (the OTel contrib instrumentation's limit as well);
    #    asyncio.to_thread needs nothing (it copies contextvars)
    Target("concurrent.futures.thread", "ThreadPoolExecutor.submit", lambda: threads.submit_wrapper, Kind.THREADS,
           ("fn",), "executor-thread parent links"),
    Target("threading", "Thread.start", lambda: threads.thread_start_wrapper, Kind.THREADS,
           None, "thread parent links"),
    Target("threading", "Thread.run", lambda: threads.thread_run_wrapper, Kind.THREADS,
           None, "thread parent links"),
    # -- Ray: actor classes get the seams above on their own method copies (actor-process side only)
    Target(ray_actors.RAY_FUNCTION_MANAGER, ray_actors.INJECT_TRACING, lambda: ray_actors.inject_tracing_wrapper,
           Kind.RAY, ("_cls",), "spans of Ray actor methods"),
)  # fmt: skip

LIVE_KINDS = frozenset({Kind.LOGGER, Kind.TRAINER, Kind.CHUNK, Kind.REQUEST})
"""What the live account (:mod:`otel_verl.live`) cannot do without: verl's logger, and the seams of the spans its
account is made of (steps and phases, workers and barriers, requests); ``check-seams`` says whether they fit."""

expect({(t.module, t.method): Expected(t.reads, t.records) for t in TARGETS if t.reads is not None})
alternatives({(t.module, t.method): t.alternative for t in TARGETS if t.alternative})
