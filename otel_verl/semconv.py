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
"""Synthesized, one per worker and step: the time the worker waited, its work done, for the step's sync point
(:data:`VERL_BARRIER_SYNC_POINT`; :mod:`otel_verl.instrumentation.rollout.barriers`)."""

SPAN_UPDATE: Final = "verl.update"
"""One inner update of a V1 step (``PPOTrainer._step_once``: sample a mini-batch from the replay buffer, then
its phases); a step has ``parameter_sync_step`` of them (separate-async), else one. Links to every sample group
it consumed, each link carrying the group's policy versions and its staleness (:data:`VERL_SAMPLE_STALENESS`)."""

SPAN_GROUP: Final = "verl.rollout.group"
"""One sample group of the V1 rollout (``AgentLoopWorkerTQ._run_prompt``: one prompt, its ``rollout.n`` samples
as ``verl.rollout.request`` children). Sync trainer: a child of its worker span, in the step's trace. Async
trainers: the root of a trace of its own (its samples may be generated across steps), linked to the worker
span that dispatched it; the inner update that consumed it links back to it. Its ids follow from the prompt's
``uid`` (:mod:`otel_verl.instrumentation.sample_groups`), so the trainer can link to it without a message."""

SPAN_WEIGHT_SYNC: Final = "verl.weight_sync"
"""One parameter sync (``CheckpointEngineManager.update_weights``): the new policy version into the rollout
replicas; seconds are the span's, bytes where the engine reports them (:data:`VERL_SYNC_BYTES`)."""

SPAN_SUBMISSION_HOLD: Final = "verl.submission_hold"
"""The time a request waited at a rollout server's submission gate before reaching the engine
(``vLLMHttpServer._park_until_admitted``, verl#7511: the gate is closed while a weight sync drains the engine), under
the engine call that waited, beside the engine's own span (which starts after it). Only a request that found the gate
closed gets one; :data:`VERL_SUBMISSION_REJECTED` when the gate refused it instead (the client re-routes)."""

SPAN_GENERATE: Final = "verl.generate"
"""A fully-async client's engine round trip (``FullyAsyncLLMServerClient.generate``, which resumes after aborts):
its attempts are its children, each one engine submission and the GenAI ``text_completion <model>`` span with its
own ``gen_ai.usage``. It carries :data:`VERL_REQUEST_NUM_RESUMES` and no ``gen_ai.*``, so a sum over GenAI spans
counts each engine call once. A plain client's round trip has no attempts: it is the GenAI span itself."""

GEN_AI_OP_TEXT_COMPLETION: Final = "text_completion"
GEN_AI_OP_EXECUTE_TOOL: Final = "execute_tool"


def phase_span_name(phase: str) -> str:
    """``verl.phase gen`` etc."""
    return f"{SPAN_PHASE_PREFIX} {phase}"


def generate_span_name(model: str | None) -> str:
    """GenAI span name for one engine call (a plain round trip, or one attempt of :data:`SPAN_GENERATE`)."""
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
"""Rank of the worker everybody waited for (the legacy trainer's barrier: :data:`BARRIER_SLOWEST_WORKER`)."""

VERL_BARRIER_SYNC_POINT: Final = "verl.barrier.sync_point"
"""What the barrier ends at: :data:`BARRIER_SLOWEST_WORKER`, :data:`BARRIER_SAMPLE_END`, :data:`BARRIER_WEIGHT_SYNC`."""
BARRIER_SLOWEST_WORKER: Final = "slowest_worker"
"""Legacy trainer: the slowest worker's end (``generate_sequences`` returns then)."""
BARRIER_SAMPLE_END: Final = "sample_end"
"""V1 sync and colocate-async trainers: the end of the trainer's ``gen`` (its batch sampled; the replicas put to
sleep, colocate-async's unfinished requests aborted first)."""
BARRIER_WEIGHT_SYNC: Final = "weight_sync"
"""V1 separate-async trainer: the start of the step's ``update_weights`` (the weight sync pauses the rollout)."""

