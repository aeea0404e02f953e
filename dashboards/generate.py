"""Grafana dashboards for otel_verl, as code (grafana-foundation-sdk ~=0.0.21).

    uv run python dashboards/generate.py          # (re)writes dashboards/*.json
    uv run python dashboards/generate.py --check  # exit 1 when the committed JSON differs

The JSON next to this file is committed and provisioned by docker compose
(grafana/provisioning/dashboards). tests/backends checks it equals what this script produces and runs
every PromQL query of :func:`promql_queries` against a real Prometheus fed by the real collector.

Metrics come from the collector's span_metrics connector (collector/config.yaml: namespace
``traces.span.metrics``, unit ``s``): ``traces_span_metrics_duration_seconds_{bucket,sum,count}`` and
``traces_span_metrics_calls_total`` with labels span_name, span_kind, status_code, service_name,
verl_phase_name, verl_request_status, gen_ai_tool_name, plus job/instance from service.name /
service.instance.id. Span metrics cannot group by step (the step number is deliberately not a
dimension): "per step" panels use time windows of ``$window`` (pick about one step's duration), and
exemplars / TraceQL lead from a window to the step's trace.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import warnings
from pathlib import Path

# Grafana 13's file provisioning reads the classic dashboard JSON built here; the SDK nudges towards the
# v2 schema with a DeprecationWarning on every build.
warnings.filterwarnings("ignore", category=DeprecationWarning, module=r"grafana_foundation_sdk\..*")

from grafana_foundation_sdk.builders import dashboard as dash  # noqa: E402
from grafana_foundation_sdk.builders import piechart, table, tempo, timeseries  # noqa: E402
from grafana_foundation_sdk.builders import prometheus as prom  # noqa: E402
from grafana_foundation_sdk.cog.encoder import JSONEncoder  # noqa: E402
from grafana_foundation_sdk.models import common  # noqa: E402
from grafana_foundation_sdk.models import dashboard as dm  # noqa: E402
from grafana_foundation_sdk.models import tempo as tm  # noqa: E402

HERE = Path(__file__).resolve().parent

# Data source uids, fixed by grafana/provisioning/datasources/datasources.yaml.
PROM = common.DataSourceRef(type_val="prometheus", uid="otel-verl-prometheus")
TEMPO = common.DataSourceRef(type_val="tempo", uid="otel-verl-tempo")

DURATION = "traces_span_metrics_duration_seconds"
CALLS = "traces_span_metrics_calls_total"
SVC = 'service_name=~"$service"'

# Span names (otel_verl.semconv; kept literal so this script runs without the package installed).
STEP = "verl.step"
WORKER = "verl.rollout.worker"
REQUEST = "verl.rollout.request"
BARRIER = "verl.barrier"
EVENTS = "text_completion.*|execute_tool.*|verl.tool_parse|verl.preprocess|verl.reward"

# What the test substitutes for Grafana's variables when it runs the queries against Prometheus.
TEST_VARIABLES = {"$service": ".+", "$window": "1m", "$__rate_interval": "1m", "$__range": "1h"}


def _q(expr: str, legend: str = "", ref: str = "A", exemplar: bool = False, instant: bool = False):
    q = prom.Dataquery().expr(expr).ref_id(ref).legend_format(legend or "__auto")
    if exemplar:
        q = q.exemplar(True)
    if instant:
        q = q.instant()
    return q


def _quantile(q: float, match: str, by: str = "") -> str:
    grp = f"le, {by}" if by else "le"
    return f"histogram_quantile({q}, sum by ({grp}) (rate({DURATION}_bucket{{{match}, {SVC}}}[$window])))"


def _mean(match: str, by: str = "") -> str:
    b = f" by ({by})" if by else ""
    return (
        f"sum{b} (rate({DURATION}_sum{{{match}, {SVC}}}[$window]))"
        f" / sum{b} (rate({DURATION}_count{{{match}, {SVC}}}[$window]))"
    )


def _ts(title: str, desc: str, targets, unit: str = "s", w: int = 12, h: int = 8):
    p = timeseries.Panel().title(title).description(desc).datasource(PROM).unit(unit).span(w).height(h)
    for t in targets:
        p = p.with_target(t)
    return p


def _variables():
    service = (
        dash.QueryVariable("service")
        .label("service")
        .datasource(PROM)
        .query(f"label_values({CALLS}, service_name)")
        .refresh(dm.VariableRefresh.ON_TIME_RANGE_CHANGED)
        .include_all(True)
        .all_value(".+")
        .multi(True)
        .current(dm.VariableOption(selected=True, text="All", value="$__all"))
    )
    window = (
        dash.IntervalVariable("window")
        .label("window (≈ one step)")
        .values("1m,2m,5m,10m,15m,30m")
        .current(dm.VariableOption(selected=True, text="5m", value="5m"))
    )
    return [service, window]


def _base(uid: str, title: str, desc: str):
    d = (
        dash.Dashboard(title)
        .uid(uid)
        .description(desc)
        .tags(["otel-verl", "verl", "rl"])
        .time("now-3h", "now")
        .refresh("30s")
        .tooltip(dm.DashboardCursorSync.CROSSHAIR)
        .timezone("browser")
        .editable()
    )
    for v in _variables():
        d = d.with_variable(v)
    return d


def _traceql_table(title: str, desc: str, query: str, limit: int = 20, w: int = 24):
    q = (
        tempo.Dataquery()
        .ref_id("A")
        .query_type("traceql")
        .query(query)
        .limit(limit)
        .table_type(tm.SearchTableType.SPANS)
    )
    return table.Panel().title(title).description(desc).datasource(TEMPO).with_target(q).span(w).height(10)


def rollout_dashboard():
    req = f'span_name="{REQUEST}"'
    d = _base(
        "otel-verl-rollout",
        "otel_verl · rollout long tail",
        "Step and rollout time, request latency percentiles per window (≈ per step), throughput and aborted ratio. "
        "Click an exemplar dot to open the trace of that request in Tempo/Jaeger.",
    )
    d = d.with_row(dash.Row("Steps"))
    d = d.with_panel(
        _ts(
            "Step duration",
            "verl.step span duration (mean and max bucket bound per window). A step waits for its slowest request.",
            [
                _q(_mean(f'span_name="{STEP}"'), "mean step", "A", exemplar=True),
                _q(_quantile(0.99, f'span_name="{STEP}"'), "p99 step", "B"),
            ],
        )
    )
    d = d.with_panel(
        _ts(
            "Rollout (gen phase) duration",
            "verl.phase gen: the rollout part of each step, vs the other phases.",
            [_q(_mean('span_name=~"verl.phase.*"', "verl_phase_name"), "{{verl_phase_name}}", "A", exemplar=True)],
        )
    )
    d = d.with_row(dash.Row("Requests"))
    d = d.with_panel(
        _ts(
            "Request latency P50 / P90 / P99",
            "verl.rollout.request duration percentiles over $window. "
            "The gap P99/P50 is the long tail the step waits for. "
            "Exemplars (dots) link to the traces of individual slow requests.",
            [
                _q(_quantile(0.5, req), "P50", "A"),
                _q(_quantile(0.9, req), "P90", "B"),
                _q(_quantile(0.99, req), "P99", "C", exemplar=True),
            ],
        )
    )
    d = d.with_panel(
        _ts(
            "Tail ratio P99 / P50",
            "How much longer the slowest requests take than the median one, per window.",
            [_q(f"{_quantile(0.99, req)} / {_quantile(0.5, req)}", "P99/P50", "A")],
            unit="none",
        )
    )
    d = d.with_panel(
        _ts(
            "Request throughput by status",
            "Finished trajectories per second, by verl.request.status.",
            [
                _q(
                    f"sum by (verl_request_status) (rate({CALLS}{{{req}, {SVC}}}[$__rate_interval]))",
                    "{{verl_request_status}}",
                )
            ],
            unit="reqps",
        )
    )
    d = d.with_panel(
        _ts(
            "Aborted / failed / truncated ratio",
            "Share of requests that did not complete (over-sampled and aborted, failed, or truncated), per window.",
            [
                _q(
                    f'(sum(rate({CALLS}{{{req}, verl_request_status=~"aborted|failed|truncated", {SVC}}}[$window]))'
                    " or vector(0))"
                    f" / sum(rate({CALLS}{{{req}, {SVC}}}[$window]))",
                    "not completed",
                )
            ],
            unit="percentunit",
        )
    )
    d = d.with_row(dash.Row("Slowest requests (Tempo)"))
    d = d.with_panel(
        _traceql_table(
            "Slowest requests (TraceQL)",
            "Requests slower than 30 s with their step, status and turns; click a trace id to open the waterfall.",
            '{ name = "verl.rollout.request" && duration > 30s } '
            "| select(span.verl.step, span.verl.request.status, span.verl.request.num_turns, span.verl.worker.rank)",
        )
    )
    return d


def workers_dashboard():
    d = _base(
        "otel-verl-workers",
        "otel_verl · workers",
        "Per-worker rollout time and barrier wait. The worker rank is not a span-metrics dimension (cardinality): "
        "metrics split by worker process (instance = service.instance.id), TraceQL gives the rank.",
    )
    wk = f'span_name="{WORKER}"'
    d = d.with_panel(
        _ts(
            "Worker chunk duration by process",
            "verl.rollout.worker span duration, mean per window, per worker process (job/instance).",
            [_q(_mean(wk, "job, instance"), "{{job}} {{instance}}", "A", exemplar=True)],
        )
    )
    d = d.with_panel(
        _ts(
            "Barrier wait",
            "verl.barrier: time a worker waited for the slowest worker of the step (mean per window).",
            [_q(_mean(f'span_name="{BARRIER}"', "job, instance"), "{{job}} {{instance}}", "A", exemplar=True)],
        )
    )
    d = d.with_panel(
        _ts(
            "Barrier share of worker time",
            "Seconds spent waiting at the barrier per second of worker time; high = imbalanced workers.",
            [
                _q(
                    f'sum(rate({DURATION}_sum{{span_name="{BARRIER}", {SVC}}}[$window]))'
                    f" / sum(rate({DURATION}_sum{{{wk}, {SVC}}}[$window]))",
                    "barrier / worker",
                )
            ],
            unit="percentunit",
        )
    )
    d = d.with_panel(
        _ts(
            "Worker chunks per second",
            "verl.rollout.worker spans finished per second.",
            [_q(f"sum by (job, instance) (rate({CALLS}{{{wk}, {SVC}}}[$__rate_interval]))", "{{job}} {{instance}}")],
            unit="ops",
        )
    )
    d = d.with_panel(
        _traceql_table(
            "Worker chunks by rank (TraceQL)",
            "Each verl.rollout.worker span with its rank and request counts; the slowest rank makes the step slow.",
            '{ name = "verl.rollout.worker" } | select(span.verl.step, span.verl.worker.rank, '
            "span.verl.worker.num_requests, span.verl.worker.num_aborted)",
            limit=50,
            w=12,
        )
    )
    d = d.with_panel(
        _traceql_table(
            "Barrier waits by rank (TraceQL)",
            "verl.barrier spans: who waited, and for which slowest rank.",
            '{ name = "verl.barrier" } | select(span.verl.step, span.verl.worker.rank, span.verl.barrier.slowest_rank)',
            limit=50,
            w=12,
        )
    )
    return d


def events_dashboard():
    d = _base(
        "otel-verl-events",
        "otel_verl · events",
        "Where request time goes: engine generate, tool calls, reward, preprocessing; tool latency by tool name.",
    )
    ev = f'span_name=~"{EVENTS}"'
    share = (
        f"sum by (span_name) (rate({DURATION}_sum{{{ev}, {SVC}}}[$window]))"
        f' / ignoring(span_name) group_left sum(rate({DURATION}_sum{{span_name="{REQUEST}", {SVC}}}[$window]))'
    )
    d = d.with_panel(
        _ts(
            "Time share of request time by event",
            "Seconds of each event kind per second of request time (generate ≈ text_completion, tool ≈ execute_tool).",
            [_q(share, "{{span_name}}")],
            unit="percentunit",
        )
    )
    pie = (
        piechart.Panel()
        .title("Event time over the range")
        .description("Total seconds per event kind in the dashboard's time range.")
        .datasource(PROM)
        .unit("s")
        .span(12)
        .height(8)
        .with_target(
            _q(f"sum by (span_name) (increase({DURATION}_sum{{{ev}, {SVC}}}[$__range]))", "{{span_name}}", instant=True)
        )
    )
    d = d.with_panel(pie)
    d = d.with_panel(
        _ts(
            "Tool latency P90 by tool",
            "execute_tool span duration P90 per gen_ai.tool.name.",
            [
                _q(
                    _quantile(0.9, 'span_name=~"execute_tool.*"', "gen_ai_tool_name"),
                    "{{gen_ai_tool_name}}",
                    "A",
                    exemplar=True,
                )
            ],
        )
    )
    d = d.with_panel(
        _ts(
            "Tool calls per second by tool and status",
            "execute_tool calls by tool and span status (STATUS_CODE_ERROR = failed call).",
            [
                _q(
                    "sum by (gen_ai_tool_name, status_code) "
                    f'(rate({CALLS}{{span_name=~"execute_tool.*", {SVC}}}[$__rate_interval]))',
                    "{{gen_ai_tool_name}} {{status_code}}",
                )
            ],
            unit="ops",
        )
    )
    d = d.with_panel(
        _ts(
            "Engine round trip P50 / P99",
            "text_completion (one generate call to the inference engine) duration percentiles.",
            [
                _q(_quantile(0.5, 'span_name=~"text_completion.*"'), "P50", "A"),
                _q(_quantile(0.99, 'span_name=~"text_completion.*"'), "P99", "B", exemplar=True),
            ],
        )
    )
    d = d.with_panel(
        _ts(
            "Reward and preprocessing mean",
            "verl.reward and verl.preprocess mean duration per window.",
            [_q(_mean('span_name=~"verl.reward|verl.preprocess"', "span_name"), "{{span_name}}", "A", exemplar=True)],
        )
    )
    return d


USUAL_RANGE = "1h"
"""The range a panel's "usual" is taken over (a step's baseline in the live account: its window's median)."""
PARTS = r"(text_completion|execute_tool|verl\\.tool_parse|verl\\.preprocess|verl\\.reward).*"
"""Request event span names → the account part they make (the model and tool names cut off)."""


