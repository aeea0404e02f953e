"""The line reader: one seed log file (``step_<n>/worker_<rank>.jsonl``) → checked lines → a worker-step's
:class:`.rows.StepRows`.

Each line is ``{"timestamp": <event END, ISO>, "event", "duration_sec"?, "extra"?, "workid", "step", ...}``
as the seed's ``SGLangLogManager.log`` writes it. Why a hand-rolled reader: orjson and a C
``datetime.fromisoformat`` instead of ``json`` + regex work cut the per-line cost to a fraction (docs/performance.md).
Every file the Arrow reader (:mod:`.arrow`) refuses comes here (damaged, unusual, or with its lines kept for
``import-legacy`` and ``export-legacy``): the ``extra`` values the spans carry stay as the line has them, of any
JSON type (Python lists), so the sinks write them as they always have.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import numpy as np
import orjson

from otel_verl.analysis.read.seed import events as le
from otel_verl.analysis.read.seed.rows import ENGINE, PREPROCESS, TOOL, TURN, StepRows, row_kinds, turn_index
from otel_verl.analysis.read.span_columns import INT64_LIMIT
from otel_verl.analysis.read.stats import LoadStats
from otel_verl.invocation import otel_verl_command

VALIDATION_PREFIX = "val_"
"""``val_step_<n>/``: a validation rollout's logs (``export-legacy`` writes them there, each line with
``"validate": true``), kept apart so the seed's scripts, which read ``step_<n>/``, never count them."""
OTLP_HINT = (
    "an OTLP/JSON trace line (a spool or a collector export), not a seed log; analyze it directly: "
    "{otel_verl} analyze DIR --out OUT"
)
"""``{otel_verl}``: how the user's shell runs it (:func:`otel_verl.invocation.otel_verl_command`), filled in when
raised."""
_NUM = re.compile(r"(\d+)")
_EPOCH = datetime(1970, 1, 1)
_EPOCH_UTC = datetime(1970, 1, 1, tzinfo=timezone.utc)
_NO_EXTRA: dict[str, Any] = {}
_INT64 = 1 << 63


@dataclass(slots=True)
class Line:
    """One usable seed line: its JSON object, raw text (kept whole on the span; None when not kept), times in ns."""

    d: dict[str, Any]
    raw: str | None
    start: int
    end: int
    lineno: int
    step: int | None
    worker: int | None
    validate: bool


@dataclass
class FileLines:
    """A file's usable lines plus what was read and skipped (with ``skip_bad_lines``)."""

    path: Path
    lines: list[Line] = field(default_factory=list)
    stats: LoadStats = field(default_factory=LoadStats)


