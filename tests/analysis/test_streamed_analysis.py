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

from benchmarks.diagnosis.run_model import build_run
from benchmarks.diagnosis.shape import OTLP, OTLP_ENGINE, SEED
from benchmarks.diagnosis.write_otlp import write_spool
from benchmarks.diagnosis.write_seed import write_seed
from benchmarks.gen_seed_logs import write_seed_logs
from otel_verl.analysis import analyze
from otel_verl.analysis.read import load_spans
from otel_verl.analysis.read.step_split import owner_steps, take_rows


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
