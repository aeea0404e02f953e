"""``OTEL_VERL_MLFLOW_TRACES=true`` against a real ``mlflow server`` (SQLite store, scripts/install_mlflow.sh).

``otel-verl demo --logger mlflow`` logs to the server (verl's own mlflow logger, the live account beside it) with
the setting on; then, with mlflow's own client:

1. the run that holds the live account's ``otel_verl/*`` metrics is in an experiment whose traces are the run's
   steps: one trace per step, rooted at ``verl.step``, linked to that run, each holding every span the spool holds
   (ids, parents, names, times, attributes, links): what mlflow keeps of ours;
2. mlflow's trace view, in Debian's headless chromium, draws a step's tree down to the engine's own span;
3. what mlflow keeps at the edges, measured with the exporter alone (a process that finds the run by its tag):
   an 8 MiB attribute, span events, and a trace of 5,000 spans (``OTEL_VERL_TRACE_MAX_SPANS``' default).

docs/backends.md, "Traces in mlflow", gives the figures.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from otel_verl import semconv as sc

from .conftest import CACHE, free_ports, http_get, start, wait_until
from .emitters import REPO, emitter_command
from .jaeger_ui import CHROMIUM, CHROMIUM_ARGS

pytestmark = pytest.mark.backends

MLFLOW = CACHE / "mlflow" / "bin" / "mlflow"
STEPS = 2
DEMO_ARGS = ("--steps", str(STEPS), "--logger", "mlflow", "--no-val-before-train", "--no-report")


@pytest.fixture(scope="module")
def server(tmp_path_factory) -> str:
    """A real ``mlflow server`` on SQLite (its job runner off: it only slows the start)."""
    if not MLFLOW.exists():
        pytest.fail(f"{MLFLOW} is missing: run scripts/install_mlflow.sh", pytrace=False)
    home = tmp_path_factory.mktemp("mlflow")
    (port,) = free_ports(1)
    cmd = [MLFLOW, "server", "--backend-store-uri", f"sqlite:///{home}/mlflow.db", "--workers", "1"]
    cmd += ["--default-artifact-root", str(home / "artifacts"), "--host", "127.0.0.1", "--port", str(port)]
    proc = start("mlflow", cmd, {"MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false"}, home)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_until(lambda: http_get(f"{url}/health")[0] == 200, 400, "mlflow server", interval=2.0, procs=[proc])
        yield url
    finally:
        proc.stop()


def _spool_spans(spool: Path) -> dict[str, dict[str, dict]]:
    """trace id → span id → the spool's OTLP/JSON span."""
    out: dict[str, dict[str, dict]] = {}
    for path in spool.rglob("*.jsonl"):
        for line in path.read_text().splitlines():
            for rs in json.loads(line)["resourceSpans"] if line.strip() else []:
                for ss in rs["scopeSpans"]:
                    for sp in ss["spans"]:
                        out.setdefault(sp["traceId"], {})[sp["spanId"]] = sp
    return out


def _value(v: dict) -> object:
    ((kind, x),) = v.items()
    if kind == "intValue":
        return int(x)
    if kind == "arrayValue":
        return [_value(i) for i in x.get("values", [])]
    return x


@pytest.fixture(scope="module")
def demo(server: str, tmp_path_factory) -> tuple[str, Path]:
    """The demo logged to the server with the setting on: (mlflow run id, spool)."""
    spool = tmp_path_factory.mktemp("mlflow-demo")
    env = {
        **os.environ,
        "MLFLOW_TRACKING_URI": server,
        "OTEL_VERL_MLFLOW_TRACES": "true",
        "OTEL_VERL_LIVE": "true",  # tests/conftest.py turns it off for the other demos
        "OTEL_SDK_DISABLED": "false",
    }
    for name in ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"):
        env.pop(name, None)
    r = subprocess.run(
        emitter_command("demo", spool, DEMO_ARGS), cwd=REPO, env=env, capture_output=True, text=True, timeout=600
    )
    assert r.returncode == 0, f"demo failed:\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}"
    said = [line for line in r.stdout.splitlines() if line.startswith("mlflow wrote to")]
    assert said, f"the demo did not say where mlflow wrote:\n{r.stdout[-2000:]}"
    return said[0].rsplit("(run ", 1)[1].rstrip(")"), spool


def test_step_traces_in_the_live_accounts_experiment(server: str, demo: tuple[str, Path]) -> None:
    import mlflow
    from mlflow import MlflowClient

    run_id, spool = demo
    client = MlflowClient(server)
    run = client.get_run(run_id)
    assert {"otel_verl/step", "otel_verl/step_s"} <= set(run.data.metrics), "the live account wrote no metrics"
    mlflow.set_tracking_uri(server)
    traces = mlflow.search_traces(locations=[run.info.experiment_id], return_type="list", max_results=100)
    in_spool = _spool_spans(spool)
    steps = {}
    for trace in traces:
        roots = [s for s in trace.data.spans if s.parent_id is None]
        assert len(roots) == 1, f"{trace.info.trace_id}: roots {[r.name for r in roots]}"
        if roots[0].name == sc.SPAN_STEP:
            steps[roots[0].attributes[sc.VERL_STEP]] = trace
    assert sorted(steps) == list(range(1, STEPS + 1)), f"step traces {sorted(steps)} of {len(traces)} traces"
    linked = mlflow.search_traces(locations=[run.info.experiment_id], run_id=run_id, return_type="list")
    assert {t.info.trace_id for t in steps.values()} <= {t.info.trace_id for t in linked}, "not linked to the run"
    for step, trace in steps.items():
        otel_id = trace.info.trace_id.removeprefix("tr-")
        want, got = in_spool[otel_id], {s.span_id: s for s in trace.data.spans}
        assert set(got) == set(want), f"step {step}: {len(set(want) - set(got))} spans missing"
        for sid, sp in want.items():
            kept = got[sid]
            assert (kept.name, kept.parent_id or "") == (sp["name"], sp.get("parentSpanId", ""))
            assert (kept.start_time_ns, kept.end_time_ns) == (int(sp["startTimeUnixNano"]), int(sp["endTimeUnixNano"]))
            attrs = {a["key"]: _value(a["value"]) for a in sp.get("attributes", [])}
            assert {k: kept.attributes.get(k) for k in attrs} == attrs, f"{sp['name']}: attributes changed"
            assert len(kept._links) == len(sp.get("links", [])), f"{sp['name']}: links"
        print(f"\nstep {step}: {len(got)} spans, all kept")


