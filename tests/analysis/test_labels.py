"""One label and one colour per kind of time (issue 29): raw span names, account parts, trainer phases and
tools map to the same label and colour in every figure, and distinct kinds do not share a label."""

from __future__ import annotations

from otel_verl import semconv as sc
from otel_verl.analysis.findings.common import kinds
from otel_verl.analysis.labels import ENGINE_SERVER_LABEL, STYLES, color, phase_key, readable, style


def test_raw_names_read_as_their_kind() -> None:
    assert readable("engine") == readable("text_completion Qwen/Qwen3-8B") == "engine call"
    assert color("text_completion m") == color("engine") == color("turn_engine_call")
    assert readable(sc.ENGINE_SPAN_REQUEST) == readable("sim_engine.generate") == ENGINE_SERVER_LABEL
    assert "vLLM" not in ENGINE_SERVER_LABEL and "engine" in ENGINE_SERVER_LABEL  # any engine: the demo simulates one
    assert readable("tool calculator") == readable("execute_tool calculator") == "tool: calculator"
    assert color("tool calculator") == color("execute_tool calculator")
    assert readable(sc.SPAN_BARRIER) == readable("barrier_wait_duration") == "barrier wait"
    assert color(sc.SPAN_REWARD) == color("reward") == color("reward_calculation") == color("verl.reward.compute")
    assert readable(sc.phase_span_name("update_actor")) == readable(phase_key("update_actor")) == "phase: update_actor"
    assert color(sc.phase_span_name("ref")) == color(phase_key("ref"))


def test_every_account_part_has_its_own_words_and_colour() -> None:
    """The diagnosis's parts (findings/common/kinds.py) are keys of the mapping, each with a label in words (no raw
    key with underscores) and a colour no other part uses."""
    parts = [p for p in kinds.STEP_PARTS if p != kinds.PART_PHASE]
    assert all(p in STYLES for p in parts), [p for p in parts if p not in STYLES]
    labels = [readable(p) for p in parts]
    assert all("_" not in label for label in labels), labels
    assert len(set(labels)) == len(labels)
    assert len({color(p) for p in parts}) == len(parts)


def test_trainer_phases_differ_from_rollout_parts() -> None:
    """A phase named ``reward`` is the trainer's phase, not one request's reward: its own label and colour."""
    assert readable(phase_key("reward")) == "phase: reward" != readable("reward")
    assert color(phase_key("reward")) != color("reward")
    unknown = style(phase_key("my_custom_timer"))
    assert unknown.label == "phase: my_custom_timer" and unknown == style(sc.phase_span_name("my_custom_timer"))


def test_unknown_names_keep_their_name_and_a_stable_colour() -> None:
    assert readable("cache_flush_duration") == "cache flush duration"
    assert color("cache_flush_duration") == color("cache_flush_duration")
    assert color("tool search") != color("tool")  # a named tool: a shade of the tool orange, by name
    assert style("barrier").hatch and not style("engine").hatch


def test_key_of_raw_names() -> None:
    from otel_verl.analysis.labels import key_of

    assert key_of(sc.ENGINE_SPAN_REQUEST) == key_of("engine_async_generate_actual") == "engine_server"
    assert key_of("execute_tool calculator") == "tool calculator" and key_of("text_completion m") == "engine"
    assert key_of(sc.phase_span_name("ref")) == "phase:ref" and key_of("main_loop") is None
