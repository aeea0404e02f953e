"""Issue 30: traces at real-run size — steps of 4,096 trajectories × 8 turns at ``full`` detail (~164k spans a
step) through the OTel SDK → the real collector (``otelcol-verl``) → Jaeger, and the spool, for several steps.

The rollout is :mod:`benchmarks._real_size_rollout`: a trainer process and 8 AgentLoopWorker processes, as verl
runs them, their trajectories generated and driven through otel_verl's own wrappers (the recorder, trace
placement, hold, delivery and exporters verl's would use). verl's real agent loop (the CPU demo) does not keep
up at this size on a 2-core machine: see docs/notes/performance-history.md, "Real-size load". Collector and
Jaeger are the binaries scripts/install_backends.sh builds, run with the repo's configs (the collector's Tempo
exporter left out of its pipeline by an overlay: a Jaeger-only login node).

Counted: spans created (each process's ``.counts`` file: spans its tracer and recorder ended), written to the
spool, delivered to the collector (the delivery journal), and found in Jaeger (every trace of the spool fetched
by id from ``/api/v3/traces/<id>``, span ids compared); the largest trace (spans; OTLP/protobuf bytes, the
size Tempo's ``max_bytes_per_trace`` counts); Jaeger's answer times (a request found by its id as Jaeger's UI
searches, then its trace; a step's trace; all of a step's traces); the collector's peak RSS against its
memory limiter; CPU and peak RSS of the emitting processes against an untraced twin run of the same rollout.

``--quick``: 2 steps of 512 trajectories (2 workers). ``python -m benchmarks.bench_real_size [--quick]``.
"""

from __future__ import annotations

import json
import multiprocessing as mp
import os
import statistics
import sys
import tempfile
import threading
import time
import urllib.parse
import urllib.request
from collections import defaultdict
from pathlib import Path
from typing import Any

from benchmarks._real_size_rollout import Shape, Trainer, worker_main
from benchmarks._table import Result

REPO = Path(__file__).resolve().parents[1]
CACHE = Path(os.environ.get("OTEL_VERL_CACHE") or Path.home() / ".cache" / "otel_verl")
COLLECTOR, JAEGER = CACHE / "bin" / "otelcol-verl", CACHE / "bin" / "jaeger"
FULL = Shape(steps=3, workers=8, prompts=512, n=8, turns=8)
QUICK = Shape(steps=2, workers=2, prompts=64, n=8, turns=8)
TRACE_LIMIT_SPANS, TRACE_LIMIT_BYTES = 5000, 4 * 1024 * 1024
JAEGER_ONLY = "service:\n  pipelines:\n    traces/backends:\n      exporters: [otlp_grpc/jaeger]\n"


# ------------------------------------------------------------------ processes
def _trainer_main(shape: Shape, traced: bool, conn: Any) -> None:
    """The trainer process: spawns the workers, runs the steps, reports."""
    ctx = mp.get_context("spawn")
    pipes = [ctx.Pipe() for _ in range(shape.workers)]
    procs = [ctx.Process(target=worker_main, args=(r, shape, traced, pipes[r][1])) for r in range(shape.workers)]
    for p in procs:
        p.start()
    conns = [a for a, _ in pipes]
    ready = [c.recv() for c in conns]  # each worker's RSS once set up (libraries and exporters loaded)
    trainer = Trainer(shape, traced, conns)
    steps = []
    for _ in range(shape.steps):
        t0, cpu0 = time.perf_counter(), time.process_time()
        timing = trainer.step()
        steps.append({"wall_s": time.perf_counter() - t0, "cpu_s": time.process_time() - cpu0, **timing})
    for c in conns:
        c.send(None)
    finals = [c.recv() for c in conns]
    for p in procs:
        p.join(60)
    trainer.close()
    conn.send(
        {
            "steps": steps,
            "workers": trainer.worker_reports,
            "finals": finals,
            "ready": ready,
            "trainer_maxrss_mib": _maxrss(),
        }
    )


def _maxrss() -> float:
    from benchmarks._real_size_rollout import peak_rss_mib

    return peak_rss_mib()


