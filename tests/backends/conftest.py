"""Real backends for tests/backends: otelcol-verl + Jaeger v2 + Prometheus on free localhost ports.

The binaries come from ``${OTEL_VERL_CACHE:-$HOME/.cache/otel_verl}/bin`` (built by
scripts/install_backends.sh) and Prometheus from PATH (Debian's package). The repo's own config files
are used unchanged; ports are moved with env vars only (collector/config.yaml, jaeger/config.yaml).
Prometheus gets a copy of prometheus/prometheus.yml with only targets and intervals changed.
Jaeger serves the built Jaeger UI (``$OTEL_VERL_JAEGER_UI``, default ``../shared/jaeger-ui/v1.74.0`` beside
the checkout) through ``JAEGER_UI_ASSETS_PATH`` when it is there; without it, its placeholder page.
No Tempo runs here: the collector's Tempo exporter points at a closed port, which is the documented
"Tempo absent" case (bounded queue + retry, the other exporters keep working).
"""

from __future__ import annotations

import copy
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from .emitters import EmitterRun, run_emitter

REPO = Path(__file__).resolve().parents[2]
CACHE = Path(os.environ.get("OTEL_VERL_CACHE") or Path.home() / ".cache" / "otel_verl")
BIN = CACHE / "bin"
INSTALL_HINT = "run scripts/install_backends.sh (builds otelcol-verl and jaeger, installs prometheus)"
JAEGER_UI = Path(os.environ.get("OTEL_VERL_JAEGER_UI") or REPO.parent / "shared" / "jaeger-ui" / "v1.74.0")
"""The built Jaeger UI (jaegertracing/jaeger-ui's ``packages/jaeger-ui/build``; docs/without-docker.md says how)."""


def jaeger_ui_assets() -> Path | None:
    """JAEGER_UI when it holds a built UI (its index.html), else None."""
    return JAEGER_UI if (JAEGER_UI / "index.html").is_file() else None


def load_dashboards():
    """dashboards/generate.py as a module (it is a script, not part of the package)."""
    import importlib.util

    name = "otel_verl_dashboards_generate"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, REPO / "dashboards" / "generate.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def binary(name: str) -> Path:
    """A backend binary, or a test failure that says how to get it."""
    if name in ("otelcol-verl", "jaeger"):
        path = BIN / name
        if not (path.exists() and os.access(path, os.X_OK)):
            pytest.fail(f"{path} is missing: {INSTALL_HINT}", pytrace=False)
        return path
    found = shutil.which(name)
    if not found:
        pytest.fail(f"{name} not found on PATH: {INSTALL_HINT}", pytrace=False)
    return Path(found)


def free_ports(n: int) -> list[int]:
    socks, ports = [], []
    for _ in range(n):
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        socks.append(s)
        ports.append(s.getsockname()[1])
    for s in socks:
        s.close()
    return ports


def http_get(url: str, timeout: float = 5.0) -> tuple[int, bytes]:
    try:
        with urllib.request.urlopen(url, timeout=timeout) as resp:
            return resp.status, resp.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


def wait_until(predicate, timeout: float, what: str, interval: float = 0.25, procs=()):
    deadline = time.monotonic() + timeout
    last_exc = None
    while time.monotonic() < deadline:
        for p in procs:
            if p.proc.poll() is not None:
                raise AssertionError(f"{p.name} exited with {p.proc.returncode} while waiting for {what}:\n{p.tail()}")
        try:
            result = predicate()
            if result:
                return result
        except Exception as exc:  # connection refused while starting, etc.
            last_exc = exc
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout}s waiting for {what} (last error: {last_exc})")


@dataclass
class Proc:
    name: str
    proc: subprocess.Popen
    log: Path

    def tail(self, n: int = 40) -> str:
        try:
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-n:])
        except OSError:
            return ""

    def stop(self, timeout: float = 10.0) -> None:
        if self.proc.poll() is not None:
            return
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=timeout)


def start(name: str, cmd: list[str], env: dict[str, str], logdir: Path) -> Proc:
    log = logdir / f"{name}.log"
    fh = log.open("wb")
    proc = subprocess.Popen(
        [str(c) for c in cmd],
        env={**os.environ, **env},
        stdout=fh,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        cwd=logdir,
        start_new_session=True,
    )
    fh.close()
    return Proc(name, proc, log)


