"""Issue 50: in an asynchronous run the norms and the groups' medians are read from the occurrences that did not
wait out a rollout pause (``step_summary._unpaused``), as no anomaly is told on those that did.

The benchmark's own clean colocate-async run (``--classes async_clean --seed 9837``, run 0), written as verl traces
itself and read by the real analyzer: step 2's batch went out while the replicas slept, so its 40 first engine calls
were parked through the pause (9.2 s against a usual 0.7 s). Read into the step's median they moved the whole step
7.8x; the step's other calls, at 1.0x their usual, were then told a warning "all 5 workers decoded at 6.64 ms/token,
1.0x the usual 6.49 ms/token in step 3: +3.7 s". Nothing was planted: no warning is right."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from benchmarks.diagnosis.async_classes import BUILDERS
from benchmarks.diagnosis.shape import OTLP
from benchmarks.diagnosis.write_async import write_async
from otel_verl.analysis import analyze


def test_a_clean_colocate_run_tells_no_step_slow_for_calls_parked_in_a_pause(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(os.environ, "OTEL_VERL_ANALYZE_JOBS", "1")
    run, expect = BUILDERS["async_clean"](9837729511, OTLP)
    assert expect.variant == "colocate"
    root = write_async(run, tmp_path / "data")
    analyze(root, tmp_path / "out", html_report=False, figures=False)
    data = json.loads((tmp_path / "out" / "findings.json").read_text())
    loud = [f"{f['kind']} {f['severity']}: {f['message']}" for f in data["findings"] if f["severity"] != "info"]
    assert loud == []
    # the parked calls are still in the account: step 2's rollout paused while its batch waited for the replicas
    paused = {s["step"]: sum(p["value_s"] for p in s["parts"] if p["kind"] == "pause") for s in data["steps"]}
    assert any(v > 0 for v in paused.values())
