"""Each trainer mode of the demo (verl's own ``PPOTrainerSync`` / ``PPOTrainerColocateAsync`` /
``PPOTrainerSeparateAsync``, and the legacy loop) through the real collector into Jaeger: the trace shape checked
in Jaeger, as docs/trainers.md draws it.

- every mode: the rollout's worker spans hang under the ``gen`` that waits for them (V1: the step's first), and
  each worker has one ``verl.barrier`` per step under its worker span, from the end of its work to the step's
  sync point (legacy: the slowest worker's end; V1 sync and colocate-async: the end of ``gen``; separate-async:
  the start of ``update_weights``), or 0 s there when it still had requests in flight;
- V1: the step's trace holds the training work: ``verl.update`` per inner update (``parameter_sync_step`` of them
  under separate-async), its phases, and the parameter sync (``verl.weight_sync``; bytes where reported);
- V1: rollout work lives in a trace per sample group under the async trainers (in the step's trace under the
  sync one), each sample with the policy versions that generated it;
- V1: each inner update links to the groups it consumed (staleness on the link) and each async group links to
  the worker span that dispatched it: both ends of every link are in Jaeger.

The demo's own analysis runs too (the command exits 0). Small runs: 3 steps of 4 prompts × 2.

The same runs carry the live account (issue 43; the live account is on, as a user has it, with verl's console
and file loggers): the spans travel from the AgentLoopWorker, reward and server actors to the collector actor
beside the trainer and back to verl's ``Tracking``. Checked as a user sees it (the console lines), in verl's file
logger (every step, once, at its own step), and against ``otel-verl analyze`` of the run's spool over the same
window. One demo per mode serves both (a demo costs ~2 min of CI).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

import pytest

from otel_verl import semconv as sc
from otel_verl.live import names as n
from otel_verl.live.backends import CONSOLE_PREFIX
from tests.live.checks import assert_adds_up, assert_live_is_the_spools, logged_rows

from .conftest import REPO, Backends, wait_until
from .emitters import otlp_spans
from .test_pipeline import jaeger_json

pytestmark = pytest.mark.backends

INNER = {"v1-sync": 1, "v1-colocate-async": 1, "v1-separate-async": 4}
MODE = {"v1-sync": "sync", "v1-colocate-async": "colocate_async", "v1-separate-async": "separate_async"}
MODES = ["legacy", *INNER]
STEPS = 3
SYNC_POINT = {
    "legacy": sc.BARRIER_SLOWEST_WORKER,
    "v1-sync": sc.BARRIER_SAMPLE_END,
    "v1-colocate-async": sc.BARRIER_SAMPLE_END,
    "v1-separate-async": sc.BARRIER_WEIGHT_SYNC,
}
JAEGER_NS = 1000
"""Tolerance on span times read back from Jaeger (its own span model keeps microseconds)."""


def _attrs(items: list[dict]) -> dict:
    out = {}
    for kv in items or []:
        value = kv.get("value", {})
        out[kv["key"]] = next(iter(value.values())) if value else None
    return {k: int(v) if isinstance(v, str) and v.lstrip("-").isdigit() else v for k, v in out.items()}


def _link(link: dict) -> tuple[str, str, dict]:
    return link["traceId"].lower(), link["spanId"].lower(), _attrs(link.get("attributes"))


def _jaeger_trace(b: Backends, trace_id: str) -> dict[str, dict]:
    status, doc = jaeger_json(b, f"/api/v3/traces/{trace_id}")
    if status != 200 or not doc:
        return {}
    spans = {}
    for _svc, sp in otlp_spans(doc.get("result", doc)):
        spans[sp["spanId"].lower()] = {
            "trace": sp["traceId"].lower(),
            "parent": (sp.get("parentSpanId") or "").lower(),
            "name": sp["name"],
            "start": int(sp["startTimeUnixNano"]),
            "end": int(sp["endTimeUnixNano"]),
            "attrs": _attrs(sp.get("attributes")),
            "links": [
                (lk["traceId"].lower(), lk["spanId"].lower(), _attrs(lk.get("attributes")))
                for lk in sp.get("links") or []
            ],
        }
    return spans


@pytest.fixture(scope="module", params=MODES)
def mode_demo(request, backends: Backends, tmp_path_factory) -> tuple[str, Path, str]:
    """One demo run of the mode against the collector, the live account on with verl's console and file loggers;
    (mode, its folder: spool/ and verl.jsonl, its stdout)."""
    mode = request.param
    tmp = tmp_path_factory.mktemp(f"mode-{mode}")
    spool = tmp / "spool"
    exe = Path(sys.executable).with_name("otel-verl")
    size = ["--steps", str(STEPS), "--workers", "2", "--prompts", "4", "--n", "2"]
    cmd = [str(exe), "demo", "--trainer", mode, *size, "--spool", str(spool), "--report", str(tmp / "report")]
    cmd += ["--logger", "console", "--logger", "file"]
    env = {
        **os.environ,
        "OTEL_EXPORTER_OTLP_ENDPOINT": backends.collector_otlp_grpc,
        "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc",
        "OTEL_EXPORTER_OTLP_INSECURE": "true",
        "OTEL_BSP_SCHEDULE_DELAY": "200",
        "OTEL_SDK_DISABLED": "false",
        "VERL_FILE_LOGGER_PATH": str(tmp / "verl.jsonl"),
    }
    env.pop("OTEL_VERL_LIVE", None)  # the suite turns it off (tests/conftest.py); a user has it on
    r = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, f"{cmd} failed:\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}"
    assert (tmp / "report" / "findings.json").exists()
    return mode, tmp, r.stdout


@pytest.fixture(scope="module")
def mode_run(mode_demo: tuple[str, Path, str], backends: Backends):
    """(mode, every trace of its demo as Jaeger returns it)."""
    mode, tmp, _ = mode_demo
    spool = tmp / "spool"
    traces: set[str] = set()
    for path in spool.rglob("*.jsonl"):
        for line in path.read_text().splitlines():
            if line.strip():
                traces |= {sp["traceId"].lower() for _, sp in otlp_spans(json.loads(line))}
    counts: dict[str, int] = defaultdict(int)
    for path in spool.rglob("*.jsonl"):
        for line in path.read_text().splitlines():
            if line.strip():
                for _, sp in otlp_spans(json.loads(line)):
                    counts[sp["traceId"].lower()] += 1

    def arrived():
        got = {t: _jaeger_trace(backends, t) for t in traces}
        return got if all(len(got[t]) == counts[t] for t in traces) else None

    got = wait_until(arrived, 120, f"{mode}: every spooled span in Jaeger", interval=2.0)
    return mode, got


def _all(got: dict[str, dict]) -> dict[str, dict]:
    return {sid: span for spans in got.values() for sid, span in spans.items()}


def _v1_only(mode: str) -> None:
    if mode not in INNER:
        pytest.skip("the legacy trainer has no inner updates, weight syncs or sample groups")


def test_workers_under_the_gen_that_waits_and_a_barrier_each(mode_run) -> None:
    """docs/trainers.md's tree of each mode: step → (update →) gen → worker → barrier, a barrier per worker and
    step lasting from the end of the worker's work to the mode's sync point."""
    mode, got = mode_run
    spans = _all(got)
    training = [s for s in spans.values() if s["name"] == sc.SPAN_WORKER and not s["attrs"].get(sc.VERL_VALIDATE)]
    steps = {s["attrs"][sc.VERL_STEP]: sid for sid, s in spans.items() if s["name"] == sc.SPAN_STEP}
    assert sorted(steps) == list(range(1, STEPS + 1))
    for step, sid in steps.items():
        trace = got[spans[sid]["trace"]]
        gens = sorted((s for s in trace.values() if s["name"] == sc.phase_span_name("gen")), key=lambda s: s["start"])
        first_gen = next(gid for gid, g in trace.items() if g is gens[0])
        workers = {wid: w for wid, w in trace.items() if w["name"] == sc.SPAN_WORKER}
        assert sorted(w["attrs"][sc.VERL_WORKER_RANK] for w in workers.values()) == [0, 1]
        assert {w["parent"] for w in workers.values()} == {first_gen}
        if mode in INNER:
            assert spans[gens[0]["parent"]]["name"] == sc.SPAN_UPDATE
        barriers = [b for b in trace.values() if b["name"] == sc.SPAN_BARRIER]
        assert sorted(workers[b["parent"]]["attrs"][sc.VERL_WORKER_RANK] for b in barriers) == [0, 1]
        if mode == "legacy":
            sync = max(w["end"] for w in workers.values())
        elif mode == "v1-separate-async":
            (weights,) = [p for p in trace.values() if p["name"] == sc.phase_span_name("update_weights")]
            sync = weights["start"]
        else:
            sync = gens[0]["end"]
        for barrier in barriers:
            worker = workers[barrier["parent"]]
            rank = worker["attrs"][sc.VERL_WORKER_RANK]
            assert barrier["attrs"][sc.VERL_STEP] == step and barrier["attrs"][sc.VERL_WORKER_RANK] == rank
            assert barrier["attrs"][sc.VERL_BARRIER_SYNC_POINT] == SYNC_POINT[mode]
            assert abs(barrier["end"] - sync) <= JAEGER_NS
            if mode == "legacy":
                assert abs(barrier["start"] - worker["end"]) <= JAEGER_NS
                continue
            # the worker's work: every training chunk of its rank (older steps' and the warm-up's too)
            chunks = [(w["start"], w["end"]) for w in training if w["attrs"][sc.VERL_WORKER_RANK] == rank]
            busy = any(start <= sync < end for start, end in chunks)
            idle_since = max([end for _, end in chunks if end <= sync] + [worker["start"]])
            assert abs(barrier["start"] - (sync if busy else idle_since)) <= JAEGER_NS
            assert (barrier["attrs"][sc.VERL_BARRIER_REQUESTS_IN_FLIGHT] > 0) <= busy


def test_step_trace_holds_the_training_work(mode_run) -> None:
    mode, got = mode_run
    _v1_only(mode)
    spans = _all(got)
    steps = {s["attrs"][sc.VERL_STEP]: sid for sid, s in spans.items() if s["name"] == sc.SPAN_STEP}
    assert sorted(steps) == list(range(1, STEPS + 1))
    for step, sid in steps.items():
        trace = got[spans[sid]["trace"]]
        assert spans[sid]["attrs"][sc.VERL_TRAINER_MODE] == MODE[mode]
        updates = [s for s in trace.values() if s["name"] == sc.SPAN_UPDATE]
        assert sorted(u["attrs"][sc.VERL_UPDATE_INDEX] for u in updates) == list(range(INNER[mode]))
        assert all(u["parent"] == sid for u in updates)
        for update_id in (uid for uid, s in trace.items() if s["name"] == sc.SPAN_UPDATE):
            phases = {s["name"] for s in trace.values() if s["parent"] == update_id}
            assert {sc.phase_span_name(p) for p in ("gen", "old_log_prob", "adv", "update_actor")} <= phases
        syncs = [s for s in trace.values() if s["name"] == sc.SPAN_WEIGHT_SYNC]
        assert len(syncs) == 1 and syncs[0]["attrs"][sc.VERL_SYNC_VERSION] == step
        assert trace[syncs[0]["parent"]]["name"] == sc.phase_span_name("update_weights")
        if mode == "v1-separate-async":  # its backend reports the payload
            assert syncs[0]["attrs"][sc.VERL_SYNC_BYTES] > 0


def test_updates_link_the_groups_they_consumed_and_groups_link_their_dispatch(mode_run) -> None:
    mode, got = mode_run
    _v1_only(mode)
    spans = _all(got)
    groups = {sid: s for sid, s in spans.items() if s["name"] == sc.SPAN_GROUP and not s["attrs"].get(sc.VERL_VALIDATE)}
    assert groups
    consumed = set()
    staleness = []
    for update in (s for s in spans.values() if s["name"] == sc.SPAN_UPDATE):
        assert update["links"]
        for trace_id, span_id, attrs in update["links"]:
            group = got.get(trace_id, {}).get(span_id)  # the other end, in Jaeger
            assert group is not None and group["name"] == sc.SPAN_GROUP, (trace_id, span_id)
            assert attrs[sc.VERL_POLICY_VERSION_MIN] <= attrs[sc.VERL_POLICY_VERSION_MAX]
            staleness.append(attrs[sc.VERL_SAMPLE_STALENESS])
            if mode == "v1-sync":
                assert trace_id == update["trace"]  # the step's own groups
            consumed.add(span_id)
    assert min(staleness) >= 0
    if mode == "v1-sync":
        assert set(staleness) == {0}  # on-policy
    if mode == "v1-separate-async":
        assert max(staleness) >= 1  # trained on samples of older weights, as the mode intends
    for group in groups.values():
        if mode == "v1-sync":
            assert spans[group["parent"]]["name"] == sc.SPAN_WORKER  # in the step's trace
            continue
        assert group["parent"] == "" and len(got[group["trace"]]) > 1  # a trace of its own, with its samples
        ((trace_id, span_id, _),) = group["links"]
        assert got.get(trace_id, {}).get(span_id, {}).get("name") == sc.SPAN_WORKER  # who dispatched it
    samples = [s for s in spans.values() if s["name"] == sc.SPAN_REQUEST and not s["attrs"].get(sc.VERL_VALIDATE)]
    assert all(sc.VERL_POLICY_VERSION_MIN in s["attrs"] for s in samples)
    assert all(spans[s["parent"]]["name"] == sc.SPAN_GROUP for s in samples)
    assert consumed <= set(groups)


def test_one_genai_span_per_engine_call(mode_run) -> None:
    """Issue 50: summed ``gen_ai.usage.output_tokens`` over every span in Jaeger is the tokens generated (the
    engine's own count of each submission it answered, plus what aborted submissions returned): one GenAI span
    per engine call, in every mode. Under the async trainers a round trip is ``verl.generate`` (no ``gen_ai.*``)
    and each attempt the GenAI span the engine's ``llm_request`` nests under."""
    mode, got = mode_run
    spans = _all(got)
    genai = {
        sid: s
        for sid, s in spans.items()
        if s["attrs"].get(sc.GEN_AI_OPERATION_NAME) == sc.GEN_AI_OP_TEXT_COMPLETION
        and s["name"] != sc.ENGINE_SPAN_REQUEST
    }
    assert genai and all(sid in genai for sid, s in spans.items() if sc.GEN_AI_USAGE_OUTPUT_TOKENS in s["attrs"])
    assert not any(
        spans.get(s["parent"], {}).get("name", "").startswith(sc.GEN_AI_OP_TEXT_COMPLETION) for s in genai.values()
    )
    engine = [s for s in spans.values() if s["name"] == sc.ENGINE_SPAN_REQUEST]
    for e in engine:  # the engine answered a GenAI span, and counted what it recorded
        assert (
            genai[e["parent"]]["attrs"][sc.GEN_AI_USAGE_OUTPUT_TOKENS] == e["attrs"][sc.ENGINE_USAGE_COMPLETION_TOKENS]
        )
    answered = {e["parent"] for e in engine}
    unanswered = [s for sid, s in genai.items() if sid not in answered]
    assert all(s["attrs"][sc.VERL_ENGINE_STOP_REASON] == "aborted" for s in unanswered)  # vLLM makes no span then
    generated = sum(e["attrs"][sc.ENGINE_USAGE_COMPLETION_TOKENS] for e in engine)
    generated += sum(s["attrs"][sc.GEN_AI_USAGE_OUTPUT_TOKENS] for s in unanswered)
    assert sum(s["attrs"].get(sc.GEN_AI_USAGE_OUTPUT_TOKENS, 0) for s in spans.values()) == generated > 0
    trips = [s for s in spans.values() if s["name"] == sc.SPAN_GENERATE]
    if mode in ("v1-colocate-async", "v1-separate-async"):  # FullyAsyncLLMServerClient
        assert trips and not any(key.startswith("gen_ai.") for t in trips for key in t["attrs"])
        assert all(spans[s["parent"]]["name"] == sc.SPAN_GENERATE for s in genai.values())
    else:
        assert not trips and all(spans[s["parent"]]["name"] == sc.SPAN_TURN for s in genai.values())


def test_live_account_reaches_the_console_and_the_file_logger(mode_demo) -> None:
    mode, tmp, out = mode_demo
    ours = [" ".join(x.split()) for x in out.splitlines() if x.startswith(CONSOLE_PREFIX)]
    assert [int(x.split("step ")[1].split(":")[0]) for x in ours] == list(range(1, STEPS + 1)), out[-3000:]
    rows = logged_rows(tmp)
    assert sorted(rows) == list(range(1, STEPS + 1))
    for step, row in rows.items():
        assert row[n.STEP] == step and row[n.SPANS] > 0 and row[n.LATE_SPANS] == 0
        assert_adds_up(step, row)
        assert any(k.startswith(n.PART) for k in row), "the rollout's parts"
    if mode in ("v1-colocate-async", "v1-separate-async"):
        assert all(n.ASYNC + "trainer_idle_ratio" in row for row in rows.values()), "who waited for whom"
        assert all(n.STALENESS_MAX in row for row in rows.values())
    else:  # issue 51: a synchronous trainer's staleness is always 0, a number that means nothing there
        assert not any(k.startswith((n.STALENESS_MAX, n.STALENESS_MEAN)) for row in rows.values() for k in row)


def test_live_numbers_are_the_spools_accounts(mode_demo, tmp_path: Path) -> None:
    """Every live row is the live account of the finished spool, each step's own numbers ``analyze``'s
    (docs/live.md, "Live and offline")."""
    _, tmp, _ = mode_demo
    (spool,) = list((tmp / "spool").iterdir())
    assert_live_is_the_spools(logged_rows(tmp), spool, STEPS, tmp_path)
