"""Target 1: per-event cost of our recording path vs the seed's ``SGLangLogManager.log``.

Same events both ways: requests of 3 turns, each turn an engine call, a tool parse, a tool call and
a token merge, plus the initial preprocess and the reward (17 events a request). The baseline is
seed 000's logger re-created line by line (dict + ``datetime.now().isoformat()`` + ``json.dumps`` +
``write`` + ``flush`` per event, file opened with ``buffering=1``). Ours is the request recorder with
the default config writing the spool, inside an open rollout chunk as in an AgentLoopWorker:
start/end per event, ``finish`` per request (spans held until the chunk ends, :mod:`otel_verl.export.hold`).

Two figures: the hot path's wall time (what the event loop pays while the chunk runs), and CPU time
of the whole process until the spool is flushed (encoding and writing the spans included: the work
the worker does after its chunk, while it waits for the trainer). Both are measured side by side,
alternating, and the median of the repetitions is kept.
"""

from __future__ import annotations

import atexit
import json
import os
import statistics
import tempfile
import time
from datetime import datetime
from pathlib import Path
from typing import Any

from benchmarks._table import Result

TURNS = 3
EVENTS_PER_REQUEST = 2 + TURNS * 5  # preprocess + reward + per turn: turn, engine, tool parse, tool, merge


class SGLangLogManager:
    """Seed 000's logger, unchanged in behaviour (one JSON line written and flushed per event)."""

    def __init__(self) -> None:
        self.file_handles: dict[str, Any] = {}
        atexit.register(self.close_all)

    def get_handle(self, log_path: str) -> Any:
        if log_path not in self.file_handles:
            os.makedirs(os.path.dirname(log_path), exist_ok=True)
            self.file_handles[log_path] = open(log_path, "a", buffering=1)  # noqa: SIM115 - seed behaviour
        return self.file_handles[log_path]

    def log(self, log_path, event, duration=None, extra=None, workid=None, step=None, **extra_keys):
        handle = self.get_handle(log_path)
        log_entry = {"timestamp": datetime.now().isoformat(), "event": event}
        if duration is not None:
            log_entry["duration_sec"] = duration
        if extra is not None:
            log_entry["extra"] = extra
        if workid is not None:
            log_entry["workid"] = workid
        if step is not None:
            log_entry["step"] = step
        if extra_keys is not None:
            for key in extra_keys:
                log_entry[key] = extra_keys[key]
        ordered_keys = ["timestamp", "event", "duration_sec"] + [
            k for k in log_entry if k not in ("timestamp", "event", "duration_sec")
        ]
        ordered_entry = {k: log_entry[k] for k in ordered_keys if k in log_entry}
        handle.write(json.dumps(ordered_entry) + "\n")
        handle.flush()

    def close_all(self) -> None:
        for handle in self.file_handles.values():
            handle.close()
        self.file_handles.clear()


def run_seed(requests: int, log_dir: Path) -> None:
    """The seed's calls for ``requests`` trajectories: one ``log`` per event, at its end, with its duration."""
    manager = SGLangLogManager()
    path = str(log_dir / "step_1" / "worker_0.jsonl")
    perf = time.perf_counter
    for r in range(requests):
        rid = f"req-{r}"
        t = perf()
        manager.log(path, "preprocess", perf() - t, {"kind": "initial_prompt"}, workid=0, step=1, request_id=rid)
        for turn in range(TURNS):
            t_turn = perf()
            t = perf()
            manager.log(path, "generate", perf() - t, {"output_tokens": 60}, 0, 1, request_id=rid, turn=turn)
            t = perf()
            manager.log(path, "tool_parse", perf() - t, {"num_calls": 1}, 0, 1, request_id=rid, turn=turn)
            t = perf()
            manager.log(path, "tool_call", perf() - t, {"tool": "calculator"}, 0, 1, request_id=rid, turn=turn)
            t = perf()
            manager.log(path, "preprocess", perf() - t, {"kind": "merge_assistant"}, 0, 1, request_id=rid, turn=turn)
            manager.log(path, "turn", perf() - t_turn, None, 0, 1, request_id=rid, turn=turn)
        t = perf()
        manager.log(path, "reward", perf() - t, {"score": 1.0}, 0, 1, request_id=rid)
    manager.close_all()


