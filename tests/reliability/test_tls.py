"""OTLP over TLS with bearer-token auth, through the standard env vars only, against the real collector.

The collector runs collector/config.yaml + collector/tls_auth.yaml with a self-signed certificate made
here; verl's real AgentLoopWorker (ToolAgentLoop, hermes parser, calculator tool, reward) runs traced
with nothing but OTEL_EXPORTER_OTLP_ENDPOINT=https://..., OTEL_EXPORTER_OTLP_CERTIFICATE and
OTEL_EXPORTER_OTLP_HEADERS. Right token: every span reaches Jaeger once. Wrong token: none does, verl
returns exactly what an untraced run returns, and the spool keeps the spans, which ``replay`` then
delivers with the right token (same env vars). A missing or wrong CA certificate: the TLS handshake
fails, nothing reaches Jaeger, training is unaffected, the spool keeps every span and one warning says
the export failed; replay with the wrong CA fails with one clear error, with the right one it delivers.
"""

from __future__ import annotations

import datetime
import ipaddress
import logging
import time
from pathlib import Path

import pytest
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from otel_verl.config import OtelVerlConfig
from otel_verl.demo import runner
from otel_verl.export.replay import ReplayError, replay
from tests.backends.conftest import REPO, wait_until
from tests.reliability.stack import Stack, jaeger_copies, spool_span_ids
from tests.reliability.traced_run import digest, problems, run, traced

pytest.importorskip("verl", reason="needs the verl extra")
pytestmark = [pytest.mark.backends, pytest.mark.verl]

TOKEN = "s3cr3t-token-for-tests"
OPTS = runner.DemoOptions(prompts=3, n=2, seed=5)


