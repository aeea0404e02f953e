"""Minimal valid spools: only requests, only workers, only steps. Every figure and detector copes (a
"no data" figure, no finding, no crash), from the library and from the CLI."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from builder import TraceBuilder
from typer.testing import CliRunner

from otel_verl.analysis import analyze
from otel_verl.analysis.figures.catalog import FIGURES
from otel_verl.analysis.figures.worker_cdf import pick_step
from otel_verl.analysis.read import load_spans
from otel_verl.cli import app


def _requests_only(b: TraceBuilder) -> None:
    """Bare request spans of step 1: no worker span, no worker rank (the reviewer's crash)."""
    for i in range(12):
        b.span("verl.rollout.request", 0.1 * i, 1.0 + 0.3 * i, step=1, **{"verl.step": 1, "verl.request.id": f"r{i}"})


def _workers_only(b: TraceBuilder) -> None:
    for step in (1, 2):
        for w in range(2):
            b.span(
                "verl.rollout.worker", 10.0 * step, 10.0 * step + 2 + w, step=step, file=f"worker_{w}.jsonl",
                **{"verl.step": step, "verl.worker.rank": w},
            )  # fmt: skip


def _steps_only(b: TraceBuilder) -> None:
    for step in (1, 2, 3):
        b.span("verl.step", 10.0 * step, 10.0 * step + 5, step=step, **{"verl.step": step})


SHAPES = {"requests-only": _requests_only, "workers-only": _workers_only, "steps-only": _steps_only}
EMPTY = {
    "requests-only": {"worker_cdf", "worker_phases", "event_share", "turn_engine", "turn_counts"},
    "workers-only": {"request_cdf", "worker_cdf", "outliers", "turn_engine", "turn_counts", "aborted"},
    "steps-only": {"request_cdf", "worker_cdf", "worker_phases", "outliers", "event_share", "turn_engine"},
}


@pytest.fixture(params=sorted(SHAPES))
def minimal(request, tmp_path: Path) -> tuple[str, Path]:
    b = TraceBuilder()
    SHAPES[request.param](b)
    b.write(tmp_path / "spool")
    return request.param, tmp_path / "spool"


def test_library(minimal, tmp_path: Path) -> None:
    shape, spool = minimal
    res = analyze(load_spans(spool), tmp_path / "out")
    for name, *_ in FIGURES:
        assert (tmp_path / "out" / f"{name}.png").stat().st_size > 0, name
    empty = {name for name, df in res.frames.items() if df.empty}
    assert EMPTY[shape] <= empty, (shape, empty)
    assert pick_step(res.frames["worker_cdf"]) is None if "worker_cdf" in empty else True
    assert all(f.severity == "info" for f in res.findings), [f.message for f in res.findings]
    assert (tmp_path / "out" / "report.html").stat().st_size > 10_000


def test_cli(minimal, tmp_path: Path) -> None:
    _shape, spool = minimal
    res = CliRunner().invoke(app, ["analyze", str(spool), "--out", str(tmp_path / "out")])
    assert res.exit_code == 0, res.output
    data = json.loads((tmp_path / "out" / "findings.json").read_text())
    assert data["summary"]["spans"] == len(load_spans(spool))
