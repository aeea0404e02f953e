"""Every span name and attribute key otel_verl emits, pinned in one place.

Tests, the analyzer, the collector's span-metrics dimensions and the dashboards all rely on these
names. OTel GenAI conventions are still "development": the ``gen_ai.*`` names we use are pinned
here, so a renaming upstream is a one-line change.
"""

from __future__ import annotations

from enum import Enum
from typing import Final

# ---------------------------------------------------------------- span names
SPAN_STEP: Final = "verl.step"
"""One training step (trainer process); ``verl.step`` holds the global step."""

SPAN_PHASE_PREFIX: Final = "verl.phase"
"""Every ``marked_timer``/``simple_timer`` phase is named ``verl.phase <name>`` (bounded set)."""

SPAN_WORKER: Final = "verl.rollout.worker"
"""One AgentLoopWorker chunk, in the worker's own process."""

SPAN_REQUEST: Final = "verl.rollout.request"
"""One trajectory (sample index x rollout n)."""

SPAN_TURN: Final = "verl.rollout.turn"
"""Turn i of a trajectory: one engine round trip plus the tool calls it asked for."""

SPAN_TOOL_PARSE: Final = "verl.tool_parse"
"""Parsing tool calls out of the generated tokens."""

SPAN_PREPROCESS: Final = "verl.preprocess"
"""Chat template / tokenisation work (initial prompt or per-turn merge)."""

SPAN_REWARD: Final = "verl.reward"
"""Per-request reward, local or remote (RewardLoopWorker)."""

SPAN_VALIDATE: Final = "verl.validate"
"""One validation pass of the trainer (verl's ``_validate``: before training and every ``test_freq``
steps); the validation rollout's worker spans are its children. Carries ``verl.step`` and
``verl.validate`` = true."""

SPAN_BARRIER: Final = "verl.barrier"
"""Synthesized: time a worker waited for the slowest worker of the step."""

GEN_AI_OP_TEXT_COMPLETION: Final = "text_completion"
GEN_AI_OP_EXECUTE_TOOL: Final = "execute_tool"


def phase_span_name(phase: str) -> str:
    """``verl.phase gen`` etc."""
    return f"{SPAN_PHASE_PREFIX} {phase}"


def generate_span_name(model: str | None) -> str:
    """GenAI span name for one engine round trip: ``text_completion <model>``."""
    return f"{GEN_AI_OP_TEXT_COMPLETION} {model}" if model else GEN_AI_OP_TEXT_COMPLETION


def tool_span_name(tool: str | None) -> str:
    """GenAI span name for one tool call: ``execute_tool <tool>``."""
    return f"{GEN_AI_OP_EXECUTE_TOOL} {tool}" if tool else GEN_AI_OP_EXECUTE_TOOL


# ---------------------------------------------------------------- verl.* attributes
VERL_STEP: Final = "verl.step"
"""Global training step (trainer's ``global_steps``); on every span of the step."""

VERL_PHASE_NAME: Final = "verl.phase.name"
"""Timer name of a phase span (gen, reward, old_log_prob, update_actor, ...)."""

VERL_VALIDATE: Final = "verl.validate"
"""True when the rollout is a validation rollout."""

VERL_WORKER_RANK: Final = "verl.worker.rank"
"""Index of the AgentLoopWorker (0..num_workers-1)."""

VERL_WORKER_NUM_REQUESTS: Final = "verl.worker.num_requests"
"""Trajectories handled by the worker chunk."""

VERL_WORKER_NUM_COMPLETED: Final = "verl.worker.num_completed"
VERL_WORKER_NUM_ABORTED: Final = "verl.worker.num_aborted"

VERL_WORKER_NUM_SAMPLED_OUT: Final = "verl.worker.num_sampled_out"
"""Requests of the chunk whose spans were not kept (tail sampling or a detail level below ``request``)."""

VERL_SAMPLED_OUT_START_NS: Final = "verl.worker.sampled_out.start_ns"
"""int[]: start (unix ns) of each sampled-out request; the arrays below are parallel to it, so the
analyzer adds these requests back to its per-request tables and percentiles stay exact."""
VERL_SAMPLED_OUT_END_NS: Final = "verl.worker.sampled_out.end_ns"
VERL_SAMPLED_OUT_STATUS: Final = "verl.worker.sampled_out.status"
VERL_SAMPLED_OUT_NUM_TURNS: Final = "verl.worker.sampled_out.num_turns"
VERL_SAMPLED_OUT_RESPONSE_TOKENS: Final = "verl.worker.sampled_out.response_tokens"
"""-1 where the response length is unknown."""

