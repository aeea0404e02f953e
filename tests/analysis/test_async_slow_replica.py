"""A replica slower than its peer, which the trainer waited for, is judged by that wait (issue 50, items 4-5).

``bench_diagnosis --classes async_replica --runs 16 --seed 7``, run 2 (colocate-async, 2 replicas): replica 0
decodes 1.4x slower per token from step 4 on; the trainer waited 10.2 s of a 29 s step for its samples in step 6
(35 %) and 5.1 s in step 4, with a chance of 2e-11 against its norm and its peer. The run's steps stray ±8 s (an
asynchronous step's spread is the rollout's batch-to-batch rhythm), and the step lost nothing against its usual,
so the old judgement held it at cost 0, a note below the floor, and the verdict said "No problems found".
"""

from __future__ import annotations

import json
from pathlib import Path

from benchmarks.bench_diagnosis import plan_classes
from benchmarks.diagnosis.class_scoring import score_class_run
from benchmarks.diagnosis.classes import build_class_run
from benchmarks.diagnosis.shape import FORMATS
from benchmarks.diagnosis.write_async import write_async
from otel_verl import analysis
from otel_verl.analysis.findings.common import kinds as k


def test_a_replica_the_trainer_waited_for_is_a_warning_by_that_wait(tmp_path: Path) -> None:
    spec = plan_classes(16, 7, list(FORMATS), ["async_replica"])[2]
    run, expect = build_class_run(spec.seed, spec.fmt, spec.cls, spec.max_spans)
    write_async(run, tmp_path / "data")
    analysis.analyze(tmp_path / "data", tmp_path / "out", html_report=False, figures=False)
    doc = json.loads((tmp_path / "out" / "findings.json").read_text())
    record = score_class_run(run, expect, doc)
    f = doc["findings"][0]
    assert record["told"] and record["rank"] == 1, [x["message"] for x in doc["findings"][:3]]
    assert (f["kind"], f["details"]["scope"], f["severity"]) == (k.SLOW_DECODE, k.SCOPE_REPLICA, "warning"), f
    judged = f["details"]["judged"]
    assert judged["basis"] == ["norm"] and judged["cost_s"] >= judged["floor_s"], judged
    waited = {s["step"]: s["async"]["trainer_wait_s"] for s in doc["steps"]}
    assert judged["cost_s"] <= max(waited[s] for s in f["steps"]) + 1e-6  # held to what the trainer waited
    assert not doc["summary"]["verdict"].startswith("No problems found"), doc["summary"]["verdict"]