def test_trace_view_in_a_browser(server: str, demo: tuple[str, Path], tmp_path: Path) -> None:
    """mlflow's own UI opens a step's trace and draws its tree: step, phase, worker, request, turn, engine."""
    import mlflow
    from mlflow import MlflowClient
    from playwright.sync_api import sync_playwright

    if not Path(CHROMIUM).exists():
        pytest.skip("chromium not installed (scripts/install_backends.sh installs it)")
    run = MlflowClient(server).get_run(demo[0])
    mlflow.set_tracking_uri(server)
    traces = mlflow.search_traces(locations=[run.info.experiment_id], return_type="list", max_results=100)
    step = next(t for t in traces if any(s.name == sc.SPAN_STEP and s.parent_id is None for s in t.data.spans))
    url = f"{server}/#/experiments/{run.info.experiment_id}/traces?selectedEvaluationId={step.info.trace_id}"
    shots = Path(os.environ.get("OTEL_VERL_MLFLOW_UI_SHOTS") or tmp_path)
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1600, "height": 1000})
        page.goto(url, timeout=120_000)
        page.get_by_text("llm_request").first.wait_for(timeout=120_000)
        shown = page.inner_text("body")
        page.screenshot(path=shots / "mlflow-trace.png", timeout=120_000)  # slow on a loaded machine
        browser.close()
    print(f"\nmlflow trace view: {shots / 'mlflow-trace.png'}")
    otel_id = step.info.trace_id.removeprefix("tr-")
    assert f"Trace {otel_id[:8]}" in " ".join(shown.split()), "the trace view names another trace"
    for name in ("verl.step", "verl.phase gen", "verl.rollout.worker", "verl.rollout.request", "verl.rollout.turn"):
        assert name in shown, f"{name} not drawn"


def test_what_mlflow_keeps(server: str) -> None:
    """The exporter alone, in a process that finds the run by its tag: an 8 MiB attribute, events, 5,000 spans."""
    from mlflow import MlflowClient

    client = MlflowClient(server)
    experiment = client.create_experiment(f"limits-{time.time_ns()}")
    run = client.create_run(experiment, tags={"otel_verl.run_id": "limits-run"})
    script = r"""
import json, os
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from otel_verl.export import mlflow_traces
provider = TracerProvider()
provider.add_span_processor(BatchSpanProcessor(mlflow_traces.exporter("limits-run"), max_queue_size=20000))
tracer = provider.get_tracer("limits")
ids = {}
with tracer.start_as_current_span("big") as span:
    span.set_attribute("blob", "x" * (8 << 20))
    span.add_event("first", {"k": 1})
    span.add_event("second")
    ids["big"] = format(span.get_span_context().trace_id, "032x")
with tracer.start_as_current_span("many") as root:
    ids["many"] = format(root.get_span_context().trace_id, "032x")
    for i in range(4999):
        tracer.start_span(f"child {i}").end()
provider.shutdown()
print(json.dumps(ids))
"""
    env = {**os.environ, "MLFLOW_TRACKING_URI": server, "OTEL_SDK_DISABLED": "false"}
    r = subprocess.run([sys.executable, "-c", script], cwd=REPO, env=env, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    ids = json.loads(r.stdout.splitlines()[-1])
    import mlflow

    mlflow.set_tracking_uri(server)
    big = mlflow.get_trace(f"tr-{ids['big']}")
    many = mlflow.get_trace(f"tr-{ids['many']}")
    assert big is not None and many is not None, "a trace did not reach mlflow"
    assert big.info.experiment_id == experiment and many.info.experiment_id == experiment
    (span,) = big.data.spans
    assert len(span.attributes["blob"]) == 8 << 20
    assert [(e.name, e.attributes) for e in span.events] == [("first", {"k": 1}), ("second", {})]
    assert len(many.data.spans) == 5000
    linked = mlflow.search_traces(locations=[experiment], run_id=run.info.run_id, return_type="list")
    assert {t.info.trace_id for t in linked} == {f"tr-{ids['big']}", f"tr-{ids['many']}"}


def test_a_store_that_is_no_server_gets_nothing(monkeypatch, caplog) -> None:
    """A ``file:`` or ``sqlite:`` store has no OTLP endpoint: one warning that says what to set, no exporter."""
    from otel_verl.export import mlflow_traces

    for uri in ("file:///tmp/otel-verl-mlruns", "sqlite:////tmp/mlruns.db"):
        monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
        caplog.clear()
        assert mlflow_traces.exporter("r") is None
        assert f"MLFLOW_TRACKING_URI ({uri}) is not an mlflow server" in caplog.text
