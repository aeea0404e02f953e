"""One label and one colour per kind of time: the mapping every figure, legend, the SVG timeline, the
Perfetto export, the finding headlines and the report use, so "engine call" is the same blue everywhere and
no raw span name (``sim_engine.generate``, ``verl.reward.compute``) reaches a reader.

A *key* names a kind of time: a span kind (``engine``, ``reward``, ``barrier``), an event-share bucket
(``idle``, ``request``), a part of a step's account (``engine_queue``, ``decode``, ``gap``, ``stall``,
``outside_phases``; :mod:`otel_verl.analysis.findings.common.kinds`, matched here by value so figures never import
findings), a trainer phase (``phase:update_actor``), a tool (``tool calculator``) or a raw span name (``llm_request``,
the seed's ``reward_calculation``). :func:`readable` gives its label, :func:`color` its colour; unknown names get
their own name (underscores as spaces) and a colour picked from their name, the same in every figure.
"""

from __future__ import annotations

import zlib
from typing import NamedTuple

from otel_verl import semconv as sc


class Style(NamedTuple):
    label: str
    color: str
    hatch: str = ""
    """A matplotlib hatch (``//``) for time that is not work: the barrier wait, unexplained time."""


ENGINE_SERVER_LABEL = "inside the engine (its own span)"
"""The engine's own ``llm_request`` span (vLLM's, or the CPU demo's engine writing the same span)."""

GAP_LABEL = "gap (time between a request's spans)"
"""The one name of a request's time that none of its spans covers, with its meaning: the figures' legends and
the causes' messages say it alike (issue 51: "gap" in one, "time between a request's spans" in another)."""

REQUEST_LABEL = "in a request, between its calls"
"""A worker's time with requests in flight and none of their calls (engine, tool, reward, preprocess) running, in
plain words: the report said "in a request, no event span", span jargon a newcomer could not place (issue 51)."""

STYLES: dict[str, Style] = {
    # work inside a request (span kinds, event-share buckets, account parts)
    "engine": Style("engine call", "#4c78a8"),
    "engine_server": Style(ENGINE_SERVER_LABEL, "#86bcdc"),
    "engine_before": Style("before the engine (Ray hops, load balancer)", "#c5b0d5"),
    "engine_queue": Style("queued in the engine", "#e377c2"),
    "prefill": Style("prefill", "#17becf"),
    "decode": Style("decode", "#1f3a93"),
    "engine_other": Style("other engine time", "#aec7e8"),
    "engine_after": Style("after the engine (the answer's way back)", "#9edae5"),
    "tool": Style("tool", "#f58518"),
    "tool_parse": Style("tool-call parsing", "#eeca3b"),
    "preprocess": Style("preprocess", "#bcbd22"),
    "reward": Style("reward", "#54a24b"),
    "other": Style("other span", "#c49c94"),
    # a worker's time outside its requests' spans
    "request": Style(REQUEST_LABEL, "#d9d9d9"),
    "gap": Style(GAP_LABEL, "#bdbdbd"),
    "pause": Style("waited out a rollout pause (weight sync)", "#969696", "//"),
    "idle": Style("idle (no request in flight)", "#eeeeee"),
    "stall": Style("stall (nothing moved on the worker)", "#3b3b3b"),
    "start": Style("start (before the first request)", "#9d755d"),
    "finish": Style("finish (after the last request)", "#d8b5a5"),
    "barrier": Style("barrier wait", "#e45756", "//"),
    # the trainer's side of a step
    "rollout_overhead": Style("rollout overhead (dispatch, gather)", "#8c6d31"),
    "outside_phases": Style("outside any phase", "#cfc6a3"),
    "unexplained": Style("unexplained", "#f2f2f2", "//"),
    # an asynchronous trainer's two sides (figures/async_timeline.py)
    "trainer_wait": Style("trainer waiting for samples", "#f1a340", "//"),
    "trainer_train": Style("trainer training (an update's phases)", "#b2182b"),
    "weight_sync": Style("weight sync", "#762a83"),
    "rollout_busy": Style("rollout working (a sample in flight)", "#92c5de"),
    "rollout_generating": Style("rollout generating (an engine call in flight)", "#2166ac"),
    "rollout_paused": Style("rollout paused (weight sync, asleep)", "#969696", "//"),
    # containers (the Perfetto export, the outlier figure)
    "step": Style("step", "#555555"),
    "worker": Style("worker", "#dddddd"),
    "turn": Style("turn", "#c9d6ea"),
    "validate": Style("validation", "#637939"),
    "update": Style("inner update (its phases)", "#b2182b"),
    "group": Style("sample group (one prompt's rollouts)", "#c7c7c7"),
    "generate": Style("engine round trip (its attempts below)", "#9ecae1"),
}

PHASE_STYLES: dict[str, Style] = {
    "gen": Style("phase: gen (rollout)", "#6fa8dc"),
    "reward": Style("phase: reward", "#98df8a"),
    "old_log_prob": Style("phase: old_log_prob", "#ff9896"),
    "ref": Style("phase: ref", "#9467bd"),
    "values": Style("phase: values", "#dbdb8d"),
    "adv": Style("phase: adv", "#f7b6d2"),
    "update_critic": Style("phase: update_critic", "#ffbb78"),
    "update_actor": Style("phase: update_actor", "#a50f15"),
    "update_weights": Style("phase: update_weights", "#7b4173"),
    "testing": Style("phase: testing (validation)", "#637939"),
    "save_checkpoint": Style("phase: save_checkpoint", "#8c8c8c"),
}
"""verl's ``marked_timer`` names (``verl.phase <name>``): a phase of its own colour, apart from the
rollout's parts (a phase named ``reward`` is the trainer's reward phase, not one request's reward)."""

