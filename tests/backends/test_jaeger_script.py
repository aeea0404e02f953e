"""From the demo to Jaeger without Docker, as the demo tells it (issue 51): its last lines, run as printed.

``otel-verl demo`` runs from a shell without the venv on its PATH; the commands of its "see the traces in Jaeger"
lines run in that shell: ``bash scripts/jaeger.sh up`` (the collector and Jaeger this project builds), the replay of
the demo's spool, then Jaeger's own UI (jaeger-ui v1.74.0 in headless chromium, as test_jaeger_ui.py drives it)
lists a trace per step and draws a step's tree, and ``bash scripts/jaeger.sh down`` stops both. Every port is moved
by the configs' own variables (free ones), which the demo's lines and the script both read.
"""

from __future__ import annotations

import os
import re
import socket
from pathlib import Path

import pytest

from otel_verl import semconv as sc
from tests.clean_shell import ROOT, VENV_BIN, shell, user_env

from .conftest import BIN, free_ports, http_get, jaeger_ui_assets, wait_until
from .jaeger_ui import CHROMIUM, CHROMIUM_ARGS, VIEWPORT, ConsoleLog, rows, search

pytestmark = [pytest.mark.backends, pytest.mark.ray]
STEPS = 2


def _needs() -> Path:
    for name in ("otelcol-verl", "jaeger"):
        if not os.access(BIN / name, os.X_OK):
            pytest.skip(f"{BIN / name} is absent: scripts/install_backends.sh builds it")
    ui = jaeger_ui_assets()
    if ui is None:
        pytest.skip("no built Jaeger UI (tests/backends/conftest.py JAEGER_UI says where it is looked for)")
    if not Path(CHROMIUM).exists():
        pytest.skip("chromium not installed (scripts/install_backends.sh installs it)")
    pytest.importorskip("playwright.sync_api")
    pytest.importorskip("verl")
    return ui


def _ports() -> dict[str, str]:
    names = [
        "OTEL_VERL_OTLP_GRPC_PORT", "OTEL_VERL_OTLP_HTTP_PORT", "OTEL_VERL_HEALTH_PORT", "OTEL_VERL_METRICS_PORT",
        "OTEL_VERL_TELEMETRY_PORT", "JAEGER_OTLP_GRPC_PORT", "JAEGER_OTLP_HTTP_PORT", "JAEGER_QUERY_HTTP_PORT",
        "JAEGER_QUERY_GRPC_PORT", "JAEGER_HEALTH_PORT", "JAEGER_METRICS_PORT", "TEMPO",
    ]  # fmt: skip
    ports = dict(zip(names, map(str, free_ports(len(names))), strict=True))
    ports["OTEL_VERL_TEMPO_OTLP_ENDPOINT"] = f"127.0.0.1:{ports.pop('TEMPO')}"  # no Tempo: the documented case
    return ports


def _commands(stdout: str) -> tuple[list[str], str, str]:
    """The demo's Jaeger lines: the commands (two spaces in, comments cut), the URL it names, the stop command."""
    lines = stdout.splitlines()
    at = lines.index("see the traces in Jaeger:")
    block = [line for line in lines[at + 1 :] if line.startswith("  ")]
    commands = [re.split(r"\s+#\s", line)[0].strip() for line in block if not line.strip().startswith("#")]
    note = next(line for line in block if line.strip().startswith("#"))
    url = re.search(r"open (http://[\d.]+:\d+)", note).group(1)
    stop = note.rsplit("stop them: ", 1)[1].strip()
    return commands, url, stop


def _listening(port: str) -> bool:
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", int(port))) == 0


def test_demo_to_jaeger_without_docker(tmp_path: Path) -> None:
    ui = _needs()
    ports = _ports()
    env = user_env(**ports, OTEL_VERL_BACKENDS_DIR=str(tmp_path / "run"), JAEGER_UI_ASSETS_PATH=str(ui))
    cli = (VENV_BIN / "otel-verl").relative_to(ROOT)
    args = f"--steps {STEPS} --no-val-before-train --spool {tmp_path / 'spool'} --report {tmp_path / 'report'}"
    demo = shell(f"{cli} demo {args}", env, timeout=900)
    assert demo.returncode == 0, demo.stdout[-3000:] + demo.stderr[-3000:]
    commands, url, stop = _commands(demo.stdout)
    assert len(commands) == 2 and commands[0] == "bash scripts/jaeger.sh up", commands
    assert (
        commands[1].startswith(f"{cli} replay {tmp_path / 'spool'}")
        and ports["OTEL_VERL_OTLP_GRPC_PORT"] in commands[1]
    )
    assert url == f"http://127.0.0.1:{ports['JAEGER_QUERY_HTTP_PORT']}" and stop == "bash scripts/jaeger.sh down"
    try:
        for command in commands:
            done = shell(command, env, timeout=300)
            assert done.returncode == 0, f"{command}\n{done.stdout[-2000:]}{done.stderr[-2000:]}"
            if command.endswith(" up"):
                assert url in done.stdout and "replay" in done.stdout, done.stdout
        # Jaeger makes spans searchable in batches: wait for every step's trace
        services = f"{url}/api/v3/services"
        wait_until(lambda: b'"verl"' in http_get(services)[1], 60, "the demo's service in Jaeger")
        _ui_shows_the_steps(url, tmp_path)
        again = shell(commands[0], env)  # up twice: says so, starts nothing
        assert again.returncode == 0 and again.stdout.count("already runs") == 2, again.stdout + again.stderr
    finally:
        down = shell(stop, env, timeout=60)
    assert down.returncode == 0, down.stdout + down.stderr
    assert "stopped collector" in down.stdout and "stopped jaeger" in down.stdout, down.stdout
    assert not list((tmp_path / "run").glob("*.pid"))
    for name in ("OTEL_VERL_OTLP_GRPC_PORT", "OTEL_VERL_HEALTH_PORT", "JAEGER_QUERY_HTTP_PORT"):
        assert not _listening(ports[name]), f"{name} {ports[name]} still listens after down"


def _ui_shows_the_steps(url: str, shots: Path) -> None:
    """Search lists a trace per step (and the validation-free run has no other); one opens as step → phases."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        context = browser.new_context(viewport=VIEWPORT)
        log = ConsoleLog()
        log.attach(context)
        page = context.new_page()
        try:

            def step_results() -> list[str]:
                search(page, url, "verl", "")
                found = page.locator(".ResultItem").all_inner_texts()
                return found if sum(sc.SPAN_STEP in t for t in found) >= STEPS else []

            found = wait_until(step_results, 60, f"{STEPS} step traces in Jaeger's search", interval=2.0)
            page.screenshot(path=str(shots / "search.png"))
            page.locator(".ResultItem").filter(has_text=sc.SPAN_STEP).first.locator("a").first.click()
            page.wait_for_selector(".span-row")
            shown = rows(page)
            page.screenshot(path=str(shots / "trace.png"))
        finally:
            log.write(shots / "console.tsv")
            context.close()
            browser.close()
    assert sum(sc.SPAN_STEP in t for t in found) == STEPS, found
    assert shown[0].depth == 0 and shown[0].name == sc.SPAN_STEP, shown[:3]
    assert any(r.depth >= 1 and r.name.startswith(sc.SPAN_PHASE_PREFIX) for r in shown), shown
    assert log.offsite(url) == [] and log.unexpected() == [], log.messages
