"""A simulated run as a spool, in the span contract the instrumentation emits.

Layout and lines as :class:`otel_verl.export.spool.SpoolSpanExporter` writes them (``<root>/<run>/step_<n>/
worker_<rank>.jsonl`` and ``trainer.jsonl``, one ExportTraceServiceRequest of up to 512 spans a line, in end
order), through the span helpers of ``benchmarks/gen_spool.py``. Per step: ``verl.step`` → ``verl.phase gen``
(and the trainer phases after it) → ``verl.rollout.worker`` → ``verl.rollout.request`` → initial
``verl.preprocess``, ``verl.rollout.turn`` → ``text_completion <model>`` (+ the engine's ``llm_request``),
``verl.tool_parse``, ``execute_tool <tool>``, the merge's ``verl.preprocess``; ``verl.reward``; one
``verl.barrier`` per worker. Engine spans (format ``otlp_engine``) go where the server process's exporter puts
spans without a step: ``<run>/no_step/server_<replica>.jsonl``, resource ``service.name=verl.vllm`` with
``verl.engine.replica``; none for an aborted call (vLLM traces finished requests only).
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.util.instrumentation import InstrumentationScope
from opentelemetry.trace import SpanKind

from benchmarks.diagnosis.run_model import SimRun
from benchmarks.diagnosis.simulate import RequestTimeline, TurnTimeline, WorkerTimeline
from benchmarks.diagnosis.steps import StepTimeline
from benchmarks.gen_spool import MODEL, T0_NS, GenStats, OtlpSpan, SpanIds, otlp_resource, otlp_span, write_spans
from otel_verl import semconv as sc

RUN_NAME = "bench"
_CLIENT, _SERVER = SpanKind.CLIENT, SpanKind.SERVER


def _ns(t: float) -> int:
    return T0_NS + round(t * 1e9)


class _WorkerSpans:
    """The spans of one worker-step. Times in: seconds from the step's ``gen`` start, before the stall."""

    def __init__(self, run: SimRun, step: StepTimeline, wt: WorkerTimeline, gen_start: float, ids: SpanIds) -> None:
        self.run, self.step, self.wt, self.gen_start, self.ids = run, step, wt, gen_start, ids
        cut = step.cut_of(wt.worker)
        self.cut = None if cut is None else gen_start + cut
        self.spans: list[OtlpSpan] = []
        self.engine: list[tuple[int, OtlpSpan]] = []
        """(replica, ``llm_request`` span) each."""
        self.limit: float | None = None
        """The abort's moment while an aborted request is written: nothing of it after that."""

    def at(self, t: float) -> float:
        return self.gen_start + self.wt.warp(t)

    def add(
        self,
        trace: str,
        parent: str,
        name: str,
        start: float,
        end: float,
        attrs: dict[str, Any],
        sid: str = "",
        kind: SpanKind = SpanKind.INTERNAL,
    ) -> str:
        """A span (its id), or "" when it would have begun after the abort."""
        a, b = self.at(start), self.at(end)
        if self.limit is not None:
            if a >= self.limit:
                return ""
            b = min(b, self.limit)
        sid = sid or self.ids.span()
        self.spans.append(otlp_span(trace, sid, parent, name, _ns(a), _ns(b), attrs, kind))
        return sid

    def decoded(self, turn: TurnTimeline) -> int:
        """Tokens the call had decoded when it ended (an aborted call: those before the abort)."""
        if self.limit is None or self.at(turn.last_token) <= self.limit:
            return turn.tokens
        first, last = self.at(turn.first_token), self.at(turn.last_token)
        return int(turn.tokens * min(1.0, max(0.0, (self.limit - first) / (last - first))))

    def request(self, trace: str, parent: str, rq: RequestTimeline) -> str:
        w, d = self.wt.worker, rq.draw
        aborted = (w, d.index) in self.step.aborted
        self.limit = self.cut if aborted else None
        base = {sc.VERL_STEP: self.step.step, sc.VERL_WORKER_RANK: w, sc.VERL_REQUEST_ID: d.request_id}
        rid = self.ids.span()
        t0 = rq.turns[0]
        initial = {**base, sc.VERL_PREPROCESS_KIND: "initial_prompt"}
        self.add(trace, rid, sc.SPAN_PREPROCESS, t0.start, t0.call_start, initial)
        context, turns, response = d.prompt_tokens, 0, 0
        for i, turn in enumerate(rq.turns):
            turn_id = self.add(
                trace,
                rid,
                sc.SPAN_TURN,
                turn.call_start if i == 0 else turn.start,
                turn.end,
                {**base, sc.VERL_TURN_INDEX: i},
            )
            if not turn_id:
                break
            turns += 1
            self._turn(trace, turn_id, base, rq, i, turn, context)
            response += self.decoded(turn)
            context += turn.tokens + turn.draw.tool_tokens
        reward = {**base, sc.VERL_REWARD_REMOTE: False, sc.VERL_REWARD_SCORE: d.score}
        self.add(trace, rid, sc.SPAN_REWARD, rq.reward_start, rq.end - d.finalization, reward)
        status = "aborted" if aborted else "truncated" if rq.truncated else "completed"
        attrs = {
            sc.VERL_STEP: self.step.step,
            sc.VERL_SAMPLE_INDEX: d.sample_index,
            sc.VERL_ROLLOUT_N: d.rollout_index,
            sc.VERL_VALIDATE: False,
            sc.VERL_REQUEST_AGENT: "tool_agent",
            sc.VERL_WORKER_RANK: w,
            sc.VERL_REQUEST_ID: d.request_id,
            sc.VERL_REQUEST_RESPONSE_TOKENS: response,
            sc.VERL_REQUEST_PROMPT_TOKENS: d.prompt_tokens,
            sc.VERL_REWARD_SCORE: d.score,
            sc.VERL_REQUEST_STATUS: status,
            sc.VERL_REQUEST_NUM_TURNS: turns,
        }
        self.add(trace, parent, sc.SPAN_REQUEST, rq.start, rq.end, attrs, sid=rid)
        self.limit = None
        return status

    def _turn(
        self,
        trace: str,
        turn_id: str,
        base: dict[str, Any],
        rq: RequestTimeline,
        i: int,
        turn: TurnTimeline,
        context: int,
    ) -> None:
        aborted = self.limit is not None and self.at(turn.call_end) > self.limit
        reason = "aborted" if aborted else "length" if turn.truncated else "completed"
        call = {
            **base,
            sc.GEN_AI_OPERATION_NAME: sc.GEN_AI_OP_TEXT_COMPLETION,
            sc.GEN_AI_REQUEST_MODEL: MODEL,
            sc.GEN_AI_SYSTEM: "vllm",
            sc.GEN_AI_USAGE_INPUT_TOKENS: context,
            sc.GEN_AI_USAGE_OUTPUT_TOKENS: self.decoded(turn),
            sc.VERL_ENGINE_STOP_REASON: reason,
            sc.GEN_AI_RESPONSE_FINISH_REASONS: [reason],
            sc.VERL_ENGINE_NUM_PREEMPTED: 0,
        }
        name = sc.generate_span_name(MODEL)
        call_id = self.add(trace, turn_id, name, turn.call_start, turn.call_end, call, kind=_CLIENT)
        if call_id and reason != "aborted" and self.run.shape.has_engine_spans:
            self._llm_request(trace, call_id, rq, i, turn, context)
        parsed = {**base, sc.VERL_TOOL_PARSER: "HermesToolParser", sc.VERL_TOOL_CALL_COUNT: int(turn.has_tool)}
        self.add(trace, turn_id, sc.SPAN_TOOL_PARSE, turn.call_end, turn.parse_end, parsed)
        if turn.has_tool:
            tool = {**base, sc.GEN_AI_OPERATION_NAME: sc.GEN_AI_OP_EXECUTE_TOOL, sc.GEN_AI_TOOL_NAME: "python"}
            self.add(trace, turn_id, sc.tool_span_name("python"), turn.post_end, turn.tool_end, tool)
            merge = {**base, sc.VERL_PREPROCESS_KIND: "merge_context"}
            self.add(trace, turn_id, sc.SPAN_PREPROCESS, turn.tool_end, turn.end, merge)

    def _llm_request(
        self, trace: str, parent: str, rq: RequestTimeline, i: int, turn: TurnTimeline, context: int
    ) -> None:
        """vLLM's span for a finished call (``sim_engine_spans.EngineTimeline``'s formulas)."""
        start, end = self.wt.engine_window(turn)
        queued = turn.arrival + turn.draw.engine_other / 2
        attrs = {
            sc.ENGINE_LATENCY_TTFT: turn.first_token - turn.arrival,
            sc.ENGINE_LATENCY_E2E: turn.engine_end - turn.arrival,
            sc.ENGINE_LATENCY_QUEUE: turn.scheduled - queued,
            sc.ENGINE_USAGE_PROMPT_TOKENS: context,
            sc.ENGINE_USAGE_COMPLETION_TOKENS: turn.tokens,
            sc.ENGINE_LATENCY_PREFILL: turn.first_token - turn.scheduled,
            sc.ENGINE_LATENCY_DECODE: turn.last_token - turn.first_token,
            sc.ENGINE_LATENCY_INFERENCE: turn.last_token - turn.scheduled,
            sc.ENGINE_REQUEST_ID: f"{rq.draw.request_id}-{i}",
            sc.ENGINE_REQUEST_MAX_TOKENS: self.run.shape.max_tokens,
            sc.VERL_ENGINE_REPLICA: rq.draw.replica,
        }
        s = self.gen_start + start, self.gen_start + end
        span = otlp_span(trace, self.ids.span(), parent, sc.ENGINE_SPAN_REQUEST, _ns(s[0]), _ns(s[1]), attrs, _SERVER)
        self.engine.append((rq.draw.replica, span))

    def worker(self, trace: str, parent: str) -> str:
        """Every span of the worker-step; returns the worker span's id."""
        wid = self.ids.span()
        statuses = [self.request(trace, wid, rq) for rq in self.wt.requests]
        end = self.gen_start + self.step.worker_ends[self.wt.worker]
        attrs = {
            sc.VERL_WORKER_RANK: self.wt.worker,
            sc.VERL_STEP: self.step.step,
            sc.VERL_VALIDATE: False,
            sc.VERL_WORKER_NUM_REQUESTS: len(statuses),
            sc.VERL_WORKER_NUM_COMPLETED: len(statuses) - statuses.count("aborted"),
            sc.VERL_WORKER_NUM_ABORTED: statuses.count("aborted"),
        }
        self.spans.append(
            otlp_span(trace, wid, parent, sc.SPAN_WORKER, _ns(self.gen_start + self.wt.start), _ns(end), attrs)
        )
        return wid


