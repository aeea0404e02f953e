"""The real engine in the trace: one ``otel-verl demo --engine vllm`` run (tests/engine/conftest.py), checked.

Every ``text_completion`` has vLLM's ``llm_request`` as its child, in the step's one trace; the tool path
runs (engine, tool and reward spans together); over-sampling aborts real in-flight requests and their
engine side still ends; the engine's queue/prefill/decode split loads into the analyzer's span table; the
validation rollout hangs under ``verl.validate``; and the same spans reach Jaeger through the collector.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
import urllib.parse
from pathlib import Path

import pandas as pd
import pytest

from otel_verl import semconv
from tests.backends.conftest import http_get

pytest.importorskip("vllm", reason="needs vLLM (scripts/install_vllm.sh)")
pytestmark = [pytest.mark.ray, pytest.mark.backends]

ENGINE = "llm_request"
LATENCIES = (
    "gen_ai.latency.time_in_queue",
    "gen_ai.latency.time_in_model_prefill",
    "gen_ai.latency.time_in_model_decode",
    "gen_ai.latency.time_to_first_token",
    "gen_ai.latency.e2e",
)


def _extra(row: pd.Series) -> dict:
    return json.loads(row["extra"]) if isinstance(row["extra"], str) and row["extra"] else {}


def _completions(spans: pd.DataFrame) -> pd.DataFrame:
    return spans[spans.name.str.startswith(semconv.GEN_AI_OP_TEXT_COMPLETION)]


def test_every_text_completion_has_its_llm_request_child(engine_spans, engine_run) -> None:
    completions = _completions(engine_spans)
    engine = engine_spans[engine_spans.name == ENGINE]
    assert len(completions) > 0
    children = engine.groupby("parent_id").size()
    assert set(completions.span_id) <= set(children.index), "a turn's engine call without vLLM's span"
    assert (children.reindex(completions.span_id) == 1).all()
    assert len(engine) == len(completions)
    assert set(engine.service) == {"verl.vllm"}
    # one trace per step and one per validation pass, no orphan: step → … → text_completion → llm_request
    ids = set(engine_spans.span_id)
    parents = engine_spans.parent_id.fillna("")
    assert parents[parents != ""].isin(ids).all()
    roots = engine_spans[(parents == "") & (engine_spans.name != ENGINE)]
    loading = roots[roots.service == "verl.vllm"]  # vLLM's own loading spans ("Overall Loading"): a trace apart
    assert sorted(roots.drop(loading.index).name) == [semconv.SPAN_STEP, semconv.SPAN_VALIDATE]
    print(
        f"\nengine run: launch {engine_run.launch_seconds} s, whole demo {engine_run.wall_seconds:.0f} s; "
        f"{len(engine_spans)} spans ({(engine_spans.step == 1).sum()} in step 1), "
        f"{len(engine)}/{len(completions)} text_completion spans with their llm_request"
    )


def test_tool_engine_and_reward_spans_in_one_trace(engine_spans) -> None:
    step = engine_spans[engine_spans.name == semconv.SPAN_STEP].trace_id.iloc[0]
    in_step = engine_spans[engine_spans.trace_id == step]
    tools = in_step[in_step.name.str.startswith(semconv.GEN_AI_OP_EXECUTE_TOOL)]
    assert len(tools) > 0, "the forced hermes tool calls did not reach verl's ToolAgentLoop"
    assert (in_step.name == ENGINE).sum() > 0
    assert (in_step.name == semconv.SPAN_REWARD).sum() > 0
    assert set(tools.tool_name) == {"calculator"}


def test_abort_ends_the_engine_side_and_counts_as_waste(engine_spans, engine_run, tmp_path) -> None:
    requests = engine_spans[(engine_spans.name == semconv.SPAN_REQUEST) & (engine_spans.step == 1)]
    aborted = requests[requests.request_status == "aborted"]
    assert len(aborted) >= 1, requests.request_status.value_counts()
    engine = engine_spans[engine_spans.name == ENGINE].set_index("parent_id")
    aborted_calls = _completions(engine_spans)
    aborted_calls = aborted_calls[aborted_calls.stop_reason == "aborted"]
    assert len(aborted_calls) >= 1
    ends = engine.loc[aborted_calls.span_id]
    assert (ends.stop_reason == "aborted").all()  # the engine span otel_verl makes for vLLM's aborted request
    done = subprocess.run(
        [str(Path(sys.executable).parent / "otel-verl"), "analyze", str(engine_run.spool_run), "--out", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    findings = json.loads((tmp_path / "findings.json").read_text())["findings"]
    (waste,) = [f for f in findings if f["kind"] == "aborted_waste" and f["step"] == 1]
    assert waste["details"]["aborted"] == len(aborted)
    assert waste["value"] > 0  # request-seconds thrown away
    assert waste["details"]["tokens_wasted"] > 0


def test_engine_latency_split_loads_into_the_span_table(engine_spans) -> None:
    engine = engine_spans[(engine_spans.name == ENGINE) & (engine_spans.stop_reason != "aborted")]
    assert len(engine) > 0
    for _, row in engine.iterrows():
        extra = _extra(row)
        missing = [key for key in LATENCIES if key not in extra]
        assert not missing, f"{row['span_id']}: {missing}"
        assert extra["gen_ai.latency.time_in_model_decode"] >= 0
        assert isinstance(extra.get(semconv.VERL_ENGINE_REPLICA), int)  # groupable by replica
    replicas = {_extra(row)[semconv.VERL_ENGINE_REPLICA] for _, row in engine.iterrows()}
    assert replicas == {0, 1}, "verl's load balancer spread the requests over both replicas"


def test_analyzer_splits_real_engine_calls_into_queue_prefill_decode(engine_run) -> None:
    """The analyzer's engine view on vLLM's real spans: every turn of step 1 with a finished engine call is
    split into before / queued / prefill / decode / other / after seconds that add up to our call, and the
    replicas are told apart."""
    from otel_verl import analysis
    from otel_verl.analysis.tables.engine_calls import PHASE_COLUMNS

    tables = analysis.load(engine_run.spool_run)
    calls = tables.engine_calls
    assert calls["joined"].all(), "an llm_request without our text_completion as parent (orphan)"
    all_turns = tables.engine_turns
    # an aborted call's engine span (vLLM's abort output, or our stand-in) has no latency account
    turns = all_turns.dropna(subset=list(PHASE_COLUMNS))
    assert len(turns) >= 0.5 * len(all_turns) > 0
    parts = turns[list(PHASE_COLUMNS)]
    assert (parts >= 0).all().all()
    gap = (parts.sum(axis=1) - turns["call_s"]).abs()
    # the parts add up to our call; a few turns came out ~55 ms short on a real run (an engine account that
    # ends before vLLM's output handling is done), so: all within 0.1 s, most within 5 ms
    assert gap.max() < 0.1 and (gap < 0.005).mean() >= 0.5, gap.round(4).tolist()
    assert (turns["engine_decode_s"] > 0).all() and (turns["engine_prefill_s"] > 0).all()
    assert turns["replica"].nunique() == 2
    print(f"\nengine view: {len(turns)} turns, mean parts (s): {parts.mean().round(3).to_dict()}")


def test_validation_rollout_under_verl_validate(engine_spans) -> None:
    validate = engine_spans[engine_spans.name == semconv.SPAN_VALIDATE]
    assert len(validate) == 1 and int(validate.step.iloc[0]) == 0
    validating = engine_spans.validate.fillna(False).astype(bool)
    workers = engine_spans[(engine_spans.name == semconv.SPAN_WORKER) & validating]
    assert len(workers) > 0 and set(workers.parent_id) == set(validate.span_id)


def test_engine_spans_reach_jaeger_through_the_collector(engine_spans, engine_run) -> None:
    jaeger = engine_run.backends.jaeger_url
    step = engine_spans[engine_spans.name == semconv.SPAN_STEP].trace_id.iloc[0]
    expected = engine_spans[engine_spans.trace_id == step]
    deadline = time.monotonic() + 90
    found: dict = {}
    while time.monotonic() < deadline:
        status, body = http_get(f"{jaeger}/api/v3/traces/{urllib.parse.quote(step)}", timeout=10)
        if status == 200 and body:
            found = {
                (span["spanId"].lower(), span["name"], scope["scope"].get("name", ""))
                for resource in json.loads(body)["result"]["resourceSpans"]
                for scope in resource.get("scopeSpans", [])
                for span in scope.get("spans", [])
            }
            if len(found) >= len(expected):
                break
        time.sleep(2)
    names = {name for _, name, _ in found}
    assert ENGINE in names and semconv.SPAN_STEP in names
    assert {span_id for span_id, _, _ in found} >= set(expected.span_id)