def _run_rollout(shape: Shape, traced: bool, env: dict[str, str]) -> dict[str, Any]:
    saved = dict(os.environ)
    os.environ.update(env)
    try:
        ctx = mp.get_context("spawn")
        ours, theirs = ctx.Pipe()
        proc = ctx.Process(target=_trainer_main, args=(shape, traced, theirs))
        proc.start()
        report = ours.recv()
        proc.join(120)
        return report
    finally:
        os.environ.clear()
        os.environ.update(saved)


# ------------------------------------------------------------------ backends
class Backends:
    """otelcol-verl + Jaeger on free localhost ports (tests/backends/conftest.py's helpers)."""

    def __init__(self, work: Path) -> None:
        from tests.backends.conftest import free_ports, http_get, start, wait_until

        self.work, self._http_get = work, http_get
        c_grpc, c_http, c_health, c_metrics, self.c_tele, j_grpc, j_http, j_query, j_qgrpc, j_health, j_metrics = (
            free_ports(11)
        )
        self.otlp = f"http://127.0.0.1:{c_grpc}"
        self.jaeger = f"http://127.0.0.1:{j_query}"
        (work / "jaeger_only.yaml").write_text(JAEGER_ONLY)
        env_j = {
            "JAEGER_BIND": "127.0.0.1",
            "JAEGER_OTLP_GRPC_PORT": str(j_grpc),
            "JAEGER_OTLP_HTTP_PORT": str(j_http),
            "JAEGER_QUERY_HTTP_PORT": str(j_query),
            "JAEGER_QUERY_GRPC_PORT": str(j_qgrpc),
            "JAEGER_HEALTH_PORT": str(j_health),
            "JAEGER_METRICS_PORT": str(j_metrics),
        }
        env_c = {
            "OTEL_VERL_COLLECTOR_BIND": "127.0.0.1",
            "OTEL_VERL_OTLP_GRPC_PORT": str(c_grpc),
            "OTEL_VERL_OTLP_HTTP_PORT": str(c_http),
            "OTEL_VERL_HEALTH_PORT": str(c_health),
            "OTEL_VERL_METRICS_PORT": str(c_metrics),
            "OTEL_VERL_TELEMETRY_PORT": str(self.c_tele),
            "OTEL_VERL_JAEGER_OTLP_ENDPOINT": f"127.0.0.1:{j_grpc}",
            "OTEL_VERL_ARCHIVE_DIR": str(work / "archive"),
        }
        self.limit_mib = int(os.environ.get("OTEL_VERL_MEMORY_LIMIT_MIB", "1024"))
        self.jaeger_proc = start("jaeger", [JAEGER, "--config", REPO / "jaeger" / "config.yaml"], env_j, work)
        cmd = [COLLECTOR, "--config", REPO / "collector" / "config.yaml", "--config", work / "jaeger_only.yaml"]
        self.collector_proc = start("collector", cmd, env_c, work)
        procs = [self.jaeger_proc, self.collector_proc]
        wait_until(lambda: http_get(f"http://127.0.0.1:{j_health}/status")[0] == 200, 120, "jaeger", procs=procs)
        wait_until(lambda: http_get(f"{self.jaeger}/api/v3/services")[0] == 200, 120, "jaeger query", procs=procs)
        wait_until(lambda: http_get(f"http://127.0.0.1:{c_health}/")[0] == 200, 120, "collector", procs=procs)
        self.collector_rss: list[float] = []
        self._sampling = True
        self._sampler = threading.Thread(target=self._sample, daemon=True)
        self._sampler.start()

    def _sample(self) -> None:
        pid = self.collector_proc.proc.pid
        while self._sampling:
            try:
                with open(f"/proc/{pid}/status") as fh:
                    rss = next(int(line.split()[1]) for line in fh if line.startswith("VmRSS:"))
                self.collector_rss.append(rss / 1024)
            except (OSError, StopIteration):
                pass
            time.sleep(0.25)

    def collector_metrics(self) -> dict[str, float]:
        """The collector's own span counters (its internal telemetry), summed over label sets."""
        status, body = self._http_get(f"http://127.0.0.1:{self.c_tele}/metrics", timeout=10)
        out: dict[str, float] = defaultdict(float)
        for line in body.decode().splitlines() if status == 200 else []:
            if line.startswith("otelcol_") and "_spans" in line and not line.startswith("#"):
                name = line.split("{")[0].split(" ")[0]
                labels = line[line.find("{") : line.find("}") + 1] if "{" in line else ""
                key = name + ("[jaeger]" if "jaeger" in labels else "")
                out[key] += float(line.rsplit(" ", 1)[1])
        return dict(out)

    def get(self, path: str, params: dict[str, Any] | None = None) -> tuple[float, bytes]:
        url = self.jaeger + path + ("?" + urllib.parse.urlencode(params) if params else "")
        t0 = time.perf_counter()
        with urllib.request.urlopen(url, timeout=300) as resp:
            body = resp.read()
        return time.perf_counter() - t0, body

    def stop(self) -> None:
        self._sampling = False
        self.collector_proc.stop()
        self.jaeger_proc.stop()


