"""One CPU-demo run per trainer that serves three test files (each run costs CI ~1.5 min of Ray and verl start-up):
test_plants.py (a planted problem per step 2-6 after a clean step 1), test_validation.py (verl's validation
before training, step 0, and at ``test_freq`` inside the last step, 7, which nothing is planted in) and
test_ray_propagation.py (each step one connected trace across the Ray processes; the validations' spans aside)."""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any

PHASE_S, START_S, LONG_TOKENS, DECODE_K, REWARD_S = 3.0, 3.0, 6000, 8.0, 2.0
PLANTS = {
    2: {"slow_phase": {"update_actor": PHASE_S}},
    3: {"slow_start": {1: START_S}},  # worker 1 (samples 4-7)
    4: {"long_response": {5: LONG_TOKENS}},
    5: {"step_slow_decode": DECODE_K},
    6: {"step_slow_reward": REWARD_S},
}
SECONDS_PER_TOKEN = 0.0004
STEPS = 7
"""Step 7 is clean and validates (``test_freq``): the plants' checks compare steps 1-6 only."""


@dataclass(frozen=True)
class PlantedRun:
    opts: Any
    """The demo's ``DemoOptions``."""
    spans: Any
    """Its spool's spans (``load_spans``), with ``seconds``."""
    result: Any
    """What ``run_demo`` returned (verl's outputs of each training step)."""
    threads_left: list[str]
    """Threads the run started in this process and left running (our own exporters' aside)."""


def run_planted(trainer: str, spool: str) -> PlantedRun:
    """The trainer's planted run."""
    import ray

    from otel_verl.analysis.read import load_spans
    from otel_verl.demo.runner import DemoOptions, run_demo
    from tests.process_state import reset_tracing

    if ray.is_initialized():  # an earlier in-process test's cluster: the demo starts its own
        ray.shutdown()
    reset_tracing()
    opts = DemoOptions(
        steps=STEPS,
        workers=2,
        prompts=8,
        n=2,
        ray_cpus=4,  # V1: TransferQueue's controller and storage take a logical CPU each, beside the 2 workers
        trainer=trainer,
        step_plants=PLANTS,
        seconds_per_token=SECONDS_PER_TOKEN,
        val_before_train=True,  # as verl: the workers' first-call warm-up happens there, not in step 1
        test_freq=STEPS,
        spool=spool,
    )
    before = {thread.ident for thread in threading.enumerate()}
    try:
        result = run_demo(opts)
    finally:
        reset_tracing()
    left = [t.name for t in threading.enumerate() if t.ident not in before and not t.name.startswith("otel-verl")]
    spans = load_spans(result.spool_dir)
    spans["seconds"] = (spans.end_ns - spans.start_ns) / 1e9
    return PlantedRun(opts, spans, result, left)


def training_spans(spans: Any) -> Any:
    """The spans outside verl's validation: neither a ``verl.validate`` span, nor under one, nor V1's ``testing``
    phase that holds it."""
    from otel_verl import semconv

    parent = dict(zip(spans.span_id, spans.parent_id.fillna(""), strict=True))
    name = dict(zip(spans.span_id, spans.name, strict=True))
    aside = {semconv.SPAN_VALIDATE, semconv.phase_span_name("testing")}

    def in_validation(span_id: str) -> bool:
        while span_id:
            if name.get(span_id) in aside:
                return True
            span_id = parent.get(span_id, "")
        return False

    return spans[[not in_validation(s) for s in spans.span_id]]