VERL_WORKER_NUM_OWN_TRACE: Final = "verl.worker.num_own_trace"
"""Requests of the chunk whose spans went to a trace of their own (one per sample group), not the step's:
the step's trace was full (``OTEL_VERL_TRACE_MAX_SPANS``) or ``OTEL_VERL_TRACE_PER_REQUEST`` is on."""

VERL_LINK_KIND: Final = "verl.link.kind"
"""Attribute of a span link otel_verl makes: what it points to (:class:`LinkKind`)."""

VERL_REQUEST_ID: Final = "verl.request.id"
"""verl's request id (sticky-session id of the trajectory)."""

VERL_SAMPLE_INDEX: Final = "verl.sample.index"
"""Dataset index of the prompt."""

VERL_ROLLOUT_N: Final = "verl.rollout.n"
"""Which of the n rollouts of the same prompt."""

VERL_REQUEST_STATUS: Final = "verl.request.status"
"""completed | aborted | truncated | failed (see :class:`RequestStatus`)."""

VERL_REQUEST_NUM_TURNS: Final = "verl.request.num_turns"
"""Assistant turns (engine round trips) of the trajectory."""

VERL_REQUEST_AGENT: Final = "verl.request.agent"
"""Agent loop name (tool_agent, single_turn_agent, ...)."""

VERL_REQUEST_RESPONSE_TOKENS: Final = "verl.request.response_tokens"
"""Response length in tokens (LLM + tool tokens) of the trajectory."""

VERL_REQUEST_PROMPT_TOKENS: Final = "verl.request.prompt_tokens"

VERL_REQUEST_NUM_RESUMES: Final = "verl.request.num_resumes"
"""Times a generation was resumed after an abort (partial rollout)."""

VERL_TURN_INDEX: Final = "verl.turn.index"
"""0-based turn index within the trajectory."""

VERL_REWARD_SCORE: Final = "verl.reward.score"
VERL_REWARD_REMOTE: Final = "verl.reward.remote"
"""True when the reward ran in a RewardLoopWorker actor."""

VERL_PREPROCESS_KIND: Final = "verl.preprocess.kind"
"""initial_prompt | merge_assistant | merge_context."""

VERL_TOOL_CALL_COUNT: Final = "verl.tool.num_calls"
VERL_TOOL_PARSER: Final = "verl.tool.parser"

VERL_ENGINE_STOP_REASON: Final = "verl.engine.stop_reason"
"""Raw ``TokenOutput.stop_reason`` of an engine round trip (completed, aborted, length...)."""

VERL_ENGINE_NUM_PREEMPTED: Final = "verl.engine.num_preempted"

VERL_BARRIER_SLOWEST_RANK: Final = "verl.barrier.slowest_rank"
"""Rank of the worker everybody waited for."""

VERL_EVENT_ORIGIN: Final = "verl.event.origin"
"""For imported seed logs: the original event name."""

VERL_LEGACY_LINE: Final = "verl.legacy.line"
"""For imported seed logs: the whole original JSON line, so ``export-legacy`` gives back every field."""

VERL_PROCESS_ROLE: Final = "verl.process.role"
"""Resource attribute: trainer | agent_loop_worker | reward | server | demo | driver."""

VERL_RUN_ID: Final = "verl.run.id"
"""Resource attribute: one id for all processes of a run (spool directory name)."""

VERL_TRUNCATED_TEXT: Final = "verl.text.truncated"

# ---------------------------------------------------------------- pinned GenAI names
GEN_AI_OPERATION_NAME: Final = "gen_ai.operation.name"
GEN_AI_REQUEST_MODEL: Final = "gen_ai.request.model"
GEN_AI_SYSTEM: Final = "gen_ai.provider.name"
GEN_AI_USAGE_INPUT_TOKENS: Final = "gen_ai.usage.input_tokens"
GEN_AI_USAGE_OUTPUT_TOKENS: Final = "gen_ai.usage.output_tokens"
GEN_AI_RESPONSE_FINISH_REASONS: Final = "gen_ai.response.finish_reasons"
GEN_AI_TOOL_NAME: Final = "gen_ai.tool.name"
GEN_AI_TOOL_CALL_ID: Final = "gen_ai.tool.call.id"
GEN_AI_PROMPT: Final = "gen_ai.prompt"
"""Opt-in only (OTEL_VERL_CAPTURE_CONTENT), capped."""
GEN_AI_COMPLETION: Final = "gen_ai.completion"
GEN_AI_TOOL_CALL_ARGUMENTS: Final = "gen_ai.tool.call.arguments"

