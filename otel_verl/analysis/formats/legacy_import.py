"""``import-legacy``: the seed's SGLangLogManager logs → otel_verl spans in a spool.

Seed lines are ``{"timestamp": <event END, ISO>, "event", "duration_sec", "extra", "workid", "step", ...}``
in ``step_<n>/worker_<rank>.jsonl``. Each becomes a span of the contract (start = end - duration);
step, gen phase and worker spans are synthesized around them. Unknown events are kept as generic
spans named after the event, with ``verl.event.origin``.
"""

from __future__ import annotations

import json
import re
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from otel_verl import semconv as sc
from otel_verl.analysis.errors import AnalysisInputError
from otel_verl.analysis.formats import legacy_events as le
from otel_verl.analysis.formats.spool_write import SpanRecord, otlp_documents, stable_id, write_spool
from otel_verl.analysis.output_paths import prepare_dir, writing
from otel_verl.analysis.read.progress import Bar, interactive
from otel_verl.analysis.read.span_columns import INT64_LIMIT

_NUM = re.compile(r"(\d+)")


def parse_ts(value: Any) -> int:
    """ISO timestamp (naive = UTC, as the seed wrote ``datetime.now()``) or epoch seconds → ns."""
    if isinstance(value, (int, float)):
        return int(value * 1e9)
    dt = datetime.fromisoformat(str(value).replace("Z", "+00:00"))
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=timezone.utc)
    return int(dt.timestamp()) * 10**9 + dt.microsecond * 1000


def read_legacy(logdir: Path, skip_bad_lines: bool = False, stats: Any = None) -> list[dict[str, Any]]:
    """Every log line as a dict with ``_end``, ``_start`` (ns), ``_step``, ``_worker``, ``_file``, ``_line``.

    A line that is not a usable seed line (bad JSON, a wrong-typed or out-of-range value) is an
    :class:`AnalysisInputError` naming file:line, or with ``skip_bad_lines`` counted in ``stats``
    (a :class:`~otel_verl.analysis.read.sources.LoadStats`) and skipped.
    """
    if not Path(logdir).exists():
        raise AnalysisInputError(f"{logdir}: no such directory")
    files = sorted(p for p in Path(logdir).rglob("*.jsonl") if p.is_file()) if Path(logdir).is_dir() else []
    if not files:
        raise AnalysisInputError(f"{logdir}: no step_<n>/worker_<rank>.jsonl files found")
    rows: list[dict[str, Any]] = []
    total = sum(p.stat().st_size for p in files)
    with Bar(interactive() and total > 20_000_000, "reading seed logs", total, "bytes") as bar:
        for path in files:
            rows += _read_file(path, skip_bad_lines, stats, bar)
    if not rows:
        bad = stats.first_bad if stats is not None else []
        first = f" ({stats.bad_lines} bad lines skipped; first: {bad[0]})" if bad else ""
        raise AnalysisInputError(f"{logdir}: no usable log lines{first}")
    return rows


def _read_file(path: Path, skip_bad_lines: bool, stats: Any, bar: Bar) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    dir_step = _num(path.parent.name)
    file_worker = _num(path.stem)
    validation = path.parent.name.startswith(VALIDATION_PREFIX)
    with path.open("rb") as fh:
        for lineno, raw in enumerate(fh, start=1):
            bar.advance(len(raw))
            if not raw.strip():
                continue
            try:
                d = json.loads(raw)
                if isinstance(d, dict) and ("resourceSpans" in d or "resourceSpans" in (d.get("result") or {})):
                    raise ValueError(OTLP_HINT)
                if not isinstance(d, dict) or "event" not in d or "timestamp" not in d:
                    raise ValueError("not a seed log line (needs 'timestamp' and 'event')")
                if not isinstance(d["event"], str):
                    raise ValueError(f"'event' is {type(d['event']).__name__}, not a string")
                end = parse_ts(d["timestamp"])
                dur = float(d.get("duration_sec") or 0.0)
                start = end - int(dur * 1e9)
                if not (0 <= start <= end < INT64_LIMIT):
                    raise ValueError("timestamp/duration_sec out of range")
                step = d.get("step", dir_step)
                worker = d.get("workid", file_worker)
                d["_step"] = _small_int(step, "step")
                d["_worker"] = _small_int(worker, "workid")
            except (ValueError, TypeError, OverflowError) as exc:
                why = "truncated last line; was the writer killed?" if not raw.endswith(b"\n") else str(exc)
                if skip_bad_lines:
                    if stats is not None:
                        stats.bad_lines += 1
                        if len(stats.first_bad) < 5:
                            stats.first_bad.append(f"{path}:{lineno}: {why}")
                    continue
                raise AnalysisInputError(f"{path}:{lineno}: {why} (use --skip-bad-lines to skip it)") from None
            d["_end"], d["_start"] = end, start
            d["_file"], d["_line"] = path, lineno
            d["_validate"] = validation or d.get("validate") is True
            rows.append(d)
    return rows


