"""A tracker that will not get the live account, said once, in a line the user sees.

Two ways a tracker misses it: verl's ``Tracking`` did not start it (mlflow: verl retries its store for 10 s, warns
through its own logger, which a job's log level often hides, and goes on without it), or it raised when the account
was written to it (:mod:`.backends` then skips it). Either is printed on stdout, with the live account's prefix
(``otel_verl | ``, the console lines' own, which the demo's quiet mode keeps and a Ray job's driver shows), once per
tracker and process; the reason names what to change where we can tell (mlflow's store).
"""

from __future__ import annotations

import importlib.util
import logging
import os
import threading

logger = logging.getLogger(__name__)

PREFIX = "otel_verl | "
"""``backends.CONSOLE_PREFIX`` (not imported: backends imports this module)."""
VERL_MLFLOW_DEFAULT = "sqlite:////tmp/mlruns.db"
"""verl's mlflow store when ``MLFLOW_TRACKING_URI`` is unset (verl/utils/tracking.py)."""

_said: set[str] = set()
_lock = threading.Lock()


def say_once(tracker: str, why: str) -> None:
    """Print ``tracker``'s line unless this process already did."""
    with _lock:
        if tracker in _said:
            return
        _said.add(tracker)
    print(f"{PREFIX}{tracker} gets no live account: {why}", flush=True)
    logger.debug("otel_verl: %s refused the live account: %s", tracker, why)


def not_started(asked: object, started: dict[str, object]) -> None:
    """Say each backend ``asked`` of verl's ``Tracking`` that it did not start (``started``: its ``logger``)."""
    names = [asked] if isinstance(asked, str) else list(asked or [])
    for name in names:
        if isinstance(name, str) and name not in started and name != "tracking":
            say_once(name, f"verl did not start it{_mlflow_hint() if name == 'mlflow' else ''}")


def _mlflow_hint() -> str:
    """Why verl's mlflow backend gave up, where it can be told from the environment."""
    uri = os.environ.get("MLFLOW_TRACKING_URI") or VERL_MLFLOW_DEFAULT
    if uri.startswith("sqlite:") and importlib.util.find_spec("sqlalchemy") is None:
        return (
            f" (its store {uri} needs SQLAlchemy: pip install sqlalchemy alembic, or set MLFLOW_TRACKING_URI to a "
            "server, or to a file: store with MLFLOW_ALLOW_FILE_STORE=true)"
        )
    file_store = uri.startswith("file:") or "://" not in uri  # a plain path is a file store too
    if file_store and os.environ.get("MLFLOW_ALLOW_FILE_STORE", "").lower() != "true":
        return f" (mlflow refuses the file store {uri} unless MLFLOW_ALLOW_FILE_STORE=true)"
    return f" (its store {uri} refused it; verl's warning says why)"