@contextmanager
def replayed_jaeger(
    config: Path, spool: Path, work: Path, since_ns: int = 0, env: dict[str, str] | None = None, timeout: float = 60
):
    """Jaeger v2 with ``config`` (a jaeger/*.yaml, ports moved by env vars only; ``env``: its other variables) on
    free ports, ``spool`` replayed into it; yields the query URL once every span of the spool is found there from
    ``since_ns`` on (each wait up to ``timeout`` s). Jaeger's batch processor (and a search store's refresh) makes
    spans searchable in batches and the service shows with the first: a test that read on then saw part of the
    run (stop 42's CI failed so)."""
    from otel_verl.analysis.read import load_spans

    grpc, otlp_http, query, qgrpc, health, metrics = free_ports(6)
    ports = {
        "JAEGER_BIND": "127.0.0.1",
        "JAEGER_OTLP_GRPC_PORT": str(grpc),
        "JAEGER_OTLP_HTTP_PORT": str(otlp_http),
        "JAEGER_QUERY_HTTP_PORT": str(query),
        "JAEGER_QUERY_GRPC_PORT": str(qgrpc),
        "JAEGER_HEALTH_PORT": str(health),
        "JAEGER_METRICS_PORT": str(metrics),
    }
    proc = start("jaeger", [binary("jaeger"), "--config", config], {**(env or {}), **ports}, work)
    try:
        url = f"http://127.0.0.1:{query}"
        wait_until(lambda: http_get(f"{url}/api/v3/services")[0] == 200, timeout, "jaeger query", procs=[proc])
        cmd = [sys.executable, "-c", "from otel_verl.cli import main; main()", "replay", str(spool)]
        cmd += ["--endpoint", f"http://127.0.0.1:{grpc}", "--ignore-journal"]
        subprocess.run(cmd, check=True, capture_output=True, timeout=120)
        sent = len(load_spans(spool))
        wait_until(lambda: len(load_spans(url, since_ns=since_ns)) == sent, timeout, f"all {sent} spans", 1.0, [proc])
        yield url
    finally:
        proc.stop()


def prometheus_test_config(targets: dict[str, str], interval: str = "2s") -> dict:
    """The repo's prometheus.yml with only scrape targets and intervals changed."""
    import yaml

    cfg = yaml.safe_load((REPO / "prometheus" / "prometheus.yml").read_text())
    cfg = copy.deepcopy(cfg)
    cfg["global"]["scrape_interval"] = interval
    cfg["global"]["evaluation_interval"] = interval
    for job in cfg["scrape_configs"]:
        if "scrape_interval" in job:
            job["scrape_interval"] = interval
        job["static_configs"] = [{"targets": [targets[job["job_name"]]]}]
    return cfg


@dataclass
class Backends:
    collector_otlp_grpc: str  # http://127.0.0.1:port, for OTEL_EXPORTER_OTLP_ENDPOINT
    collector_otlp_http: str
    jaeger_url: str  # query API base, e.g. http://127.0.0.1:16686
    prometheus_url: str
    archive_dir: Path
    workdir: Path
    jaeger_ui: Path | None  # the UI files Jaeger serves at jaeger_url, None: its placeholder page
    procs: dict[str, Proc] = field(default_factory=dict)

    def logs(self) -> str:
        return "\n".join(f"--- {n} ---\n{p.tail()}" for n, p in self.procs.items())


