"""docs/without-docker.md's "The Jaeger UI without Docker" snippet, run as written from the repository root (issue 51).

It ended with ``~/.cache/otel_verl/bin/jaeger --config jaeger/config.yaml &`` after ``cd jaeger-ui`` (no such
config there), started a Jaeger whose OTLP port is 14317 while the replay the docs give targets 4317 (the
collector's), and never started the collector. Here the snippet runs in a user's shell whose home is a temporary
folder (the real collector and Jaeger binaries linked into its cache), with ``git clone`` and ``npm`` stubbed to
lay down the v1.74.0 UI the tests use (no network): ``bash scripts/jaeger.sh up`` must find the built UI where the
snippet put it, Jaeger must serve it, and the replay command it prints must target the collector.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from tests.clean_shell import ROOT, shell, user_env

from .conftest import BIN, http_get, jaeger_ui_assets
from .test_jaeger_script import _listening, _ports

pytestmark = [pytest.mark.backends]
STUBS = {
    "git": 'for a; do last="$a"; done; [ "$1" = clone ] && mkdir -p "$last"',
    "npm": '[ "$1" = run ] && mkdir -p packages/jaeger-ui/build && cp -r "$BUILT_UI"/. packages/jaeger-ui/build/; true',
}


def _snippet() -> str:
    text = (ROOT / "docs" / "without-docker.md").read_text()
    found = re.search(r"### The Jaeger UI without Docker.*?```bash\n(.*?)```", text, re.S)
    assert found, "docs/without-docker.md has no bash block under 'The Jaeger UI without Docker'"
    return found.group(1)


def test_the_docs_ui_snippet_starts_the_collector_and_jaeger_with_the_built_ui(tmp_path: Path) -> None:
    ui = jaeger_ui_assets()
    for name in ("otelcol-verl", "jaeger"):
        if not os.access(BIN / name, os.X_OK):
            pytest.skip(f"{BIN / name} is absent: scripts/install_backends.sh builds it")
    if ui is None:
        pytest.skip("no built Jaeger UI (tests/backends/conftest.py JAEGER_UI says where it is looked for)")
    home = tmp_path / "home"
    (home / ".cache" / "otel_verl").mkdir(parents=True)
    (home / ".cache" / "otel_verl" / "bin").symlink_to(BIN)
    stubs = tmp_path / "stubs"
    stubs.mkdir()
    for name, body in STUBS.items():
        (stubs / name).write_text(f"#!/usr/bin/env bash\n{body}\n")
        (stubs / name).chmod(0o755)
    ports = _ports()
    env = user_env(**ports, HOME=str(home), BUILT_UI=str(ui), OTEL_VERL_BACKENDS_DIR=str(tmp_path / "run"))
    env.pop("JAEGER_UI_ASSETS_PATH", None)
    env["PATH"] = f"{stubs}{os.pathsep}{env['PATH']}"
    url = f"http://127.0.0.1:{ports['JAEGER_QUERY_HTTP_PORT']}"
    try:
        done = shell(f"set -e\n{_snippet()}", env, timeout=180)
        assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
        assert f"replay ./traces --endpoint http://127.0.0.1:{ports['OTEL_VERL_OTLP_GRPC_PORT']}" in done.stdout
        assert f"then open {url}: Search" in done.stdout, done.stdout  # jaeger.sh found the UI the snippet built
        status, index = http_get(f"{url}/")
        asset = re.search(r"static/[\w.-]+\.js", (ui / "index.html").read_text())
        assert status == 200 and asset and asset.group(0).encode() in index, index[:500]
        assert http_get(f"{url}/{asset.group(0)}")[0] == 200
    finally:
        down = shell("bash scripts/jaeger.sh down", env, timeout=60)
    assert "stopped collector" in down.stdout and "stopped jaeger" in down.stdout, down.stdout + down.stderr
    assert not _listening(ports["JAEGER_QUERY_HTTP_PORT"]) and not _listening(ports["OTEL_VERL_OTLP_GRPC_PORT"])