def _usual(match: str, by: str = "") -> str:
    """The median duration over the last :data:`USUAL_RANGE` (from the histogram): the usual, as the live account
    takes the median over the recent steps."""
    grp = f"le, {by}" if by else "le"
    return f"histogram_quantile(0.5, sum by ({grp}) (rate({DURATION}_bucket{{{match}, {SVC}}}[{USUAL_RANGE}])))"


def _per_request(window: str) -> str:
    """Seconds per finished request of each part (engine, tools, tool parsing, preprocessing, reward) over
    ``window``."""
    parts = (
        f'sum by (part) (label_replace(rate({DURATION}_sum{{span_name=~"{EVENTS}", {SVC}}}[{window}]), '
        f'"part", "$1", "span_name", "{PARTS}"))'
    )
    return f'{parts} / scalar(sum(rate({CALLS}{{span_name="{REQUEST}", {SVC}}}[{window}])))'


def account_dashboard():
    """The step's account from span metrics: what Prometheus can tell of it without the traces (no critical path,
    no step label): each window's step time against its usual and the excess, the trainer phases and the
    requests' parts against theirs, the barrier's share. Per step and with causes: the live account in verl's
    logger (docs/live.md, ``otel_verl/*``)."""
    step = f'span_name="{STEP}"'
    phases = 'span_name=~"verl.phase.*"'
    d = _base(
        "otel-verl-account",
        "otel_verl · step account",
        "Each window's step time against its usual (the median step of the last hour), where the excess went "
        "(trainer phases, the requests' parts) and the barrier's share of the rollout. The per-step account with "
        "its causes is in verl's own logger (otel_verl/* metrics, docs/live.md).",
    )
    d = d.with_row(dash.Row("Step time against its usual"))
    d = d.with_panel(
        _ts(
            "Step: time, usual, excess",
            f"Mean verl.step duration per window, the median step of the last {USUAL_RANGE} (the usual), and the "
            "difference (the live account's otel_verl/step_s, usual_s, excess_s, per window instead of per step).",
            [
                _q(_mean(step), "step", "A", exemplar=True),
                _q(_usual(step), "usual", "B"),
                _q(f"{_mean(step)} - {_usual(step)}", "excess", "C"),
            ],
        )
    )
    d = d.with_panel(
        _ts(
            "Trainer phases: excess over their usual",
            f"Each phase's mean seconds per window minus its median of the last {USUAL_RANGE} "
            "(otel_verl/excess/phase/*): the phase that moved.",
            [
                _q(
                    f"{_mean(phases, 'verl_phase_name')} - {_usual(phases, 'verl_phase_name')}",
                    "{{verl_phase_name}}",
                )
            ],
        )
    )
    d = d.with_row(dash.Row("The rollout's parts"))
    d = d.with_panel(
        _ts(
            "Seconds per request by part",
            "Engine round trips, tool calls, tool parsing, preprocessing and reward: seconds per finished request "
            "per window (the request-level shares of otel_verl/part/*; the account itself follows the critical "
            "path, which needs the traces).",
            [_q(_per_request("$window"), "{{part}}")],
        )
    )
    d = d.with_panel(
        _ts(
            "Parts per request: excess over their usual",
            f"The panel to the left minus the same over the last {USUAL_RANGE}: which part moved.",
            [_q(f"{_per_request('$window')} - {_per_request(USUAL_RANGE)}", "{{part}}")],
        )
    )
    d = d.with_panel(
        _ts(
            "Barrier share of the rollout",
            "verl.barrier seconds over verl.rollout.worker seconds per window: the workers' time waiting for the "
            "slowest one (otel_verl/tail/barrier_share).",
            [
                _q(
                    f'sum(rate({DURATION}_sum{{span_name="{BARRIER}", {SVC}}}[$window]))'
                    f' / sum(rate({DURATION}_sum{{span_name="{WORKER}", {SVC}}}[$window]))',
                    "barrier share",
                )
            ],
            unit="percentunit",
            w=24,
        )
    )
    return d


