"""The analysis read a step at a time equals the whole-run analysis (issue 31): findings.json's findings, steps and
summary, every figure's frame and every section of report.html, on the planted spool, the CPU demo's spool, seed
logs and runs of the accuracy benchmark. The reference is the whole-run analysis as it was (``whole_run.py``)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from whole_run import assert_same, assert_same_frames, report_sections, whole_run

from benchmarks.diagnosis.async_classes import BUILDERS
from benchmarks.diagnosis.run_model import build_run
from benchmarks.diagnosis.shape import OTLP, OTLP_ENGINE, SEED
from benchmarks.diagnosis.write_async import write_async
from benchmarks.diagnosis.write_otlp import write_spool
from benchmarks.diagnosis.write_seed import write_seed
from benchmarks.gen_seed_logs import write_seed_logs
from otel_verl.analysis import analyze
from otel_verl.analysis.read import LoadStats, load_spans
from otel_verl.analysis.read.step_split import owner_steps, take_rows
from otel_verl.analysis.read.step_stream import iter_steps


def _assert_streamed_equals_whole(source: Path, spans: pd.DataFrame, tmp_path: Path, **options) -> dict:
    """``analyze(source)`` (read a step at a time) against the whole-run analysis of ``spans``."""
    expected, frames = whole_run(spans, tmp_path / "whole", source=str(source), **options)
    result = analyze(source, tmp_path / "streamed", **options)
    got = json.loads((tmp_path / "streamed" / "findings.json").read_text())
    assert_same(got["findings"], expected["findings"], "findings")
    assert_same(got["steps"], expected["steps"], "steps")
    assert_same(got["summary"], expected["summary"], "summary")
    assert_same_frames(result.frames, frames)
    whole_html = report_sections(tmp_path / "whole" / "report.html")
    streamed_html = report_sections(tmp_path / "streamed" / "report.html")
    assert list(streamed_html) == list(whole_html)
    for name, section in whole_html.items():
        assert streamed_html[name] == section, name
    return got


def test_planted_spool(planted_spool: Path, planted_spans, tmp_path: Path) -> None:
    got = _assert_streamed_equals_whole(planted_spool, planted_spans, tmp_path, timeline_steps=(2, 99))
    assert got["findings"] and got["summary"]["steps"] == list(range(1, 9))
    assert (tmp_path / "streamed" / "report.html").read_text().count("<h2 id='timeline-") == 3  # slowest, 2, 99


def test_demo_spool(demo_planted, tmp_path: Path) -> None:
    """The CPU demo: a validation rollout (step 0), the simulated engine's spans in ``no_step/``, aborts."""
    opts, spans, _analysis, _out = demo_planted
    got = _assert_streamed_equals_whole(Path(opts.spool), spans, tmp_path, top_requests=3)
    assert got["summary"]["engine"]["llm_request_spans"] > 0 and got["summary"]["requests_by_status"]["aborted"] > 0


def test_seed_logs(tmp_path: Path) -> None:
    logs = write_seed_logs(tmp_path / "logs", steps=6, workers=4, requests=12, seed=2, stall={(4, 1): 40.0})
    got = _assert_streamed_equals_whole(logs, load_spans(logs), tmp_path)
    assert got["findings"][0]["steps"] == [4]


@pytest.mark.parametrize(("seed", "fmt"), [(1004, OTLP), (1005, OTLP_ENGINE), (1006, SEED)])
def test_accuracy_benchmark_runs(seed: int, fmt: str, tmp_path: Path) -> None:
    """Runs of the accuracy benchmark (random shapes, planted causes), as its spool or the seed's logs."""
    run = build_run(seed, fmt, None, None, 20_000)
    data = tmp_path / "data"
    (write_seed if fmt == SEED else write_spool)(run, data)
    got = _assert_streamed_equals_whole(data, load_spans(data), tmp_path)
    assert got["findings"]


def test_in_memory_run_and_step_range(planted_spool: Path, planted_spans, tmp_path: Path) -> None:
    """A run in memory goes the same way (its table split by step); ``steps`` and ``window`` as the reader's."""
    whole = analyze(planted_spans, tmp_path / "memory")
    streamed = analyze(planted_spool, tmp_path / "path", window=3)
    assert_same([f.to_json() for f in whole.findings], [f.to_json() for f in streamed.findings])
    assert_same(whole.steps, streamed.steps)
    ranged = analyze(planted_spool, tmp_path / "range", steps=range(2, 6), html_report=False)
    in_memory = analyze(planted_spans, tmp_path / "range-memory", steps=range(2, 6), html_report=False)
    assert ranged.summary["steps"] == [2, 3, 4, 5]
    assert_same([f.to_json() for f in ranged.findings], [f.to_json() for f in in_memory.findings])
    # judged against the selected steps only, a range is the whole analysis of its steps' rows
    ranged = analyze(planted_spool, tmp_path / "range", steps=range(2, 6), baseline="selected", html_report=False)
    owner = owner_steps(planted_spans)
    expected, _ = whole_run(take_rows(planted_spans, np.flatnonzero((owner >= 2) & (owner <= 5))), tmp_path / "w")
    assert_same(json.loads((tmp_path / "range" / "findings.json").read_text())["findings"], expected["findings"])


def _findings(out: Path) -> dict:
    """findings.json without the read's wall time (the one field that differs between two runs)."""
    doc = json.loads((out / "findings.json").read_text())
    doc["summary"]["load"].pop("seconds", None)
    return doc


def test_span_sized_parts_change_nothing(tmp_path: Path) -> None:
    """Small steps analysed together up to a span budget (issue 52.8) give the same findings.json and report as
    a step at a time; a part of several steps stays within the budget, a step over it is a part of its own."""
    stall = {(5, 1): 40.0, (9, 0): 25.0}
    logs = write_seed_logs(tmp_path / "logs", steps=12, workers=3, requests=10, seed=7, stall=stall)
    sizes = {p.steps: len(p.spans) for p in iter_steps(logs) if p.steps}
    budget = int(sum(sizes.values()) / len(sizes) * 2.5)  # two steps a part, some three: uneven cuts
    parts = [p for p in iter_steps(logs, span_budget=budget) if p.steps]
    assert 1 < len(parts) < len(sizes)
    assert all(len(p.spans) <= budget for p in parts if len(p.steps) > 1)
    assert [len(p.steps) for p in iter_steps(logs, span_budget=min(sizes.values()) - 1) if p.steps] == [1] * 12
    expected = None
    for b in (0, budget, None):
        out = tmp_path / f"out{b}"
        analyze(logs, out, span_budget=b, stats=LoadStats())
        got = _findings(out), report_sections(out / "report.html")
        if expected is None:
            expected = got
            named = {s for f in got[0]["findings"] for s in f.get("steps") or [f.get("step")]}
            assert {5, 9} <= named, named
        assert got == expected, f"span_budget={b}"


def test_an_asynchronous_run_stays_a_step_a_part(tmp_path: Path) -> None:
    """Its samples cross steps and where a part ends decides what links (stream/consumers.py): the span budget
    leaves it a step a part, so its findings stay what they were (a separate-async demo spool's moved when its
    steps were grouped)."""
    run, _ = BUILDERS["async_reward"](9837734513, OTLP)  # separate-async, 4 steps
    root = write_async(run, tmp_path / "data")
    assert [len(p.steps) for p in iter_steps(root, span_budget=10**9) if p.steps] == [1] * 4
    for b in (0, None):
        analyze(root, tmp_path / f"out{b}", span_budget=b, stats=LoadStats(), html_report=False, figures=False)
    assert _findings(tmp_path / "outNone") == _findings(tmp_path / "out0")
