"""The real otelcol-verl + Jaeger for reliability tests, with a collector that can be killed and restarted.

Reuses tests/backends/conftest.py's helpers (binaries from scripts/install_backends.sh, free ports,
process handling). Unlike its session-wide ``backends`` fixture, each test gets its own Jaeger (an
empty memory store, so span counts are exact) and controls the collector's life: start it late
(collector down during the run), SIGKILL it, restart it on the same ports, add config overlays
(collector/durable.yaml, collector/tls_auth.yaml).
"""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from tests.backends.conftest import REPO, Proc, binary, free_ports, http_get, start, wait_until


@dataclass
class Stack:
    workdir: Path
    overlays: list[Path] = field(default_factory=list)
    collector_env: dict[str, str] = field(default_factory=dict)
    procs: dict[str, Proc] = field(default_factory=dict)
    restarts: int = 0

    def __post_init__(self) -> None:
        (
            self.c_grpc,
            self.c_http,
            self.c_health,
            self.c_metrics,
            self.c_tele,
            self.tempo_closed,
            self.j_grpc,
            self.j_http,
            self.j_query,
            self.j_qgrpc,
            self.j_health,
            self.j_metrics,
        ) = free_ports(12)
        self.jaeger_url = f"http://127.0.0.1:{self.j_query}"
        self.otlp_grpc = f"http://127.0.0.1:{self.c_grpc}"
        self.otlp_http = f"http://127.0.0.1:{self.c_http}"

    # -- Jaeger
    def start_jaeger(self) -> None:
        env = {
            "JAEGER_BIND": "127.0.0.1",
            "JAEGER_OTLP_GRPC_PORT": str(self.j_grpc),
            "JAEGER_OTLP_HTTP_PORT": str(self.j_http),
            "JAEGER_QUERY_HTTP_PORT": str(self.j_query),
            "JAEGER_QUERY_GRPC_PORT": str(self.j_qgrpc),
            "JAEGER_HEALTH_PORT": str(self.j_health),
            "JAEGER_METRICS_PORT": str(self.j_metrics),
        }
        jaeger = start("jaeger", [binary("jaeger"), "--config", REPO / "jaeger" / "config.yaml"], env, self.workdir)
        self.procs["jaeger"] = jaeger
        wait_until(lambda: http_get(f"http://127.0.0.1:{self.j_health}/status")[0] == 200, 60, "jaeger", procs=[jaeger])
        wait_until(lambda: http_get(f"{self.jaeger_url}/api/v3/services")[0] == 200, 60, "jaeger query", procs=[jaeger])

    # -- collector
    def start_collector(self) -> Proc:
        env = {
            "OTEL_VERL_COLLECTOR_BIND": "127.0.0.1",
            "OTEL_VERL_OTLP_GRPC_PORT": str(self.c_grpc),
            "OTEL_VERL_OTLP_HTTP_PORT": str(self.c_http),
            "OTEL_VERL_HEALTH_PORT": str(self.c_health),
            "OTEL_VERL_METRICS_PORT": str(self.c_metrics),
            "OTEL_VERL_TELEMETRY_PORT": str(self.c_tele),
            "OTEL_VERL_JAEGER_OTLP_ENDPOINT": f"127.0.0.1:{self.j_grpc}",
            "OTEL_VERL_TEMPO_OTLP_ENDPOINT": f"127.0.0.1:{self.tempo_closed}",
            "OTEL_VERL_ARCHIVE_DIR": str(self.workdir / "archive"),
            "OTEL_VERL_QUEUE_DIR": str(self.workdir / "queue"),
            **self.collector_env,
        }
        cmd: list[object] = [binary("otelcol-verl"), "--config", REPO / "collector" / "config.yaml"]
        for overlay in self.overlays:
            cmd += ["--config", overlay]
        name = "collector" if not self.restarts else f"collector-{self.restarts}"
        proc = start(name, cmd, env, self.workdir)
        self.procs["collector"] = proc
        self.restarts += 1
        wait_until(
            lambda: http_get(f"http://127.0.0.1:{self.c_health}/")[0] == 200, 60, "collector health", procs=[proc]
        )
        return proc

    def kill_collector(self) -> None:
        """SIGKILL: no shutdown, no flush (a crash or an OOM kill)."""
        proc = self.procs["collector"].proc
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)

    def stop(self) -> None:
        for proc in reversed(list(self.procs.values())):
            proc.stop()

    def logs(self) -> str:
        return "\n".join(f"--- {n} ---\n{p.tail()}" for n, p in self.procs.items())

    # -- Jaeger queries
    def jaeger_span_ids(self, trace_id: str) -> Counter[str]:
        """Span id → how many copies Jaeger stores in that trace (raw: no adjuster merges duplicates)."""
        status, body = http_get(f"{self.jaeger_url}/api/v3/traces/{trace_id}?raw_traces=true", timeout=10)
        if status != 200 or not body:
            return Counter()
        doc = json.loads(body)
        doc = doc.get("result", doc)
        return Counter(
            span["spanId"].lower()
            for rs in doc.get("resourceSpans", [])
            for ss in rs.get("scopeSpans", [])
            for span in ss.get("spans", [])
        )