DASHBOARDS = {
    "rollout.json": rollout_dashboard,
    "workers.json": workers_dashboard,
    "events.json": events_dashboard,
    "account.json": account_dashboard,
}


def render_all() -> dict[str, str]:
    """File name → JSON text, exactly as written to disk."""
    return {
        name: json.dumps(build().build(), cls=JSONEncoder, indent=2, sort_keys=True, ensure_ascii=False) + "\n"
        for name, build in DASHBOARDS.items()
    }


def _walk_targets(obj):
    if isinstance(obj, dict):
        if "expr" in obj and isinstance(obj["expr"], str):
            yield obj
        for v in obj.values():
            yield from _walk_targets(v)
    elif isinstance(obj, list):
        for v in obj:
            yield from _walk_targets(v)


def promql_queries() -> list[dict[str, str]]:
    """Every PromQL expression of every dashboard panel and variable: {dashboard, panel, expr}."""
    out = []
    for name, text in render_all().items():
        doc = json.loads(text)
        for panel in doc.get("panels", []):
            for target in _walk_targets(panel.get("targets", [])):
                out.append({"dashboard": name, "panel": panel.get("title", ""), "expr": target["expr"]})
        for var in doc.get("templating", {}).get("list", []):
            query = var.get("query")
            if isinstance(query, str) and var.get("type") == "query":
                m = re.fullmatch(r"label_values\((.+),\s*\w+\)", query)
                out.append({"dashboard": name, "panel": f"variable {var['name']}", "expr": m.group(1) if m else query})
    return out


def substitute(expr: str, variables: dict[str, str] | None = None) -> str:
    """Replace Grafana's variables by concrete values (default: :data:`TEST_VARIABLES`)."""
    for k, v in sorted((variables or TEST_VARIABLES).items(), key=lambda kv: -len(kv[0])):
        expr = expr.replace(k, v)
    return expr


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="Generate otel_verl Grafana dashboards")
    ap.add_argument("--check", action="store_true", help="exit 1 when the JSON on disk differs")
    ap.add_argument("--list-queries", action="store_true", help="print the PromQL queries as JSON")
    args = ap.parse_args(argv)
    if args.list_queries:
        print(json.dumps(promql_queries(), indent=2))
        return 0
    stale = []
    for name, text in render_all().items():
        path = HERE / name
        if args.check:
            if not path.exists() or path.read_text() != text:
                stale.append(name)
        else:
            path.write_text(text)
    if stale:
        print(f"stale dashboards (run dashboards/generate.py): {', '.join(stale)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
