"""Offline validation of the backend configs with the real tools (no network, no Docker engine)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from .conftest import REPO, Proc, binary, free_ports, http_get, load_dashboards, start, wait_until

pytestmark = pytest.mark.backends


def run(cmd, env=None, timeout=120):
    return subprocess.run(
        [str(c) for c in cmd],
        cwd=REPO,
        env={**os.environ, **(env or {})},
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def _compose(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """docker-compose on the repo's file with no GRAFANA_ADMIN_PASSWORD unless ``env`` sets one."""
    base = {k: v for k, v in os.environ.items() if k != "GRAFANA_ADMIN_PASSWORD"}
    cmd = [str(binary("docker-compose")), "-f", str(REPO / "docker-compose.yml"), *args]
    return subprocess.run(cmd, cwd=REPO, env={**base, **(env or {})}, capture_output=True, text=True, timeout=120)


def test_docker_compose_config_needs_no_variable():
    """`docker compose up` and `docker compose up collector` parse with nothing set (and with a password)."""
    r = _compose("config", "-q")
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stderr.strip() == "", r.stderr  # not even a "variable is not set" warning
    r = _compose("config", "--services")
    assert r.returncode == 0 and "collector" in r.stdout.split(), r.stdout + r.stderr
    r = _compose("config", env={"GRAFANA_ADMIN_PASSWORD": "test-only"})
    assert r.returncode == 0, r.stderr
    import yaml

    resolved = yaml.safe_load(r.stdout)["services"]["grafana"]
    assert resolved["environment"]["GRAFANA_ADMIN_PASSWORD"] == "test-only"
    assert "GF_SECURITY_ADMIN_PASSWORD" not in resolved["environment"]  # only the entrypoint sets it


def test_grafana_entrypoint_generates_the_admin_password_once(tmp_path):
    """grafana/entrypoint.sh with a stand-in for Grafana's /run.sh: a random password on the first start,
    kept (mode 600) and reused later; GRAFANA_ADMIN_PASSWORD wins when set."""
    data, run_sh = tmp_path / "data", tmp_path / "run.sh"
    data.mkdir()
    pw_file = "$GF_SECURITY_ADMIN_PASSWORD__FILE"
    run_sh.write_text(f'#!/bin/sh\nprintf \'%s|%s|%s\' "{pw_file}" "$(cat "{pw_file}")" "$*"\n')
    run_sh.chmod(0o755)

    def start(password: str | None = None) -> tuple[str, str]:
        env = {"GRAFANA_DATA_DIR": str(data), "GRAFANA_RUN": str(run_sh)}
        if password is not None:
            env["GRAFANA_ADMIN_PASSWORD"] = password
        r = run(["sh", REPO / "grafana" / "entrypoint.sh", "web"], env=env)
        assert r.returncode == 0, r.stderr
        log, handed = r.stdout.rsplit("\n", 1)
        return log, handed

    log, handed = start()
    path, password, args = handed.split("|")
    assert path == str(data / "otel-verl-admin-password") and args == "web"
    assert (
        len(password) == 24 and password.isalnum() and f"admin password (generated on first start): {password}" in log
    )
    assert (os.stat(path).st_mode & 0o777) == 0o600
    log, handed = start()
    assert handed.split("|")[1] == password and password not in log  # printed once only
    _, handed = start("chosen by me")
    assert handed.split("|")[1] == "chosen by me"


def test_compose_pins_and_binds():
    import yaml

    doc = yaml.safe_load((REPO / "docker-compose.yml").read_text())
    services = doc["services"]
    images = {name: s["image"] for name, s in services.items()}
    assert images["collector"] == "otel/opentelemetry-collector-contrib:0.159.0"
    assert images["jaeger"] == "jaegertracing/jaeger:2.20.0"
    assert images["tempo"] == "grafana/tempo:3.0.3"
    assert images["prometheus"].startswith("prom/prometheus:v3.")
    assert images["grafana"].startswith("grafana/grafana:13.")
    for name, s in services.items():
        for port in s.get("ports", []):
            assert str(port).startswith("127.0.0.1:"), f"{name} publishes {port} beyond localhost"
    published = {str(p).split(":")[1] for s in services.values() for p in s.get("ports", [])}
    otlp_publishers = [
        n for n, s in services.items() for p in s.get("ports", []) if str(p).split(":")[1] in ("4317", "4318")
    ]
    assert set(otlp_publishers) == {"collector"}
    assert {"4317", "4318"} <= published
    grafana_env = services["grafana"]["environment"]
    assert grafana_env["GF_AUTH_ANONYMOUS_ENABLED"] == "false" or grafana_env["GF_AUTH_ANONYMOUS_ORG_ROLE"] == "Viewer"


