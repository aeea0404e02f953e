"""``export-legacy``: otel_verl spans → the seed's ``step_<n>/worker_<rank>.jsonl`` logs.

So the seed's plotting scripts run on otel_verl data: same layout, same event names
(``async_rollout_request_complete`` with ``turns``/``turn_timings`` and the fields the seed's
scripts read, per-request phase events named as the seed profiler logged them, ``*_duration``
worker events), timestamp = event end time. tests/analysis/test_legacy_contract.py and
tests/analysis/test_legacy_seed.py list every event name and field the seed's scripts read and its
logger wrote. Spans imported from seed logs carry their whole original line (``verl.legacy.line``):
it is written back as it was, so a round trip keeps every field. Each (step, worker) gets the seed's
once-per-worker-step events (:data:`~otel_verl.analysis.read.seed.events.WORKER_STEP_EVENTS`) from
:mod:`otel_verl.analysis.write.seed_worker_step` when its lines lack them.
"""

from __future__ import annotations

import json
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import numpy as np
import orjson
import pandas as pd

from otel_verl import semconv as sc
from otel_verl.analysis.output_paths import prepare_dir, writing
from otel_verl.analysis.read.seed import events as le
from otel_verl.analysis.read.seed.log_file import VALIDATION_PREFIX
from otel_verl.analysis.read.seed.rows import LEGACY_SERVICE
from otel_verl.analysis.write import seed_worker_step


