"""The CLI: analyze end to end, one-line errors with exit code 2."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from otel_verl.cli import app

runner = CliRunner()


def test_analyze_cli(planted_spool: Path, tmp_path: Path) -> None:
    res = runner.invoke(
        app, ["analyze", str(planted_spool), "--out", str(tmp_path), "--no-html", "--set", "straggler_min_s=5"]
    )
    assert res.exit_code == 0, res.output
    kinds = {f["kind"] for f in json.loads((tmp_path / "findings.json").read_text())["findings"]}
    assert {"slow_step", "straggler_worker", "idle_gap", "slow_event", "turn_anomaly", "aborted_waste"} <= kinds


def test_bad_line_is_one_line_exit_2(tmp_path: Path) -> None:
    (tmp_path / "run" / "step_1").mkdir(parents=True)
    (tmp_path / "run" / "step_1" / "worker_0.jsonl").write_text("garbage\n")
    res = runner.invoke(app, ["analyze", str(tmp_path), "--out", str(tmp_path / "o")])
    assert res.exit_code == 2
    assert "worker_0.jsonl:1:" in res.output and "Traceback" not in res.output
    res = runner.invoke(app, ["analyze", str(tmp_path), "--out", str(tmp_path / "o"), "--skip-bad-lines"])
    assert res.exit_code == 2 and "no spans found" in res.output


def test_bad_threshold_and_missing_source(tmp_path: Path) -> None:
    res = runner.invoke(app, ["analyze", str(tmp_path / "nope"), "--out", str(tmp_path)])
    assert res.exit_code == 2 and "no such file" in res.output