@pytest.fixture(scope="session")
def backends(tmp_path_factory) -> Iterator[Backends]:
    import yaml

    otelcol, jaeger, prometheus = binary("otelcol-verl"), binary("jaeger"), binary("prometheus")
    work = tmp_path_factory.mktemp("backends")
    (
        c_grpc,
        c_http,
        c_health,
        c_metrics,
        c_tele,
        tempo_closed,
        j_grpc,
        j_http,
        j_query,
        j_qgrpc,
        j_health,
        j_metrics,
        prom,
    ) = free_ports(13)
    archive = work / "archive"
    env_jaeger = {
        "JAEGER_BIND": "127.0.0.1",
        "JAEGER_OTLP_GRPC_PORT": str(j_grpc),
        "JAEGER_OTLP_HTTP_PORT": str(j_http),
        "JAEGER_QUERY_HTTP_PORT": str(j_query),
        "JAEGER_QUERY_GRPC_PORT": str(j_qgrpc),
        "JAEGER_HEALTH_PORT": str(j_health),
        "JAEGER_METRICS_PORT": str(j_metrics),
    }
    ui = jaeger_ui_assets()
    if ui is not None:
        env_jaeger["JAEGER_UI_ASSETS_PATH"] = str(ui)
    env_collector = {
        "OTEL_VERL_COLLECTOR_BIND": "127.0.0.1",
        "OTEL_VERL_OTLP_GRPC_PORT": str(c_grpc),
        "OTEL_VERL_OTLP_HTTP_PORT": str(c_http),
        "OTEL_VERL_HEALTH_PORT": str(c_health),
        "OTEL_VERL_METRICS_PORT": str(c_metrics),
        "OTEL_VERL_TELEMETRY_PORT": str(c_tele),
        "OTEL_VERL_JAEGER_OTLP_ENDPOINT": f"127.0.0.1:{j_grpc}",
        "OTEL_VERL_TEMPO_OTLP_ENDPOINT": f"127.0.0.1:{tempo_closed}",
        "OTEL_VERL_ARCHIVE_DIR": str(archive),
        "OTEL_VERL_SPANMETRICS_FLUSH": "4s",
    }
    prom_cfg = prometheus_test_config(
        {
            "otel-verl-spanmetrics": f"127.0.0.1:{c_metrics}",
            "otel-collector": f"127.0.0.1:{c_tele}",
            "jaeger": f"127.0.0.1:{j_metrics}",
            "tempo": f"127.0.0.1:{tempo_closed}",
        }
    )
    prom_file = work / "prometheus.yml"
    prom_file.write_text(yaml.safe_dump(prom_cfg))

    procs: dict[str, Proc] = {}
    b = Backends(
        collector_otlp_grpc=f"http://127.0.0.1:{c_grpc}",
        collector_otlp_http=f"http://127.0.0.1:{c_http}",
        jaeger_url=f"http://127.0.0.1:{j_query}",
        prometheus_url=f"http://127.0.0.1:{prom}",
        archive_dir=archive,
        workdir=work,
        jaeger_ui=ui,
        procs=procs,
    )
    try:
        procs["jaeger"] = start("jaeger", [jaeger, "--config", REPO / "jaeger" / "config.yaml"], env_jaeger, work)
        procs["collector"] = start(
            "collector", [otelcol, "--config", REPO / "collector" / "config.yaml"], env_collector, work
        )
        procs["prometheus"] = start(
            "prometheus",
            [
                prometheus,
                f"--config.file={prom_file}",
                f"--storage.tsdb.path={work / 'tsdb'}",
                f"--web.listen-address=127.0.0.1:{prom}",
                "--enable-feature=exemplar-storage",
            ],
            {},
            work,
        )
        running = list(procs.values())
        wait_until(
            lambda: http_get(f"http://127.0.0.1:{j_health}/status")[0] == 200, 60, "jaeger health", procs=running
        )
        wait_until(lambda: http_get(f"{b.jaeger_url}/api/v3/services")[0] == 200, 60, "jaeger query", procs=running)
        wait_until(lambda: http_get(f"http://127.0.0.1:{c_health}/")[0] == 200, 60, "collector health", procs=running)
        wait_until(lambda: http_get(f"{b.prometheus_url}/-/ready")[0] == 200, 60, "prometheus ready", procs=running)
        yield b
    finally:
        for p in reversed(list(procs.values())):
            p.stop()


@pytest.fixture(scope="session")
def emitter_runs(backends: Backends, tmp_path_factory):
    """``run(kind, args=(), env=None) -> EmitterRun``: each distinct run once per session, through the collector."""
    runs: dict[tuple, EmitterRun] = {}

    def run(kind: str, args: tuple[str, ...] = (), env: dict[str, str] | None = None) -> EmitterRun:
        key = (kind, tuple(args), tuple(sorted((env or {}).items())))
        if key not in runs:
            spool = tmp_path_factory.mktemp(f"spool-{kind}")
            runs[key] = run_emitter(kind, backends.collector_otlp_grpc, spool, args, env)
        return runs[key]

    return run
