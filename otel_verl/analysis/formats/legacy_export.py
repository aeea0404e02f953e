"""``export-legacy``: otel_verl spans → the seed's ``step_<n>/worker_<rank>.jsonl`` logs.

So the seed's plotting scripts run on otel_verl data: same layout, same event names
(``async_rollout_request_complete`` with ``turns``/``turn_timings`` and the fields the seed's
scripts read, per-request phase events named as the seed profiler logged them, ``*_duration``
worker events), timestamp = event end time. tests/analysis/test_legacy_contract.py lists every
event name and field the seed's plotting scripts read.
"""

from __future__ import annotations

import json
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from otel_verl.analysis.formats import legacy_events as le
from otel_verl.analysis.formats.legacy_import import VALIDATION_PREFIX
from otel_verl.analysis.output_paths import prepare_dir, writing


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


def _turn_timings(sp: pd.DataFrame, pos: np.ndarray) -> dict[int, list[dict[str, Any]]]:
    """Request row → the seed's ``turn_timings``: one dict per turn, in turn order.

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
    out: dict[int, list[dict[str, Any]]] = {}
    for t, (engine, parse, tool, prep), tools in zip(
        turns.itertuples(index=False), table.fillna(0.0).to_numpy(), n_tools.to_numpy(), strict=True
    ):
        timings = out.setdefault(int(t.request_span), [])
        timings.append(
            {
                "turn": int(t.turn_index) if pd.notna(t.turn_index) else len(timings),
                "total_duration": float(t.duration),
                "engine_call_duration": float(engine),
                "tool_parsing_duration": float(parse),
                "tool_call_duration": float(tool),
                "pre_process_duration": float(prep),
                "has_tool_calls": bool(tools),
            }
        )
    return out


def _request_facts(sp: pd.DataFrame) -> tuple[dict[int, int], dict[int, str]]:
    """Request row → tokens the engine generated, and the finish reason of its last engine call."""
    eng = sp[(sp["kind"] == "engine") & (sp["request_span"] >= 0)]
    tokens = pd.to_numeric(eng["output_tokens"], errors="coerce").groupby(eng["request_span"]).sum(min_count=1)
    reason = eng["stop_reason"].where(eng["stop_reason"].notna(), eng["finish_reasons"])
    last = reason[eng["end_ns"].groupby(eng["request_span"]).idxmax().to_numpy()]
    finish = dict(zip(eng.loc[last.index, "request_span"].astype(int), last, strict=True))
    return {int(k): int(v) for k, v in tokens.dropna().items()}, {k: str(v) for k, v in finish.items() if pd.notna(v)}


def _event_name(kind: str, preprocess_kind: Any) -> str:
    if kind == "preprocess" and preprocess_kind == le.PREPROCESS_KIND_OF[le.TOOL_RESPONSE]:
        return le.TOOL_RESPONSE
    return le.EXPORT_NAME[kind]


def export_legacy(spans: pd.DataFrame, out: str | Path) -> int:
    """Write one log file per (step, worker); returns lines written.

    A validation rollout (``verl.validate``) goes to ``val_step_<n>/`` with ``"validate": true`` on each
    line: the seed's scripts read ``step_<n>/`` only, and ``import-legacy`` marks it validation again.
    """
    out = prepare_dir(out)
    keep = (spans["step"].notna() & spans["worker"].notna()).to_numpy()
    sp = spans[keep]
    pos = np.flatnonzero(keep)  # request_span/turn_span are row positions in ``spans``
    turn_timings = _turn_timings(sp, pos)
    gen_tokens, finish = _request_facts(sp)
    val = sp["validate"].fillna(False).to_numpy(dtype=bool) if "validate" in sp else np.zeros(len(sp), dtype=bool)
    lines: dict[tuple[bool, int, int], list[tuple[int, dict[str, Any]]]] = {}
    for p, row, is_val in zip(pos, sp.itertuples(index=False), val, strict=True):
        kind = row.kind
        step, worker = int(row.step), int(row.worker)
        extra: dict[str, Any] = {}
        if kind == "request":
            status = _clean(row.request_status)
            event = le.REQUEST_ABORTED if status == "aborted" else le.REQUEST_COMPLETE
            tt = turn_timings.get(int(p), [])
            prompt, response = _clean(row.prompt_tokens), _clean(row.response_tokens)
            extra = {
                "request_id": _clean(row.request_id),
                "batch_data_id": _clean(row.sample_index),
                "finish_reason": "aborted" if status == "aborted" else finish.get(int(p), status),
                "turns": _clean(row.num_turns) if pd.notna(row.num_turns) else len(tt),
                "response_length": response,
                "actual_response_tokens": gen_tokens.get(int(p)),
                "total_sequence_length": prompt + response if prompt is not None and response is not None else None,
                "turn_timings": tt,
                "status": status,
                "reward_score": _clean(row.reward_score),
                "response_tokens": response,
                "prompt_tokens": prompt,
            }
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
            continue  # turn spans live in turn_timings; step/phase spans are not per worker
        entry: dict[str, Any] = {"timestamp": iso(int(row.end_ns)), "event": event, "duration_sec": float(row.duration)}
        if extra:
            entry["extra"] = {k: v for k, v in extra.items() if v is not None}
        entry["workid"] = worker
        entry["step"] = step
        if is_val:
            entry["validate"] = True
        lines.setdefault((bool(is_val), step, worker), []).append((int(row.end_ns), entry))
    n = 0
    for (is_val, step, worker), entries in lines.items():
        path = out / f"{VALIDATION_PREFIX if is_val else ''}step_{step}" / f"worker_{worker}.jsonl"
        entries.sort(key=lambda x: x[0])
        with writing(path):
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text("".join(json.dumps(e) + "\n" for _, e in entries))
        n += len(entries)
    return n


__all__ = ["export_legacy", "iso"]
