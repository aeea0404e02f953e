"""``scripts/jaeger.sh`` as a user runs it again and again (issue 51, items 8-10), on free ports, in a clean shell.

``up`` a second time reads the running Jaeger for its web UI (it said "API only" when the new shell lacked
JAEGER_UI_ASSETS_PATH); ``status`` prints pids and ports; after ``down`` and ``up`` the replay command printed
runs as printed and fills the new, empty Jaeger (its hint lacked ``--ignore-journal``, and the journal sent
nothing); the collector exports to nothing that was not started (it tried Tempo, 51 warnings in 10 minutes).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from otel_verl import semconv as sc
from tests.clean_shell import shell, user_env

from .conftest import BIN, free_ports, http_get, jaeger_ui_assets, wait_until

pytestmark = [pytest.mark.backends]
SPANS = 3
WRITE_SPOOL = """
import sys
from otel_verl import semconv
from otel_verl.config import OtelVerlConfig
from otel_verl.export import flush, provider, tracing
provider.setup_tracing("trainer", config=OtelVerlConfig(spool=True, spool_dir=sys.argv[1], run_id="r"))
for i in range(int(sys.argv[2])):
    with tracing.tracer().start_as_current_span(semconv.SPAN_STEP, attributes={semconv.VERL_STEP: i + 1}):
        pass
flush.flush()
"""


def _replay_line(stdout: str, spool: Path | None = None) -> str:
    """The printed replay command, its spool (./traces where the checkout has one, else SPOOL_DIR) made ours."""
    line = re.split(r"\s+#\s", next(x for x in stdout.splitlines() if " replay " in x))[0].strip()
    return re.sub(r" replay \S+ ", f" replay {spool} ", line) if spool else line


def _steps_in(url: str) -> int:
    code, body = http_get(f"{url}/api/traces?service=verl&limit=50")
    return body.count(f'"operationName":"{sc.SPAN_STEP}"'.encode()) if code == 200 else 0


def test_up_again_status_restart_and_replay(tmp_path: Path) -> None:
    for name in ("otelcol-verl", "jaeger"):
        if not os.access(BIN / name, os.X_OK):
            pytest.skip(f"{BIN / name} is absent: scripts/install_backends.sh builds it")
    ui = jaeger_ui_assets()
    if ui is None:
        pytest.skip("no built Jaeger UI (tests/backends/conftest.py JAEGER_UI)")
    names = [
        "OTEL_VERL_OTLP_GRPC_PORT", "OTEL_VERL_OTLP_HTTP_PORT", "OTEL_VERL_HEALTH_PORT", "OTEL_VERL_METRICS_PORT",
        "OTEL_VERL_TELEMETRY_PORT", "JAEGER_OTLP_GRPC_PORT", "JAEGER_OTLP_HTTP_PORT", "JAEGER_QUERY_HTTP_PORT",
        "JAEGER_QUERY_GRPC_PORT", "JAEGER_HEALTH_PORT", "JAEGER_METRICS_PORT", "TEMPO",
    ]  # fmt: skip
    ports = dict(zip(names, map(str, free_ports(len(names))), strict=True))
    ports["OTEL_VERL_TEMPO_OTLP_ENDPOINT"] = f"127.0.0.1:{ports.pop('TEMPO')}"  # nothing listens there
    run = tmp_path / "run"
    bare = user_env(**ports, OTEL_VERL_BACKENDS_DIR=str(run))
    with_ui = {**bare, "JAEGER_UI_ASSETS_PATH": str(ui)}
    spool = tmp_path / "spool"
    subprocess.run([sys.executable, "-c", WRITE_SPOOL, str(spool), str(SPANS)], check=True, timeout=120)
    url = f"http://127.0.0.1:{ports['JAEGER_QUERY_HTTP_PORT']}"
    try:
        first = shell("bash scripts/jaeger.sh up", with_ui, timeout=120)
        assert first.returncode == 0, first.stdout + first.stderr
        replay = _replay_line(first.stdout, spool)
        assert replay.endswith("--ignore-journal"), first.stdout  # a Jaeger it started: empty
        sent = shell(replay, bare, timeout=120)
        assert sent.returncode == 0, sent.stdout + sent.stderr
        wait_until(lambda: _steps_in(url) == SPANS, 60, f"{SPANS} steps in Jaeger")

        again = shell("bash scripts/jaeger.sh up", bare, timeout=60)  # a new shell, no JAEGER_UI_ASSETS_PATH
        assert again.returncode == 0 and again.stdout.count("already runs") == 2, again.stdout + again.stderr
        assert "no Jaeger web UI" not in again.stdout and "Find Traces" in again.stdout, again.stdout
        assert not _replay_line(again.stdout).endswith("--ignore-journal"), again.stdout  # it holds them

        status = shell("bash scripts/jaeger.sh status", bare, timeout=60)
        assert status.returncode == 0, status.stdout + status.stderr
        pids = {n: (run / f"{n}.pid").read_text().strip() for n in ("collector", "jaeger")}
        assert f"collector runs (pid {pids['collector']})" in status.stdout, status.stdout
        assert f"127.0.0.1:{ports['OTEL_VERL_OTLP_GRPC_PORT']}" in status.stdout, status.stdout
        assert f"jaeger runs (pid {pids['jaeger']}): web UI and API {url}" in status.stdout, status.stdout

        assert shell("bash scripts/jaeger.sh down", bare, timeout=60).returncode == 0
        fresh = shell("bash scripts/jaeger.sh up", with_ui, timeout=120)  # its in-memory store is gone
        assert fresh.returncode == 0 and _steps_in(url) == 0, fresh.stdout + fresh.stderr
        replay = _replay_line(fresh.stdout, spool)
        resent = shell(replay, bare, timeout=120)
        assert resent.returncode == 0 and "already delivered" not in resent.stdout, resent.stdout + resent.stderr
        wait_until(lambda: _steps_in(url) == SPANS, 60, f"{SPANS} steps in the restarted Jaeger")
    finally:
        down = shell("bash scripts/jaeger.sh down", bare, timeout=60)
    assert down.returncode == 0, down.stdout + down.stderr
    log = (run / "collector.log").read_text()
    assert "tempo" not in log.lower() and "connection refused" not in log, log[-3000:]