def _trainer_spans(
    step: StepTimeline, start: float, trace: str, ids: SpanIds, workers: dict[int, str], step_id: str, gen_id: str
) -> list[OtlpSpan]:
    """The step, its phases and the barrier spans (trainer process)."""
    gen_start = start + step.lead
    last = max(step.worker_ends)
    slowest = step.worker_ends.index(last)
    spans = [
        otlp_span(
            trace,
            ids.span(),
            workers[w],
            sc.SPAN_BARRIER,
            _ns(gen_start + end),
            _ns(gen_start + last),
            {sc.VERL_WORKER_RANK: w, sc.VERL_BARRIER_SLOWEST_RANK: slowest, sc.VERL_STEP: step.step},
        )
        for w, end in enumerate(step.worker_ends)
    ]
    gen = {sc.VERL_PHASE_NAME: "gen", sc.VERL_STEP: step.step}
    spans.append(
        otlp_span(trace, gen_id, step_id, sc.phase_span_name("gen"), _ns(gen_start), _ns(gen_start + step.gen_end), gen)
    )
    for name, a, b in step.phases:
        attrs = {sc.VERL_PHASE_NAME: name, sc.VERL_STEP: step.step}
        spans.append(
            otlp_span(trace, ids.span(), step_id, sc.phase_span_name(name), _ns(start + a), _ns(start + b), attrs)
        )
    spans.append(
        otlp_span(trace, step_id, "", sc.SPAN_STEP, _ns(start), _ns(start + step.end), {sc.VERL_STEP: step.step})
    )
    return spans


