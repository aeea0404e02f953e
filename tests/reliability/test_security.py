"""Security and privacy by default: no text unless opted in, redact then cap, private spool, local-only stack."""

from __future__ import annotations

import json
import logging
import os
import re
import shutil
import stat
import subprocess
from pathlib import Path

import pytest
import yaml
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from otel_verl import content, semconv
from otel_verl.config import OtelVerlConfig
from otel_verl.demo import runner
from otel_verl.export import flush
from otel_verl.instrumentation import llm_server
from tests.process_state import reset_redactors
from tests.reliability.traced_run import digest, problems, run, traced

ROOT = Path(__file__).resolve().parents[2]
OPTS = runner.DemoOptions(prompts=4, n=2, seed=5)
TEXT_KEYS = (semconv.GEN_AI_PROMPT, semconv.GEN_AI_COMPLETION, semconv.GEN_AI_TOOL_CALL_ARGUMENTS)
CAP = 24
seen_lengths: list[int] = []


# ------------------------------------------------------------------ redaction hooks (imported by OTEL_VERL_REDACT)
def redact_digits(text: str) -> str:
    seen_lengths.append(len(text))
    return "[redacted]" + re.sub(r"\d", "#", text)


def redact_raises(text: str) -> str:
    raise RuntimeError("redactor broke")


def redact_returns_bytes(text: str) -> bytes:
    return text.encode()


@pytest.fixture
def fresh_content(monkeypatch):
    reset_redactors()
    monkeypatch.setattr(llm_server, "_config", None)  # the engine seam caches its config per process
    yield
    reset_redactors()
    llm_server._config = None


def traced_spans(config: OtelVerlConfig, extra_check=None) -> list:
    memory = InMemorySpanExporter()
    with traced(memory, config=config):
        output = run(OPTS)
        flush.flush()
        if extra_check is not None:
            extra_check(output)
        return list(memory.get_finished_spans())


def texts(spans: list, key: str) -> list[str]:
    return [s.attributes[key] for s in spans if key in (s.attributes or {})]


# ------------------------------------------------------------------ content
@pytest.mark.verl
def test_no_text_anywhere_by_default(tmp_path, fresh_content):
    pytest.importorskip("verl")
    spans = traced_spans(OtelVerlConfig(spool=True, spool_dir=str(tmp_path), run_id="private"))
    assert any(s.name.startswith(semconv.GEN_AI_OP_EXECUTE_TOOL) for s in spans)
    for span in spans:
        assert not set(TEXT_KEYS) & set(span.attributes or {}), span.name
    # nor on disk: the prompts ("Question #3: Tom has ...") and tool arguments ({"expression": ...})
    written = "".join(p.read_text() for p in (tmp_path / "private").rglob("*.jsonl"))
    assert written and "Question #" not in written and "expression" not in written and "apples" not in written


@pytest.mark.verl
def test_opt_in_text_is_redacted_then_capped(fresh_content):
    pytest.importorskip("verl")
    seen_lengths.clear()
    config = OtelVerlConfig(
        spool=False, capture_content=True, content_max_chars=CAP, redact=f"{__name__}:redact_digits"
    )
    spans = traced_spans(config)
    arguments, completions = texts(spans, semconv.GEN_AI_TOOL_CALL_ARGUMENTS), texts(spans, semconv.GEN_AI_COMPLETION)
    assert arguments and completions
    for text in arguments + completions:
        assert text.startswith("[redacted]") and not re.search(r"\d", text)
        assert len(text) <= CAP + 1  # the cap (+ "…") applies to the redacted text
    # the hook saw the whole text, before the cap cut it
    assert max(seen_lengths) > CAP
    assert any(t.endswith("…") for t in completions)


@pytest.mark.verl
@pytest.mark.parametrize(
    ("hook", "why"),
    [
        (f"{__name__}:redact_raises", "raised RuntimeError: redactor broke"),
        (f"{__name__}:redact_returns_bytes", "returned bytes, not str"),
        ("no_such_module_for_otel_verl:redact", "cannot be loaded (ModuleNotFoundError"),
        (f"{__name__}", "cannot be loaded (ValueError: expected module:function"),
    ],
    ids=["raises", "not-a-string", "not-importable", "malformed"],
)
def test_failing_redaction_hook_drops_text_and_warns_once(fresh_content, caplog, hook, why):
    pytest.importorskip("verl")
    otel_untraced = digest(run(OPTS))
    caplog.set_level(logging.WARNING)
    config = OtelVerlConfig(spool=False, capture_content=True, redact=hook)
    outputs = []
    spans = traced_spans(config, extra_check=outputs.append)
    assert digest(outputs[0]) == otel_untraced  # training unaffected
    assert sum(s.name == semconv.SPAN_REQUEST for s in spans) == OPTS.prompts * OPTS.n
    assert any(s.name.startswith(semconv.GEN_AI_OP_EXECUTE_TOOL) for s in spans)
    for span in spans:
        assert not set(TEXT_KEYS) & set(span.attributes or {}), span.name
    found = problems(caplog.records)
    assert len(found) == 1, [r.getMessage() for r in found]
    assert f"OTEL_VERL_REDACT={hook}" in found[0].getMessage() and why in found[0].getMessage()


def test_redact_env_var(monkeypatch):
    monkeypatch.setenv("OTEL_VERL_REDACT", "mypkg.redact:scrub")
    assert OtelVerlConfig().redact == "mypkg.redact:scrub"
    monkeypatch.delenv("OTEL_VERL_REDACT")
    assert OtelVerlConfig().redact is None
    assert content.capture_text("secret", OtelVerlConfig(capture_content=False, redact=None)) is None


