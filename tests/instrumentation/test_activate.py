"""The Ray setup hook instruments the process and imports the OTLP exporter off the main thread."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

PROBE = """
import json, sys, threading
import otel_verl.activate as activate
activate.setup()
for thread in threading.enumerate():
    if thread.name == "otel-verl-warm-imports":
        thread.join(60)
print(json.dumps({m: m in sys.modules for m in sys.argv[1:]}))
"""
GRPC = "opentelemetry.exporter.otlp.proto.grpc.trace_exporter"
HTTP = "opentelemetry.exporter.otlp.proto.http.trace_exporter"


def _probe(env: dict[str, str]) -> dict[str, bool]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    done = subprocess.run(
        [sys.executable, "-c", PROBE, GRPC, HTTP], env={**clean, **env}, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize(
    ("env", "expected"),
    [
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4317"}, {GRPC: True, HTTP: False}),
        (
            {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318", "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf"},
            {GRPC: False, HTTP: True},
        ),
        ({}, {GRPC: False, HTTP: False}),  # spool only: nothing more is loaded
    ],
)
def test_setup_hook_preimports_the_configured_exporter(env, expected):
    assert _probe(env) == expected
