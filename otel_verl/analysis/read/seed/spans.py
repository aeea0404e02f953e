"""What every seed span builder shares: ids, the service name, the damage rules for a line's fields, the
grouping of a file's lines and the step spans.

A worker-step's spans are built once, as a batch (:mod:`.batch`), from the lines
(:mod:`.lines`) or from Arrow's columns (:mod:`.arrow_spans`); the rules here are the ones both
front ends apply to a line's fields. Span ids are a per-file hash plus the line number (one hash per file
instead of one per span, which was an eighth of the import).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable
from typing import Any

from otel_verl import semconv as sc
from otel_verl.analysis.read.seed.log_file import Line

LEGACY_SERVICE = "otel-verl-legacy"
"""service.name of imported spans: ``export-legacy`` writes their stored lines back verbatim."""
_MAX_TURN_SECONDS = 1e9
"""Above this (or negative, NaN, infinite) a turn timing is damage, not a duration: it is left out."""
SLACK_NS = 1_000_000
"""A line's window may poke out of its turn by the timestamps' µs rounding; 1 ms is generous."""


def stable_id(nbytes: int, *parts: object) -> str:
    """Deterministic hex id from its origin (file, line, role), so re-imports give identical spools."""
    return hashlib.blake2b("\x1f".join(map(str, parts)).encode(), digest_size=nbytes).hexdigest()


SpanFields = tuple[str, str, str, str, int, int, dict[str, Any]]
"""One span: (trace id, span id, parent id or "", name, start ns, end ns, attributes; None values left out)."""
SpanSink = Callable[[str, str, str, str, int, int, dict[str, Any]], None]
"""Takes one span's :data:`SpanFields`, as arguments."""


def extra_of(d: dict[str, Any]) -> dict[str, Any]:
    """A line's ``extra`` object, empty where it has none (or something else there)."""
    e = d.get("extra")
    return e if isinstance(e, dict) else {}


def request_id(d: dict[str, Any]) -> str | None:
    """A line's request id (``extra.request_id``, else the top-level one where ``extra`` has no such key), as text."""
    rid = extra_of(d).get("request_id", d.get("request_id"))
    return None if rid is None else str(rid)


def turn_index(value: Any) -> int | None:
    """An event's ``turn``/``turn_index`` as an int (None when damaged: the event then hangs off its request)."""
    if isinstance(value, bool):
        return None
    try:
        return int(value)
    except (TypeError, ValueError, OverflowError):
        return None


def turn_durations(timings: Any) -> list[float]:
    """``turn_timings`` as a list of seconds; accepts numbers or dicts with a duration-like key."""
    out: list[float] = []
    if not isinstance(timings, (list, tuple)):  # a damaged line: no per-turn timings, not a crash
        return out
    for t in timings:
        if isinstance(t, dict):
            t = next((t[k] for k in ("total_duration", "duration_sec", "duration", "total", "time") if k in t), None)
        if isinstance(t, (int, float)) and not isinstance(t, bool) and 0.0 <= t <= _MAX_TURN_SECONDS:
            out.append(float(t))
    return out


def group_lines(lines: Iterable[Line]) -> dict[tuple[bool, int | None, int | None], list[Line]]:
    """A file's lines by (validation?, step, worker): normally one group, the file's worker-step."""
    if not isinstance(lines, list):
        lines = list(lines)
    # the usual file: one worker-step, found without building a key per line (what that costs: docs/performance.md)
    one = lines and len({x.step for x in lines}) == 1 and len({x.worker for x in lines}) == 1
    if one and len({x.validate for x in lines}) == 1:
        return {(lines[0].validate, lines[0].step, lines[0].worker): lines}
    groups: dict[tuple[bool, int | None, int | None], list[Line]] = {}
    for x in lines:
        groups.setdefault((x.validate, x.step, x.worker), []).append(x)
    return groups


def step_spans(run: str, step: int | None, lo: int, hi: int) -> list[SpanFields]:
    """A training step's step span and ``gen`` phase span around its workers."""
    trace = stable_id(16, run, step)
    step_id, gen_id = stable_id(8, run, step, "step"), stable_id(8, run, step, "gen")
    attrs = {sc.VERL_STEP: step}
    return [
        (trace, step_id, "", sc.SPAN_STEP, lo, hi, attrs),
        (trace, gen_id, step_id, sc.phase_span_name("gen"), lo, hi, {sc.VERL_PHASE_NAME: "gen", **attrs}),
    ]


def gen_span_id(run: str, step: int | None) -> str:
    return stable_id(8, run, step, "gen")