def _jaeger_spans(body: bytes) -> list[dict[str, Any]]:
    import orjson

    spans: list[dict[str, Any]] = []
    for line in body.splitlines():
        if not line.strip():
            continue
        doc = orjson.loads(line)
        for rs in doc.get("result", doc).get("resourceSpans", []):
            for ss in rs.get("scopeSpans", []):
                spans.extend(ss.get("spans", []))
    return spans


def _jaeger_span_ids(body: bytes) -> set[str]:
    return {s["spanId"].lower() for s in _jaeger_spans(body)}


def _to_group(link: dict) -> bool:
    """A cut request's link to its V1 sample group's span (first, before its worker and step links)."""
    return any(
        a.get("key") == "verl.link.kind" and a["value"].get("stringValue") == "group"
        for a in link.get("attributes", ())
    )


def _links_back(step_body: bytes, piece: bytes) -> bool:
    """Whether every request at the root of a piece (a sample group's trace, as Jaeger returns it) links to a
    worker span and then the step span of the step's trace (as Jaeger returns that)."""
    step_spans = _jaeger_spans(step_body)
    step_ids = {s["spanId"].lower() for s in step_spans if s["name"] == "verl.step"}
    workers = {s["spanId"].lower() for s in step_spans if s["name"] == "verl.rollout.worker"}
    roots = [s for s in _jaeger_spans(piece) if not s.get("parentSpanId")]
    if not roots:
        return False
    for root in roots:
        links = [(lk["spanId"].lower(), lk["traceId"].lower()) for lk in root.get("links", ()) if not _to_group(lk)]
        if root["name"] != "verl.rollout.request" or len(links) < 2:
            return False
        (worker, w_trace), (step, s_trace) = links[:2]
        if worker not in workers or step not in step_ids or w_trace != s_trace:
            return False
    return True


# ------------------------------------------------------------------ the spool's view
class SpoolTraces:
    """Every span of the spool by trace: ids, names, OTLP/protobuf bytes."""

    def __init__(self, run_dir: Path) -> None:
        from otel_verl.export.replay import parse_line

        self.spans: dict[str, set[str]] = defaultdict(set)
        self.bytes: dict[str, int] = defaultdict(int)
        self.step_traces: dict[int, str] = {}
        self.request_traces: dict[str, str] = {}
        """request id → its trace"""
        self.request_steps: dict[str, int] = {}
        """request id → its step"""
        self.lines = 0
        for path in sorted(run_dir.rglob("*.jsonl")):
            for line in path.read_text().splitlines():
                if not line.strip():
                    continue
                self.lines += 1
                request = parse_line(line)
                for rs in request.resource_spans:
                    for ss in rs.scope_spans:
                        for span in ss.spans:
                            trace = span.trace_id.hex()
                            self.spans[trace].add(span.span_id.hex())
                            self.bytes[trace] += span.ByteSize()
                            if span.name in ("verl.step", "verl.rollout.request"):
                                attrs = {a.key: a.value for a in span.attributes}
                                if span.name == "verl.step":
                                    self.step_traces[attrs["verl.step"].int_value] = trace
                                elif "verl.request.id" in attrs:
                                    request_id = attrs["verl.request.id"].string_value
                                    self.request_traces[request_id] = trace
                                    self.request_steps[request_id] = attrs["verl.step"].int_value

    @property
    def total(self) -> int:
        return sum(len(s) for s in self.spans.values())


def _counts(run_dir: Path) -> dict[str, int]:
    from tests.process_state import read_counts

    out: dict[str, int] = defaultdict(int)
    for c in read_counts(run_dir):
        for key in ("spans_ended", "spans_spooled", "spans_delivered", "spans_otlp_failed", "spans_spool_failed"):
            out[key] += int(c.get(key) or 0)
    return dict(out)


