"""One worker-step of seed log lines → its OTLP/JSON spans (worker → request → turn → event).

Each line becomes a span of the contract (start = end - duration) carrying its whole original line
(``verl.legacy.line``) and name (``verl.event.origin``), so ``export-legacy`` gives every field back.
Turns come from the seed's ``turn_end`` lines where it wrote them (exact windows), else are laid end
to end from the request's ``turn_timings``. Span ids are a per-file hash plus the line number (one
hash per file instead of one per span, which was an eighth of the import).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable
from typing import Any

from otel_verl import semconv as sc
from otel_verl.analysis.read.seed import seed_events as le
from otel_verl.analysis.read.seed.seed_read import Line
from otel_verl.export.encoding import fields_json

LEGACY_SERVICE = "otel-verl-legacy"
"""service.name of imported spans: ``export-legacy`` writes their stored lines back verbatim."""
_MASK = (1 << 64) - 1
_MAX_TURN_SECONDS = 1e9
"""Above this (or negative, NaN, infinite) a turn timing is damage, not a duration: it is left out."""
_SLACK_NS = 1_000_000
"""A line's window may poke out of its turn by the timestamps' µs rounding; 1 ms is generous."""


def stable_id(nbytes: int, *parts: object) -> str:
    """Deterministic hex id from its origin (file, line, role), so re-imports give identical spools."""
    return hashlib.blake2b("\x1f".join(map(str, parts)).encode(), digest_size=nbytes).hexdigest()


SpanFields = tuple[str, str, str, str, int, int, dict[str, Any]]
"""One span: (trace id, span id, parent id or "", name, start ns, end ns, attributes; None values left out)."""
SpanSink = Callable[[str, str, str, str, int, int, dict[str, Any]], None]
"""Takes one span's :data:`SpanFields`, as arguments."""


def _extra(d: dict[str, Any]) -> dict[str, Any]:
    e = d.get("extra")
    return e if isinstance(e, dict) else {}


def _request_id(d: dict[str, Any]) -> str | None:
    rid = _extra(d).get("request_id", d.get("request_id"))
    return None if rid is None else str(rid)


def _turn_index(value: Any) -> int | None:
    """An event's ``turn``/``turn_index`` as an int (None when damaged: the event then hangs off its request)."""
    if isinstance(value, bool):
        return None
    try:
        return int(value)
    except (TypeError, ValueError, OverflowError):
        return None


def _turn_durations(timings: Any) -> list[float]:
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


def kinds_in_context(lines: list[Line]) -> list[str]:
    """Span kind per line, where the worker-step's other lines decide.

    Why: ``async_generate_duration`` is the worker's whole rollout; with request lines beside it, it
    is the worker span (counting it as engine time would double the engine); alone (seed 000's
    worker-level logs) it is the only engine time there is. ``engine_async_generate_actual`` sits inside
    ``turn_engine_call`` and is left generic where both were written.
    """
    events = [x.d["event"] for x in lines]  # a str: the reader checks it
    names = set(events)
    kind_of = {e: le.kind_of(e) for e in names}  # a few dozen names: one lookup a line, not the name rules
    kinds = [kind_of[e] for e in events]
    has_req = "request" in kind_of.values() or "aborted" in kind_of.values()
    promote = has_req and le.WORKER_ROLLOUT not in names
    inner_engine = le.TURN_ENGINE in names
    if not (
        (le.ASYNC_GENERATE in names and has_req)
        or (le.ENGINE_ACTUAL in names and inner_engine)
        or ("turn" in kind_of.values() and not has_req)
    ):
        return kinds  # nothing below applies (the seed's request-level logs): skip the pass
    for i, e in enumerate(events):
        if e == le.ASYNC_GENERATE and has_req:
            kinds[i] = "worker" if promote else "other"
            promote = False
        elif (e == le.ENGINE_ACTUAL and inner_engine) or (kinds[i] == "turn" and not has_req):
            kinds[i] = "other"
    return kinds