class SilentEndpoint:
    """A TCP port that accepts connections and never answers: a hung collector, not a refused one.

    gRPC connects, sends its preface and waits for the server's HTTP/2 settings, which never come, so
    every export runs into its full deadline (OTEL_EXPORTER_OTLP_TIMEOUT, 10 s by default) instead of
    failing at once as on a closed port.
    """

    def __init__(self) -> None:
        self._server = socket.socket()
        self._server.bind(("127.0.0.1", 0))
        self._server.listen(64)
        self.url = f"http://127.0.0.1:{self._server.getsockname()[1]}"
        self._held: list[socket.socket] = []
        self._thread = threading.Thread(target=self._accept, name="silent-endpoint", daemon=True)
        self._thread.start()

    @property
    def connections(self) -> int:
        return len(self._held)

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self._server.accept()
            except OSError:  # closed
                return
            self._held.append(conn)  # kept open, never read from or written to

    def close(self) -> None:
        try:
            self._server.shutdown(socket.SHUT_RDWR)  # wakes the blocked accept()
        except OSError:
            pass
        self._server.close()
        for conn in self._held:
            conn.close()
        self._thread.join(timeout=5)

    def __enter__(self) -> SilentEndpoint:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def wait_while_running(child: subprocess.Popen, predicate: Callable[[], bool], timeout: float, what: str) -> None:
    """Poll ``predicate`` until true; fail at once (with the child's exit code) if ``child`` ends first."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if child.poll() is not None:
            raise AssertionError(f"the demo exited ({child.returncode}) before {what}")
        try:
            if predicate():
                return
        except OSError:  # a file appearing or being rotated under us
            pass
        time.sleep(0.1)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}")


def spool_span_ids(root: Path) -> dict[str, str]:
    """span id → trace id of every span in the spool's OTLP/JSON lines (the delivery journal excluded)."""
    out: dict[str, str] = {}
    for path in sorted(root.rglob("*.jsonl")):
        if ".delivery" in path.parts:
            continue
        for line in path.read_text().splitlines():
            if not line.strip():
                continue
            doc = json.loads(line)
            for rs in doc.get("resourceSpans", []):
                for ss in rs.get("scopeSpans", []):
                    for span in ss.get("spans", []):
                        out[span["spanId"].lower()] = span["traceId"].lower()
    return out


def spool_line_spans(root: Path) -> int:
    """Spans counted line by line (duplicated lines counted twice), for created-vs-spooled checks."""
    total = 0
    for path in sorted(root.rglob("*.jsonl")):
        if ".delivery" in path.parts:
            continue
        for line in path.read_text().splitlines():
            if line.strip():
                doc = json.loads(line)
                total += sum(len(ss.get("spans", [])) for rs in doc["resourceSpans"] for ss in rs.get("scopeSpans", []))
    return total


def jaeger_copies(stack: Stack, spool: dict[str, str]) -> Counter[str]:
    """For every spool span: copies in Jaeger (0 = missing, 2+ = duplicated)."""
    by_trace: dict[str, set[str]] = {}
    for span_id, trace_id in spool.items():
        by_trace.setdefault(trace_id, set()).add(span_id)
    copies: Counter[str] = Counter()
    extra = 0
    for trace_id, ids in by_trace.items():
        got = stack.jaeger_span_ids(trace_id)
        for span_id in ids:
            copies[span_id] = got.get(span_id, 0)
        extra += sum(n for s, n in got.items() if s not in ids)
    copies["<not in spool>"] = extra
    return copies
