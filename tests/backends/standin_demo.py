"""Stand-in for ``otel-verl demo``: emits a small verl-shaped span tree with the plain OTel SDK.

Used by tests/backends/test_pipeline.py to exercise the real collector → Jaeger / file archive /
span metrics → Prometheus path independently of otel_verl's own instrumentation. Span names and
attribute keys come from :mod:`otel_verl.semconv` (the contract). It exports over OTLP gRPC to
``OTEL_EXPORTER_OTLP_ENDPOINT`` and writes the same spans as a spool (OTLP/JSON lines, one
ExportTraceServiceRequest per line, hex ids) under ``<spool>/<run>/step_<n>/standin.jsonl``.

    python tests/backends/standin_demo.py --steps 2 --spool DIR
"""

from __future__ import annotations

import argparse
import json
import random
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path

from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor, SpanExporter, SpanExportResult
from opentelemetry.trace import Status, StatusCode, set_span_in_context

from otel_verl import semconv as sc

S = 1_000_000_000  # ns per second


def _value(v):
    if isinstance(v, bool):
        return {"boolValue": v}
    if isinstance(v, int):
        return {"intValue": str(v)}
    if isinstance(v, float):
        return {"doubleValue": v}
    if isinstance(v, (list, tuple)):
        return {"arrayValue": {"values": [_value(x) for x in v]}}
    return {"stringValue": str(v)}


def _attrs(mapping) -> list[dict]:
    return [{"key": k, "value": _value(v)} for k, v in (mapping or {}).items()]


class SpoolWriter(SpanExporter):
    """Minimal OTLP/JSON spool writer (the format of otel_verl's spool)."""

    def __init__(self, root: Path, run: str) -> None:
        self.root = root / run

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        by_step: dict[int, list[ReadableSpan]] = defaultdict(list)
        for s in spans:
            by_step[int((s.attributes or {}).get(sc.VERL_STEP, 0))].append(s)
        for step, group in by_step.items():
            resource = group[0].resource
            scope = group[0].instrumentation_scope
            request = {
                "resourceSpans": [
                    {
                        "resource": {"attributes": _attrs(resource.attributes)},
                        "scopeSpans": [
                            {
                                "scope": {"name": scope.name if scope else "standin"},
                                "spans": [self._span(s) for s in group],
                            }
                        ],
                    }
                ]
            }
            path = self.root / f"step_{step}" / "standin.jsonl"
            path.parent.mkdir(parents=True, exist_ok=True)
            with path.open("a") as fh:
                fh.write(json.dumps(request, separators=(",", ":")) + "\n")
        return SpanExportResult.SUCCESS

    @staticmethod
    def _span(s: ReadableSpan) -> dict:
        ctx = s.get_span_context()
        out = {
            "traceId": f"{ctx.trace_id:032x}",
            "spanId": f"{ctx.span_id:016x}",
            "name": s.name,
            "kind": int(s.kind.value) + 1,
            "startTimeUnixNano": str(s.start_time),
            "endTimeUnixNano": str(s.end_time),
            "attributes": _attrs(s.attributes),
            "status": {"code": {StatusCode.UNSET: 0, StatusCode.OK: 1, StatusCode.ERROR: 2}[s.status.status_code]},
        }
        if s.parent is not None:
            out["parentSpanId"] = f"{s.parent.span_id:016x}"
        return out

    def shutdown(self) -> None:
        pass