def parse_ts(value: Any) -> int:
    """ISO timestamp (naive = UTC, as the seed wrote ``datetime.now()``) or epoch seconds → ns."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return int(value * 1e9)
    if not isinstance(value, str):
        raise ValueError(f"'timestamp' is {type(value).__name__}, not an ISO string")
    dt = datetime.fromisoformat(value)
    delta = dt - (_EPOCH if dt.tzinfo is None else _EPOCH_UTC)
    return (delta.days * 86400 + delta.seconds) * 10**9 + delta.microseconds * 1000


def small_int(value: Any, key: str) -> int | None:
    """step/workid: an integer (or its string), never bool/float junk or beyond int64."""
    if value is None:
        return None
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        raise ValueError(f"'{key}' is {type(value).__name__}, not an integer")
    number = int(value)
    if not -INT64_LIMIT <= number < INT64_LIMIT:
        raise ValueError(f"'{key}' out of range")
    return number


def number_in(name: str) -> int | None:
    m = _NUM.search(name)
    return int(m.group(1)) if m else None


def _loads(raw: bytes) -> Any:
    """orjson, and ``json`` for what it refuses (NaN, Infinity: the seed's ``json.dumps`` writes them)."""
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError:
        return json.loads(raw)


def _check(raw: bytes, dir_step: int | None, file_worker: int | None) -> tuple[dict[str, Any], int, int, Any, Any]:
    d = _loads(raw)
    if not isinstance(d, dict) or "event" not in d or "timestamp" not in d:
        if isinstance(d, dict) and ("resourceSpans" in d or "resourceSpans" in (d.get("result") or {})):
            raise ValueError(OTLP_HINT.format(otel_verl=otel_verl_command()))
        raise ValueError("not a seed log line (needs 'timestamp' and 'event')")
    if not isinstance(d["event"], str):
        raise ValueError(f"'event' is {type(d['event']).__name__}, not a string")
    end = parse_ts(d["timestamp"])
    dur = d.get("duration_sec")
    dur = float(dur) if dur else 0.0
    start = end - int(dur * 1e9)
    if not (0 <= start <= end < INT64_LIMIT):
        raise ValueError("timestamp/duration_sec out of range")
    step = small_int(d.get("step", dir_step), "step")
    worker = small_int(d.get("workid", file_worker), "workid")
    return d, start, end, step, worker


def _fast(
    raw: bytes, dir_step: int | None, file_worker: int | None, keep_text: bool = True
) -> tuple[dict[str, Any], str | None, int, int, Any, Any] | None:
    """:func:`_check` for the line the seed logger writes (UTF-8, naive ISO timestamp, float or no duration, int
    step and workid), inline; None for anything else, which :func:`_check` then reads or rejects by name.

    Why: a third of the reader's time was calls and type checks (docs/performance.md).
    """
    try:
        d = _orjson_loads(raw)
        if d.__class__ is not dict:
            return None
        ts, event = d.get("timestamp"), d.get("event")
        if ts.__class__ is not str or event.__class__ is not str:
            return None
        dt = _fromisoformat(ts)
        if dt.tzinfo is not None:
            return None
        delta = dt - _EPOCH
        end = (delta.days * 86400 + delta.seconds) * 1_000_000_000 + delta.microseconds * 1000
        dur = d.get("duration_sec")
        if dur.__class__ is float or dur.__class__ is int:
            start = end - int(float(dur) * 1e9)
        elif dur is None:
            start = end
        else:
            return None
        step, worker = d.get("step", dir_step), d.get("workid", file_worker)
        if (step is not None and step.__class__ is not int) or (worker is not None and worker.__class__ is not int):
            return None
        if not (0 <= start <= end < INT64_LIMIT) or (step is not None and not -INT64_LIMIT <= step < INT64_LIMIT):
            return None
        if worker is not None and not -INT64_LIMIT <= worker < INT64_LIMIT:
            return None
        text = raw.decode() if keep_text else None  # orjson checked the UTF-8 already
    except (ValueError, TypeError, OverflowError):  # orjson's JSONDecodeError and UnicodeDecodeError included
        return None
    return d, text, start, end, step, worker


_orjson_loads = orjson.loads
_fromisoformat = datetime.fromisoformat


def read_file(path: Path, skip_bad_lines: bool, keep_text: bool = True) -> FileLines:
    """Every usable line of ``path``; a bad one raises ``AnalysisInputError("file:line: why")`` unless skipped.
    ``keep_text=False``: ``Line.raw`` is None (the span table of ``analyze`` leaves the lines out)."""
    out = FileLines(path)
    dir_step = number_in(path.parent.name)
    file_worker = number_in(path.stem)
    in_val_dir = path.parent.name.startswith(VALIDATION_PREFIX)
    data = path.read_bytes()
    lines = data.split(b"\n")
    last = len(lines) - 1
    append = out.lines.append
    for i, raw in enumerate(lines):
        if not raw.strip():
            continue
        got = _fast(raw, dir_step, file_worker, keep_text)
        if got is not None:
            d, text, start, end, step, worker = got
            append(Line(d, text, start, end, i + 1, step, worker, in_val_dir or d.get("validate") is True))
            continue
        try:
            d, start, end, step, worker = _check(raw, dir_step, file_worker)
            text = raw.decode() if keep_text else None  # json also reads UTF-16/32; a kept line must be UTF-8
        except (ValueError, TypeError, OverflowError) as exc:
            why = "truncated last line; was the writer killed?" if i == last and data[-1:] != b"\n" else str(exc)
            out.stats.bad_line(f"{path}:{i + 1}: {why}", skip_bad_lines)
            continue
        append(Line(d, text, start, end, i + 1, step, worker, in_val_dir or d.get("validate") is True))
    out.stats.files, out.stats.lines = 1, len(out.lines) + out.stats.bad_lines
    return out


def seed_files(logdir: Path) -> list[Path]:
    """The ``*.jsonl`` files under LOGDIR in a stable order."""
    return sorted(p for p in Path(logdir).rglob("*.jsonl") if p.is_file()) if Path(logdir).is_dir() else []


def looks_like_seed_dir(root: Path) -> bool:
    """``step_*/worker_*.jsonl`` (or ``val_step_*``) whose first line is a seed line, not OTLP/JSON."""
    for path in sorted(root.glob("*step_*/worker_*.jsonl"))[:3]:
        with path.open("rb") as fh:
            for raw in fh:
                if raw.strip():
                    try:
                        d = _loads(raw)
                    except ValueError:
                        break
                    return isinstance(d, dict) and "event" in d and "timestamp" in d and "resourceSpans" not in d
    return False


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


def line_rows(lines: list[Line], run: str, rel: str, key: tuple[bool, int | None, int | None], parent: str) -> StepRows:
    """A worker-step's lines (one group of :func:`group_lines`) as rows, applying the damage rules
    of :mod:`.batch`; a turn beyond int64 (damage), or within 4096 of its bottom, gets a key of its own from -2⁶³
    up, one per value, so equal turns still meet; each field is read only on the rows whose kind uses it."""
    ds = [x.d for x in lines]
    events = [d["event"] for d in ds]  # a str: the reader checks it
    index: dict[str, int] = {}
    codes = np.array([index.setdefault(e, len(index)) for e in events], dtype=np.int64)
    names = list(index)
    kinds = row_kinds(codes, names)
    n = len(lines)
    # comprehensions, not one loop over rows: about a third of the time
    es = [e if (e := d.get("extra")).__class__ is dict else _NO_EXTRA for d in ds]
    rid = [
        r if (r := e.get("request_id", d.get("request_id"))) is None or r.__class__ is str else str(r)
        for d, e in zip(ds, es, strict=True)
    ]
    event_turn = [
        None if r is None else t if (t := e.get("turn", e.get("turn_index"))) is None or t.__class__ is int
        else turn_index(t)
        for r, e in zip(rid, es, strict=True)
    ]  # fmt: skip
    turn: list[int | None] = [None] * n
    for i in np.flatnonzero(kinds == TURN).tolist():
        if rid[i] is not None:
            turn[i] = turn_index(es[i].get("turn"))
    model, tool, pre, out, inp = ([None] * n for _ in range(5))
    for i in np.flatnonzero(kinds == ENGINE).tolist():
        e = es[i]
        model[i] = e.get("model")
        out[i] = e.get("output_tokens", e.get("generated_tokens"))
        inp[i] = e.get("input_tokens")
    for i in np.flatnonzero(kinds == TOOL).tolist():
        tool[i] = es[i].get("tool_name") or es[i].get("tool")
    for i in np.flatnonzero(kinds == PREPROCESS).tolist():
        pre[i] = es[i].get("kind") or le.PREPROCESS_KIND_OF.get(events[i])
    beyond: dict[int, int] = {}
    turn_keys, has_turn = _turn_keys(turn, beyond)
    event_keys, has_event_turn = _turn_keys(event_turn, beyond)
    val, step, worker = key
    times = np.array([(x.start, x.end, x.lineno) for x in lines], dtype=np.int64).reshape(-1, 3)
    raw: list[str | None] | None = [x.raw for x in lines]
    if lines[0].raw is None and all(line is None for line in raw):  # type: ignore[union-attr]
        raw = None
    return StepRows(
        run=run,
        rel=rel,
        step=step,
        worker=worker,
        validate=val,
        parent=parent,
        kinds=kinds,
        name_codes=codes,
        event_names=names,
        start=times[:, 0].copy(),
        end=times[:, 1].copy(),
        lineno=times[:, 2].copy(),
        rid=rid,
        turn=turn_keys,
        has_turn=has_turn,
        turn_value=turn,
        event_turn=event_keys,
        has_event_turn=has_event_turn,
        model=model,
        tool=tool,
        pre_kind=pre,
        output_tokens=out,
        input_tokens=inp,
        obj=lambda row: lines[row].d,
        raw=raw,
    )


def _turn_keys(values: list[int | None], beyond: dict[int, int]) -> tuple[np.ndarray, np.ndarray]:
    """Turns as int64 keys and where there is one; a turn beyond int64 keyed from -2⁶³ up, one key per value."""
    if values.count(None) == len(values):
        return np.zeros(len(values), dtype=np.int64), np.zeros(len(values), dtype=bool)
    has = np.array([v is not None for v in values], dtype=bool)
    try:
        keys = np.array([0 if v is None else v for v in values], dtype=np.int64)
        if not len(keys) or keys.min() >= -_INT64 + 4096:
            return keys, has
    except OverflowError:
        keys = np.zeros(len(values), dtype=np.int64)
    for i, v in enumerate(values):
        if v is not None:
            keys[i] = v if -_INT64 + 4096 <= v < _INT64 else beyond.setdefault(v, -_INT64 + len(beyond))
    return keys, has