def iso(ns: int) -> str:
    """Naive ISO timestamp (UTC) with microseconds, like the seed's ``datetime.now().isoformat()``."""
    return (
        datetime.fromtimestamp(ns // 10**9, tz=timezone.utc)
        .replace(microsecond=(ns % 10**9) // 1000, tzinfo=None)
        .isoformat()
    )


def _clean(v: Any) -> Any:
    if v is None or (isinstance(v, float) and pd.isna(v)) or v is pd.NA:
        return None
    if hasattr(v, "item"):
        return v.item()
    return v


def _turn_timings(
    sp: pd.DataFrame, pos: np.ndarray
) -> tuple[dict[int, list[dict[str, Any]]], dict[int, dict[str, Any]]]:
    """Request row → the seed's ``turn_timings``: one dict per turn, in turn order; and turn row → its dict.

    The seed profiler logged ``{"turn", "total_duration", "engine_call_duration", "tool_parsing_duration",
    "has_tool_calls", ...}`` per turn; the parts otel_verl measures are filled in the same keys.
    """
    kinds = sp["kind"].to_numpy()
    turn_of = sp["turn_span"].to_numpy()
    inside = turn_of >= 0
    parts = pd.DataFrame({"turn": turn_of[inside], "kind": kinds[inside], "d": sp["duration"].to_numpy()[inside]})
    is_turn = kinds == "turn"
    turns = sp[is_turn].assign(pos=pos[is_turn]).sort_values(["request_span", "turn_index", "start_ns"])
    table = parts.pivot_table(index="turn", columns="kind", values="d", aggfunc="sum")
    table = table.reindex(index=turns["pos"].to_numpy(), columns=["engine", "tool_parse", "tool", "preprocess"])
    n_tools = parts[parts["kind"] == "tool"].groupby("turn").size().reindex(turns["pos"].to_numpy(), fill_value=0)
    reasons = _turn_reasons(sp, pos).reindex(turns["pos"].to_numpy())
    out: dict[int, list[dict[str, Any]]] = {}
    by_turn: dict[int, dict[str, Any]] = {}
    for t, (engine, parse, tool, prep), tools, reason in zip(
        turns.itertuples(index=False), table.fillna(0.0).to_numpy(), n_tools.to_numpy(), reasons, strict=True
    ):
        timings = out.setdefault(int(t.request_span), [])
        total = float(t.duration)
        timings.append(
            {
                "turn": int(t.turn_index) if pd.notna(t.turn_index) else len(timings),
                "total_duration": total,
                "pre_process_duration": float(prep),
                "engine_call_duration": float(engine),
                # the seed's post-process: what follows the engine call in the turn, tool parsing included
                "post_process_duration": max(0.0, total - float(engine) - float(prep) - float(tool)),
                "tool_parsing_duration": float(parse),
                "tool_call_duration": float(tool),
                "has_tool_calls": bool(tools),
                "finish_reason": seed_reason(reason, bool(tools)),
            }
        )
        by_turn[int(t.pos)] = timings[-1]
    return out, by_turn


def _turn_reasons(sp: pd.DataFrame, pos: np.ndarray) -> pd.Series:
    """Turn row → its last engine call's stop reason."""
    eng = sp[(sp["kind"] == "engine") & (sp["turn_span"] >= 0)]
    reason = eng["stop_reason"].where(eng["stop_reason"].notna(), eng["finish_reasons"])
    last = eng["end_ns"].groupby(eng["turn_span"]).idxmax()
    return pd.Series(reason[last.to_numpy()].to_numpy(), index=last.index.to_numpy())


_SEED_REASONS = {"stop": "STOP", "completed": "STOP", "end_turn": "STOP", "length": "LENGTH", "max_tokens": "LENGTH"}


def seed_reason(reason: Any, tool_call: bool = False) -> str:
    """An engine stop reason as the seed wrote ``str(FinishReasonTypeEnum.X)`` (a tool call turn is TOOL_CALL)."""
    if tool_call:
        return le.FINISH_REASON_PREFIX + "TOOL_CALL"
    if reason is None or (isinstance(reason, float) and pd.isna(reason)):
        return le.FINISH_REASON_PREFIX + "STOP"
    text = str(reason)
    return le.FINISH_REASON_PREFIX + _SEED_REASONS[text.lower()] if text.lower() in _SEED_REASONS else text


def _summary(timings: list[dict[str, Any]], total: float) -> dict[str, Any]:
    """The seed's per-request summary fields, from its turn timings (as ``_async_rollout_a_request`` computes them)."""
    n = len(timings)
    engine = sum(t["engine_call_duration"] for t in timings)
    post = sum(t["post_process_duration"] for t in timings)
    return {
        "user_turns": 0,  # verl's interaction (user) turns are not recorded as such
        "turns_with_tools": sum(1 for t in timings if t["has_tool_calls"]),
        "avg_turn_duration": round(sum(t["total_duration"] for t in timings) / n, 4) if n else 0,
        "avg_engine_call_duration": round(engine / n, 4) if n else 0,
        "avg_post_process_duration": round(post / n, 4) if n else 0,
        "total_engine_time": round(engine, 4),
        "total_post_process_time": round(post, 4),
        "engine_time_pct": round(engine / total * 100, 2) if total > 0 else 0,
        "post_process_time_pct": round(post / total * 100, 2) if total > 0 else 0,
    }


def _request_facts(sp: pd.DataFrame) -> tuple[dict[int, int], dict[int, str]]:
    """Request row → tokens the engine generated, and the finish reason of its last engine call."""
    eng = sp[(sp["kind"] == "engine") & (sp["request_span"] >= 0)]
    tokens = pd.to_numeric(eng["output_tokens"], errors="coerce").groupby(eng["request_span"]).sum(min_count=1)
    reason = eng["stop_reason"].where(eng["stop_reason"].notna(), eng["finish_reasons"])
    last = reason[eng["end_ns"].groupby(eng["request_span"]).idxmax().to_numpy()]
    finish = dict(zip(eng.loc[last.index, "request_span"].astype(int), last, strict=True))
    return {int(k): int(v) for k, v in tokens.dropna().items()}, {k: str(v) for k, v in finish.items() if pd.notna(v)}


def _event_name(kind: str, preprocess_kind: Any) -> str:
    """Seed name of a per-request event; a request's own preprocessing is never the seed's once-per-worker-step
    ``preprocessing_duration`` (the scripts keep one value per worker-step)."""
    if kind == "preprocess":
        if preprocess_kind == le.PREPROCESS_KIND_OF[le.TOOL_RESPONSE]:
            return le.TOOL_RESPONSE
        return f"preprocess_{preprocess_kind}" if isinstance(preprocess_kind, str) else "preprocess_request"
    return le.EXPORT_NAME[kind]


def _legacy_lines(sp: pd.DataFrame) -> np.ndarray:
    """Per row: the original seed line (dict) of an imported span, else None."""
    out = np.full(len(sp), None, dtype=object)
    if "extra" not in sp:
        return out
    extra = sp["extra"].to_numpy()
    for i in np.flatnonzero(sp["extra"].astype(str).str.contains(sc.VERL_LEGACY_LINE, regex=False).to_numpy()):
        line = orjson.loads(extra[i]).get(sc.VERL_LEGACY_LINE)
        if isinstance(line, str):
            out[i] = orjson.loads(line)
    return out


def _entry(
    row: Any,
    p: int,
    turn_timings: tuple[dict[int, list[dict[str, Any]]], dict[int, dict[str, Any]]],
    gen_tokens: dict[int, int],
    finish: dict[int, str],
) -> dict[str, Any] | None:
    """The seed line for one otel_verl span (without workid/step), or None for spans the seed has no line for."""
    kind = row.kind
    by_request, by_turn = turn_timings
    extra: dict[str, Any] = {}
    if kind == "request":
        status = _clean(row.request_status)
        event = le.REQUEST_ABORTED if status == "aborted" else le.REQUEST_COMPLETE
        tt = by_request.get(p, [])
        prompt, response = _clean(row.prompt_tokens), _clean(row.response_tokens)
        extra = {
            "request_id": _clean(row.request_id),
            "batch_data_id": _clean(row.sample_index),
            "finish_reason": "aborted" if status == "aborted" else seed_reason(finish.get(p, status)),
            "turns": _clean(row.num_turns) if pd.notna(row.num_turns) else len(tt),
            **_summary(tt, float(row.duration)),
            # unknown counts are 0, as the seed wrote them when a request had no ids
            "response_length": response or 0,
            "actual_response_tokens": gen_tokens.get(p, response or 0),
            "total_sequence_length": (prompt or 0) + (response or 0),
            "turn_timings": tt,
            "status": status,
            "reward_score": _clean(row.reward_score),
            "response_tokens": response,
            "prompt_tokens": prompt,
        }
    elif kind == "turn" and p in by_turn:
        event = le.TURN_END
        t = by_turn[p]
        total = t["total_duration"]
        extra = {"request_id": _clean(row.request_id), **{k: v for k, v in t.items() if k != "total_duration"}}
        extra["engine_call_pct"] = round(t["engine_call_duration"] / total * 100, 2) if total > 0 else 0
        extra["post_process_pct"] = round(t["post_process_duration"] / total * 100, 2) if total > 0 else 0
    elif kind == "worker":
        event = le.WORKER_ROLLOUT
        extra = {"total_requests": _clean(row.num_requests), "completed_count": _clean(row.num_completed)}
    elif kind == "barrier":
        event = le.BARRIER
    elif kind in le.EXPORT_NAME and row.request_span >= 0:
        event = _event_name(kind, row.preprocess_kind)
        extra = {"request_id": _clean(row.request_id)}
        if pd.notna(row.turn_index):
            extra["turn"] = int(row.turn_index)
        if kind == "tool":
            extra["tool_name"] = _clean(row.tool_name) or str(row.name).replace("execute_tool ", "")
        if kind == "engine":
            extra["output_tokens"] = _clean(row.output_tokens)
            extra["input_tokens"] = _clean(row.input_tokens)
            extra["finish_reason"] = _clean(row.stop_reason)
        if kind == "preprocess":
            extra["kind"] = _clean(row.preprocess_kind)
    elif kind in ("other",) or (kind in le.EXPORT_NAME and row.request_span < 0):
        event = _clean(row.event_origin) or str(row.name)
        if row.request_span >= 0:
            extra = {"request_id": _clean(row.request_id)}
    else:
        return None  # step/phase spans are not per worker
    entry: dict[str, Any] = {"timestamp": iso(int(row.end_ns)), "event": event, "duration_sec": float(row.duration)}
    if extra:
        entry["extra"] = {k: v for k, v in extra.items() if v is not None}
    return entry


def export_legacy(spans: pd.DataFrame, out: str | Path) -> int:
    """Write one log file per (step, worker); returns lines written.

    A validation rollout (``verl.validate``) goes to ``val_step_<n>/`` with ``"validate": true`` on each
    line: the seed's scripts read ``step_<n>/`` only, and ``import-legacy`` marks it validation again.
    """
    out = prepare_dir(out)
    spans = _unique_request_ids(spans)
    keep = (spans["step"].notna() & spans["worker"].notna()).to_numpy()
    sp = spans[keep]
    pos = np.flatnonzero(keep)  # request_span/turn_span are row positions in ``spans``
    turn_timings = _turn_timings(sp, pos)
    gen_tokens, finish = _request_facts(sp)
    val = sp["validate"].fillna(False).to_numpy(dtype=bool) if "validate" in sp else np.zeros(len(sp), dtype=bool)
    imported = (sp["service"] == LEGACY_SERVICE).to_numpy() if "service" in sp else np.zeros(len(sp), dtype=bool)
    originals = _legacy_lines(sp)
    lines: dict[tuple[bool, int, int], list[tuple[int, dict[str, Any]]]] = {}
    times: dict[tuple[bool, int, int], seed_worker_step.WorkerStepTimes] = {}
    for p, row, is_val, from_seed, original in zip(
        pos, sp.itertuples(index=False), val, imported, originals, strict=True
    ):
        key = (bool(is_val), int(row.step), int(row.worker))
        times.setdefault(key, seed_worker_step.WorkerStepTimes()).see(
            row.kind, int(row.start_ns), int(row.end_ns), float(row.duration)
        )
        if original is not None:
            lines.setdefault(key, []).append((int(row.end_ns), original))
            continue
        if from_seed:
            continue  # made up on import (turns from turn_timings, a worker span): the seed never wrote it
        entry = _entry(row, int(p), turn_timings, gen_tokens, finish)
        if entry is None:
            continue
        entry["workid"], entry["step"] = key[2], key[1]
        if is_val:
            entry["validate"] = True
        lines.setdefault(key, []).append((int(row.end_ns), entry))
    for key, entries in lines.items():
        present = {str(e.get("event")) for _, e in entries}
        for end, event, secs in seed_worker_step.missing_events(times[key], present):
            made = seed_worker_step.entry(iso(end), event, secs, key[2], key[1])
            if key[0]:
                made["validate"] = True
            entries.append((end, made))
    n = 0
    for (is_val, step, worker), entries in lines.items():
        path = out / f"{VALIDATION_PREFIX if is_val else ''}step_{step}" / f"worker_{worker}.jsonl"
        entries.sort(key=lambda x: x[0])
        with writing(path):
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text("".join(json.dumps(e) + "\n" for _, e in entries))
        n += len(entries)
    return n


def _unique_request_ids(spans: pd.DataFrame) -> pd.DataFrame:
    """``spans`` where a request id names several requests of one step and worker: those requests' spans get
    ``<id>#<request's span id>``. The seed's logs name a request by its id alone, so ``import-legacy`` would merge
    them (verl's ``full_determinism`` names every V1 request ``det-0``); ids that are unique are written as they are."""
    if not {"request_id", "request_span", "kind", "step", "worker"} <= set(spans):
        return spans
    requests = np.flatnonzero((spans["kind"] == "request").to_numpy())
    req = spans.iloc[requests]
    repeated = (
        req.duplicated(["step", "worker", "request_id"], keep=False).to_numpy() & req["request_id"].notna().to_numpy()
    )
    if not repeated.any():
        return spans
    ids = spans["request_id"].to_numpy(dtype=object)
    span_ids = spans["span_id"].to_numpy(dtype=object)
    owner = spans["request_span"].to_numpy()
    renamed = np.isin(owner, requests[repeated])
    out = spans.copy(deep=False)
    new = ids.copy()
    new[renamed] = [f"{ids[o]}#{span_ids[o]}" for o in owner[renamed]]
    out["request_id"] = pd.Series(new, index=spans.index, dtype=object)
    return out


__all__ = ["export_legacy", "iso"]
