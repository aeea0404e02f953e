"""Readable names for events, span kinds and buckets: the one mapping every figure, legend, finding
headline and the report use ("engine generate", "reward", "tool: calculator"), so no raw span name
(``sim_engine.generate``, ``verl.reward.compute``) reaches a reader."""

from __future__ import annotations

from otel_verl import semconv as sc

READABLE = {
    "engine": "engine generate",
    "reward": "reward",
    "tool": "tool",
    "tool_parse": "tool-call parsing",
    "preprocess": "preprocess",
    "other": "other",
    "request": "in a request (no event span)",
    "idle": "idle (no request in flight)",
    "barrier": "barrier wait",
    "turn": "turn",
    "worker": "worker",
    "step": "step",
    sc.SPAN_REWARD: "reward",
    sc.SPAN_PREPROCESS: "preprocess",
    sc.SPAN_TOOL_PARSE: "tool-call parsing",
    sc.SPAN_BARRIER: "barrier wait",
    sc.SPAN_TURN: "turn",
    sc.SPAN_REQUEST: "request",
    sc.SPAN_WORKER: "worker",
    "verl.reward.compute": "reward (reward worker)",
    "sim_engine.generate": "engine generate (server side)",
    "engine_async_generate_actual": "engine generate (seed: actual)",
    "turn_engine_call": "engine generate",
    "async_generate_duration": "engine generate (whole worker)",
    "preprocessing_duration": "preprocess",
    "reward_calculation": "reward",
    "tool_execution": "tool",
    "barrier_wait_duration": "barrier wait",
}


def readable(label: object) -> str:
    """``engine`` → ``engine generate``, ``tool calculator`` / ``execute_tool calculator`` → ``tool: calculator``,
    ``text_completion m`` → ``engine generate``; unknown names pass through (underscores become spaces)."""
    text = "" if label is None else str(label)
    if text in READABLE:
        return READABLE[text]
    for prefix in ("tool ", sc.GEN_AI_OP_EXECUTE_TOOL + " "):
        if text.startswith(prefix):
            return "tool: " + text[len(prefix) :]
    if text.startswith(sc.GEN_AI_OP_TEXT_COMPLETION):
        return "engine generate"
    if text.startswith(sc.SPAN_PHASE_PREFIX + " "):
        return "phase: " + text[len(sc.SPAN_PHASE_PREFIX) + 1 :]
    return text.replace("_", " ")