VERL_BARRIER_REQUESTS_IN_FLIGHT: Final = "verl.barrier.requests_in_flight"
"""V1: the worker's requests still in flight at the sync point (then it did not wait: the barrier lasts 0 s)."""

# ---------------------------------------------------------------- V1 trainers: modes, inner updates, versions
# semantic-conventions-genai#88 (the ``rl.*`` proposal) names namespaces (``rl.loop``, ``rl.sample``,
# ``rl.reward``, ``rl.train``, ``rl.sync``) and resource attributes (``rl.system``, ``rl.run.id``,
# ``rl.algorithm``, ...) but, in the text available to us, no attribute for a sample's policy version, its
# staleness or a sync's payload: those are ``verl.*`` names here, kept in this one place for an alias later.
RL_SYSTEM: Final = "rl.system"
"""Resource attribute (#88): the RL framework, ``verl`` on every process otel_verl sets up."""

RL_RUN_ID: Final = "rl.run.id"
"""Resource attribute (#88): the training run; the same value as :data:`VERL_RUN_ID`."""

VERL_TRAINER_MODE: Final = "verl.trainer.mode"
"""On ``verl.step``: ``sync`` | ``colocate_async`` | ``separate_async`` (verl's ``trainer.v1.trainer_mode``),
``legacy`` for ``RayPPOTrainer``."""

VERL_PARAMETER_SYNC_STEP: Final = "verl.trainer.parameter_sync_step"
"""On ``verl.step`` (V1): inner updates per step between parameter syncs (verl's ``parameter_sync_step``)."""

VERL_TRAINER_FIRST_STEP: Final = "verl.trainer.first_step"
"""On ``verl.step``: the first step this trainer ran (1, or the step after the checkpoint it resumed from): an
asynchronous run's pipeline fills there, whatever steps an analysis reads."""

VERL_UPDATE_INDEX: Final = "verl.update.index"
"""0-based inner update within the step (verl's ``local_trigger_step``): on ``verl.update`` and its phases."""

VERL_UPDATE_NUM_GROUPS: Final = "verl.update.num_groups"
"""Sample groups (prompts) the inner update consumed."""

VERL_UPDATE_NUM_SAMPLES: Final = "verl.update.num_samples"
"""Samples (trajectories) the inner update consumed, padding left out."""

VERL_UPDATE_STALENESS_MAX: Final = "verl.update.staleness.max"
VERL_UPDATE_STALENESS_MEAN: Final = "verl.update.staleness.mean"
"""Over the consumed samples: :data:`VERL_SAMPLE_STALENESS` (verl's ``training/off_policy/trajectory_staleness``)."""

VERL_GROUP_UID: Final = "verl.group.uid"
"""The prompt's ``uid`` (verl's TransferQueue key of the group; its samples are ``<uid>_<session>_<i>``)."""

VERL_GROUP_NUM_SAMPLES: Final = "verl.group.num_samples"
"""Samples (rollout.n) of a sample group."""

VERL_POLICY_VERSION: Final = "verl.policy.version"
"""The policy version (verl's ``global_steps`` of the weights the engine served) that generated an engine call."""

VERL_POLICY_VERSION_MIN: Final = "verl.policy.version.min"
VERL_POLICY_VERSION_MAX: Final = "verl.policy.version.max"
"""The oldest / newest policy version a sample (request span), a group, or a consumed group (link) was generated
with (verl's ``min_global_steps`` / ``max_global_steps``; they differ when a partial rollout resumed on new
weights)."""

VERL_DISPATCH_STEP: Final = "verl.dispatch.step"
"""On a consumption link: the step that dispatched the group (the group's ``verl.step``)."""

VERL_SAMPLE_STALENESS: Final = "verl.sample.staleness"
"""On a consumption link: how many versions behind the consuming policy the group's stalest sample is,
``(consuming step - 1) - max_global_steps`` (verl's ``trajectory_staleness``, a lower bound; 0 = on-policy)."""

