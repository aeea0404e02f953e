"""``OTEL_VERL_MLFLOW_TRACES=true``: every process's spans also go to the run's mlflow experiment, over OTLP.

mlflow >= 3.6 takes OpenTelemetry traces at ``<tracking server>/v1/traces`` (OTLP/HTTP), into the experiment its
``x-mlflow-experiment-id`` header names (and the run ``x-mlflow-run-id`` names). The experiment is the one verl's
mlflow logger, and so the live account, writes to: verl starts that run in the trainer's process only
(``Tracking.__init__``: experiment ``trainer.project_name``, or the run ``MLFLOW_RUN_ID`` names). So:

- the trainer's process, once verl started its mlflow run, tags it ``otel_verl.run_id = <run>`` (:func:`attach_run`)
  and sends there at once;
- every other process (AgentLoopWorkers, reward, servers) finds that run by its tag (mlflow's REST search, at most
  once per :data:`LOOK_EVERY_S` until found) and holds its spans until then (at most :data:`HELD_MAX` spans;
  beyond that, and any left at exit when no run was found, are dropped and said once).

The spans go to ``MLFLOW_TRACKING_URI``, which must be a server (``http(s)://``): a ``file:`` or ``sqlite:`` store
has no OTLP endpoint, said once, and nothing is sent. Exporting runs on the batch processor's thread, never in
verl's. What mlflow keeps of the spans: docs/mlflow.md.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Sequence
from typing import Any

from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

logger = logging.getLogger(__name__)

ENV = "OTEL_VERL_MLFLOW_TRACES"
RUN_TAG = "otel_verl.run_id"
"""The tag on verl's mlflow run by which every process of the job finds it."""
EXPERIMENT_HEADER = "x-mlflow-experiment-id"
RUN_HEADER = "x-mlflow-run-id"
TRACES_PATH = "/v1/traces"
LOOK_EVERY_S = 2.0
"""How often a process that has not found the run yet asks mlflow again."""
HELD_MAX = 65536
"""Spans a process holds while it has not found the run (bounded memory; the rest are dropped and counted)."""
HTTP_TIMEOUT_S = 5.0
"""The run lookup's HTTP timeout."""
SEND_TIMEOUT_S = 30.0
"""An OTLP request's timeout: a loaded mlflow server on SQLite is slow to take a full batch (docs/mlflow.md); the
exporter's default 10 s made it send again a batch the server had kept."""

_target: tuple[str, str] | None = None
"""(experiment id, mlflow run id) set in the trainer's process by :func:`attach_run`."""


def tracking_server() -> str | None:
    """``MLFLOW_TRACKING_URI`` when it is an http(s) server, else None."""
    uri = (os.environ.get("MLFLOW_TRACKING_URI") or "").strip().rstrip("/")
    return uri if uri.startswith(("http://", "https://")) else None


def wanted() -> bool:
    """The setting is on (a bad value is logged and read as off)."""
    from otel_verl.config import _env_bool

    return bool(_env_bool(ENV, False))


def exporter(run_id: str) -> MlflowTraceExporter | None:
    """This process's exporter to mlflow, or None (with one warning) when the store is not a server."""
    server = tracking_server()
    if server is None:
        uri = os.environ.get("MLFLOW_TRACKING_URI") or "verl's default sqlite:////tmp/mlruns.db"
        logger.warning(
            "otel_verl: %s=true but MLFLOW_TRACKING_URI (%s) is not an mlflow server (http(s)://): "
            "its traces go nowhere; run `mlflow server` and point MLFLOW_TRACKING_URI at it",
            ENV,
            uri,
        )
        return None
    return MlflowTraceExporter(server, run_id)


def attach_run(run_id: str) -> None:
    """In the trainer's process, once verl started its mlflow run: tag it with ``run_id`` and send there."""
    global _target
    import mlflow

    run = mlflow.active_run()
    if run is None:
        return
    mlflow.set_tag(RUN_TAG, run_id)
    _target = (run.info.experiment_id, run.info.run_id)


