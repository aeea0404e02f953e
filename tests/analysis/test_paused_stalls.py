"""Issue 50: a worker's stretch of nothing moving that lies in a rollout pause is the pause, not a stall
(``paused_gaps.unpaused_quiet``), and a call's way to the engine that waited out a replica sleep is the pause too
(``anomalies._paused_share``).

The benchmark's own clean colocate-async run (``--classes async_clean --seed 77001``, run 7), written as verl traces
and read by the real analyzer: step 8's batch went out while the replicas slept through a weight sync (7.6 s), so
its calls waited in ``engine_before`` and nothing moved on the workers. The old analysis told two warnings "worker
0 stalled in step 9 ... nothing else moved on it for 7.4 s" (and, under them, "the way to the engine took 7.4 s").
Nothing was planted: the pause is the weight sync's cost, judged where it happened."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from async_runs import analyzed_async_run

from benchmarks.diagnosis.shape import OTLP_ENGINE
from otel_verl.analysis.findings.common import kinds as k
from otel_verl.analysis.findings.steps.paused_gaps import RESUME_LAG_S, unpaused_quiet


def test_a_clean_colocate_run_tells_no_stall_for_a_replica_sleep(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(os.environ, "OTEL_VERL_ANALYZE_JOBS", "1")
    expect, data = analyzed_async_run("async_clean", 77001931010, OTLP_ENGINE, tmp_path)
    assert expect.variant == "colocate"
    loud = [f"{f['kind']} {f['severity']}: {f['message']}" for f in data["findings"] if f["severity"] != "info"]
    assert not [m for m in loud if m.startswith((k.STALL, k.ENGINE_WAIT))], loud
    # the sleep is still in the account: the rollout paused while the batch waited for the replicas
    assert any(p["value_s"] > 0 for s in data["steps"] for p in s["parts"] if p["kind"] == k.PART_PAUSE)


def test_only_the_unpaused_part_of_a_stretch_is_judged() -> None:
    """A 10 s stretch with a 6 s pause inside it (ending 2 s before the stretch's end) keeps 10 - 6 - 2 (the
    resume's lag) = 2 s; a stretch outside every pause, and any stretch of a run with no pauses, stays whole."""
    s = int(1e9)
    quiet = pd.DataFrame(
        {"start_ns": [0, 20 * s], "end_ns": [10 * s, 25 * s], "seconds": [10.0, 5.0], "in_flight": [4, 3]}
    ).assign(weight=lambda q: q["seconds"] * q["in_flight"])
    out = unpaused_quiet(quiet, (np.array([2 * s]), np.array([8 * s])))
    assert out["seconds"].tolist() == pytest.approx([10.0 - 6.0 - RESUME_LAG_S, 5.0])
    assert out["weight"].tolist() == pytest.approx([4 * (10.0 - 6.0 - RESUME_LAG_S), 15.0])
    none = unpaused_quiet(quiet, (np.array([], dtype=np.int64), np.array([], dtype=np.int64)))
    pd.testing.assert_frame_equal(none, quiet)
