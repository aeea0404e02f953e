"""The demo's last lines: how to see its spool in Jaeger, with Docker and without, as commands that run as printed.

Why: the demo writes a spool and nothing else; a Jaeger link alone pointed at a Jaeger that held nothing (issue
51). Without Docker, ``scripts/jaeger.sh up`` starts the collector and Jaeger this project builds (when the
package runs from a checkout, which has the script); with Docker, ``docker compose up -d``. Either listens for
OTLP on the collector's port, ``OTEL_VERL_OTLP_GRPC_PORT`` (4317), which the replay command names, and serves
Jaeger on ``JAEGER_QUERY_HTTP_PORT`` (16686): the variables both stacks' configs read.
"""

from __future__ import annotations

import os
import shlex
from pathlib import Path

from otel_verl.export.provider import DEFAULT_SERVICE_NAME
from otel_verl.invocation import otel_verl_command
from otel_verl.semconv import VERL_STEP

JAEGER_SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "jaeger.sh"
"""Present in a checkout, absent from an installed wheel."""


def see_in_jaeger(spool: Path, cwd: Path | None = None) -> list[str]:
    """Lines for the user: a heading, then each command on its own line (two spaces in, a ``#`` comment after)."""
    here = (cwd or Path.cwd()).resolve()
    grpc = os.environ.get("OTEL_VERL_OTLP_GRPC_PORT") or "4317"
    query = os.environ.get("JAEGER_QUERY_HTTP_PORT") or "16686"
    service = os.environ.get("OTEL_SERVICE_NAME") or DEFAULT_SERVICE_NAME
    replay = f"{otel_verl_command(cwd=here)} replay {shlex.quote(str(spool))} --endpoint http://127.0.0.1:{grpc}"
    if JAEGER_SCRIPT.is_file():
        script = shlex.quote(_shown(JAEGER_SCRIPT, here))
        start = f"  bash {script} up   # the collector and Jaeger, no Docker (or: docker compose up -d)"
        if not ui_built():  # a Go-built Jaeger serves a placeholder page at / until its UI is built
            start = (
                f"  bash {script} up   # the collector and Jaeger, no Docker; its web UI needs building once "
                "(docs/without-docker.md#the-jaeger-ui-without-docker), or: docker compose up -d"
            )
        stop = f"bash {script} down"
    else:
        start = "  docker compose up -d   # in otel_verl's repository; without Docker: docs/backends.md"
        stop = "docker compose down"
    url = f"http://127.0.0.1:{query}"
    if ui_built() or not JAEGER_SCRIPT.is_file():  # compose's Jaeger image has its UI
        # one trace per step, each named verl.step (span names stay low-cardinality): a step is found by its tag
        then = f"then open {url}: Search, Service {service}, Find Traces; step 2 alone: Tags {VERL_STEP}=2"
    else:  # a Go-built Jaeger's / is a placeholder page: what answers is its API
        then = f"then ask its API: curl '{url}/api/v3/services' (the web UI once built, see above)"
    return ["see the traces in Jaeger:", start, f"  {replay}", f"  # {then}; stop them: {stop}"]


def ui_built() -> bool:
    """Whether ``scripts/jaeger.sh up`` serves Jaeger's web UI: ``JAEGER_UI_ASSETS_PATH``, or a build in the cache
    where the script looks (``<cache>/jaeger-ui``). Without one, the API answers but "open …:16686" shows a
    placeholder page (issue 51: the demo said to open a UI that was not there)."""
    if os.environ.get("JAEGER_UI_ASSETS_PATH"):
        return True
    cache = Path(os.environ.get("OTEL_VERL_CACHE") or Path.home() / ".cache" / "otel_verl")
    return (cache / "jaeger-ui" / "index.html").is_file()


def _shown(path: Path, here: Path) -> str:
    try:
        return str(path.relative_to(here))
    except ValueError:
        return str(path)