# ------------------------------------------------------------------ the run
def _run_demo(shape: Shape, env: dict[str, str], spool: Path) -> dict[str, Any]:
    """verl's real agent loop instead of the generator: ``otel-verl demo`` at the shape's size (its simulated
    engine decides how many of the ``turns`` each trajectory takes)."""
    import subprocess

    exe = Path(sys.executable).with_name("otel-verl")
    cmd = [str(exe), "demo", "--steps", str(shape.steps), "--prompts", str(shape.prompts), "--n", str(shape.n)]
    cmd += ["--workers", str(shape.workers), "--max-turns", str(shape.turns), "--spool", str(spool), "--no-report"]
    proc = subprocess.run(cmd, env={**os.environ, **env}, capture_output=True, text=True, timeout=7200)
    if proc.returncode != 0:
        raise RuntimeError(f"otel-verl demo exited {proc.returncode}: {(proc.stdout + proc.stderr)[-800:]}")
    return {"output": proc.stdout[-2000:]}


def measure(shape: Shape, work: Path, source: str = "generator") -> dict[str, Any]:
    backends = Backends(work)
    try:
        spool = work / "spool"
        env = {
            "OTEL_EXPORTER_OTLP_ENDPOINT": backends.otlp,
            "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc",
            "OTEL_EXPORTER_OTLP_INSECURE": "true",
            "OTEL_VERL_SPOOL": "true",
            "OTEL_VERL_SPOOL_DIR": str(spool),
            "OTEL_VERL_RUN_ID": "real-size",
            "OTEL_VERL_DETAIL": "full",
            "OTEL_SERVICE_NAME": "verl",
            "OTEL_SDK_DISABLED": "false",
        }
        t0 = time.perf_counter()
        traced = _run_rollout(shape, True, env) if source == "generator" else _run_demo(shape, env, spool)
        traced["seconds"] = time.perf_counter() - t0
        run_dir = next(p for p in spool.iterdir() if p.is_dir())
        counts = _counts(run_dir)
        view = SpoolTraces(run_dir)
        found: dict[str, set[str]] = {}
        deadline = time.monotonic() + 600
        pending = set(view.spans)
        while pending and time.monotonic() < deadline:  # Jaeger has it all once the collector drained
            for trace in sorted(pending):
                _, body = backends.get(f"/api/v3/traces/{trace}")
                found[trace] = _jaeger_span_ids(body)
                if found[trace] >= view.spans[trace]:
                    pending.discard(trace)
            if pending:
                time.sleep(5)
        in_jaeger = sum(len(found.get(t, set()) & ids) for t, ids in view.spans.items())
        timings = _answer_times(backends, view, shape)
        metrics = backends.collector_metrics()
        return {
            "traced": traced,
            "counts": counts,
            "spool_spans": view.total,
            "jaeger_spans": in_jaeger,
            "traces": len(view.spans),
            "largest_spans": max(len(s) for s in view.spans.values()),
            "largest_bytes": max(view.bytes.values()),
            "step_trace_spans": [len(view.spans[t]) for t in view.step_traces.values()],
            "timings": timings,
            "collector_peak_mib": max(backends.collector_rss or [0.0]),
            "collector_limit_mib": backends.limit_mib,
            "collector": metrics,
        }
    finally:
        backends.stop()


def _answer_times(backends: Backends, view: SpoolTraces, shape: Shape, repeats: int = 3) -> dict[str, float]:
    """Medians of ``repeats``: a request found by its id (Jaeger UI's search) then fetched; a step's trace; every
    trace of a step (the step's trace and its sample groups' traces)."""
    step, step_trace = max(view.step_traces.items())
    of_step = [r for r, s in view.request_steps.items() if s == step]
    request_id = next((r for r in of_step if view.request_traces[r] != step_trace), of_step[0])  # a cut one
    tags = json.dumps({"verl.request.id": request_id})
    search, fetch, whole, pieces = [], [], [], []
    step_traces = {view.request_traces[r] for r in of_step} | {step_trace}
    _, step_body = backends.get(f"/api/v3/traces/{step_trace}")
    linked = sum(_links_back(step_body, backends.get(f"/api/v3/traces/{t}")[1]) for t in step_traces - {step_trace})
    for _ in range(repeats):
        seconds, body = backends.get("/api/traces", {"service": "verl", "tags": tags, "lookback": "2h", "limit": 20})
        hits = json.loads(body).get("data") or []
        assert [h["traceID"] for h in hits] == [view.request_traces[request_id]], hits[:1]
        search.append(seconds)
        fetch.append(backends.get(f"/api/v3/traces/{view.request_traces[request_id]}")[0])
        whole.append(backends.get(f"/api/v3/traces/{step_trace}")[0])
        pieces.append(sum(backends.get(f"/api/v3/traces/{t}")[0] for t in step_traces))
    return {
        "request_search_s": statistics.median(search),
        "request_trace_s": statistics.median(fetch),
        "request_trace_spans": len(view.spans[view.request_traces[request_id]]),
        "step_trace_s": statistics.median(whole),
        "step_all_s": statistics.median(pieces),
        "step_traces": len(step_traces),
        "pieces_linked": linked,
    }


