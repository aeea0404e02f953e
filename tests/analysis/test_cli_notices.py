"""Small things a user notices at the command line: a findings file given to analyze is named as one."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from otel_verl.cli import app

runner = CliRunner()


@pytest.mark.parametrize("skip", [False, True])
def test_a_findings_file_is_named_as_one(planted_spool: Path, tmp_path: Path, skip: bool) -> None:
    """`analyze findings.json` called it a pretty-printed document and hinted `jq -c`, which failed again (a
    findings file holds no spans): now one line saying what it is and what to give instead, skip or not."""
    res = runner.invoke(app, ["analyze", str(planted_spool), "--out", str(tmp_path / "o"), "--no-html"])
    assert res.exit_code == 0, res.output
    findings = tmp_path / "o" / "findings.json"
    res = runner.invoke(app, ["analyze", str(findings), "--out", str(tmp_path / "o2")] + ["--skip-bad-lines"] * skip)
    assert res.exit_code == 2, res.output
    lines = [line for line in res.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith(f"error: {findings}: an otel-verl findings file"), res.stderr
    assert "jq" not in lines[0] and "spool" in lines[0]
