"""The per-step table (findings.json ``steps[].severity``/``top_cause``, the CLI's and report.html's table): each
step's worst cause and its first, from the final findings; information never counts."""

from __future__ import annotations

import json
import re
from pathlib import Path

from accounts import new_findings, step_accounts
from typer.testing import CliRunner

from otel_verl.analysis.report import presenting
from otel_verl.analysis.report.step_rows import add_step_rows, cause_words, table_rows
from otel_verl.cli import app


def test_severity_and_top_cause_of_each_step() -> None:
    rows = {a["step"]: a for a in add_step_rows(step_accounts(), new_findings())}
    assert rows[7]["severity"] == "critical" and rows[7]["top_cause"]["kind"] == "slow_reward"
    assert rows[7]["top_cause"]["seconds"] == 24.9 and rows[7]["top_cause"]["message"].startswith("slow reward")
    assert rows[9]["severity"] == "warning" and rows[9]["top_cause"]["kind"] == "slow_phase"
    # the long tail names steps 1-6, 8, 10-12, but it is information, not a cause
    assert rows[1]["severity"] == "ok" and rows[1]["top_cause"] is None
    assert cause_words(rows[7]["top_cause"]) == "slow reward (cost 24.9 s)" and cause_words(None) == ""


def test_a_recurring_cause_gives_each_step_its_own_seconds() -> None:
    recurring = {"kind": "slow_decode", "severity": "warning", "steps": [3, 4], "seconds": 9.0, "message": "m",
                 "details": {"per_step": {"3": 4.0, "4": 5.0}}}  # fmt: skip
    info_first = {"kind": "long_tail", "severity": "info", "steps": [3], "seconds": 0.0, "message": "tail"}
    rows = add_step_rows(step_accounts(4), [info_first, recurring])
    assert [r["top_cause"]["seconds"] if r["top_cause"] else None for r in rows] == [None, None, 4.0, 5.0]


def test_past_the_limit_the_worst_steps_in_step_order() -> None:
    rows = add_step_rows(step_accounts(), new_findings())
    shown, left_out = table_rows(rows, 2)
    assert [r["step"] for r in shown] == [7, 9] and left_out == 10
    assert table_rows(rows, None) == (rows, 0)


def test_the_cli_prints_the_steps_as_findings_json_has_them(planted_spool: Path, tmp_path: Path) -> None:
    res = CliRunner().invoke(app, ["analyze", str(planted_spool), "--out", str(tmp_path), "--no-html"],
                             env={"COLUMNS": "120"})  # fmt: skip
    assert res.exit_code == 0, res.output
    steps = json.loads((tmp_path / "findings.json").read_text())["steps"]
    assert {"severity", "top_cause"} <= set(steps[0])
    lines = res.stdout.splitlines()
    head = next(i for i, line in enumerate(lines) if re.search(r"step .* took .* usual .* excess", line))
    assert head < next(i for i, line in enumerate(lines) if "cause" in line and "severity" in line and i > head)
    for a in steps:
        row = next(line for line in lines[head:] if re.match(rf"^\W+{a['step']} \W", line))
        cells = [c.strip() for c in re.split(r"[│┃|]", row) if c.strip()]
        assert cells[:5] == [str(a["step"]), presenting.seconds_words(a["duration_s"]),
                             presenting.seconds_words(a["baseline_s"]), presenting.signed_seconds(a["excess_s"]),
                             a["severity"]]  # fmt: skip
        if a["top_cause"]:
            assert cells[5].startswith(a["top_cause"]["kind"].replace("_", " "))


def test_a_note_marks_no_step_and_a_stall_is_called_a_stall() -> None:
    """Issue 51: a clean run ("No problems found") marked a step faster than usual ``info`` with top cause "slow
    preprocess (0.08 s)"; and the stall of the README's demo was "slow decode (19.7 s)" in the table beside "worker
    0 stalled …" in the causes (its kind is the part that moved, its message and name the stall)."""
    note = {"kind": "slow_preprocess", "severity": "info", "steps": [2], "seconds": 0.08, "message": "preprocessing"}
    stall = {"kind": "slow_decode", "severity": "critical", "steps": [3], "seconds": 19.7,
             "message": "worker 0 stalled in step 3: nothing else moved on it for 19.4 s ...; it cost the step 19.7 s",
             "details": {"stalled_s": 19.4, "part": "decode", "scope": "sample"}}  # fmt: skip
    rows = {a["step"]: a for a in add_step_rows(step_accounts(4), [stall, note])}
    assert rows[2]["severity"] == "ok" and rows[2]["top_cause"] is None
    assert rows[3]["top_cause"]["kind"] == "slow_decode" and rows[3]["top_cause"]["name"] == "stall"
    assert cause_words(rows[3]["top_cause"]) == "stall (cost 19.7 s)"


def test_a_run_with_no_problem_marks_no_step(clean_spool: Path, tmp_path: Path) -> None:
    from otel_verl.analysis import analyze

    result = analyze(clean_spool, tmp_path, figures=False, html_report=False)
    assert result.summary["verdict"].startswith("No problems found"), result.summary["verdict"]
    assert {a["severity"] for a in result.steps} == {"ok"} and not [a for a in result.steps if a["top_cause"]]