def _sum(reports: list[list[dict[str, Any]]], key: str) -> list[float]:
    return [sum(w[key] for w in step) for step in reports]


def rows(shape: Shape, m: dict[str, Any], untraced: dict[str, Any] | None, busy: str) -> list[Result]:
    """Rows 30a-30d (delivery, size, Jaeger, collector) and, with an untraced twin, 30e (cost)."""
    c, t = m["counts"], m["timings"]
    created, lost = c.get("spans_ended", 0), c.get("spans_ended", 0) - m["jaeger_spans"]
    per_step = created / shape.steps
    size = f"{shape.steps} steps × {shape.trajectories:,} trajectories × {shape.turns} turns, full detail"
    col = m["collector"]
    out = [
        Result(
            "30a. real-size load: spans lost (SDK → collector → Jaeger, and spool)",
            "0 lost",
            f"{lost:,} lost of {created:,}",
            lost == 0 and m["spool_spans"] == created and c.get("spans_delivered", 0) == created,
            f"{size} ({per_step:,.0f} spans a step); created {created:,}, spooled {m['spool_spans']:,}, delivered "
            f"to the collector {c.get('spans_delivered', 0):,}, in Jaeger {m['jaeger_spans']:,} (every trace fetched "
            f"by id, span ids compared); {m['traces']:,} traces; collector accepted "
            f"{col.get('otelcol_receiver_accepted_spans', 0):,.0f}, refused "
            f"{col.get('otelcol_receiver_refused_spans', 0):,.0f}, sent to Jaeger "
            f"{col.get('otelcol_exporter_sent_spans[jaeger]', 0):,.0f}; {busy}",
        ),
        Result(
            "30b. real-size load: largest trace",
            f"≤ {TRACE_LIMIT_SPANS:,} spans and ≤ 4 MiB",
            f"{m['largest_spans']:,} spans, {m['largest_bytes'] / 2**20:.2f} MiB",
            m["largest_spans"] <= TRACE_LIMIT_SPANS and m["largest_bytes"] <= TRACE_LIMIT_BYTES,
            f"OTLP/protobuf bytes of the trace's spans; step traces {m['step_trace_spans']} spans; the rest in "
            f"{m['traces'] - shape.steps:,} sample-group traces linked to their worker and step spans",
        ),
        Result(
            "30c. real-size load: a step through Jaeger's API, in pieces linked to it; answer times",
            "every piece links back",
            f"{t['pieces_linked']} of {t['step_traces'] - 1} pieces; request "
            f"{t['request_search_s'] + t['request_trace_s']:.2f} s, step trace {t['step_trace_s']:.2f} s",
            t["pieces_linked"] == t["step_traces"] - 1,
            f"median of 3: a request found by its id (GET /api/traces?tags=…, as Jaeger's UI) "
            f"{t['request_search_s']:.2f} s + its trace ({t['request_trace_spans']} spans, /api/v3/traces/<id>) "
            f"{t['request_trace_s']:.2f} s; the step's trace {t['step_trace_s']:.2f} s; all {t['step_traces']} "
            f"traces of the step, one by one, {t['step_all_s']:.1f} s; {t['pieces_linked']} of "
            f"{t['step_traces'] - 1} pieces link back (each request at their root: its worker span, then the "
            f"step span, both in the step's trace as Jaeger returns it)",
        ),
        Result(
            "30d. real-size load: collector memory under its limiter",
            f"peak RSS < limit ({m['collector_limit_mib']} MiB), 0 refused",
            f"{m['collector_peak_mib']:.0f} MiB peak",
            m["collector_peak_mib"] < m["collector_limit_mib"] and not col.get("otelcol_receiver_refused_spans"),
            f"RSS sampled every 0.25 s; memory_limiter limit_mib {m['collector_limit_mib']} (spike 256); "
            f"file archive, span metrics and Jaeger exporters on, Tempo's left out",
        ),
    ]
    if untraced is None:
        return out
    traced_cpu = statistics.median(_sum(m["traced"]["workers"], "cpu_s")[1:] or _sum(m["traced"]["workers"], "cpu_s"))
    plain_cpu = statistics.median(_sum(untraced["workers"], "cpu_s")[1:] or _sum(untraced["workers"], "cpu_s"))
    rss_t = max(f["maxrss_mib"] for f in m["traced"]["finals"])
    rss_u = max(f["maxrss_mib"] for f in untraced["finals"])
    ready_t = max(r["rss_mib"] for r in m["traced"]["ready"])
    ready_u = max(r["rss_mib"] for r in untraced["ready"])
    return [
        *out,
        Result(
            "30e. real-size load: CPU and memory added in the emitting processes",
            "info",
            f"+{traced_cpu - plain_cpu:.1f} s CPU a step ({(traced_cpu - plain_cpu) / per_step * 1e6:.0f} µs/span), "
            f"+{rss_t - rss_u:.0f} MiB peak RSS a worker",
            True,
            f"workers' CPU a step (rollout + their spans built, spooled, sent), median of steps after the first: "
            f"traced {traced_cpu:.1f} s, untraced twin {plain_cpu:.1f} s; worker peak RSS {rss_t:.0f} vs "
            f"{rss_u:.0f} MiB, of which {ready_t - ready_u:.0f} MiB before the first step (the SDK, gRPC and the "
            f"exporters loaded: {ready_t:.0f} vs {ready_u:.0f} MiB); trainer peak RSS "
            f"{m['traced']['trainer_maxrss_mib']:.0f} vs {untraced['trainer_maxrss_mib']:.0f} MiB; "
            f"traced run {m['traced']['seconds']:.0f} s wall",
            info=True,
        ),
    ]