def _auth() -> dict[str, str]:
    """mlflow's own credentials variables, as its client sends them."""
    token = os.environ.get("MLFLOW_TRACKING_TOKEN")
    if token:
        return {"Authorization": f"Bearer {token}"}
    user, password = os.environ.get("MLFLOW_TRACKING_USERNAME"), os.environ.get("MLFLOW_TRACKING_PASSWORD")
    if user and password:
        import base64

        return {"Authorization": "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()}
    return {}


def find_run(server: str, run_id: str) -> tuple[str, str] | None:
    """(experiment id, mlflow run id) of the run tagged ``otel_verl.run_id = run_id``, by mlflow's REST API."""
    import requests

    headers = _auth()
    experiments = requests.post(
        f"{server}/api/2.0/mlflow/experiments/search",
        json={"max_results": 1000, "order_by": ["last_update_time DESC"]},
        headers=headers,
        timeout=HTTP_TIMEOUT_S,
    )
    experiments.raise_for_status()
    ids = [e["experiment_id"] for e in experiments.json().get("experiments", [])]
    if not ids:
        return None
    runs = requests.post(
        f"{server}/api/2.0/mlflow/runs/search",
        json={"experiment_ids": ids, "filter": f"tags.`{RUN_TAG}` = '{run_id}'", "max_results": 1},
        headers=headers,
        timeout=HTTP_TIMEOUT_S,
    )
    runs.raise_for_status()
    found = runs.json().get("runs") or []
    if not found:
        return None
    info = found[0]["info"]
    return info["experiment_id"], info["run_id"]


SEND_BATCH = 2048
"""Spans per OTLP request (the batch processor's own batch size): held spans go in requests of this size, since
mlflow takes or rejects a request whole."""


def _send(inner: SpanExporter, spans: Sequence[Any]) -> SpanExportResult:
    result = SpanExportResult.SUCCESS
    for start in range(0, len(spans), SEND_BATCH):
        if inner.export(spans[start : start + SEND_BATCH]) is not SpanExportResult.SUCCESS:
            result = SpanExportResult.FAILURE
    return result


class MlflowTraceExporter(SpanExporter):
    """OTLP/HTTP to the mlflow server, into the experiment and run of verl's mlflow run (found as above)."""

    def __init__(self, server: str, run_id: str) -> None:
        self.server, self.run_id = server, run_id
        self._inner: SpanExporter | None = None
        self._held: list[ReadableSpan] = []
        self._dropped = 0
        self._next_look = 0.0
        self._lock = threading.Lock()

    def _resolved(self) -> SpanExporter | None:
        if self._inner is not None:
            return self._inner
        target = _target
        if target is None and time.monotonic() >= self._next_look:
            self._next_look = time.monotonic() + LOOK_EVERY_S
            try:
                target = find_run(self.server, self.run_id)
            except Exception as exc:
                logger.debug("otel_verl: mlflow run lookup failed: %s", exc)
        if target is None:
            return None
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

        experiment_id, mlflow_run = target
        self._inner = OTLPSpanExporter(
            endpoint=self.server + TRACES_PATH,
            headers={EXPERIMENT_HEADER: experiment_id, RUN_HEADER: mlflow_run, **_auth()},
            timeout=int(SEND_TIMEOUT_S),
        )
        logger.debug("otel_verl: traces to mlflow experiment %s, run %s", experiment_id, mlflow_run)
        return self._inner

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        with self._lock:
            inner = self._resolved()
            if inner is None:
                room = HELD_MAX - len(self._held)
                self._held.extend(spans[: max(0, room)])
                self._dropped += max(0, len(spans) - max(0, room))
                return SpanExportResult.SUCCESS
            held, self._held = self._held, []
        return _send(inner, [*held, *spans])

    def shutdown(self) -> None:
        with self._lock:
            self._next_look = 0.0
            inner = self._resolved()
            held, self._held = self._held, []
        if inner is None:
            if held or self._dropped:
                logger.warning(
                    "otel_verl: %d spans not sent to mlflow: no mlflow run tagged %s=%s was found at %s",
                    len(held) + self._dropped,
                    RUN_TAG,
                    self.run_id,
                    self.server,
                )
            return
        _send(inner, held)
        if self._dropped:
            logger.warning(
                "otel_verl: %d spans not sent to mlflow (held past %d before its run was found)",
                self._dropped,
                HELD_MAX,
            )
        inner.shutdown()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return True
