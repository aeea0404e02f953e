"""missing_worker: a worker killed mid-chunk loses every held span of its step; the analyzer says so."""

from __future__ import annotations

import json
from pathlib import Path

from builder import Plan, TraceBuilder, all_findings, build_run
from typer.testing import CliRunner

from otel_verl.analysis import Finding
from otel_verl.analysis.read import load_spans
from otel_verl.cli import app


def _without(plan: Plan, *gone: tuple[int, int], only: str | None = None) -> TraceBuilder:
    """The planned run minus every span (or only the spans named ``only``) of the given (step, worker)s, as a
    worker killed with its spans still held leaves it (its barrier is lost too: the manager never hears back)."""
    b = build_run(plan)
    b.spans = [
        s
        for s in b.spans
        if not any(s.step == step and s.file == f"worker_{w}.jsonl" for step, w in gone)
        or (only is not None and s.name != only)
    ]
    return b


def _diagnose(tmp_path: Path, b: TraceBuilder) -> tuple[list[Finding], list[Finding]]:
    b.write(tmp_path)
    spans = load_spans(tmp_path)
    found = all_findings(spans)
    return found, [f for f in found if f.kind == "missing_worker"]


def test_worker_missing_from_one_step_is_one_warning(tmp_path: Path) -> None:
    b = _without(Plan(seed=7), (5, 2))
    step5 = next(s for s in b.spans if s.name == "verl.step" and s.step == 5)
    found, missing = _diagnose(tmp_path, b)
    (f,) = missing
    assert (f.step, f.worker, f.severity) == (5, 2, "warning")
    assert f.message == (
        "worker 2 sent no spans for step 5 (it did in 7 other steps): it may have died mid-rollout (OOM, node "
        "loss) while holding its finished requests in memory; its requests are not in this step's figures"
    )
    assert f.evidence == [{"trace_id": step5.trace_id, "span_id": step5.span_id}]
    assert f.details == {"steps_with_worker": 7, "workers_in_step": 3, "workers_in_run": 4}
    assert f.value == 7 and f.baseline == 7
    # the rest of the run stays as quiet as the clean run: the finding is the only warning
    assert [x for x in found if x.severity != "info"] == [f]


def test_last_step_of_a_run_cut_short_is_reported(tmp_path: Path) -> None:
    """The run ends in step 8 with workers 1 and 3 gone: both are reported (it is real), nothing else."""
    _, missing = _diagnose(tmp_path, _without(Plan(seed=7), (8, 1), (8, 3)))
    assert [(f.step, f.worker) for f in missing] == [(8, 1), (8, 3)]
    assert all("(it did in 7 other steps)" in f.message for f in missing)


def test_single_step_run_has_no_expected_workers(tmp_path: Path) -> None:
    """One step: nothing says worker 1 should exist, so nothing is reported."""
    _, missing = _diagnose(tmp_path, _without(Plan(seed=7, steps=1), (1, 1)))
    assert missing == []


def test_orphan_requests_are_incomplete_not_missing(tmp_path: Path) -> None:
    """Request spans without their worker span: the worker is there (``incomplete_worker``), not missing."""
    found, missing = _diagnose(tmp_path, _without(Plan(seed=7), (5, 2), only="verl.rollout.worker"))
    assert missing == []
    assert [(f.step, f.worker) for f in found if f.kind == "incomplete_worker"] == [(5, 2)]


def test_clean_and_planted_runs_have_none(clean_spans, planted_spans) -> None:
    assert not [f for f in all_findings(clean_spans) if f.kind == "missing_worker"]
    assert not [f for f in all_findings(planted_spans) if f.kind == "missing_worker"]


def test_cli_writes_it_and_counts_it(tmp_path: Path) -> None:
    _without(Plan(seed=7), (3, 0)).write(tmp_path / "spool")
    res = CliRunner().invoke(app, ["analyze", str(tmp_path / "spool"), "--out", str(tmp_path / "out"), "--no-html"])
    assert res.exit_code == 0, res.output
    doc = json.loads((tmp_path / "out" / "findings.json").read_text())
    assert [(f["step"], f["worker"]) for f in doc["findings"] if f["kind"] == "missing_worker"] == [(3, 0)]
    assert doc["summary"]["findings_by_kind"]["missing_worker"] == 1


def test_rows_without_a_step_or_rank_are_ignored():
    """A span whose rank attribute was unreadable (fuzzed, retyped) never breaks the finding."""
    from types import SimpleNamespace

    import numpy as np
    import pandas as pd

    from otel_verl.analysis.findings.quality.worker_absent_from_step import find_missing_workers

    def step(n: int, ranks: list[float]) -> SimpleNamespace:
        return SimpleNamespace(
            step=n,
            trace_id="t",
            span_id=str(n),
            workers=pd.DataFrame({"worker": ranks}),
            requests=pd.DataFrame({"worker": [np.nan]}),
        )

    found = find_missing_workers([step(1, [0.0, 1.0]), step(2, [0.0, np.nan]), step(3, [-1.0, 0.0, 1.0])])
    assert [(f.step, f.worker) for f in found] == [(2, 1)]
