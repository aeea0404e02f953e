"""Trackers out of the box (issue 51, item 5): ``otel-verl demo --logger mlflow`` logs to mlflow with nothing set and
says where each tracker wrote; in a user's job a tracker that gets no live account (verl did not start it, or it
failed a write) is said once, in a line on stdout."""

from __future__ import annotations

import ast
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from otel_verl.live import names as n
from otel_verl.live.backends import CONSOLE_PREFIX
from tests.clean_shell import shell, user_env

pytest.importorskip("verl", reason="needs the verl extra")
pytest.importorskip("mlflow", reason="needs the dev group (mlflow-skinny)")

STEPS = 3


@pytest.fixture
def said(monkeypatch: pytest.MonkeyPatch) -> None:
    """A fresh "already said" memory (it is per process)."""
    from otel_verl.live import refused

    monkeypatch.setattr(refused, "_said", set())


def test_a_tracker_verl_did_not_start_is_said_once_with_why(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], said: None
) -> None:
    """mlflow 3 refuses a ``file:`` store without ``MLFLOW_ALLOW_FILE_STORE``; verl retries, warns through its own
    logger and goes on without mlflow. Ours: one line, naming the switch, however many ``Tracking`` are built."""
    import verl.utils.tracking as verl_tracking

    import otel_verl
    from otel_verl.export import provider
    from otel_verl.instrumentation import trainer as trainer_seams
    from tests.process_state import reset_tracing

    from .inprocess import StandInTrainer

    monkeypatch.setenv("MLFLOW_TRACKING_URI", (tmp_path / "mlruns").as_uri())
    monkeypatch.delenv("MLFLOW_ALLOW_FILE_STORE", raising=False)
    monkeypatch.setenv("OTEL_VERL_LIVE", "true")
    monkeypatch.setenv("OTEL_VERL_RUN_ID", f"trackers-{time.time_ns()}")
    monkeypatch.setenv("OTEL_VERL_SPOOL", "false")
    monkeypatch.setattr(verl_tracking, "MLFLOW_SLEEP_SECONDS", 0)  # verl's retries, 5 s each
    reset_tracing()
    provider.setup_tracing("trainer")
    otel_verl.instrument()
    trainer_seams.track_trainer(StandInTrainer())
    try:
        for _ in range(2):
            tracking = verl_tracking.Tracking("otel-verl-live", "refused", default_backend=["console", "mlflow"])
            assert "mlflow" not in tracking.logger  # verl gave up on it, as the issue saw
            tracking.finish()
    finally:
        trainer_seams.track_trainer(None)
        otel_verl.uninstrument()
        reset_tracing()
    ours = [line for line in capsys.readouterr().out.splitlines() if line.startswith(CONSOLE_PREFIX)]
    assert len(ours) == 1, ours
    assert ours[0].startswith(CONSOLE_PREFIX + "mlflow gets no live account: verl did not start it")
    assert "MLFLOW_ALLOW_FILE_STORE=true" in ours[0]


def test_a_tracker_that_fails_a_write_is_said_once(capsys: pytest.CaptureFixture[str], said: None) -> None:
    """A backend whose ``log`` raises: one line on stdout, then skipped; the others still get every account."""
    from otel_verl.live import backends
    from otel_verl.live.metrics import LiveStep

    class Refusing:
        def log(self, data: dict, step: int) -> None:
            raise ConnectionError("server gone")

    class Keeping:
        def __init__(self) -> None:
            self.steps: list[int] = []

        def log(self, data: dict, step: int) -> None:
            self.steps.append(step)

    kept, state = Keeping(), {}
    for step in (1, 2, 3):
        result = LiveStep(step, {n.STEP_S: 1.0}, {n.VERDICT: f"step {step}"})
        backends.write({"clearml": Refusing(), "swanlab": kept}, [result], step, state)
    ours = [line for line in capsys.readouterr().out.splitlines() if line.startswith(CONSOLE_PREFIX)]
    assert ours == [
        CONSOLE_PREFIX + "clearml gets no live account: writing to it failed (ConnectionError: server "
        "gone); skipped from now on"
    ]
    assert kept.steps == [1, 2, 3]