def write_spool(run: SimRun, root: str | Path) -> Path:
    """Write ``<root>/bench/...``; returns ``root`` (what ``otel-verl analyze`` reads)."""
    root = Path(root)
    run_dir = root / RUN_NAME
    rng = random.Random(f"{run.seed}:otlp")
    ids = SpanIds(rng)
    stats = GenStats()
    trainer_res = otlp_resource("trainer", 1000, RUN_NAME, None)
    worker_res = [otlp_resource("agent_loop_worker", 2000 + w, RUN_NAME, w) for w in range(run.shape.workers)]
    engine: dict[int, list[OtlpSpan]] = {}
    t = 0.0
    for step in run.steps:
        trace, step_id, gen_id = ids.trace(), ids.span(), ids.span()
        gen_start = t + step.lead
        workers: dict[int, str] = {}
        for wt in step.workers:
            spans = _WorkerSpans(run, step, wt, gen_start, ids)
            workers[wt.worker] = spans.worker(trace, gen_id)
            for replica, span in spans.engine:
                engine.setdefault(replica, []).append(span)
            path = run_dir / f"step_{step.step}" / f"worker_{wt.worker}.jsonl"
            write_spans(path, worker_res[wt.worker], spans.spans, rng, stats)
        trainer = _trainer_spans(step, t, trace, ids, workers, step_id, gen_id)
        write_spans(run_dir / f"step_{step.step}" / "trainer.jsonl", trainer_res, trainer, rng, stats)
        t += step.end + step.draw.between
    for replica, spans in sorted(engine.items()):
        resource = Resource(
            {"service.name": "verl.vllm", "vllm.process_id": str(3000 + replica), sc.VERL_ENGINE_REPLICA: replica}
        )
        scope = InstrumentationScope(sc.ENGINE_SCOPE, "0.24.0")
        write_spans(run_dir / "no_step" / f"server_{replica}.jsonl", resource, spans, rng, stats, scope)
    return root
