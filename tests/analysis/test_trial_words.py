"""What a cold new-user trial of ``otel-verl analyze`` found (issue 51): a step past the run's end is a one-line
error, the steps table's median and the evidence name the steps judged against (once), a ratio reads true from the
figures printed beside it, a slow phase is named without "phase in phase", the severity ``info`` is one word
everywhere, and a Jaeger source links its own trace pages."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from otel_verl.analysis.findings.common import kinds as k
from otel_verl.analysis.findings.common.record import Finding
from otel_verl.analysis.findings.verdict import cause_in_a_line, ratio_words
from otel_verl.analysis.report.presenting import seconds_words
from otel_verl.cli import app
from otel_verl.cli.analyze import jaeger_trace_url
from otel_verl.cli.common import SourceOptions

runner = CliRunner()


@pytest.mark.parametrize(("steps", "words"), [("9", "in step 9"), ("9:", "in steps from 9 on")])
def test_steps_past_the_run_are_a_one_line_error(planted_spool: Path, tmp_path: Path, steps: str, words: str) -> None:
    """The planted run has 8 steps: ``--steps 9`` crashed in the figures with ``KeyError: 'step'``."""
    res = runner.invoke(app, ["analyze", str(planted_spool), "--out", str(tmp_path), "--steps", steps, "--no-html"])
    assert res.exit_code == 2, res.output
    assert f"no spans found {words}" in res.output and "Traceback" not in res.output


def test_one_reported_step_is_told_against_the_run_it_was_judged_by(planted_spool: Path, tmp_path: Path) -> None:
    """``--steps 3`` (the stalled step): the caption's median is the run's 8 steps', not step 3's own; the evidence
    names the baseline once."""
    whole = runner.invoke(app, ["analyze", str(planted_spool), "--out", str(tmp_path / "all"), "--no-html"])
    assert whole.exit_code == 0, whole.output
    took = [s["duration_s"] for s in json.loads((tmp_path / "all" / "findings.json").read_text())["steps"]]
    res = runner.invoke(app, ["analyze", str(planted_spool), "--out", str(tmp_path / "one"), "--steps", "3"])
    assert res.exit_code == 0, res.output
    summary = json.loads((tmp_path / "one" / "findings.json").read_text())["summary"]
    assert summary["median_step_s"] == pytest.approx(float(np.median(took)), abs=1e-3)
    page = (tmp_path / "one" / "report.html").read_text()
    assert f"the median step took {seconds_words(float(np.median(took)))}" in page
    assert "1 step reported, judged against the run's 8 steps" in summary["verdict"], summary["verdict"]
    assert summary["verdict"].count("8 steps") == 1, summary["verdict"]


def test_a_ratio_reads_true_from_the_figures_beside_it(planted_spool: Path, tmp_path: Path) -> None:
    """Live "14.1× the other step's 1.5 s", summary "13.7× its parts' usual 1.5 s": the usual carries the digits
    the ratio needs."""
    assert ratio_words(20.8, 1.48) == ("14.1", "1.48 s") and ratio_words(20.8, 1.52) == ("13.7", "1.52 s")
    assert ratio_words(20.8, 1.5) == ("13.9", "1.5 s")  # enough as it is: no digit added
    res = runner.invoke(app, ["analyze", str(planted_spool), "--out", str(tmp_path), "--no-html"])
    lines = json.loads((tmp_path / "findings.json").read_text())["summary"]["headlines"]
    told = [re.search(r"rollout took ([\d.]+) s, ([\d.]+)× [^;]*? ([\d.]+) s;", line) for line in lines]
    assert any(told), (res.output, lines)
    for m in filter(None, told):
        assert f"{float(m[1]) / float(m[3]):.1f}" == m[2], m[0]


def test_a_slow_phase_is_named_once() -> None:
    f = Finding(
        k.SLOW_PHASE, "warning", "update_actor took 12 s", step=2, seconds=8.0, details={"phase": "update_actor"}
    )
    assert cause_in_a_line(f, 2) == "slow phase update_actor (cost 8.0 s)"


def test_info_is_one_word_in_the_terminal(planted_spool: Path, tmp_path: Path) -> None:
    """The CLI counted "2 notes more in the files" that findings.json and report.html label ``info``."""
    res = runner.invoke(app, ["analyze", str(planted_spool), "--out", str(tmp_path), "--no-html"])
    infos = [f for f in json.loads((tmp_path / "findings.json").read_text())["findings"] if f["severity"] == "info"]
    assert infos and f"{len(infos)} info more in findings.json" in res.output, res.output[-600:]
    assert not re.search(r"\bnotes?\b", res.output), res.output[-600:]


def test_a_jaeger_source_links_its_own_trace_pages() -> None:
    jaeger = SourceOptions("http://127.0.0.1:16686/api/v3/traces?x=1", source_type="jaeger")
    assert jaeger_trace_url(jaeger) == "http://127.0.0.1:16686/trace/{trace_id}"
    assert jaeger_trace_url(SourceOptions("http://127.0.0.1:3200", source_type="tempo")) is None
    assert jaeger_trace_url(SourceOptions("./traces")) is None
