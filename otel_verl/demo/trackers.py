"""Where the demo's trackers (``--logger``) write, set up so each works with what is installed, and said at the end.

verl's mlflow backend defaults to ``sqlite:////tmp/mlruns.db``, which needs SQLAlchemy (mlflow-skinny, this
project's mlflow, has none); mlflow 3 refuses a ``file:`` store unless ``MLFLOW_ALLOW_FILE_STORE=true``. verl then
retries for 10 s and goes on without mlflow, its warning hidden by the demo's quiet mode. So when the user has not
chosen a store (``MLFLOW_TRACKING_URI``), the demo uses a file store in ``./otel-verl-mlruns`` (beside
``./otel-verl-spool`` and ``./otel-verl-report``), which needs nothing more, and prints it with the other trackers'
places (:func:`where`), with how to read it back from another shell (:func:`how_to_read`: the reader needs
``MLFLOW_ALLOW_FILE_STORE=true`` too, and mlflow-skinny has no ``mlflow ui``). A user's own job keeps verl's default;
a tracker verl could not start is said there by :mod:`otel_verl.live.refused`.
"""

from __future__ import annotations

import importlib.util
import os
import shlex
from pathlib import Path
from typing import Any

MLRUNS_DIR = "otel-verl-mlruns"
"""The demo's mlflow file store, in the working directory (``MLFLOW_TRACKING_URI`` overrides it)."""


def check(loggers: tuple[str, ...]) -> None:
    """A tracker the demo cannot start, as one ``ValueError`` naming it (verl would fail on its import)."""
    if "mlflow" in loggers and importlib.util.find_spec("mlflow") is None:
        raise ValueError("--logger mlflow needs mlflow: pip install mlflow-skinny")


def prepare(loggers: tuple[str, ...]) -> None:
    """The environment verl's ``Tracking`` reads, so that every tracker in ``loggers`` starts (mlflow's store)."""
    if "mlflow" in loggers and not os.environ.get("MLFLOW_TRACKING_URI"):
        os.environ["MLFLOW_TRACKING_URI"] = Path(MLRUNS_DIR).resolve().as_uri()
        os.environ["MLFLOW_ALLOW_FILE_STORE"] = "true"


def where(tracking: Any) -> dict[str, str]:
    """Backend name → where verl's ``Tracking`` wrote it (a URI, a directory, a file), for those that say."""
    out: dict[str, str] = {}
    for name, backend in (getattr(tracking, "logger", None) or {}).items():
        try:
            place = _place(name, backend)
        except Exception:  # a place unknown is not worth a failed demo
            place = None
        if place:
            out[name] = place
    return out


def _place(name: str, backend: Any) -> str | None:
    if name == "mlflow":
        import mlflow

        run = mlflow.active_run()
        return mlflow.get_tracking_uri() + (f" (run {run.info.run_id})" if run is not None else "")
    if name == "tensorboard":
        return str(Path(backend.writer.log_dir).resolve())
    if name == "file":
        return str(Path(backend.filepath).resolve())
    if name == "wandb":
        run = backend.run
        if run is None:
            return None
        # offline (no URL): the run's own folder, wandb/offline-run-*, which holds its .wandb log; run.dir is its
        # files/ subfolder (config, console output), where wandb's readers find no run (issue 51)
        return run.url or str(Path(getattr(run.settings, "sync_dir", None) or Path(run.dir).parent).resolve())
    return None


def how_to_read(tracker: str, place: str) -> str | None:
    """How a user reads ``tracker``'s store back in a fresh shell, as a command that runs as printed (issue 51: the
    hint was a code fragment): mlflow 3 refuses a ``file:`` store (the demo's) to any reader without
    ``MLFLOW_ALLOW_FILE_STORE=true``, which the demo set only for itself, and mlflow-skinny (this project's) has no
    UI, so the command is this environment's python with ``MlflowClient`` (``mlflow ui`` needs the full mlflow);
    tensorboard's is its own server on the log directory; an offline wandb run's is wandb's own reader of its log
    (``wandb leet inspect``, no network), and ``wandb sync`` uploads it. Scripts are spelled as
    :mod:`otel_verl.invocation` says."""
    from otel_verl.invocation import script_command
    from otel_verl.live import names

    if tracker == "tensorboard":
        return f"view it: {script_command('tensorboard')} --logdir {shlex.quote(place)}   # then open http://localhost:6006"
    if tracker == "wandb" and not place.startswith(("http://", "https://")):  # offline: a folder
        wandb = script_command("wandb")
        return (
            f"read it back: {wandb} leet inspect --summary {shlex.quote(place)}   "
            f"# upload it: {wandb} sync {shlex.quote(place)}"
        )
    uri, _, rest = place.partition(" ")
    run_id = rest.removeprefix("(run ").removesuffix(")")
    if tracker != "mlflow" or not uri.startswith("file:") or not run_id:
        return None
    read = (
        f'from mlflow import MlflowClient; c = MlflowClient(tracking_uri="{uri}"); '
        f'print([(m.step, m.value) for m in c.get_metric_history("{run_id}", "{names.STEP_S}")])'
    )
    return (
        f"read it back: MLFLOW_ALLOW_FILE_STORE=true {script_command('python')} -c {shlex.quote(read)}"
        f"   # mlflow-skinny has no UI; with pip install mlflow: "
        f"MLFLOW_ALLOW_FILE_STORE=true mlflow ui --backend-store-uri {uri}"
    )