# ------------------------------------------------------------------ spool permissions
@pytest.mark.verl
def test_spool_files_0600_in_0700_directories(tmp_path, fresh_content):
    pytest.importorskip("verl")
    old = os.umask(0o002)  # a permissive umask must not widen anything
    try:
        root = tmp_path / "spool" / "nested"
        traced_spans(OtelVerlConfig(spool=True, spool_dir=str(root), run_id="perm"))
    finally:
        os.umask(old)
    paths = list((root / "perm").rglob("*"))
    files = [p for p in paths if p.is_file()]
    assert any(p.suffix == ".jsonl" for p in files)
    for path in [root / "perm", *paths]:
        mode = stat.S_IMODE(path.stat().st_mode)
        assert mode == (0o700 if path.is_dir() else 0o600), f"{path}: {oct(mode)}"
    for directory in (tmp_path / "spool", root):  # the spool root the user named, created by us
        assert stat.S_IMODE(directory.stat().st_mode) == 0o700, directory


def test_import_legacy_spool_files_0600_in_0700_directories(tmp_path):
    """``import-legacy --spool`` is a spool writer too: the same promise as the live spool's."""
    from otel_verl.analysis.write.seed_to_spool import import_legacy

    logs = tmp_path / "logs" / "step_1"
    logs.mkdir(parents=True)
    fields = {"timestamp": "2025-08-11T23:19:40.000000", "duration_sec": 2.0, "step": 1, "workid": 0}
    lines = [
        {**fields, "event": event, "extra": {"request_id": "a"}}
        for event in ("req_all_finished", "barrier_wait_duration")
    ]
    (logs / "worker_0.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    old = os.umask(0o002)
    try:
        root = tmp_path / "spool" / "nested"
        assert import_legacy(tmp_path / "logs", root, run="perm") > 0
    finally:
        os.umask(old)
    paths = list((root / "perm").rglob("*"))
    assert sum(p.suffix == ".jsonl" for p in paths) == 2  # the worker's file and the trainer's (step spans)
    for path in [tmp_path / "spool", root, root / "perm", *paths]:
        mode = stat.S_IMODE(path.stat().st_mode)
        assert mode == (0o700 if path.is_dir() else 0o600), f"{path}: {oct(mode)}"


# ------------------------------------------------------------------ the compose stack
def compose() -> dict:
    return yaml.safe_load((ROOT / "docker-compose.yml").read_text())


def test_compose_ports_bound_to_localhost():
    services = compose()["services"]
    published = []
    for name, service in services.items():
        for port in service.get("ports", []):
            spec = port if isinstance(port, str) else f"{port.get('host_ip', '')}:{port.get('published')}"
            assert spec.startswith("127.0.0.1:"), f"{name} publishes {spec!r} beyond localhost"
            published.append(spec)
        assert service.get("network_mode") != "host", name
    assert "127.0.0.1:4317:4317" in published and "127.0.0.1:3000:3000" in published


def test_grafana_has_no_anonymous_admin():
    """Anonymous access is read-only (Viewer, on 127.0.0.1); the admin password is never a fixed default:
    GRAFANA_ADMIN_PASSWORD or one generated on the first start (grafana/entrypoint.sh)."""
    grafana = compose()["services"]["grafana"]
    env = grafana["environment"]
    if str(env["GF_AUTH_ANONYMOUS_ENABLED"]).lower() == "true":
        assert env["GF_AUTH_ANONYMOUS_ORG_ROLE"] == "Viewer"
    assert str(env.get("GF_AUTH_DISABLE_LOGIN_FORM", "false")).lower() == "false"
    assert str(env.get("GF_USERS_ALLOW_SIGN_UP", "false")).lower() == "false"
    assert "GF_SECURITY_ADMIN_PASSWORD" not in env  # no default like admin/admin in the file
    assert env["GRAFANA_ADMIN_PASSWORD"] == "${GRAFANA_ADMIN_PASSWORD:-}"
    assert grafana["entrypoint"] == ["/bin/sh", "/otel-verl/entrypoint.sh"]
    assert "./grafana/entrypoint.sh:/otel-verl/entrypoint.sh:ro" in grafana["volumes"]
    script = (ROOT / "grafana" / "entrypoint.sh").read_text()
    assert "/dev/urandom" in script and "GF_SECURITY_ADMIN_PASSWORD__FILE" in script
    for path in (ROOT / "grafana" / "provisioning").rglob("*"):
        if path.is_file():
            assert "anonymous" not in path.read_text().lower(), path


@pytest.mark.skipif(shutil.which("docker-compose") is None, reason="docker-compose not installed")
def test_compose_file_validates_offline():
    """`docker compose up` needs no variable; a password set by the user still validates."""
    env = {k: v for k, v in os.environ.items() if k != "GRAFANA_ADMIN_PASSWORD"}
    bare = subprocess.run(["docker-compose", "config", "-q"], cwd=ROOT, env=env, capture_output=True, text=True)
    assert bare.returncode == 0 and not bare.stderr.strip(), bare.stderr
    env["GRAFANA_ADMIN_PASSWORD"] = "test-only"
    ok = subprocess.run(["docker-compose", "config", "-q"], cwd=ROOT, env=env, capture_output=True, text=True)
    assert ok.returncode == 0, ok.stderr