def run_ours(requests: int) -> float:
    """Our recorder for the same events; returns the seconds spent until the spool was flushed."""
    from opentelemetry.trace import SpanKind

    from otel_verl import semconv as sc
    from otel_verl.export import flush, tracing
    from otel_verl.recording.recorder import RequestRecorder

    state = tracing.get_state()
    assert state is not None
    flush.hold_begin()  # what the worker-chunk wrapper does when verl's AgentLoopWorker starts a chunk
    worker = tracing.tracer().start_span(sc.SPAN_WORKER, attributes={sc.VERL_STEP: 1, sc.VERL_WORKER_RANK: 0})
    parent = worker.get_span_context()
    engine = sc.generate_span_name("demo-model")
    tool = sc.tool_span_name("calculator")
    for r in range(requests):
        rec = RequestRecorder(parent, {sc.VERL_STEP: 1, sc.VERL_WORKER_RANK: 0, sc.VERL_REQUEST_ID: f"req-{r}"})
        rec.end(rec.start(sc.SPAN_PREPROCESS, attributes={sc.VERL_PREPROCESS_KIND: "initial_prompt"}))
        for _ in range(TURNS):
            rec.open_turn()
            node = rec.start(engine, attributes={sc.GEN_AI_OPERATION_NAME: "text_completion"}, kind=SpanKind.CLIENT)
            rec.end(node, {sc.GEN_AI_USAGE_OUTPUT_TOKENS: 60, sc.VERL_ENGINE_STOP_REASON: "completed"})
            rec.end(rec.start(sc.SPAN_TOOL_PARSE), {sc.VERL_TOOL_CALL_COUNT: 1})
            rec.end(rec.start(tool, attributes={sc.GEN_AI_TOOL_NAME: "calculator"}))
            rec.end(rec.start(sc.SPAN_PREPROCESS, attributes={sc.VERL_PREPROCESS_KIND: "merge_assistant"}))
        rec.end(rec.start(sc.SPAN_REWARD, parent_id=rec.root.span_id), {sc.VERL_REWARD_SCORE: 1.0})
        rec.finish("completed")
    worker.end()
    t0 = time.perf_counter()
    flush.hold_end()
    flush.flush()
    return time.perf_counter() - t0


def _setup(spool_root: Path) -> None:
    from otel_verl.config import OtelVerlConfig
    from otel_verl.export import provider
    from tests.process_state import reset_tracing

    reset_tracing()
    for var in ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"):
        os.environ.pop(var, None)
    config = OtelVerlConfig(spool=True, spool_dir=str(spool_root), run_id="bench-event-cost")
    provider.setup_tracing("agent_loop_worker", worker_rank=0, config=config, set_global=False)


def measure(requests: int, reps: int) -> dict[str, float]:
    """Median µs per event: seed, ours (hot path wall), ours (CPU until flushed), seed CPU."""
    from otel_verl.export import provider

    seed_wall, seed_cpu, our_hot, our_cpu = [], [], [], []
    events = requests * EVENTS_PER_REQUEST
    with tempfile.TemporaryDirectory(prefix="otel-verl-bench-") as tmp:
        _setup(Path(tmp) / "spool")
        run_ours(max(1, requests // 10))  # warm up imports and the export thread
        for rep in range(reps):
            for which in ("seed", "ours") if rep % 2 == 0 else ("ours", "seed"):
                c0, t0 = time.process_time(), time.perf_counter()
                if which == "seed":
                    run_seed(requests, Path(tmp) / f"seed{rep}")
                    seed_wall.append(time.perf_counter() - t0)
                    seed_cpu.append(time.process_time() - c0)
                else:
                    flush_s = run_ours(requests)
                    our_hot.append(time.perf_counter() - t0 - flush_s)
                    our_cpu.append(time.process_time() - c0)
        provider.shutdown_tracing()
    med = statistics.median
    return {
        "seed_us": med(seed_wall) / events * 1e6,
        "seed_cpu_us": med(seed_cpu) / events * 1e6,
        "ours_hot_us": med(our_hot) / events * 1e6,
        "ours_cpu_us": med(our_cpu) / events * 1e6,
        "events": events,
        "reps": reps,
    }


def run(quick: bool) -> list[Result]:
    m = measure(requests=500 if quick else 2000, reps=3 if quick else 7)
    hot = m["ours_hot_us"] / m["seed_us"]
    cpu = m["ours_cpu_us"] / m["seed_cpu_us"]
    detail = (
        f"seed {m['seed_us']:.1f} µs/event (CPU {m['seed_cpu_us']:.1f}); ours hot path {m['ours_hot_us']:.1f} µs, "
        f"CPU incl. spool export {m['ours_cpu_us']:.1f} µs; {m['events']:,} events, median of {m['reps']}"
    )
    return [
        Result("1. per-event cost vs seed logger (hot path)", "≤ 1.0× (aim 0.5×)", f"{hot:.2f}×", hot <= 1.0, detail),
        Result(
            "1b. per-event CPU incl. spool export vs seed",
            "≤ 1.0×",
            f"{cpu:.2f}×",
            cpu <= 1.0,
            "whole-process CPU until the spool is flushed vs the seed's CPU for the same events (the encoding "
            "the seed does inline, ours does later on the export thread)",
            gate=False,
        ),
    ]


if __name__ == "__main__":
    for row in run(quick=True):
        print(row)