VALIDATION_PREFIX = "val_"
"""``val_step_<n>/``: a validation rollout's logs (``export-legacy`` writes them there, each line with
``"validate": true``), kept apart so the seed's scripts, which read ``step_<n>/``, never count them."""
OTLP_HINT = (
    "an OTLP/JSON trace line (a spool or a collector export), not a seed log; analyze it directly: "
    "otel-verl analyze DIR --out OUT"
)


def _small_int(value: Any, key: str) -> int | None:
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


def _num(name: str) -> int | None:
    m = _NUM.search(name)
    return int(m.group(1)) if m else None


def _extra(d: dict[str, Any]) -> dict[str, Any]:
    e = d.get("extra")
    return e if isinstance(e, dict) else {}


def _request_id(d: dict[str, Any]) -> str | None:
    rid = _extra(d).get("request_id", d.get("request_id"))
    return None if rid is None else str(rid)


_MAX_TURN_SECONDS = 1e9
"""Above this (or negative, NaN, infinite) a turn timing is damage, not a duration: it is left out."""


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


def _turn_index(value: Any) -> int | None:
    """An event's ``turn``/``turn_index`` as an int (None when damaged: the event then hangs off its request)."""
    if isinstance(value, bool):
        return None
    try:
        return int(value)
    except (TypeError, ValueError, OverflowError):
        return None


def legacy_to_records(rows: list[dict[str, Any]], run: str) -> list[SpanRecord]:
    """Build the span tree for all steps/workers.

    A training step gets a step span and a ``gen`` phase span around its workers. A validation rollout
    (``val_step_<n>/`` or ``"validate": true``) gets neither: its worker spans are roots marked
    ``verl.validate``, as the live instrumentation records them, so the analyzer leaves them out of steps.
    """
    recs: list[SpanRecord] = []
    groups: dict[tuple[bool, int | None], list[dict[str, Any]]] = {}
    for d in rows:
        groups.setdefault((bool(d.get("_validate")), d["_step"]), []).append(d)
    for (val, step), srows in sorted(groups.items(), key=lambda kv: (kv[0][0], kv[0][1] is None, kv[0][1] or 0)):
        trace = stable_id(16, run, step, "validate") if val else stable_id(16, run, step)
        parent = ""
        if not val:
            lo, hi = min(d["_start"] for d in srows), max(d["_end"] for d in srows)
            step_sp = SpanRecord(
                trace, stable_id(8, run, step, "step"), "", sc.SPAN_STEP, lo, hi, {sc.VERL_STEP: step}, step=step
            )
            gen = SpanRecord(
                trace,
                stable_id(8, run, step, "gen"),
                step_sp.span_id,
                sc.phase_span_name("gen"),
                lo,
                hi,
                {sc.VERL_PHASE_NAME: "gen", sc.VERL_STEP: step},
                step=step,
            )
            recs += [step_sp, gen]
            parent = gen.span_id
        by_worker: dict[int | None, list[dict[str, Any]]] = {}
        for d in srows:
            by_worker.setdefault(d["_worker"], []).append(d)
        for worker, wrows in by_worker.items():
            recs += _worker_records(trace, run, step, worker, parent, wrows, val)
    return recs


