"""Run verl's real AgentLoopWorker (tests/instrumentation/harness) traced or untraced, and compare outputs.

"Training unaffected" is checked on what verl returns: the token ids, masks, rewards and turn counts
of every trajectory must equal those of an uninstrumented run with the same seed.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from opentelemetry.sdk.trace.export import SpanExporter

import otel_verl
from otel_verl.config import OtelVerlConfig
from otel_verl.demo import runner
from otel_verl.demo.sim_server import SimServerConfig
from otel_verl.export import provider, tracing
from tests.process_state import reset_seam_warnings, reset_tracing

TENSORS = ("prompts", "responses", "response_mask", "attention_mask", "rm_scores")


def digest(output: Any) -> dict[str, Any]:
    """What verl hands back to the trainer, as plain lists (comparable with ==)."""
    out = {key: output.batch[key].tolist() for key in TENSORS if key in output.batch}
    out["__num_turns__"] = [int(x) for x in output.non_tensor_batch["__num_turns__"]]
    return out


def run(opts: runner.DemoOptions, server: SimServerConfig | None = None, remote_reward: bool = True) -> Any:
    """One worker chunk through verl's real code; returns verl's output DataProto."""
    from tests.instrumentation.harness import build_worker, run_chunk

    worker, _, opts = build_worker(opts, server or SimServerConfig(seconds_per_token=0.0), remote_reward=remote_reward)
    return run_chunk(worker, opts)


@contextmanager
def traced(*exporters: SpanExporter, config: OtelVerlConfig | None = None) -> Iterator[tracing.TracingState]:
    """otel_verl's provider with ``exporters`` (plus the spool when ``config`` enables it), verl instrumented."""
    reset_tracing()
    reset_seam_warnings()
    config = config or OtelVerlConfig(spool=False)
    state = provider.setup_tracing(
        "agent_loop_worker", config=config, worker_rank=0, extra_exporters=exporters, set_global=False
    )
    otel_verl.instrument()
    try:
        yield state
    finally:
        otel_verl.uninstrument()
        reset_tracing()


def spool_span_count(root: Path) -> int:
    """Spans in every spool line under ``root`` (each line is one OTLP ExportTraceServiceRequest)."""
    total = 0
    for path in root.rglob("*.jsonl"):
        if any(part.startswith(".") for part in path.relative_to(root).parts):  # delivery journal etc.
            continue
        for line in path.read_text().splitlines():
            doc = json.loads(line)
            total += sum(len(ss["spans"]) for rs in doc["resourceSpans"] for ss in rs["scopeSpans"])
    return total


def problems(records: list[logging.LogRecord]) -> list[logging.LogRecord]:
    """Warnings and errors from otel_verl or the OTel SDK (verl's own start-up warnings are not ours)."""
    return [r for r in records if r.levelno >= logging.WARNING and r.name.startswith(("otel_verl", "opentelemetry"))]
