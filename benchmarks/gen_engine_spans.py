"""The engine's own spans for a generated spool step: one vLLM ``llm_request`` span under each engine call.

Why: a real run with vLLM's tracing on writes, beside our spans, one engine span per finished request, from the
engine's processes. They carry no ``verl.step`` (vLLM knows nothing of steps), so the spool puts them under
``no_step/`` in one file per engine process for the whole run, and the step-at-a-time read must find each
step's among them by trace (:mod:`otel_verl.analysis.read.spill`). The streaming benchmark's spool had none.

Shaped like :mod:`otel_verl.demo.sim_engine_spans` (vLLM 0.24's ``do_tracing``): name ``llm_request``, kind
SERVER, scope ``vllm.tracing.otel``, service ``verl.vllm``, parented on our ``text_completion`` span, started
when the request reaches the engine; ``gen_ai.latency.*`` seconds that add up to the call (a hop of a few ms
each way, a queue, a prefill, the rest decode) and ``gen_ai.usage.*`` tokens. None for an aborted call, as vLLM
makes none. The call's engine process (its replica) is its worker's rank modulo ``replicas``.
"""

from __future__ import annotations

import hashlib
import random
from pathlib import Path

import orjson
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.util.instrumentation import InstrumentationScope
from opentelemetry.trace import SpanKind

from otel_verl import semconv as sc
from otel_verl.analysis.read.otlp.documents import attr_value
from otel_verl.demo.sim_engine_spans import EngineTimeline
from otel_verl.export.encoding import document_line, fields_json

REPLICAS = 4
SPANS_PER_LINE = 256
_SCOPE = InstrumentationScope(sc.ENGINE_SCOPE)


def _attrs(span: dict) -> dict:
    return {a["key"]: attr_value(a.get("value", {})) for a in span.get("attributes", ())}


def engine_resource(replica: int) -> Resource:
    return Resource(
        {
            "service.name": "verl" + sc.ENGINE_SERVICE_SUFFIX,
            "vllm.process_id": str(50_000 + replica),
            sc.VERL_ENGINE_REPLICA: f"vllm-{replica}",
            sc.VERL_PROCESS_ROLE: sc.ProcessRole.SERVER.value,
        }
    )


def engine_lines(step_dir: Path, replicas: int = REPLICAS, seed: int = 0) -> dict[int, bytes]:
    """Per replica, the OTLP/JSON lines of the engine spans under every engine call in ``step_dir``'s files."""
    rng = random.Random(seed)
    by_replica: dict[int, list[tuple[int, str]]] = {r: [] for r in range(replicas)}
    for path in sorted(step_dir.glob("*.jsonl")):
        for line in path.read_bytes().splitlines():
            for rs in orjson.loads(line)["resourceSpans"]:
                for ss in rs["scopeSpans"]:
                    for span in ss["spans"]:
                        if span.get("kind") != SpanKind.CLIENT.value + 1:  # OTLP numbers kinds from 1
                            continue
                        a = _attrs(span)
                        if a.get(sc.GEN_AI_OPERATION_NAME) is None or a.get(sc.VERL_ENGINE_STOP_REASON) == "aborted":
                            continue
                        replica = int(a.get(sc.VERL_WORKER_RANK) or 0) % replicas
                        by_replica[replica].append(_engine_span(span, a, replica, rng))
    out = {}
    for replica, spans in by_replica.items():
        spans.sort()
        encoded = [s for _, s in spans]
        lines = [
            document_line(engine_resource(replica), _SCOPE, encoded[i : i + SPANS_PER_LINE])
            for i in range(0, len(encoded), SPANS_PER_LINE)
        ]
        out[replica] = b"".join(lines)
    return out


def _engine_span(call: dict, a: dict, replica: int, rng: random.Random) -> tuple[int, str]:
    """(end, encoded span): the engine's account of one call."""
    start, end = int(call["startTimeUnixNano"]), int(call["endTimeUnixNano"])
    hop = min(int(rng.uniform(1e6, 4e6)), (end - start) // 4)
    arrival, done = start + hop, end - hop
    inside = max(done - arrival, 0) / 1e9
    queue = inside * min(rng.expovariate(1 / 0.03), 0.5)
    prefill = (inside - queue) * rng.uniform(0.02, 0.08)
    decode = inside - queue - prefill
    prompt = int(a.get(sc.GEN_AI_USAGE_INPUT_TOKENS) or 0)
    completion = int(a.get(sc.GEN_AI_USAGE_OUTPUT_TOKENS) or 0)
    timeline = EngineTimeline(arrival=arrival / 1e9, queued=arrival / 1e9)
    timeline.scheduled = timeline.queued + queue
    timeline.first_token = timeline.scheduled + prefill
    timeline.last_token = timeline.first_token + decode
    attrs = {
        **timeline.attributes(done / 1e9, prompt, completion),  # vLLM's formulas, as the demo's engine uses them
        sc.ENGINE_REQUEST_ID: f"{call['spanId']}-{replica}",
        sc.VERL_ENGINE_REPLICA: f"vllm-{replica}",
        sc.ENGINE_REQUEST_MAX_TOKENS: 4096,
        sc.ENGINE_REQUEST_TEMPERATURE: 1.0,
    }
    # from the call's id, not the random stream: gen_spool draws its own ids from the same seeded generator
    span_id = hashlib.blake2b(bytes.fromhex(call["spanId"]), digest_size=8, person=b"llm_request").hexdigest()
    encoded = fields_json(
        call["traceId"], span_id, call["spanId"], sc.ENGINE_SPAN_REQUEST, arrival, done, attrs, SpanKind.SERVER
    )
    return done, encoded