def _split_at_barrier(lines: list[Line], kinds: list[str]) -> tuple[list[Line], set[int]]:
    """The worker's rollout lines, and the ids of lines after its barrier wait began.

    Why: the seed logs ``broadcast_duration`` (and the like) after ``barrier_wait_duration``; inside the
    worker span they would stretch every worker to the end of the step, hiding the straggler.
    """
    body = [x for x, k in zip(lines, kinds, strict=True) if k not in ("barrier", "worker")]
    barriers = [x.start for x, k in zip(lines, kinds, strict=True) if k == "barrier"]
    if not barriers:
        return body, set()
    cut = min(barriers)
    return [x for x in body if x.start < cut], {id(x) for x in body if x.start >= cut}


class WorkerStep:
    """Builds the spans of one (step, worker) group of one file; :meth:`spans` returns them."""

    def __init__(
        self,
        run: str,
        step: int | None,
        worker: int | None,
        val: bool,
        rel: str,
        parent: str,
        sink: SpanSink | None = None,
    ) -> None:
        self.trace = stable_id(16, run, step, "validate") if val else stable_id(16, run, step)
        self.base = int(stable_id(8, run, rel, step, worker), 16)
        self.step, self.worker, self.parent = step, worker, parent
        self.flag = {sc.VERL_VALIDATE: True} if val else {}
        self.worker_id = stable_id(8, run, step, worker, "validate" if val else "worker")
        self.out: list[str] = []
        self._emit = sink if sink is not None else self._otlp

    def _otlp(self, trace: str, sid: str, parent: str, name: str, start: int, end: int, attrs: dict[str, Any]) -> None:
        self.out.append(fields_json(trace, sid, parent, name, start, end, attrs))

    def _sid(self, x: Line, role: int = 0) -> str:
        return f"{(self.base + (x.lineno << 8) + role) & _MASK:016x}"

    def spans(self, lines: list[Line]) -> list[str]:
        """The worker-step's spans encoded as OTLP/JSON span objects (:func:`~otel_verl.export.encoding.fields_json`),
        or (with a ``sink``) handed to it one by one (an empty list)."""
        kinds = kinds_in_context(lines)
        wroll = [x for x, k in zip(lines, kinds, strict=True) if k == "worker"]
        body, post = _split_at_barrier(lines, kinds)
        window = wroll or body or [x for x in lines if id(x) not in post] or lines
        n_req = sum(k in ("request", "aborted") for k in kinds)
        lo, hi = min(x.start for x in window), max(x.end for x in window)
        self.worker_span(wroll[0] if wroll else None, lo, hi, n_req)
        for extra_worker_line in wroll[1:]:  # a second rollout line of the same worker-step: kept generic
            self._event(extra_worker_line, "other", {}, {}, post)
        requests = self.requests(lines, kinds)
        turns = self._turns(lines, kinds, requests)
        for x, k in zip(lines, kinds, strict=True):
            if k in ("request", "aborted", "worker") or (k == "turn" and id(x) in turns["lines"]):
                continue
            self._event(x, k, requests, turns["by_key"], post)
        return self.out

    def worker_span(self, rollout: Line | None, lo: int, hi: int, n_req: int) -> None:
        """The worker span over ``lo``..``hi``, from its rollout line (the seed's per-worker-step total) if any."""
        wextra = _extra(rollout.d) if rollout is not None else {}
        attrs: dict[str, Any] = {
            sc.VERL_WORKER_RANK: self.worker,
            sc.VERL_STEP: self.step,
            sc.VERL_WORKER_NUM_REQUESTS: wextra.get("total_requests", n_req),
            sc.VERL_WORKER_NUM_COMPLETED: wextra.get("completed_count"),
            sc.VERL_EVENT_ORIGIN: rollout.d["event"] if rollout is not None else None,
            sc.VERL_LEGACY_LINE: rollout.raw if rollout is not None else None,
            **self.flag,
        }
        self._emit(self.trace, self.worker_id, self.parent, sc.SPAN_WORKER, lo, hi, attrs)

    def requests(self, lines: list[Line], kinds: list[str]) -> dict[str, tuple[str, Line]]:
        requests: dict[str, tuple[str, Line]] = {}
        for x, k in zip(lines, kinds, strict=True):
            if k not in ("request", "aborted"):
                continue
            e = _extra(x.d)
            rid = _request_id(x.d) or f"{self.base:016x}:{x.lineno}"
            timings = _turn_durations(e.get("turn_timings"))
            status = e.get("status") or ("aborted" if k == "aborted" else "completed")
            sid = self._sid(x)
            attrs = {
                sc.VERL_STEP: self.step,
                sc.VERL_WORKER_RANK: self.worker,
                sc.VERL_REQUEST_ID: rid,
                sc.VERL_REQUEST_STATUS: status,
                sc.VERL_REQUEST_NUM_TURNS: e.get("turns", len(timings) if timings else None),
                sc.VERL_REWARD_SCORE: e.get("reward_score"),
                sc.VERL_REQUEST_RESPONSE_TOKENS: e.get("response_tokens", e.get("response_length")),
                sc.VERL_REQUEST_PROMPT_TOKENS: e.get("prompt_tokens"),
                sc.VERL_SAMPLE_INDEX: e.get("batch_data_id") if type(e.get("batch_data_id")) is int else None,
                sc.VERL_EVENT_ORIGIN: x.d["event"],
                sc.VERL_LEGACY_LINE: x.raw,
                **self.flag,
            }
            self._emit(self.trace, sid, self.worker_id, sc.SPAN_REQUEST, x.start, x.end, attrs)
            requests[rid] = (sid, x)
        return requests

    def _turns(self, lines: list[Line], kinds: list[str], requests: dict[str, tuple[str, Line]]) -> dict[str, Any]:
        """Turn spans keyed (request id, turn index) → (span id, start, end, exact?)."""
        by_key: dict[tuple[str, int], tuple[str, int, int, bool]] = {}
        used: set[int] = set()
        for x, k in zip(lines, kinds, strict=True):
            rid = _request_id(x.d) if k == "turn" else None
            i = _turn_index(_extra(x.d).get("turn")) if rid in requests else None
            if rid is None or i is None or (rid, i) in by_key:
                continue
            sid = self._sid(x)
            attrs = {sc.VERL_TURN_INDEX: i, sc.VERL_EVENT_ORIGIN: x.d["event"], sc.VERL_LEGACY_LINE: x.raw}
            self._emit(self.trace, sid, requests[rid][0], sc.SPAN_TURN, x.start, x.end, attrs)
            by_key[(rid, i)] = (sid, x.start, x.end, True)
            used.add(id(x))
        with_turn_lines = {key[0] for key in by_key}  # a set: scanning by_key per request was quadratic (~10%)
        by_key.update(self.timing_turns(requests, with_turn_lines))
        return {"by_key": by_key, "lines": used}

    def timing_turns(
        self, requests: dict[str, tuple[str, Line]], with_turn_lines: set[str]
    ) -> dict[tuple[str, int], tuple[str, int, int, bool]]:
        """Turn spans laid end to end from ``turn_timings``, for the requests with no turn lines of their own."""
        by_key: dict[tuple[str, int], tuple[str, int, int, bool]] = {}
        for rid, (req_sid, x) in requests.items():
            if rid in with_turn_lines:
                continue
            cur = x.start
            for i, td in enumerate(_turn_durations(_extra(x.d).get("turn_timings"))):
                t_end = cur + int(td * 1e9)
                sid = self._sid(x, 2 + i) if i < 254 else stable_id(8, self.base, x.lineno, "turn", i)
                self._emit(self.trace, sid, req_sid, sc.SPAN_TURN, cur, t_end, {sc.VERL_TURN_INDEX: i})
                by_key[(rid, i)] = (sid, cur, t_end, False)
                cur = t_end
        return by_key

    def _event(
        self,
        x: Line,
        k: str,
        requests: dict[str, tuple[str, Line]],
        turns: dict[tuple[str, int], tuple[str, int, int, bool]],
        post: set[int],
    ) -> None:
        """One event line's span, under its turn (when its window fits the turn's), else its request, else the
        worker (or, after the barrier, the step's gen phase).

        Written with locals and the helpers inlined (same results; what it saved: docs/performance.md)."""
        d = x.d
        e = d.get("extra")
        if not isinstance(e, dict):
            e = _NO_EXTRA
        event = d["event"]
        if event.__class__ is not str:
            event = str(event)
        attrs: dict[str, Any] = {_ORIGIN: event}
        if x.raw is not None:  # left out rather than None: one attribute fewer for the sink to skip
            attrs[_LINE] = x.raw
        sid = f"{(self.base + (x.lineno << 8)) & _MASK:016x}"
        if k == "barrier":
            attrs[_WORKER] = self.worker
            attrs[_STEP] = self.step
            self._emit(self.trace, sid, self.parent or self.worker_id, sc.SPAN_BARRIER, x.start, x.end, attrs)
            return
        rid = e.get("request_id", d.get("request_id"))
        if rid is not None and rid.__class__ is not str:
            rid = str(rid)
        req = requests.get(rid) if rid is not None else None
        parent = req[0] if req is not None else None
        if parent is not None:
            turn_i = e.get("turn", e.get("turn_index"))
            if turn_i.__class__ is not int and turn_i is not None:
                turn_i = _turn_index(turn_i)
            turn = turns.get((rid, turn_i)) if turn_i is not None else None  # type: ignore[arg-type]
            if turn is not None and (not turn[3] or (turn[1] - _SLACK_NS <= x.start and x.end <= turn[2] + _SLACK_NS)):
                parent = turn[0]
        else:
            attrs[_STEP] = self.step
            attrs[_WORKER] = self.worker
            parent = (self.parent or self.worker_id) if id(x) in post else self.worker_id
        if k == "engine":
            name = sc.generate_span_name(e.get("model"))
            attrs[_OPERATION] = _TEXT_COMPLETION
            attrs[_OUTPUT_TOKENS] = e.get("output_tokens", e.get("generated_tokens"))
            attrs[_INPUT_TOKENS] = e.get("input_tokens")
        elif k == "tool":
            tool = e.get("tool_name") or e.get("tool")
            name = sc.tool_span_name(tool)
            attrs[_OPERATION] = sc.GEN_AI_OP_EXECUTE_TOOL
            attrs[sc.GEN_AI_TOOL_NAME] = tool
        elif k == "reward":
            name = sc.SPAN_REWARD
        elif k == "preprocess":
            name = sc.SPAN_PREPROCESS
            attrs[sc.VERL_PREPROCESS_KIND] = e.get("kind") or le.PREPROCESS_KIND_OF.get(event)
        elif k == "tool_parse":
            name = sc.SPAN_TOOL_PARSE
        else:
            name = event
        self._emit(self.trace, sid, parent, name, x.start, x.end, attrs)


_NO_EXTRA: dict[str, Any] = {}
_ORIGIN, _LINE, _STEP, _WORKER = sc.VERL_EVENT_ORIGIN, sc.VERL_LEGACY_LINE, sc.VERL_STEP, sc.VERL_WORKER_RANK
_OPERATION, _TEXT_COMPLETION = sc.GEN_AI_OPERATION_NAME, sc.GEN_AI_OP_TEXT_COMPLETION
_OUTPUT_TOKENS, _INPUT_TOKENS = sc.GEN_AI_USAGE_OUTPUT_TOKENS, sc.GEN_AI_USAGE_INPUT_TOKENS


def group_lines(lines: Iterable[Line]) -> dict[tuple[bool, int | None, int | None], list[Line]]:
    """A file's lines by (validation?, step, worker): normally one group, the file's worker-step."""
    if not isinstance(lines, list):
        lines = list(lines)
    # the usual file: one worker-step, found without building a key per line (~0.4 µs a line)
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