ALIASES: dict[str, tuple[str, str | None]] = {
    sc.SPAN_REWARD: ("reward", None),
    sc.SPAN_PREPROCESS: ("preprocess", None),
    sc.SPAN_TOOL_PARSE: ("tool_parse", None),
    sc.SPAN_BARRIER: ("barrier", None),
    sc.SPAN_TURN: ("turn", None),
    sc.SPAN_REQUEST: ("request", "request"),
    sc.SPAN_WORKER: ("worker", None),
    sc.SPAN_STEP: ("step", None),
    sc.SPAN_VALIDATE: ("validate", None),
    sc.SPAN_UPDATE: ("update", None),
    sc.SPAN_GROUP: ("group", None),
    sc.SPAN_WEIGHT_SYNC: ("weight_sync", None),
    sc.SPAN_GENERATE: ("generate", None),
    sc.ENGINE_SPAN_REQUEST: ("engine_server", None),
    "sim_engine.generate": ("engine_server", None),
    "verl.reward.compute": ("reward", None),  # the reward worker's span inside our reward span
    # the seed's SGLangLogManager events
    "engine_async_generate_actual": ("engine_server", "engine (seed: its own time)"),
    "turn_engine_call": ("engine", None),
    "async_generate_duration": ("engine", "engine call (whole worker)"),
    "preprocessing_duration": ("preprocess", None),
    "reward_calculation": ("reward", None),
    "tool_execution": ("tool", None),
    "barrier_wait_duration": ("barrier", None),
    # engine_calls' parts of one call
    "before": ("engine_before", None),
    "queue": ("engine_queue", None),
    "after": ("engine_after", None),
}
"""Raw names → (key, a label of their own or None for the key's)."""

TOOL_COLORS = ("#f58518", "#fdae6b", "#e6550d", "#fd8d3c", "#a63603", "#fdd0a2")
"""Named tools: shades of the tool orange, picked by name (the same tool, the same shade, in every figure)."""
FALLBACK_COLORS = (
    "#8e7cc3",
    "#6d597a",
    "#a26769",
    "#d5b9b2",
    "#7d8491",
    "#b5838d",
    "#e5989b",
    "#6b705c",
    "#a5a58d",
    "#52796f",
    "#cb997e",
    "#936639",
)
"""Unknown names and phases: a colour picked by name (a seed's ``cache_flush_duration``, a custom timer), from
muted tones away from the named kinds' hues (no blue that reads as an engine call, no red as the barrier)."""


def key_of(name: object) -> str | None:
    """The key a raw name stands for (``llm_request`` → ``engine_server``, ``execute_tool x`` → ``tool x``),
    or None for a name the mapping does not know (it keeps its own label and a picked colour)."""
    text = "" if name is None else str(name)
    if text in STYLES:
        return text
    if text in ALIASES:
        return ALIASES[text][0]
    if _phase_name(text) is not None:
        return phase_key(_phase_name(text) or "")
    tool = _tool_name(text)
    if tool is not None:
        return f"tool {tool}" if tool else "tool"
    if text.startswith(sc.GEN_AI_OP_TEXT_COMPLETION):
        return "engine"
    return None


def _pick(name: str, palette: tuple[str, ...]) -> str:
    return palette[zlib.crc32(name.encode()) % len(palette)]


def style(name: object) -> Style:
    """The label and colour of one key or raw name (see the module docstring)."""
    text = "" if name is None else str(name)
    if text in STYLES:
        return STYLES[text]
    if text in ALIASES:
        key, label = ALIASES[text]
        base = STYLES[key]
        return base if label is None else base._replace(label=label)
    phase = _phase_name(text)
    if phase is not None:
        return PHASE_STYLES.get(phase) or Style(f"phase: {phase}", _pick(phase, FALLBACK_COLORS))
    tool = _tool_name(text)
    if tool is not None:
        return Style(f"tool: {tool}", _pick(tool, TOOL_COLORS)) if tool else STYLES["tool"]
    if text.startswith(sc.GEN_AI_OP_TEXT_COMPLETION):
        return STYLES["engine"]
    return Style(text.replace("_", " "), _pick(text, FALLBACK_COLORS))


def _phase_name(text: str) -> str | None:
    for prefix in ("phase:", sc.SPAN_PHASE_PREFIX + " "):
        if text.startswith(prefix):
            return text[len(prefix) :].strip()
    return None


def _tool_name(text: str) -> str | None:
    for prefix in ("tool ", "tool: ", sc.GEN_AI_OP_EXECUTE_TOOL + " "):
        if text.startswith(prefix):
            return text[len(prefix) :].strip()
    return "" if text == sc.GEN_AI_OP_EXECUTE_TOOL else None


def phase_key(phase: str) -> str:
    """The key of a trainer phase: ``phase:update_actor``."""
    return f"phase:{phase}"


def readable(name: object) -> str:
    """``engine`` → ``engine call``, ``tool calculator`` / ``execute_tool calculator`` → ``tool: calculator``,
    ``llm_request`` → ``inside the engine (its own span)``, ``verl.phase ref`` → ``phase: ref``; unknown names pass
    through (underscores become spaces)."""
    return style(name).label


def color(name: object) -> str:
    """The colour of one key or raw name (hex)."""
    return style(name).color


def hatch(name: object) -> str:
    return style(name).hatch