def test_collector_manifest_matches_config():
    """ocb manifest lists exactly the component types the config and its overlays (every collector/*.yaml) use."""
    import yaml

    manifest = yaml.safe_load((REPO / "collector" / "manifest.yaml").read_text())
    out = run([binary("otelcol-verl"), "components"])
    assert out.returncode == 0, out.stderr
    comps = yaml.safe_load(out.stdout)
    built = {
        kind: {c["name"] for c in comps.get(kind) or []}
        for kind in ("receivers", "processors", "exporters", "connectors", "extensions")
    }
    used: dict[str, set[str]] = {k: set() for k in built}
    configs = sorted(p for p in (REPO / "collector").glob("*.yaml") if p.name != "manifest.yaml")
    assert {p.name for p in configs} >= {"config.yaml", "tail_sampling.yaml", "durable.yaml", "tls_auth.yaml"}
    for path in configs:
        cfg = yaml.safe_load(path.read_text())
        for kind in used:
            for cid in cfg.get(kind) or {}:
                used[kind].add(cid.split("/")[0])
    assert built == used
    assert sum(len(manifest.get(k) or []) for k in used) == sum(len(v) for v in used.values())


@pytest.mark.parametrize("overlay", [None, "tail_sampling.yaml", "durable.yaml", "tls_auth.yaml"])
def test_collector_validate(overlay, tmp_path, monkeypatch):
    """The base config and each documented overlay (collector/*.yaml) pass the built collector's validate."""
    cmd = [binary("otelcol-verl"), "validate", "--config", REPO / "collector" / "config.yaml"]
    if overlay:
        cmd += ["--config", REPO / "collector" / overlay]
    # tls_auth.yaml's variables have no defaults on purpose; durable.yaml's queue directory does
    monkeypatch.setenv("OTEL_VERL_TLS_CERT", str(tmp_path / "server.crt"))
    monkeypatch.setenv("OTEL_VERL_TLS_KEY", str(tmp_path / "server.key"))
    monkeypatch.setenv("OTEL_VERL_BEARER_TOKEN", "validate-only")
    r = run(cmd)
    assert r.returncode == 0, r.stdout + r.stderr


def test_promtool_check_config():
    r = run([binary("promtool"), "check", "config", REPO / "prometheus" / "prometheus.yml"])
    assert r.returncode == 0, r.stdout + r.stderr


def test_jaeger_config_loads(tmp_path):
    grpc, http_, query, qgrpc, health, metrics = free_ports(6)
    env = {
        "JAEGER_OTLP_GRPC_PORT": str(grpc),
        "JAEGER_OTLP_HTTP_PORT": str(http_),
        "JAEGER_QUERY_HTTP_PORT": str(query),
        "JAEGER_QUERY_GRPC_PORT": str(qgrpc),
        "JAEGER_HEALTH_PORT": str(health),
        "JAEGER_METRICS_PORT": str(metrics),
    }
    p: Proc = start("jaeger-offline", [binary("jaeger"), "--config", REPO / "jaeger" / "config.yaml"], env, tmp_path)
    try:
        wait_until(lambda: http_get(f"http://127.0.0.1:{health}/status")[0] == 200, 60, "jaeger health", procs=[p])
        status, body = http_get(f"http://127.0.0.1:{query}/api/v3/services")
        assert status == 200, body
        assert "services" in json.loads(body) or json.loads(body) == {}
    finally:
        p.stop()
    assert p.proc.returncode == 0, p.tail()


def test_dashboards_json_is_generated():
    """The committed dashboards/*.json equal what dashboards/generate.py produces."""
    generate = load_dashboards()
    rendered = generate.render_all()
    on_disk = {p.name: p.read_text() for p in (REPO / "dashboards").glob("*.json")}
    assert set(on_disk) == set(rendered), "dashboards/*.json files differ from generate.DASHBOARDS"
    for name, text in rendered.items():
        assert on_disk[name] == text, f"dashboards/{name} is stale: run `uv run python dashboards/generate.py`"
    r = run([sys.executable, REPO / "dashboards" / "generate.py", "--check"])
    assert r.returncode == 0, r.stderr
    queries = generate.promql_queries()
    assert len(queries) >= 15
    assert all("traces_span_metrics_" in q["expr"] for q in queries)


def test_grafana_provisioning_matches_dashboards():
    import yaml

    ds = yaml.safe_load((REPO / "grafana" / "provisioning" / "datasources" / "datasources.yaml").read_text())
    uids = {d["uid"]: d for d in ds["datasources"]}
    assert {"otel-verl-prometheus", "otel-verl-tempo", "otel-verl-jaeger"} <= set(uids)
    for path in (REPO / "dashboards").glob("*.json"):
        doc = json.loads(path.read_text())
        for panel in doc["panels"]:
            ref = panel.get("datasource")
            if ref:
                assert ref["uid"] in uids, f"{path.name}: panel {panel.get('title')} uses unknown datasource {ref}"
    # exemplars link to traces, Tempo links back to metrics
    prom = uids["otel-verl-prometheus"]["jsonData"]["exemplarTraceIdDestinations"]
    assert {d["datasourceUid"] for d in prom} == {"otel-verl-tempo", "otel-verl-jaeger"}
    assert uids["otel-verl-tempo"]["jsonData"]["tracesToMetrics"]["datasourceUid"] == "otel-verl-prometheus"
