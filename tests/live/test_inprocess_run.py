"""One traced training run in this process (tests/live/inprocess.py) logging through verl's real ``Tracking`` to the
real wandb (offline), tensorboard, an mlflow file store, the console and verl's file logger: each step's live
account is read back with each library's own reader, and agrees with ``otel-verl analyze`` of the run's spool.

Six steps; in step 5 the update phase takes 2 s more (a planted slow phase).
"""

from __future__ import annotations

import contextlib
import io
import json
import subprocess
import sys
from pathlib import Path

import pytest

from otel_verl.live import names as n
from otel_verl.live.account import WINDOW_STEPS
from otel_verl.live.backends import CONSOLE_PREFIX

from .checks import assert_adds_up, assert_live_is_the_spools, logged_rows
from .inprocess import Run, train

pytest.importorskip("verl", reason="needs the verl extra")
pytest.importorskip("mlflow", reason="needs the dev group (mlflow-skinny)")

STEPS = 6
SLOW_STEP = 5
LOGGERS = ["console", "wandb", "tensorboard", "mlflow", "file"]


class Tee(io.StringIO):
    """stdout kept for the test and still shown."""

    def write(self, s: str) -> int:
        sys.__stdout__.write(s)
        return super().write(s)


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Run, Path, str]:
    tmp = tmp_path_factory.mktemp("live")
    out = Tee()
    with pytest.MonkeyPatch.context() as mp, contextlib.redirect_stdout(out):
        result = train(tmp, LOGGERS, steps=STEPS, slow_update={SLOW_STEP: 2.0}, monkeypatch=mp)
    return result, tmp, out.getvalue()


def test_console_shows_one_line_per_step(run) -> None:
    """As a user reads the console: one line of ours per step, in step order, each after verl's own line of that
    step (it is computed once the step is logged: it comes at a later log call, or at ``finish``), the slow step
    named with its cause."""
    _, tmp, out = run
    lines = [line for line in out.splitlines() if line.startswith(("step:", CONSOLE_PREFIX))]
    ours = [line for line in lines if line.startswith(CONSOLE_PREFIX)]
    assert [int(line.split("step ")[1].split(":")[0]) for line in ours] == list(range(1, STEPS + 1))
    verl_line = {int(x.split(" ")[0][5:]): i for i, x in enumerate(lines) if x.startswith("step:")}
    rows = logged_rows(tmp)
    for step in range(1, STEPS + 1):
        at = lines.index(ours[step - 1])
        assert verl_line[step] < at
        if rows[step][n.LAG_STEPS] == 0 and step < STEPS:  # came before verl logged anything later
            assert at < verl_line[step + 1]
    slow = ours[SLOW_STEP - 1]
    assert "update_actor" in slow and ("[critical]" in slow or "[warning]" in slow), slow
    assert "no baseline yet (no earlier step to compare with)" in ours[0]
    assert all(len(line) < 400 for line in ours)


def test_file_logger_has_every_step(run) -> None:
    _, tmp, _ = run
    rows = logged_rows(tmp)
    assert sorted(rows) == list(range(1, STEPS + 1))
    slow = rows[SLOW_STEP]
    assert slow[n.CAUSE].startswith("slow phase update_actor")
    assert slow[n.EXCESS + "phase/update_actor_s"] == pytest.approx(2.0, abs=0.3)
    assert slow[n.CAUSE_SEVERITY] >= 2 and slow[n.CAUSE_S] == pytest.approx(2.0, abs=0.3)
    for step, row in rows.items():
        assert_adds_up(step, row)
        assert row[n.BASELINE_STEPS] == min(step, WINDOW_STEPS)
        assert row[n.LATE_SPANS] == 0 and row[n.DROPPED_SPANS] == 0
        assert row[n.SPANS] > 50  # step, phases, worker, requests, turns, events