VERL_SAMPLE_STALENESS_WORST: Final = "verl.sample.staleness_worst"
"""On a consumption link: ``(consuming step - 1) - min_global_steps`` (verl's ``trajectory_staleness_worst``)."""

VERL_SYNC_VERSION: Final = "verl.weight_sync.version"
"""The policy version a parameter sync installs (the ``global_steps`` it was called with)."""

VERL_SYNC_BACKEND: Final = "verl.weight_sync.backend"
"""The checkpoint-engine backend (``naive`` = in-process, colocated; ``nccl``, ``nixl``, ...)."""

VERL_SYNC_REPLICAS: Final = "verl.weight_sync.replicas"
"""Rollout replicas the sync updates."""

VERL_SYNC_BYTES: Final = "verl.weight_sync.bytes"
"""Bytes on the wire, where the engine reports them (verl's ``checkpoint_engine/payload_mbytes``)."""

VERL_SUBMISSION_REJECTED: Final = "verl.submission.rejected"
"""The gate refused the request (the server left rotation behind it): it never reached the engine."""

VERL_EVENT_ORIGIN: Final = "verl.event.origin"
"""For imported seed logs: the original event name."""

VERL_LEGACY_LINE: Final = "verl.legacy.line"
"""For imported seed logs: the whole original JSON line, so ``export-legacy`` gives back every field."""

VERL_PROCESS_ROLE: Final = "verl.process.role"
"""Resource attribute: trainer | agent_loop_worker | reward | server | demo | driver."""

VERL_RUN_ID: Final = "verl.run.id"
"""Resource attribute: one id for all processes of a run (spool directory name)."""

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
ENGINE_OPERATIONS: Final = ("text_completion", "chat", "generate_content", "embeddings")
"""GenAI operation names (``gen_ai.operation.name``) an engine's request span may be named by: under
``OTEL_SEMCONV_STABILITY_OPT_IN=gen_ai_latest_experimental`` vLLM names it ``"{operation} {model}"`` instead of
``llm_request`` (vllm#47633), which our ``text_completion <model>`` can equal: the analyzer tells the engine's
apart by what only the engine's has (its ``gen_ai.latency.*`` numbers, its service, its phase children)."""
ENGINE_PHASE_SPAN_PREFIX: Final = "vllm.request."
ENGINE_PHASE_SPANS: Final = {
    "vllm.request.queue": "queue",
    "vllm.request.prefill": "prefill",
    "vllm.request.decode": "decode",
}
"""Child spans of an engine request span proposed in vllm#44402 (name → the part of the engine's account): where
present, the analyzer takes the engine's queue / prefill / decode seconds from them."""
ENGINE_SCOPE: Final = "vllm.tracing.otel"
ENGINE_SERVICE_SUFFIX: Final = ".vllm"
"""Engine spans carry ``service.name`` = otel_verl's service name + this (``verl.vllm`` by default)."""
SIM_ENGINE_SERVICE_SUFFIX: Final = ".sim-engine"
"""The CPU demo's simulated engine writes vLLM-shaped spans under otel_verl's service name + this
(``verl.sim-engine``): a service name says which program wrote the span, and no vLLM runs there (issue 51)."""
ENGINE_SERVICE_SUFFIXES: Final = (ENGINE_SERVICE_SUFFIX, SIM_ENGINE_SERVICE_SUFFIX)
"""The services whose spans are an engine's own."""
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
    GROUP = "group"
    """From a request in a trace of its own to its V1 sample group span (its parent, had it not been cut: first)."""
    CUT_OFF = "cut_off"
    """From a worker span to each trace its requests went to (a request there), so the step's trace reaches them."""


class ProcessRole(str, Enum):
    TRAINER = "trainer"
    AGENT_LOOP_WORKER = "agent_loop_worker"
    REWARD = "reward"
    SERVER = "server"
    DEMO = "demo"
    DRIVER = "driver"
