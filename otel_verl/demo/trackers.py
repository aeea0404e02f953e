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
        return (run.url or run.dir) if run is not None else None
    return None


def how_to_read(tracker: str, place: str) -> str | None:
    """How a user reads ``tracker``'s store back in a fresh shell, when it needs more than its place: mlflow 3
    refuses a ``file:`` store (the demo's) to any reader without ``MLFLOW_ALLOW_FILE_STORE=true``, which the demo
    set only for itself; mlflow-skinny (this project's) has no UI, so the client is the way, ``mlflow ui`` the way
    with the full mlflow."""
    uri = place.split(" ", 1)[0]
    if tracker != "mlflow" or not uri.startswith("file:"):
        return None
    return (
        f'read it with MLFLOW_ALLOW_FILE_STORE=true set: mlflow.MlflowClient(tracking_uri="{uri}") '
        f"(this project's mlflow-skinny has no UI; with pip install mlflow: "
        f"MLFLOW_ALLOW_FILE_STORE=true mlflow ui --backend-store-uri {uri})"
    )