def test_wandb_offline_read_back(run) -> None:
    """wandb's own reader of its offline log (``wandb leet inspect --json``): every step's values, one step's a
    row, in the row of their step when they came before the next step was logged, plotted against
    ``otel_verl/step`` either way."""
    _, tmp, _ = run
    files = list(tmp.glob("wandb/offline-run-*/run-*.wandb"))
    assert len(files) == 1
    exe = Path(sys.executable).with_name("wandb")
    done = subprocess.run([str(exe), "leet", "inspect", "--json", str(files[0])], capture_output=True, text=True)
    records = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    globbed = [r["metric"] for r in records if r.get("type") == "metric" and r["metric"].get("glob_name")]
    assert globbed == [{"glob_name": "otel_verl/*", "options": {"defined": True, "step_sync": True},
                        "step_metric": n.STEP}]  # fmt: skip
    history = [r["history"] for r in records if r.get("type") == "history"]
    ours = {int(h["item"][n.STEP]): h for h in history if n.STEP in h["item"]}
    file_rows = logged_rows(tmp)
    assert sorted(ours) == list(range(1, STEPS + 1))
    for step, h in ours.items():
        assert h["item"][n.STEP_S] == pytest.approx(file_rows[step][n.STEP_S])
        assert h["item"][n.VERDICT] == file_rows[step][n.VERDICT]
        assert int(h["step"]["num"]) >= step  # its own row, or a later one when it came late
        if int(h["step"]["num"]) == step:
            assert "timing_s/step" in h["item"]  # merged into verl's row of the step
    assert len({int(h["step"]["num"]) for h in ours.values()}) == STEPS  # one step's account a row
    assert "update_actor" in ours[SLOW_STEP]["item"][n.VERDICT]


def test_tensorboard_event_files_read_back(run) -> None:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    _, tmp, _ = run
    acc = EventAccumulator(str(tmp / "tensorboard"), size_guidance={"scalars": 0, "tensors": 0})
    acc.Reload()
    file_rows = logged_rows(tmp)
    scalars = {e.step: e.value for e in acc.Scalars(n.STEP_S)}
    assert sorted(scalars) == list(range(1, STEPS + 1))
    for step, value in scalars.items():
        assert value == pytest.approx(file_rows[step][n.STEP_S], rel=1e-6)
    texts = {e.step: e.tensor_proto.string_val[0].decode() for e in acc.Tensors(n.VERDICT + "/text_summary")}
    assert texts[SLOW_STEP] == file_rows[SLOW_STEP][n.VERDICT]
    assert sorted(texts) == list(range(1, STEPS + 1))


def test_mlflow_file_store_read_back(run, monkeypatch: pytest.MonkeyPatch) -> None:
    import mlflow
    from mlflow.tracking import MlflowClient

    _, tmp, _ = run
    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")
    assert "mlflow" in run[0].tracking.logger  # verl's mlflow backend started (it gives up quietly otherwise)
    client = MlflowClient(tracking_uri=(tmp / "mlruns").as_uri())
    (experiment,) = [e for e in client.search_experiments() if e.name == "otel-verl-live"]
    (mlrun,) = client.search_runs([experiment.experiment_id])
    file_rows = logged_rows(tmp)
    history = {m.step: m.value for m in client.get_metric_history(mlrun.info.run_id, n.STEP_S)}
    assert sorted(history) == list(range(1, STEPS + 1))
    for step, value in history.items():
        assert value == pytest.approx(file_rows[step][n.STEP_S], rel=1e-6)
    mlflow.set_tracking_uri((tmp / "mlruns").as_uri())
    text = mlflow.artifacts.load_text(f"runs:/{mlrun.info.run_id}/otel_verl/verdict/step_{SLOW_STEP:06d}.txt")
    assert text == file_rows[SLOW_STEP][n.VERDICT]


def test_live_numbers_are_the_spools_accounts(run, tmp_path: Path) -> None:
    """Every live row is what the live account makes of the finished spool, one step at a time, and each step's
    own numbers are ``analyze``'s over the same window (docs/live.md, "Live and offline")."""
    result, tmp, _ = run
    assert_live_is_the_spools(logged_rows(tmp), Path(result.spool), STEPS, tmp_path)
