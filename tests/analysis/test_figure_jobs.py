"""Figures rendered in a forked worker beside the detectors: same report as in-line, errors re-raised,
a worker that dies replaced by rendering in the parent."""

from __future__ import annotations

import json
import multiprocessing
import os
import re
from pathlib import Path

import pandas as pd
import pytest

from otel_verl.analysis import analyze
from otel_verl.analysis.figures import rendering as figure_jobs
from otel_verl.analysis.figures.catalog import FIGURES

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="the figure worker is forked")


def _report(out: Path) -> tuple[dict, str, dict[str, bytes]]:
    findings = json.loads((out / "findings.json").read_text())
    # plotly gives each figure's div a random id
    uuid = r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"
    html = re.sub(uuid, "ID", (out / "report.html").read_text())
    pngs = {name: (out / f"{name}.png").read_bytes() for name, *_ in FIGURES}
    return findings, html, pngs


def _analyze(spans: pd.DataFrame, out: Path, jobs: str, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("OTEL_VERL_ANALYZE_JOBS", jobs)
    return analyze(spans, out)


def test_forked_figures_match_inline(planted_spans, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    started = []
    real_start = figure_jobs.BackgroundFigures.start

    def spy(self):
        result = real_start(self)
        started.append(self._proc is not None)
        return result

    monkeypatch.setattr(figure_jobs.BackgroundFigures, "start", spy)
    inline = _analyze(planted_spans, tmp_path / "inline", "1", monkeypatch)
    forked = _analyze(planted_spans, tmp_path / "forked", "2", monkeypatch)
    assert started == [False, True]  # the knob decides, whatever the table's size
    assert _report(tmp_path / "inline") == _report(tmp_path / "forked")
    assert list(forked.frames) == ["step_account", *(name for name, *_ in FIGURES)]
    for name, frame in inline.frames.items():
        pd.testing.assert_frame_equal(frame, forked.frames[name])
    assert [p.name for p in forked.files] == [p.name for p in inline.files]


def test_worker_that_dies_is_replaced_by_the_parent(
    planted_spans, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    parent = os.getpid()
    real = figure_jobs.BackgroundFigures._render_all

    def dies_in_child(self):
        if os.getpid() != parent:
            os._exit(9)  # as if killed (OOM killer): nothing sent back
        return real(self)

    monkeypatch.setattr(figure_jobs.BackgroundFigures, "_render_all", dies_in_child)
    _analyze(planted_spans, tmp_path / "died", "2", monkeypatch)
    monkeypatch.setattr(figure_jobs.BackgroundFigures, "_render_all", real)
    _analyze(planted_spans, tmp_path / "inline", "1", monkeypatch)
    assert _report(tmp_path / "died") == _report(tmp_path / "inline")


def test_figure_error_in_the_worker_is_raised_in_the_parent(
    planted_spans, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(*args, **kwargs):
        raise ValueError("figure broke")

    name, compute, _, plotly_fn = next(spec for spec in FIGURES if spec[0] == "turn_counts")
    specs = tuple((name, compute, broken, plotly_fn) if spec[0] == name else spec for spec in FIGURES)
    monkeypatch.setattr("otel_verl.analysis.pipeline.FIGURES", specs)
    with pytest.raises(ValueError, match="figure broke"):
        _analyze(planted_spans, tmp_path / "broken", "2", monkeypatch)
    assert not [p for p in multiprocessing.active_children() if p.name == "otel-verl-figures"]