ERROR_TYPE: Final = "error.type"

# ---------------------------------------------------------------- the engine's own spans (vLLM 0.24)
# vLLM's ``OutputProcessor.do_tracing`` makes one span per *finished* request (none for an aborted one),
# parented on the trace headers otel_verl hands the engine, i.e. under the turn's ``text_completion`` span.
# Names from ``vllm/tracing/utils.py: SpanAttributes``; the demo's simulated engine emits the same shape.
ENGINE_SPAN_REQUEST: Final = "llm_request"
"""vLLM's span per finished request (kind SERVER, scope :data:`ENGINE_SCOPE`)."""
ENGINE_SCOPE: Final = "vllm.tracing.otel"
ENGINE_SERVICE_SUFFIX: Final = ".vllm"
"""Engine spans carry ``service.name`` = otel_verl's service name + this (``verl.vllm`` by default)."""
ENGINE_LATENCY_QUEUE: Final = "gen_ai.latency.time_in_queue"
"""Seconds from the scheduler's queue to being scheduled (waiting for a running slot / KV cache)."""
ENGINE_LATENCY_TTFT: Final = "gen_ai.latency.time_to_first_token"
"""Seconds from the engine's arrival time to the first token."""
ENGINE_LATENCY_PREFILL: Final = "gen_ai.latency.time_in_model_prefill"
ENGINE_LATENCY_DECODE: Final = "gen_ai.latency.time_in_model_decode"
ENGINE_LATENCY_INFERENCE: Final = "gen_ai.latency.time_in_model_inference"
"""prefill + decode: from scheduled to the last token."""
ENGINE_LATENCY_E2E: Final = "gen_ai.latency.e2e"
"""Seconds from the engine's arrival time to the request's end inside the engine."""
ENGINE_USAGE_PROMPT_TOKENS: Final = "gen_ai.usage.prompt_tokens"
ENGINE_USAGE_COMPLETION_TOKENS: Final = "gen_ai.usage.completion_tokens"
ENGINE_REQUEST_ID: Final = "gen_ai.request.id"
ENGINE_REQUEST_MAX_TOKENS: Final = "gen_ai.request.max_tokens"
ENGINE_REQUEST_TEMPERATURE: Final = "gen_ai.request.temperature"
ENGINE_REQUEST_TOP_P: Final = "gen_ai.request.top_p"
ENGINE_REQUEST_N: Final = "gen_ai.request.n"
VERL_ENGINE_REPLICA: Final = "verl.engine.replica"
"""Which server replica served the request (span or resource attribute of engine spans): verl's
``replica_rank`` on a real vLLM's ``llm_request`` spans and resource; the demo's simulated engine sets its
server id, e.g. ``sim-1``. Without it the analyzer falls back to
``vllm.process_id`` / ``process.pid`` attributes, then to the span's service."""

# ---------------------------------------------------------------- propagation
CARRIER_KEY: Final = "otel_verl.trace_context"
"""Key under which a W3C carrier rides in ``DataProto.meta_info`` / TensorDict / sampling params."""
CARRIER_SPAN_BUDGET_KEY: Final = "otel_verl.span_budget"
"""Beside ``traceparent`` in the carrier a rollout manager hands each worker chunk: how many request spans
the chunk may put in the step's trace (see :mod:`otel_verl.recording.cutting`)."""
CARRIER_STEP_SPAN_KEY: Final = "otel_verl.step_span"
"""Beside ``traceparent`` in that carrier: the step span's id (hex), which requests in traces of their own link to."""


class RequestStatus(str, Enum):
    """Values of ``verl.request.status``."""

    COMPLETED = "completed"
    ABORTED = "aborted"
    TRUNCATED = "truncated"
    FAILED = "failed"


class LinkKind(str, Enum):
    """Values of ``verl.link.kind``."""

    WORKER = "worker"
    """From a request in a trace of its own to its worker span (always the first link: the analyzer's parent)."""
    STEP = "step"
    """From a request in a trace of its own to its step span."""
    SLOW_REQUEST = "slow_request"
    """From a worker span to one of its slowest requests that live in traces of their own (slowest first)."""


class ProcessRole(str, Enum):
    TRAINER = "trainer"
    AGENT_LOOP_WORKER = "agent_loop_worker"
    REWARD = "reward"
    SERVER = "server"
    DEMO = "demo"
    DRIVER = "driver"
