"""A short training run in this process, as verl's legacy trainer runs it: verl's ``marked_timer`` phases around verl's
real ``AgentLoopWorker`` (driven as tests/instrumentation/harness.py drives it, against the demo's simulated
engine), and verl's real ``Tracking`` logging each step's metrics to the backends asked for.

No Ray here: the live account's collector runs in the process (``sink.LocalSink``), the way it does for a trainer
without Ray; the Ray path is the demo's, in every trainer mode (tests/backends/test_trainer_modes.py).
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import otel_verl
from otel_verl.export import flush, provider
from otel_verl.instrumentation import trainer as trainer_seams
from otel_verl.live import collector
from tests.process_state import reset_tracing

from ..instrumentation.harness import build_worker, run_chunk

UPDATE_S = 0.3
"""The stand-in update phase's usual seconds."""


class StandInTrainer:
    """What the timer wrapper reads of verl's trainer."""

    trainer_mode = "legacy"

    def __init__(self) -> None:
        self.global_steps = 0


@dataclass
class Run:
    tracking: Any
    spool: Path
    run_id: str
    printed: list[str] = field(default_factory=list)


def train(
    tmp: Path,
    loggers: list[str],
    steps: int = 6,
    slow_update: dict[int, float] | None = None,
    monkeypatch: Any = None,
) -> Run:
    """``steps`` traced steps with ``loggers`` (verl's backend names); ``slow_update``: step → extra seconds of the
    update phase (a planted slow phase). The spool is on, so ``otel-verl analyze`` can read the same run."""
    from verl.utils.profiler import marked_timer
    from verl.utils.tracking import Tracking

    run_id = f"live-test-{time.time_ns()}"
    env = {
        "OTEL_VERL_RUN_ID": run_id,
        "OTEL_VERL_SPOOL": "true",
        "OTEL_VERL_SPOOL_DIR": str(tmp / "spool"),
        "OTEL_VERL_DETAIL": "full",
        "TENSORBOARD_DIR": str(tmp / "tensorboard"),
        "MLFLOW_TRACKING_URI": (tmp / "mlruns").as_uri(),
        "MLFLOW_ALLOW_FILE_STORE": "true",  # mlflow 3 keeps its file store behind this switch
        "VERL_FILE_LOGGER_PATH": str(tmp / "verl.jsonl"),
        "WANDB_MODE": "offline",
        "WANDB_DIR": str(tmp),
        "WANDB_SILENT": "true",
    }
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    for var in ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_VERL_LIVE"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setattr(collector, "SETTLE_S", 0.3)
    reset_tracing()
    provider.setup_tracing("trainer")
    otel_verl.instrument()
    worker, _, opts = build_worker()
    stand_in = StandInTrainer()
    trainer_seams.track_trainer(stand_in)
    tracking = Tracking(project_name="otel-verl-live", experiment_name=run_id, default_backend=loggers)
    try:
        for step in range(1, steps + 1):
            stand_in.global_steps = step
            timing: dict[str, float] = {}
            with marked_timer("step", timing):
                with marked_timer("gen", timing):
                    run_chunk(worker, opts, step)
                flush.flush()  # the chunk's held spans out now, as the hold's timer does a second later
                with marked_timer("update_actor", timing):
                    time.sleep(UPDATE_S + (slow_update or {}).get(step, 0.0))
            tracking.log(data={"timing_s/step": timing["step"]}, step=step)
            time.sleep(0.5)  # verl's own metrics and checkpoint work between steps
        flush.flush()
        tracking.finish()
    finally:
        trainer_seams.track_trainer(None)
        otel_verl.uninstrument()
        reset_tracing()
    return Run(tracking, tmp / "spool" / run_id, run_id)


def spool_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k.startswith("OTEL_")}
