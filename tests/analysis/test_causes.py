"""One finding per cause, ranked by step time lost, on planted runs: the top findings are exactly the planted
causes, each naming its specific event and the seconds it cost its step; clean runs give no warning.

* (the CPU demo with every kind of plant: ``test_demo_plants.py``)
* a seed-format run (12 steps × 8 workers, the seed logger's lines, ``benchmarks/gen_seed_logs.py``) with
  a worker stalling 2 minutes, a slow reward and a slow turn-1 engine call, read by ``analyze`` directly.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

SERIOUS = ("warning", "critical")
SEED_PLANTS = {(4, 3): "stall", (7, 5): "reward", (10, 1): "turn"}


@pytest.fixture(scope="module")
def seed_run(tmp_path_factory: pytest.TempPathFactory):
    from gen_seed_logs import Plant, write_seed_logs

    from otel_verl import analysis

    plants = {(4, 3): Plant(stall=120.0), (7, 5): Plant(reward=40.0), (10, 1): Plant(slow_turn=(1, 45.0))}
    logs = write_seed_logs(tmp_path_factory.mktemp("seed"), steps=12, workers=8, requests=16, seed=3, plants=plants)
    out = tmp_path_factory.mktemp("seed-report")
    return analysis.analyze(logs, out, html_report=False), out


def test_seed_run_three_causes_rank_first(seed_run) -> None:
    """A 120 s first engine call, a 45 s turn-1 engine call and a 40 s reward, each on one request: the seed's
    logs carry each call's tokens, so the engine calls are slow decoding (not long answers), at their turn index."""
    result, out = seed_run
    top = result.findings[:3]
    assert [(f.steps, f.worker) for f in top] == [([4], 3), ([10], 1), ([7], 5)]  # by seconds lost
    stall, turn, reward = top
    assert (stall.kind, stall.details["turn_index"], stall.details["scope"]) == ("slow_decode", 0, "request")
    assert (turn.kind, turn.details["turn_index"]) == ("slow_decode", 1)
    assert reward.kind == "slow_reward" and reward.value == pytest.approx(40.0, abs=0.1)
    for f in top:
        assert f.severity == "critical" and f.seconds > 20 and f.evidence
        assert f.message.startswith(("request", "reward")) and f"in step {f.steps[0]}" in f.message
    # each cause once: nothing else serious in the run
    assert not [f for f in result.findings[3:] if f.severity in SERIOUS]
    heads = result.summary["headlines"]
    assert heads[0].startswith("step 4: rollout took") and "because request" in heads[0]
    assert any(h.startswith("step 7: rollout took") and "reward took 40.0 s" in h for h in heads)
    doc = json.loads((out / "findings.json").read_text())
    first = doc["findings"][0]
    assert {"kind", "severity", "steps", "workers", "seconds", "evidence", "trace_ids", "message"} <= set(first)
    assert first["trace_ids"] and first["seconds"] > 100
    # the account: every step adds up, and the slow steps are explained by named parts
    for step in doc["steps"]:
        total = sum(p["seconds"] for p in step["parts"]) + step["unexplained_s"]
        assert total == pytest.approx(step["excess_s"], abs=1e-3)
        if step["step"] in (4, 7, 10):
            assert 1 - step["unexplained_s"] / step["excess_s"] >= 0.9


def test_seed_run_without_plants_is_quiet(tmp_path) -> None:
    from gen_seed_logs import write_seed_logs

    from otel_verl import analysis

    for seed in (3, 5, 11):
        logs = write_seed_logs(tmp_path / f"clean{seed}", steps=12, workers=8, requests=16, seed=seed)
        result = analysis.analyze(logs, tmp_path / f"out{seed}", html_report=False)
        assert not [f for f in result.findings if f.severity in SERIOUS], [f.message for f in result.findings]
        assert result.summary["verdict"].startswith("No problems found")


@pytest.mark.ray
def test_clean_demo_says_so(demo_clean) -> None:
    _, _, result, out = demo_clean
    assert not [f for f in result.findings if f.severity in SERIOUS]
    assert result.summary["headlines"] == []
    assert result.summary["verdict"].startswith("No problems found")
    assert "No problems found" in (out / "report.html").read_text()
