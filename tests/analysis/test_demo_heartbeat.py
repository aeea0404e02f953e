"""The demo in a pipe says what it waits for (issue 51, item 2): ~5 minutes passed with no line between "running 3
traced steps …" and "step 1/3 done" (most of it verl's validation before training), and its count line left ~20 s
out of its figure.

``otel-verl demo`` runs for real through click, its output a pipe (no terminal, so no spinner); verl's run is a
stand-in that takes its time (the real one takes minutes: tests/analysis/test_demo_output.py runs it), and the
heartbeat comes every 0.3 s instead of 30.
"""

from __future__ import annotations

import io
import re
import time

import pytest
from rich.console import Console
from typer.testing import CliRunner

from otel_verl.cli import app
from otel_verl.cli.heartbeat import Heartbeat


def test_in_a_pipe_the_wait_for_step_1_names_verls_validation(monkeypatch: pytest.MonkeyPatch) -> None:
    import otel_verl.demo.runner as runner_mod
    from otel_verl.demo.options import DemoResult

    def slow_run(opts):
        time.sleep(1.0)  # Ray, verl and its validation
        opts.on_step(1, 0.2)
        time.sleep(1.0)  # step 2
        opts.on_step(2, 1.0)
        return DemoResult("run1", None, 2, 64, 2.0, [0.2, 1.0], 10, [])

    monkeypatch.setattr(runner_mod, "run_demo", slow_run)
    monkeypatch.setenv("OTEL_VERL_DEMO_HEARTBEAT_S", "0.3")
    monkeypatch.setenv("OTEL_SDK_DISABLED", "true")
    res = CliRunner().invoke(app, ["demo", "--steps", "2", "--no-report"])
    assert res.exit_code == 0, res.output
    lines = res.output.splitlines()
    done1 = next(i for i, x in enumerate(lines) if x.strip().startswith("step 1/2 done"))
    start = next(i for i, x in enumerate(lines) if "the first takes the longest" in x)  # the header may wrap (CI)
    before, after = lines[start + 1 : done1], lines[done1 + 1 :]
    assert before and all(
        x.startswith("  still waiting for step 1: Ray and verl start, then verl's validation before training")
        for x in before
    ), lines
    assert any(x.startswith("  still running step 2 of 2 (") for x in after), lines
    count = next(x for x in lines if " steps in " in x)
    took = float(re.search(r" steps in ([\d.]+) s \(the whole run: start-up, verl validation", count).group(1))
    assert took >= 2.0, count  # the whole wait, not the stand-in's own 2.0 s less its start


def test_no_line_on_a_terminal_and_none_after_the_wait() -> None:
    said = io.StringIO()
    with Heartbeat(Console(file=said, force_terminal=True), "waiting", every=0.1):
        time.sleep(0.35)
    assert said.getvalue() == ""  # the spinner says it there
    piped = io.StringIO()
    with Heartbeat(Console(file=piped, width=200), "waiting", every=0.1) as beat:
        time.sleep(0.35)
        beat.doing("running step 2 of 3")
        time.sleep(0.25)
    got = piped.getvalue()
    time.sleep(0.3)
    assert piped.getvalue() == got, "a line after the wait ended"
    assert got.startswith("  still waiting (0 s)\n") and "  still running step 2 of 3 (0 s)\n" in got, got
