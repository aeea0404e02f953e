"""The live account through Ray, in every trainer mode: ``otel-verl demo`` (its default shows the live lines) with
verl's console and file loggers; the spans travel from the AgentLoopWorker, reward and server actors to the
collector actor beside the trainer, and back to verl's ``Tracking``.

Checked as a user sees it (the console lines), in verl's file logger (every step, once, at its own step), and
against ``otel-verl analyze`` of the run's spool over the same window. Four steps of 4 prompts × 2 per mode.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from otel_verl.live import names as n
from otel_verl.live.account import WINDOW_STEPS
from otel_verl.live.backends import CONSOLE_PREFIX
from otel_verl.live.metrics import step_metrics, top_cause

pytestmark = [pytest.mark.ray, pytest.mark.verl]
pytest.importorskip("verl", reason="needs the verl extra")

STEPS = 4
MODES = ("legacy", "v1-sync", "v1-colocate-async", "v1-separate-async")


@pytest.fixture(scope="module", params=MODES)
def demo_run(request, tmp_path_factory: pytest.TempPathFactory) -> tuple[str, Path, str]:
    mode = request.param
    tmp = tmp_path_factory.mktemp(f"live-{mode}")
    exe = Path(sys.executable).with_name("otel-verl")
    size = ["--steps", str(STEPS), "--workers", "2", "--prompts", "4", "--n", "2"]
    cmd = [str(exe), "demo", "--trainer", mode, *size, "--spool", str(tmp / "spool"), "--no-report"]
    env = {**os.environ, "VERL_FILE_LOGGER_PATH": str(tmp / "verl.jsonl")}
    for var in ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_VERL_LIVE"):
        env.pop(var, None)
    done = subprocess.run(
        [*cmd, "--logger", "console", "--logger", "file"], env=env, capture_output=True, text=True, timeout=840
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return mode, tmp, done.stdout


def _rows(tmp: Path) -> dict[int, dict]:
    rows = {}
    for line in (tmp / "verl.jsonl").read_text().splitlines():
        doc = json.loads(line)
        if n.STEP in doc["data"]:
            assert doc["step"] not in rows, f"step {doc['step']} written twice"
            rows[doc["step"]] = doc["data"]
    return rows


def test_every_step_reaches_the_console_and_the_file_logger(demo_run) -> None:
    mode, tmp, out = demo_run
    ours = [" ".join(x.split()) for x in out.splitlines() if x.startswith(CONSOLE_PREFIX)]
    assert [int(x.split("step ")[1].split(":")[0]) for x in ours] == list(range(1, STEPS + 1)), out[-3000:]
    rows = _rows(tmp)
    assert sorted(rows) == list(range(1, STEPS + 1))
    for step, row in rows.items():
        assert row[n.STEP] == step and row[n.SPANS] > 0 and row[n.LATE_SPANS] == 0
        if step == 1:  # no step before it: no usual, no excess, and the line says so
            assert n.USUAL_S not in row and n.EXCESS_S not in row and "no baseline yet" in row[n.VERDICT]
        else:
            assert row[n.STEP_S] == pytest.approx(row[n.USUAL_S] + row[n.EXCESS_S], abs=1e-5)
        assert any(k.startswith(n.PART) for k in row), "the rollout's parts"
    if mode in ("v1-colocate-async", "v1-separate-async"):
        assert all(n.ASYNC + "trainer_idle_ratio" in row for row in rows.values()), "who waited for whom"
        assert all(n.STALENESS_MAX in row for row in rows.values())


def test_live_numbers_agree_with_offline_analyze(demo_run, tmp_path: Path) -> None:
    from otel_verl import analysis
    from otel_verl.analysis.findings import kinds

    _, tmp, _ = demo_run
    (spool,) = list((tmp / "spool").iterdir())
    rows = _rows(tmp)
    for step in range(1, STEPS + 1):
        first = max(1, step - WINDOW_STEPS + 1)
        offline = analysis.analyze(
            spool, tmp_path / f"s{step}", steps=range(first, step + 1), baseline="selected", figures=False,
            html_report=False,
        )  # fmt: skip
        (account,) = [s for s in offline.steps if s["step"] == step]
        cause = top_cause([f.to_json() for f in offline.findings], step, tuple(kinds.CAUSES))
        expected = step_metrics(account, cause)
        assert {k: v for k, v in rows[step].items() if k in expected} == pytest.approx(expected, abs=1e-6), step