def emit(tracer, step: int, t0: int, rng: random.Random) -> int:
    """One step trace; returns its end time (ns)."""
    base = {sc.VERL_STEP: step}

    def span(name, parent, start, end, attrs=None, error=False):
        ctx = set_span_in_context(parent) if parent is not None else None
        sp = tracer.start_span(name, context=ctx, start_time=start, attributes={**base, **(attrs or {})})
        if error:
            sp.set_status(Status(StatusCode.ERROR, "failed"))
        return sp

    step_end = t0 + 120 * S
    root = span(sc.SPAN_STEP, None, t0, step_end)
    gen_end = t0 + 90 * S
    gen = span(sc.phase_span_name("gen"), root, t0, gen_end, {sc.VERL_PHASE_NAME: "gen"})
    for rank in range(2):
        w_start = t0 + S // 10
        worker = span(
            sc.SPAN_WORKER, gen, w_start, gen_end, {sc.VERL_WORKER_RANK: rank, sc.VERL_WORKER_NUM_REQUESTS: 3}
        )
        w_last = w_start
        for i in range(3):
            status = [sc.RequestStatus.COMPLETED, sc.RequestStatus.COMPLETED, sc.RequestStatus.ABORTED][i].value
            r_start = w_start + i * S // 5
            t = r_start
            req = span(
                sc.SPAN_REQUEST,
                worker,
                r_start,
                0,
                {
                    sc.VERL_REQUEST_ID: f"req-{step}-{rank}-{i}",
                    sc.VERL_SAMPLE_INDEX: rank * 3 + i,
                    sc.VERL_ROLLOUT_N: 0,
                    sc.VERL_REQUEST_STATUS: status,
                    sc.VERL_REQUEST_NUM_TURNS: 2,
                },
            )
            pre = span(sc.SPAN_PREPROCESS, req, t, t + S // 2, {sc.VERL_PREPROCESS_KIND: "initial_prompt"})
            pre.end(t + S // 2)
            t += S // 2
            for turn in range(2):
                dur = int((2 + rng.random() * (20 if rank == 1 else 5)) * S)
                tr = span(sc.SPAN_TURN, req, t, 0, {sc.VERL_TURN_INDEX: turn})
                gen_span = span(
                    sc.generate_span_name("qwen-0.5b"),
                    tr,
                    t,
                    t + dur,
                    {
                        sc.GEN_AI_OPERATION_NAME: sc.GEN_AI_OP_TEXT_COMPLETION,
                        sc.GEN_AI_REQUEST_MODEL: "qwen-0.5b",
                        sc.GEN_AI_USAGE_OUTPUT_TOKENS: 128,
                    },
                )
                gen_span.end(t + dur)
                t += dur
                parse = span(sc.SPAN_TOOL_PARSE, tr, t, t + S // 100)
                parse.end(t + S // 100)
                t += S // 100
                tool_dur = int((0.5 + rng.random() * 3) * S)
                tool = span(
                    sc.tool_span_name("calculator"),
                    tr,
                    t,
                    t + tool_dur,
                    {sc.GEN_AI_OPERATION_NAME: sc.GEN_AI_OP_EXECUTE_TOOL, sc.GEN_AI_TOOL_NAME: "calculator"},
                    error=(i == 1 and turn == 1),
                )
                tool.end(t + tool_dur)
                t += tool_dur
                tr.end(t)
            rew = span(sc.SPAN_REWARD, req, t, t + S, {sc.VERL_REWARD_SCORE: 1.0})
            rew.end(t + S)
            t += S
            req.end(t)
            w_last = max(w_last, t)
        barrier = span(sc.SPAN_BARRIER, worker, w_last, gen_end, {sc.VERL_BARRIER_SLOWEST_RANK: 1})
        barrier.end(gen_end)
        worker.end(gen_end)
    gen.end(gen_end)
    for name, start, end in (("reward", gen_end, gen_end + 10 * S), ("update_actor", gen_end + 10 * S, step_end)):
        ph = span(sc.phase_span_name(name), root, start, end, {sc.VERL_PHASE_NAME: name})
        ph.end(end)
    root.end(step_end)
    return step_end


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--steps", type=int, default=2)
    ap.add_argument("--spool", type=Path, required=True)
    ap.add_argument("--run", default="standin-run")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)

    resource = Resource.create(
        {"service.name": "otel-verl-standin", sc.VERL_PROCESS_ROLE: "demo", sc.VERL_RUN_ID: args.run}
    )
    provider = TracerProvider(resource=resource)
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(), schedule_delay_millis=200))
    provider.add_span_processor(SimpleSpanProcessor(SpoolWriter(args.spool, args.run)))
    tracer = provider.get_tracer("otel_verl.standin")
    rng = random.Random(args.seed)
    import time

    t = time.time_ns() - args.steps * 130 * S
    for step in range(1, args.steps + 1):
        t = emit(tracer, step, t, rng) + 5 * S
    provider.force_flush()
    provider.shutdown()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
