"""Step and phase spans from verl's real timers (marked_timer / simple_timer)."""

from __future__ import annotations

import pytest

from otel_verl import semconv
from otel_verl.instrumentation.trainer import track_trainer


class Trainer:
    global_steps = 7


def test_step_and_phases_from_verl_timers(spans_of):
    from verl.utils.profiler import marked_timer, simple_timer

    track_trainer(Trainer())
    timing: dict[str, float] = {}
    with marked_timer("step", timing):
        with marked_timer("gen", timing, color="red"):
            pass
        with simple_timer("update_actor", timing):
            pass
    track_trainer(None)
    spans = {s.name: s for s in spans_of()}
    step = spans[semconv.SPAN_STEP]
    assert step.attributes[semconv.VERL_STEP] == 7
    for phase in ("gen", "update_actor"):
        span = spans[semconv.phase_span_name(phase)]
        assert span.parent.span_id == step.context.span_id
        assert span.attributes == {semconv.VERL_PHASE_NAME: phase, semconv.VERL_STEP: 7}
    assert set(timing) == {"step", "gen", "update_actor"}  # verl's own timing still recorded


def test_exception_in_a_phase_passes_through(spans_of):
    from verl.utils.profiler import marked_timer

    timing: dict[str, float] = {}
    with pytest.raises(KeyError, match="boom"), marked_timer("update_actor", timing):
        raise KeyError("boom")
    (span,) = [s for s in spans_of() if s.name == semconv.phase_span_name("update_actor")]
    assert not span.status.is_ok and span.attributes[semconv.ERROR_TYPE] == "KeyError"