@pytest.mark.ray
def test_demo_logs_to_mlflow_out_of_the_box(tmp_path: Path) -> None:
    """``otel-verl demo --logger console --logger mlflow --logger tensorboard`` with no mlflow setting: it says where
    each wrote, and mlflow's own client reads every ``otel_verl/*`` number at its step and each step's verdict, the
    console's line."""
    from mlflow.tracking import MlflowClient

    env = {k: v for k, v in user_env(OTEL_SDK_DISABLED="false").items() if not k.startswith("MLFLOW_")}
    exe = Path(sys.executable).with_name("otel-verl")  # a user's shell: its hints are spelled for it
    cmd = [str(exe), "demo", "--steps", str(STEPS), "--no-report"]
    cmd += ["--logger", "console", "--logger", "mlflow", "--logger", "tensorboard"]
    r = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, f"{r.stdout[-2000:]}\n{r.stderr[-2000:]}"
    uri = re.search(r"^mlflow wrote to (\S+) \(run (\w+)\)$", r.stdout, re.M)
    board = re.search(r"^tensorboard wrote to (.+)$", r.stdout, re.M)
    assert uri is not None and board is not None, r.stdout
    assert uri.group(1) == (tmp_path / "otel-verl-mlruns").as_uri()
    assert any(Path(board.group(1)).glob("events.out.tfevents.*"))
    # the line under each is a command that runs as printed in a user's shell (issue 51: a code fragment, no hint)
    said = _hints(r.stdout)
    read = shell(said["mlflow"], user_env(), cwd=tmp_path)
    assert read.returncode == 0, read.stderr[-2000:]
    assert [step for step, _ in ast.literal_eval(read.stdout.strip())] == list(range(1, STEPS + 1)), read.stdout
    view = shell(f"{said['tensorboard']} --inspect --tag {n.STEP_S}", user_env(), cwd=tmp_path)  # read, then exit
    stats = rf"scalars\n\s+first_step\s+1\n\s+last_step\s+{STEPS}\n"  # the account's step_s at steps 1..STEPS
    assert view.returncode == 0 and re.search(stats, view.stdout + view.stderr), view.stdout + view.stderr
    verdicts = {int(m.group(1)): m.group(0)[len(CONSOLE_PREFIX) :] for m in _console_lines(r.stdout)}
    assert sorted(verdicts) == list(range(1, STEPS + 1)), r.stdout

    os.environ["MLFLOW_ALLOW_FILE_STORE"] = "true"  # for this process's reader; the demo set its own
    try:
        client = MlflowClient(uri.group(1))
        run_id = uri.group(2)
        history = {m.step: m.value for m in client.get_metric_history(run_id, n.STEP)}
        assert history == {s: float(s) for s in range(1, STEPS + 1)}  # each account at the step it describes
        assert sorted(m.step for m in client.get_metric_history(run_id, n.STEP_S)) == list(range(1, STEPS + 1))
        for step, line in verdicts.items():
            local = client.download_artifacts(run_id, f"otel_verl/verdict/step_{step:06d}.txt", str(tmp_path))
            assert Path(local).read_text() == line
    finally:
        os.environ.pop("MLFLOW_ALLOW_FILE_STORE", None)


def _hints(stdout: str) -> dict[str, str]:
    """Tracker → the command printed under its "wrote to" line, its comment cut."""
    found = re.findall(r"^(\w+) wrote to .*\n  (?:read it back|view it): (.+?)(?:   # .*)?$", stdout, re.M)
    return dict(found)


def _console_lines(stdout: str) -> list[re.Match[str]]:
    return list(re.finditer(rf"^{re.escape(CONSOLE_PREFIX)}step (\d+): .*$", stdout, re.M))


def test_the_demos_mlflow_store_reads_back_in_a_fresh_shell_as_its_hint_says(tmp_path: Path) -> None:
    """``mlflow wrote to file:///…`` alone left a user's ``MlflowClient`` in a fresh shell refusing the store (set
    MLFLOW_ALLOW_FILE_STORE=true): the demo set it only for itself. Its hint was then a code fragment and docs/live.md's
    ``python -c …`` found no mlflow in a clean shell (issue 51). The hint under that line is now a command: run as
    printed in a user's shell (the venv off its PATH) it reads the metric back; without the variable mlflow refuses."""
    from otel_verl.demo.trackers import MLRUNS_DIR, how_to_read

    uri = (tmp_path / MLRUNS_DIR).as_uri()
    env = {k: v for k, v in os.environ.items() if not k.startswith("MLFLOW_")}
    write = (
        f"import mlflow; mlflow.set_tracking_uri({uri!r})\n"
        "with mlflow.start_run() as run:\n"
        f"    mlflow.log_metric({n.STEP_S!r}, 1.5, step=2)\n"
        "    mlflow.log_text('step 1: as usual', 'otel_verl/verdict/step_000001.txt')\n"
        "print(run.info.run_id)"
    )
    w = subprocess.run([sys.executable, "-c", write], env={**env, "MLFLOW_ALLOW_FILE_STORE": "true"}, **_TEXT)
    assert w.returncode == 0, w.stderr[-2000:]
    run_id = w.stdout.split()[-1]

    hint = how_to_read("mlflow", f"{uri} (run {run_id})")
    assert hint is not None and how_to_read("mlflow", "sqlite:////tmp/mlruns.db") is None
    assert f"mlflow ui --backend-store-uri {uri}" in hint  # the full mlflow's UI, in the comment
    command = _hints(f"mlflow wrote to {uri} (run {run_id})\n  {hint}\n")["mlflow"]
    as_said = shell(command, user_env())  # where it was printed: the working directory
    assert as_said.returncode == 0 and as_said.stdout.strip() == "[(2, 1.5)]", as_said.stderr[-2000:]
    without = shell(command.replace("MLFLOW_ALLOW_FILE_STORE=true ", ""), user_env())
    assert without.returncode != 0 and "MLFLOW_ALLOW_FILE_STORE" in without.stderr, without.stderr[-2000:]
    # docs/live.md's snippet, with this store's URI and run id, in the same shell (its `python` had no mlflow)
    text = (Path(__file__).resolve().parents[2] / "docs" / "live.md").read_text()
    doc = re.search(r"store back\.\*\*.*?```bash\n(.*?)```", text, re.S)
    assert doc is not None, "docs/live.md: no read-back snippet"
    snippet = doc.group(1).replace("file:///…/otel-verl-mlruns", uri).replace("<run id>", run_id)
    documented = shell(snippet, user_env())
    assert documented.returncode == 0, documented.stderr[-2000:]
    assert documented.stdout.splitlines() == ["[(2, 1.5)]", "step 1: as usual"], documented.stdout
    # ...and nothing else: download_artifacts drew mlflow's tqdm bars on stderr (issue 51, item 19)
    assert "Downloading artifacts" not in documented.stderr and "%|" not in documented.stderr, documented.stderr


_TEXT: dict = {"capture_output": True, "text": True, "timeout": 300}
