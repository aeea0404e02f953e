"""verl's ``rollout.full_determinism`` names every request ``det-{priority}`` (``ToolAgentLoop._make_request_id``); the
V1 trainers pass no priority, so every request of the run is ``det-0``, and under separate-async two steps' requests
run at once. A run with it on (the real demo: verl's ``ToolAgentLoop`` and V1 trainers) is traced and analysed
exactly as with random ids: every request's spans under its own turn and step, every engine span under its own call,
and the analysis of the run equals that of the same spans with every request given a unique id (findings.json
identical once the ids are mapped back; the outlier figure draws as many requests); its export to the seed's log
layout reads back with every request and turn."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from tests.process_state import reset_tracing

ENGINE_CLOCK_NS = 5_000_000
"""Tolerance on an engine span sitting inside its call (the same machine's clock; the sim engine stamps its own)."""


def test_the_demo_turns_verls_full_determinism_on(tmp_path: Path) -> None:
    pytest.importorskip("verl")
    from otel_verl.demo.runner import DemoOptions, _verl_config

    tools = tmp_path / "tools.yaml"
    assert _verl_config(DemoOptions(full_determinism=True), tmp_path, tools).actor_rollout_ref.rollout.full_determinism
    assert not _verl_config(DemoOptions(), tmp_path, tools).actor_rollout_ref.rollout.full_determinism


OVERLAP = {1: {"stall": {0: 3.0}}}
"""separate-async: sample 0's first engine call in step 1 stalls 3 s, so step 1's requests still run while steps 2
and 3's do (the trainer trains on the groups that came; without it this small run's steps never overlapped)."""


def _run(tmp_path: Path, trainer: str) -> pd.DataFrame:
    from otel_verl.analysis.read import load_spans
    from otel_verl.demo.runner import DemoOptions, run_demo

    plants = OVERLAP if trainer == "v1-separate-async" else {}
    opts = DemoOptions(
        steps=3, workers=2, prompts=4, n=2, trainer=trainer, full_determinism=True, step_plants=plants,
        spool=str(tmp_path / "spool"),
    )  # fmt: skip
    reset_tracing()
    try:
        result = run_demo(opts)
    finally:
        reset_tracing()
    return load_spans(result.spool_dir)


def _with_unique_ids(spans: pd.DataFrame) -> tuple[pd.DataFrame, dict[str, str]]:
    """The same spans, each request (and every span under it) with an id of its own; new id → verl's."""
    out = spans.copy()
    owner = out["request_span"].to_numpy()
    fresh = {row: uuid.uuid4().hex for row in np.unique(owner[owner >= 0])}
    back = {fresh[row]: str(out.at[row, "request_id"]) for row in fresh}
    mine = owner >= 0
    out.loc[mine, "request_id"] = [fresh[row] for row in owner[mine]]
    return out, back


def _findings_json(out: Path, back: dict[str, str] | None = None) -> dict:
    text = (out / "findings.json").read_text()
    for new, old in (back or {}).items():
        text = text.replace(new, old)
    return json.loads(text)


@pytest.mark.ray
@pytest.mark.parametrize("trainer", ["v1-sync", "v1-separate-async"])
def test_det_ids_are_traced_and_analysed_as_random_ones(tmp_path: Path, trainer: str) -> None:
    pytest.importorskip("verl")
    from otel_verl.analysis import analyze
    from otel_verl.analysis.read import load_spans
    from otel_verl.analysis.tables import Tables
    from otel_verl.analysis.write.seed_logs import export_legacy

    spans = _run(tmp_path, trainer)
    req = spans[spans["kind"] == "request"]
    assert len(req) and req["request_id"].str.startswith("det-").all()
    assert req.groupby("request_id")["step"].nunique().max() > 1  # one id in several steps
    if trainer == "v1-separate-async":  # two steps' requests with one id in flight at once
        a = req[["request_id", "step", "start_ns", "end_ns"]]
        pairs = a.merge(a, on="request_id")
        overlap = (pairs.step_x < pairs.step_y) & (pairs.start_ns_x < pairs.end_ns_y)
        assert (overlap & (pairs.start_ns_y < pairs.end_ns_x)).any()

    # every request's spans under its own turn and step
    turns = spans[spans["kind"] == "turn"]
    assert len(turns)
    parents = spans.reindex(turns["request_span"].to_numpy())
    assert (turns["request_span"].to_numpy() >= 0).all()
    assert (spans.loc[turns.index, "parent_id"].to_numpy() == parents["span_id"].to_numpy()).all()
    assert (turns["trace_id"].to_numpy() == parents["trace_id"].to_numpy()).all()
    assert (turns["step"].to_numpy() == parents["step"].to_numpy()).all()
    under = spans[spans["request_span"].to_numpy() >= 0]
    own = spans.reindex(under["request_span"].to_numpy())
    assert (under["trace_id"].to_numpy() == own["trace_id"].to_numpy()).all()
    assert (under["start_ns"].to_numpy() >= own["start_ns"].to_numpy()).all()
    with_worker = req[req["worker_span"].to_numpy() >= 0]
    assert len(with_worker) == len(req)
    assert (with_worker["step"].to_numpy() == spans.loc[with_worker["worker_span"], "step"].to_numpy()).all()

    # every engine span under its own call (the text_completion it answered), inside that call's time
    calls = Tables.build(spans).engine_calls
    assert len(calls) and calls["joined"].all()
    assert calls["call_row"].is_unique
    assert (calls["start_ns"] >= calls["call_start_ns"] - ENGINE_CLOCK_NS).all()
    assert (calls["end_ns"] <= calls["call_end_ns"] + ENGINE_CLOCK_NS).all()

    # analysed exactly as the same run with random ids
    random_ids, back = _with_unique_ids(spans)
    det = analyze(spans, tmp_path / "det")
    rnd = analyze(random_ids, tmp_path / "random")
    assert _findings_json(tmp_path / "det") == _findings_json(tmp_path / "random", back)
    assert [len(f.details.get("request_ids", [])) for f in det.findings] == [
        len(f.details.get("request_ids", [])) for f in rnd.findings
    ]
    drawn, drawn_random = det.frames.get("outliers"), rnd.frames.get("outliers")
    if drawn is not None and drawn_random is not None:
        assert drawn["request_span_id"].nunique() == drawn_random["request_id"].nunique()

    # the seed's log layout names a request by its id alone: export-legacy keeps the requests apart
    export_legacy(spans, tmp_path / "legacy")
    back_in = load_spans(tmp_path / "legacy")
    for kind in ("request", "turn"):
        assert (back_in["kind"] == kind).sum() == (spans["kind"] == kind).sum(), kind