def _rollout_rows(wrows: list[dict[str, Any]], kinds: list[str]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Split a worker's non-barrier lines into its rollout and what came after its barrier wait.

    Why: the seed logs ``broadcast_duration`` (and the like) after ``barrier_wait_duration``; inside the
    worker span they would stretch every worker to the end of the step, hiding the straggler.
    """
    body = [d for d, k in zip(wrows, kinds, strict=True) if k not in ("barrier", "worker")]
    barriers = [d for d, k in zip(wrows, kinds, strict=True) if k == "barrier"]
    if not barriers:
        return body, []
    cut = min(d["_start"] for d in barriers)
    return [d for d in body if d["_start"] < cut], [d for d in body if d["_start"] >= cut]


def _worker_records(
    trace: str, run: str, step: Any, worker: Any, parent: str, wrows: list[dict[str, Any]], val: bool = False
) -> list[SpanRecord]:
    fname = f"worker_{worker}.jsonl" if worker is not None else "worker.jsonl"
    common = {"step": step, "file": fname}
    out: list[SpanRecord] = []
    kinds = [le.kind_of(str(d["event"])) for d in wrows]
    wroll = [d for d, k in zip(wrows, kinds, strict=True) if k == "worker"]
    body, after = _rollout_rows(wrows, kinds)
    post = {id(d) for d in after}
    window = wroll or body or [d for d in wrows if id(d) not in post] or wrows
    w_lo = min(d["_start"] for d in window)
    w_hi = max(d["_end"] for d in window)
    wextra = _extra(wroll[0]) if wroll else {}
    n_req = sum(k in ("request", "aborted") for k in kinds)
    flag = {sc.VERL_VALIDATE: True} if val else {}
    wsp = SpanRecord(
        trace,
        stable_id(8, run, step, worker, "validate" if val else "worker"),
        parent,
        sc.SPAN_WORKER,
        w_lo,
        w_hi,
        {
            sc.VERL_WORKER_RANK: worker,
            sc.VERL_STEP: step,
            sc.VERL_WORKER_NUM_REQUESTS: wextra.get("total_requests", n_req),
            sc.VERL_WORKER_NUM_COMPLETED: wextra.get("completed_count"),
            sc.VERL_EVENT_ORIGIN: wroll[0]["event"] if wroll else None,
            **flag,
        },
        **common,
    )
    out.append(wsp)
    outer = parent or wsp.span_id  # barrier and post-barrier events: beside the worker span, not in it
    requests: dict[str, SpanRecord] = {}
    turns: dict[tuple[str, int], SpanRecord] = {}
    for d, k in zip(wrows, kinds, strict=True):
        if k not in ("request", "aborted"):
            continue
        e = _extra(d)
        rid = _request_id(d) or stable_id(8, d["_file"], d["_line"])
        timings = _turn_durations(e.get("turn_timings"))
        status = e.get("status") or ("aborted" if k == "aborted" else "completed")
        nt = e.get("turns", len(timings) if timings else None)
        sid = stable_id(8, d["_file"], d["_line"], "request")
        req = SpanRecord(
            trace,
            sid,
            wsp.span_id,
            sc.SPAN_REQUEST,
            d["_start"],
            d["_end"],
            {
                sc.VERL_STEP: step,
                sc.VERL_WORKER_RANK: worker,
                sc.VERL_REQUEST_ID: rid,
                sc.VERL_REQUEST_STATUS: status,
                sc.VERL_REQUEST_NUM_TURNS: nt,
                sc.VERL_REWARD_SCORE: e.get("reward_score"),
                sc.VERL_REQUEST_RESPONSE_TOKENS: e.get("response_tokens", e.get("response_length")),
                sc.VERL_REQUEST_PROMPT_TOKENS: e.get("prompt_tokens"),
                sc.VERL_SAMPLE_INDEX: e.get("batch_data_id") if isinstance(e.get("batch_data_id"), int) else None,
                sc.VERL_EVENT_ORIGIN: d["event"],
                **flag,
            },
            **common,
        )
        requests[rid] = req
        out.append(req)
        cur = d["_start"]
        for i, td in enumerate(timings):
            t_end = cur + int(td * 1e9)
            turn = SpanRecord(
                trace, stable_id(8, sid, "turn", i), sid, sc.SPAN_TURN, cur, t_end, {sc.VERL_TURN_INDEX: i}, **common
            )
            turns[(rid, i)] = turn
            out.append(turn)
            cur = t_end
    for d, k in zip(wrows, kinds, strict=True):
        if k in ("request", "aborted", "worker"):
            continue
        e = _extra(d)
        sid = stable_id(8, d["_file"], d["_line"], k)
        if k == "barrier":
            out.append(
                SpanRecord(
                    trace,
                    sid,
                    outer,
                    sc.SPAN_BARRIER,
                    d["_start"],
                    d["_end"],
                    {sc.VERL_WORKER_RANK: worker, sc.VERL_STEP: step, sc.VERL_EVENT_ORIGIN: d["event"]},
                    **common,
                )
            )
            continue
        rid = _request_id(d)
        parent = requests.get(rid) if rid else None
        turn_i = _turn_index(e.get("turn", e.get("turn_index")))
        if parent is not None and turn_i is not None and (rid, turn_i) in turns:
            parent = turns[(rid, turn_i)]
        parent_id = parent.span_id if parent is not None else outer if id(d) in post else wsp.span_id
        attrs: dict[str, Any] = {sc.VERL_EVENT_ORIGIN: d["event"]}
        if parent is None:
            attrs.update({sc.VERL_STEP: step, sc.VERL_WORKER_RANK: worker})
        if k == "engine":
            name = sc.generate_span_name(e.get("model"))
            attrs.update(
                {
                    sc.GEN_AI_OPERATION_NAME: sc.GEN_AI_OP_TEXT_COMPLETION,
                    sc.GEN_AI_USAGE_OUTPUT_TOKENS: e.get("output_tokens"),
                    sc.GEN_AI_USAGE_INPUT_TOKENS: e.get("input_tokens"),
                }
            )
        elif k == "tool":
            tool = e.get("tool_name") or e.get("tool")
            name = sc.tool_span_name(tool)
            attrs.update({sc.GEN_AI_OPERATION_NAME: sc.GEN_AI_OP_EXECUTE_TOOL, sc.GEN_AI_TOOL_NAME: tool})
        elif k == "reward":
            name = sc.SPAN_REWARD
        elif k == "preprocess":
            name = sc.SPAN_PREPROCESS
            attrs[sc.VERL_PREPROCESS_KIND] = e.get("kind") or le.PREPROCESS_KIND_OF.get(str(d["event"]))
        elif k == "tool_parse":
            name = sc.SPAN_TOOL_PARSE
        else:
            name = str(d["event"])
        out.append(SpanRecord(trace, sid, parent_id, name, d["_start"], d["_end"], attrs, **common))
    return out


def import_legacy(
    logdir: str | Path,
    spool: str | Path | None = None,
    run: str = "legacy",
    skip_bad_lines: bool = False,
    endpoint: str | None = None,
    protocol: str | None = None,
    stats: Any = None,
) -> int:
    """Convert LOGDIR into ``<spool>/<run>/…`` and/or send it to an OTLP ``endpoint``; returns spans converted.

    Sending reuses ``otel-verl replay``'s senders (gRPC or OTLP/HTTP protobuf, ``OTEL_EXPORTER_OTLP_*``
    headers and certificates), one ExportTraceServiceRequest per spool line's worth of spans.
    """
    if spool is None and endpoint is None:
        raise AnalysisInputError("import-legacy needs --spool DIR and/or --endpoint URL")
    if spool is not None:
        prepare_dir(spool, "--spool")
    records = legacy_to_records(read_legacy(Path(logdir), skip_bad_lines, stats), run)
    if endpoint is not None:
        send_records(records, endpoint, protocol)
    if spool is not None:
        with writing(Path(spool) / run):
            write_spool(records, Path(spool), run)
    return len(records)


def send_records(records: list[SpanRecord], endpoint: str, protocol: str | None = None) -> int:
    """Send span records over OTLP; a refusing or unreachable endpoint is one :class:`AnalysisInputError`."""
    from otel_verl.export import replay

    try:
        endpoint, protocol = replay.resolve_endpoint(endpoint, protocol)
        send = replay.make_sender(endpoint, protocol)
        sent = 0
        for _sub, _fname, doc in otlp_documents(records):
            request = replay.parse_line(json.dumps(doc))
            send(request)
            sent += replay.count_spans(request)
    except replay.ReplayError as exc:
        raise AnalysisInputError(str(exc)) from None
    except Exception as exc:  # grpc.RpcError, requests errors: the endpoint's problem, not a traceback
        first = str(exc).strip().splitlines()[0][:200] if str(exc).strip() else ""
        raise AnalysisInputError(f"{endpoint}: export failed ({type(exc).__name__}: {first})") from None
    return sent
