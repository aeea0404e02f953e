"""Target 3: a burst of 100,000 spans within 5 s in one process, default configuration, nothing dropped.

The spans are made the way a rollout makes them — request recorders of 1 request + 3 turns × 4
events (13 spans each) finished back to back — and go to the spool and over OTLP/gRPC to the real
collector (``otelcol-verl`` built by scripts/install_backends.sh, run with the repo's
collector/config.yaml; its ``file/archive`` exporter writes every span it received). Counted: spans
in the spool files, spans in the collector's archive, and ``otel_verl.spans.dropped``.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import tempfile
import time
import urllib.request
from pathlib import Path

from benchmarks._table import Result

SPANS = 100_000
PER_REQUEST = 1 + 3 * 4
REPO = Path(__file__).resolve().parents[1]
COLLECTOR = Path(os.environ.get("OTEL_VERL_CACHE") or Path.home() / ".cache" / "otel_verl") / "bin" / "otelcol-verl"


def _ports(n: int) -> list[int]:
    socks = [socket.socket() for _ in range(n)]
    for s in socks:
        s.bind(("127.0.0.1", 0))
    ports = [s.getsockname()[1] for s in socks]
    for s in socks:
        s.close()
    return ports


def _count_spans(files: list[Path]) -> int:
    total = 0
    for path in files:
        with open(path, "rb") as fh:
            for line in fh:
                if line.strip():
                    doc = json.loads(line)
                    for rs in doc.get("resourceSpans", ()):
                        for ss in rs.get("scopeSpans", ()):
                            total += len(ss.get("spans", ()))
    return total


def _start_collector(work: Path) -> tuple[subprocess.Popen, str, Path, int]:
    grpc, http, health, metrics, tele, closed = _ports(6)
    archive = work / "archive"
    env = {
        **os.environ,
        "OTEL_VERL_COLLECTOR_BIND": "127.0.0.1",
        "OTEL_VERL_OTLP_GRPC_PORT": str(grpc),
        "OTEL_VERL_OTLP_HTTP_PORT": str(http),
        "OTEL_VERL_HEALTH_PORT": str(health),
        "OTEL_VERL_METRICS_PORT": str(metrics),
        "OTEL_VERL_TELEMETRY_PORT": str(tele),
        "OTEL_VERL_JAEGER_OTLP_ENDPOINT": f"127.0.0.1:{closed}",
        "OTEL_VERL_TEMPO_OTLP_ENDPOINT": f"127.0.0.1:{closed}",
        "OTEL_VERL_ARCHIVE_DIR": str(archive),
    }
    log = open(work / "collector.log", "wb")  # noqa: SIM115 - lives as long as the process
    proc = subprocess.Popen(
        [str(COLLECTOR), "--config", str(REPO / "collector" / "config.yaml")], env=env, stdout=log, stderr=log
    )
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{health}/", timeout=2) as resp:
                if resp.status == 200:
                    return proc, f"http://127.0.0.1:{grpc}", archive, tele
        except OSError:
            time.sleep(0.25)
    proc.kill()
    raise RuntimeError(f"collector did not become healthy; see {work / 'collector.log'}")


def _collector_accepted(tele: int) -> int | None:
    """The collector's own count of spans its OTLP receiver accepted (internal telemetry)."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{tele}/metrics", timeout=5) as resp:
            text = resp.read().decode()
    except OSError:
        return None
    total = 0.0
    for line in text.splitlines():
        if line.startswith("otelcol_receiver_accepted_spans") and 'receiver="otlp"' in line:
            total += float(line.rsplit(" ", 1)[1])
    return int(total)


def burst(requests: int) -> int:
    from otel_verl import semconv as sc
    from otel_verl.export import tracing
    from otel_verl.recording.recorder import RequestRecorder

    worker = tracing.tracer().start_span(sc.SPAN_WORKER, attributes={sc.VERL_STEP: 1, sc.VERL_WORKER_RANK: 0})
    parent = worker.get_span_context()
    created = 1
    for r in range(requests):
        rec = RequestRecorder(parent, {sc.VERL_STEP: 1, sc.VERL_WORKER_RANK: 0, sc.VERL_REQUEST_ID: f"req-{r}"})
        for _ in range(3):
            rec.open_turn()
            rec.end(rec.start(sc.generate_span_name("demo-model")), {sc.GEN_AI_USAGE_OUTPUT_TOKENS: 60})
            rec.end(rec.start(sc.SPAN_TOOL_PARSE), {sc.VERL_TOOL_CALL_COUNT: 1})
            rec.end(rec.start(sc.tool_span_name("calculator")))
        created += rec.finish("completed")
    worker.end()
    return created


def run(quick: bool) -> list[Result]:
    from otel_verl.export import provider
    from tests.process_state import dropped_so_far, reset_dropped, reset_tracing

    if not COLLECTOR.exists():
        return [Result("3. burst 100k spans: 0 dropped", "0 dropped", "collector missing", False, str(COLLECTOR))]
    requests = SPANS // PER_REQUEST + 1
    with tempfile.TemporaryDirectory(prefix="otel-verl-bench-") as tmp:
        work = Path(tmp)
        proc, endpoint, archive, tele = _start_collector(work)
        saved = {
            k: os.environ.get(k) for k in ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_VERL_SPOOL", "OTEL_VERL_SPOOL_DIR")
        }
        try:
            os.environ.update(
                OTEL_EXPORTER_OTLP_ENDPOINT=endpoint, OTEL_VERL_SPOOL="true", OTEL_VERL_SPOOL_DIR=str(work / "spool")
            )
            reset_tracing()
            reset_dropped()
            provider.setup_tracing("agent_loop_worker", worker_rank=0, set_global=False)
            t0 = time.perf_counter()
            created = burst(requests)
            burst_s = time.perf_counter() - t0
            provider.shutdown_tracing()  # flushes both exporters
            drained_s = time.perf_counter() - t0
            lost = dropped_so_far()
            spooled = _count_spans(sorted((work / "spool").rglob("*.jsonl")))
            deadline = time.monotonic() + 60
            archived = 0
            while time.monotonic() < deadline:
                archived = _count_spans(sorted(archive.glob("traces*.jsonl")))
                if archived >= created:
                    break
                time.sleep(1)
            accepted = _collector_accepted(tele)
        finally:
            for k, v in saved.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v
            proc.terminate()
            proc.wait(10)
    ok = created >= SPANS and burst_s <= 5.0 and lost == 0 and spooled == created == archived
    return [
        Result(
            "3. burst 100k spans in ≤ 5 s: 0 dropped (spool + OTLP)",
            "exported == created, dropped 0",
            f"{created:,} created in {burst_s:.1f} s; spool {spooled:,}, collector {archived:,}; dropped {lost}",
            ok,
            f"drained (both exporters flushed) after {drained_s:.1f} s; collector receiver accepted {accepted}",
        )
    ]


if __name__ == "__main__":
    for row in run(quick=True):
        print(row)