def _load() -> str:
    load1, _, _ = os.getloadavg()
    return f"load average {load1:.1f} on {os.cpu_count()} CPUs" + (" (busy)" if load1 > 1.5 else "")


def run(quick: bool = False) -> list[Result]:
    shape = QUICK if quick else FULL
    if not (COLLECTOR.exists() and JAEGER.exists()):
        return [Result("30a. real-size load", "0 lost", "backends missing", False, "run scripts/install_backends.sh")]
    with tempfile.TemporaryDirectory(prefix="otel-verl-real-size-") as tmp:
        before = _load()
        m = measure(shape, Path(tmp))
        untraced = _run_rollout(shape, False, {"OTEL_SDK_DISABLED": "true"})
        return rows(shape, m, untraced, f"{before} before, {_load()} after")


def run_demo(quick: bool = False) -> list[Result]:
    """Rows 30a-30d with verl's real agent loop (the CPU demo) as the rollout: ``--demo``."""
    shape = QUICK if quick else FULL
    with tempfile.TemporaryDirectory(prefix="otel-verl-real-size-demo-") as tmp:
        before = _load()
        t0 = time.perf_counter()
        m = measure(shape, Path(tmp), source="demo")
        busy = f"{before} before, {_load()} after; the demo took {time.perf_counter() - t0:.0f} s"
        out = []
        for row in rows(shape, m, None, busy)[:4]:
            label = row.target.replace("real-size load", "real-size load, verl's agent loop (CPU demo)")
            detail = row.detail.replace(
                f"× {shape.turns} turns", f"× up to {shape.turns} turns (as many as the demo's engine asks tools for)"
            )
            out.append(Result(label, row.goal, row.measured, row.ok, detail, info=True))
        return out


if __name__ == "__main__":
    quick = "--quick" in sys.argv[1:]
    for row in run_demo(quick) if "--demo" in sys.argv[1:] else run(quick):
        print(f"{row.label}: {row.measured} [{'ok' if row.ok else 'NOT OK'}] — {row.detail}")