def self_signed(directory: Path) -> tuple[Path, Path]:
    """A CA-less self-signed server certificate for 127.0.0.1/localhost (the client trusts it directly)."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "otel-verl-test-collector")])
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(
            x509.SubjectAlternativeName([x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
            critical=False,
        )
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    cert_path, key_path = directory / "server.crt", directory / "server.key"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    key_path.chmod(0o600)
    return cert_path, key_path


@pytest.fixture(scope="module")
def tls_stack(tmp_path_factory):
    work = tmp_path_factory.mktemp("tls")
    cert, key = self_signed(work)
    stack = Stack(
        work,
        overlays=[REPO / "collector" / "tls_auth.yaml"],
        collector_env={
            "OTEL_VERL_TLS_CERT": str(cert),
            "OTEL_VERL_TLS_KEY": str(key),
            "OTEL_VERL_BEARER_TOKEN": TOKEN,
        },
    )
    try:
        stack.start_jaeger()
        stack.start_collector()
        yield stack, cert
    finally:
        stack.stop()


@pytest.fixture(scope="module")
def untraced():
    return digest(run(OPTS))


def use_standard_env(monkeypatch, stack: Stack, cert: Path, protocol: str, token: str) -> None:
    for name in ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_INSECURE", "OTEL_SDK_DISABLED"):
        monkeypatch.delenv(name, raising=False)
    port = stack.c_grpc if protocol == "grpc" else stack.c_http
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", f"https://127.0.0.1:{port}")
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_PROTOCOL", protocol)
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_CERTIFICATE", str(cert))
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_HEADERS", f"authorization=Bearer%20{token}")


@pytest.mark.parametrize("protocol", ["grpc", "http/protobuf"])
def test_tls_and_bearer_token_through_standard_env(tls_stack, untraced, monkeypatch, tmp_path, protocol):
    stack, cert = tls_stack
    use_standard_env(monkeypatch, stack, cert, protocol, TOKEN)
    memory = InMemorySpanExporter()
    with traced(memory, config=OtelVerlConfig(spool=True, spool_dir=str(tmp_path), run_id="tls")) as state:
        assert state.journaled is not None  # the OTLP exporter came from the env vars alone
        output = run(OPTS)
    assert digest(output) == untraced
    created = {f"{s.context.span_id:016x}": f"{s.context.trace_id:032x}" for s in memory.get_finished_spans()}
    assert len(created) > 20

    def arrived():
        copies = jaeger_copies(stack, created)
        return copies if all(copies[s] == 1 for s in created) else None

    wait_until(arrived, 60, "every span in Jaeger over TLS", interval=1.0)
    assert state.journaled.spans_delivered == len(created)
    # everything was delivered live: a replay over TLS has nothing to send
    assert replay(tmp_path, protocol=protocol).sent == 0


@pytest.mark.parametrize("protocol", ["grpc", "http/protobuf"])
def test_wrong_token_is_refused_and_training_unaffected(tls_stack, untraced, monkeypatch, tmp_path, protocol):
    stack, cert = tls_stack
    use_standard_env(monkeypatch, stack, cert, protocol, "not-the-token")
    memory = InMemorySpanExporter()
    with traced(memory, config=OtelVerlConfig(spool=True, spool_dir=str(tmp_path), run_id="tls-bad")) as state:
        output = run(OPTS)
    assert digest(output) == untraced
    created = {f"{s.context.span_id:016x}": f"{s.context.trace_id:032x}" for s in memory.get_finished_spans()}
    assert created and state.journaled is not None
    assert state.journaled.spans_delivered == 0 and state.journaled.spans_failed > 0
    assert spool_span_ids(tmp_path) == created  # the spool kept them all
    # nothing reached Jaeger (the collector's batch timeout is 1 s; give it several)
    wait_until(lambda: stack.procs["collector"].proc.poll() is None, 1, "collector alive")
    time.sleep(4)
    assert sum(jaeger_copies(stack, created).values()) == 0

    # replay with the wrong token fails with a clear error; with the right one it delivers each span once
    with pytest.raises(ReplayError, match=r"export failed|HTTP 401"):
        replay(tmp_path, protocol=protocol)
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_HEADERS", f"authorization=Bearer%20{TOKEN}")
    assert replay(tmp_path, protocol=protocol).sent == len(created)
    wait_until(
        lambda: all(n == 1 for s, n in jaeger_copies(stack, created).items() if s in created),
        60,
        "replayed spans in Jaeger",
        interval=1.0,
    )


@pytest.mark.parametrize("protocol", ["grpc", "http/protobuf"])
@pytest.mark.parametrize("ca", ["missing", "wrong"])
def test_missing_or_wrong_ca_fails_export_not_training(
    tls_stack, untraced, monkeypatch, tmp_path, caplog, protocol, ca
):
    stack, cert = tls_stack
    use_standard_env(monkeypatch, stack, cert, protocol, TOKEN)
    if ca == "missing":  # the system's CA store, which does not know the collector's self-signed certificate
        monkeypatch.delenv("OTEL_EXPORTER_OTLP_CERTIFICATE")
    else:  # a certificate, but not the collector's
        other = tmp_path / "other-ca"
        other.mkdir()
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_CERTIFICATE", str(self_signed(other)[0]))
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TIMEOUT", "2")  # the SDK's retry budget per batch
    memory = InMemorySpanExporter()
    caplog.set_level(logging.WARNING)
    with traced(memory, config=OtelVerlConfig(spool=True, spool_dir=str(tmp_path), run_id="tls-ca")) as state:
        output = run(OPTS)
    assert digest(output) == untraced
    created = {f"{s.context.span_id:016x}": f"{s.context.trace_id:032x}" for s in memory.get_finished_spans()}
    assert created and state.journaled is not None
    assert state.journaled.spans_delivered == 0 and state.journaled.spans_failed > 0
    assert spool_span_ids(tmp_path) == created  # the spool kept them all
    found = [r.getMessage() for r in problems(caplog.records)]
    assert len(found) == 1, found
    assert "OTLP export to https://127.0.0.1:" in found[0] and "spans stay in the spool" in found[0]
    time.sleep(3)  # the collector's batch timeout is 1 s
    assert sum(jaeger_copies(stack, created).values()) == 0

    if ca == "wrong":
        with pytest.raises(ReplayError, match=r"export failed|SSL|certificate"):
            replay(tmp_path, protocol=protocol)
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_CERTIFICATE", str(cert))
    assert replay(tmp_path, protocol=protocol).sent == len(created)
    wait_until(
        lambda: all(n == 1 for s, n in jaeger_copies(stack, created).items() if s in created),
        60,
        "replayed spans in Jaeger",
        interval=1.0,
    )
