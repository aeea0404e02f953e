"""A real AgentLoopWorker Ray actor SIGKILLed mid-step, exporting to the real collector + Jaeger and the spool.

The demo runs in a child process (the run itself fails once an actor dies, as verl's would), with
OTLP to otelcol-verl → Jaeger and the spool. Export batches are written only when the chunk/step
ends (``flush`` at the boundary) or when 16 spans are queued: the batch timer is set to 10 minutes,
so it never fires. Requests are handed to the exporters as they finish (``OTEL_VERL_ROLLOUT_HOLD_S=0``;
by default they wait in memory until the chunk ends, so a killed worker would leave nothing of its
step in flight, and nothing the analyzer could point at). Sample 0 of step 2 stalls its first engine
call for a minute, so worker 0's step 2 is in flight; the worker's pid comes from its own spans
(resource ``process.pid``), and the kill lands once worker 0 has written some step-2 request spans.
Then:

* every spool line written before the kill parses (replay's validation, the analyzer's loader);
* loss is bounded by what was not flushed: worker 0's step 1 is complete in the spool, and its last
  counts file (written by that boundary flush, the last flush before the kill) says every span it
  had ended by then was spooled; step 2 holds only some requests and no worker span;
* ``otel-verl analyze`` reports the incomplete worker instead of failing;
* ``otel-verl replay`` sends what the live exporter did not deliver, and Jaeger then holds every
  spooled span exactly once (a second replay sends nothing) — except the one window exactly-once
  cannot close: a batch the collector accepted while the worker died before journaling it is sent
  again by replay, so at most that one batch (16 spans, all of the killed worker, all unjournaled)
  may be stored twice; the test allows exactly that and records how many it saw.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from otel_verl import semconv
from otel_verl.export.journal import read_delivered
from otel_verl.export.replay import spool_files, validate
from tests.backends.conftest import REPO
from tests.process_state import read_counts
from tests.reliability import report
from tests.reliability.stack import Stack, spool_span_ids, wait_while_running
from tests.reliability.test_outage import assert_exactly_once_in_jaeger, replay_cli, sent_of

pytest.importorskip("verl", reason="needs the verl extra")
pytestmark = [pytest.mark.backends, pytest.mark.ray, pytest.mark.verl]

HERE = Path(__file__).resolve().parent
PROMPTS, N, WORKERS = 8, 2, 2
SHARE = PROMPTS * N // WORKERS  # requests per worker per step
BATCH = 16


def spans_of(path: Path) -> list[tuple[dict, dict]]:
    """(resource attributes, span) for every span of an OTLP/JSON lines file; every line must parse."""
    out = []
    for number, line in enumerate(path.read_text().splitlines(), start=1):
        assert line.strip(), f"{path}:{number}: empty line"
        doc = json.loads(line)
        for rs in doc["resourceSpans"]:
            attrs = {a["key"]: next(iter(a["value"].values())) for a in rs["resource"]["attributes"]}
            for ss in rs["scopeSpans"]:
                out.extend((attrs, span) for span in ss["spans"])
    return out


@pytest.fixture
def stack(tmp_path):
    s = Stack(tmp_path / "backends")
    s.workdir.mkdir()
    try:
        s.start_jaeger()
        s.start_collector()
        yield s
    finally:
        s.stop()


def test_worker_sigkilled_mid_step(stack: Stack, tmp_path: Path):
    spool = tmp_path / "spool"
    run_id = "killed-worker"
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    env.update(
        {
            "OTEL_BSP_SCHEDULE_DELAY": "600000",  # no timer flush: only boundaries and full batches write
            "OTEL_BSP_MAX_EXPORT_BATCH_SIZE": str(BATCH),
            "OTEL_VERL_ROLLOUT_HOLD_S": "0",  # finished requests go to the exporters at once
            "OTEL_EXPORTER_OTLP_ENDPOINT": stack.otlp_grpc,
            "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc",
            "PYTHONPATH": str(REPO),
        }
    )
    cmd = [
        sys.executable,
        str(HERE / "demo_child.py"),
        str(tmp_path / "result.json"),
        *("--spool", str(spool), "--run-id", run_id, "--steps", "3", "--workers", str(WORKERS)),
        *("--prompts", str(PROMPTS), "--n", str(N), "--seconds-per-token", "0.0005"),
        *("--stall", "0:60", "--slow-step", "2"),  # sample 0 (worker 0's chunk) hangs in step 2
    ]
    log = (tmp_path / "demo.log").open("w")
    child = subprocess.Popen(cmd, env=env, cwd=tmp_path, stdout=log, stderr=log)
    run_dir = spool / run_id
    step2 = run_dir / "step_2" / "worker_0.jsonl"
    try:
        wait_while_running(child, lambda: step2.exists() and step2.stat().st_size > 0, 300, "worker 0 writes step 2")
        pid = int(spans_of(run_dir / "step_1" / "worker_0.jsonl")[0][0]["process.pid"])
        assert child.poll() is None
        os.kill(pid, signal.SIGKILL)
        rc = child.wait(timeout=300)
    finally:
        if child.poll() is None:
            child.kill()
        log.close()
    assert rc != 0, "the run should fail once a worker actor died"

    # every line written before the kill parses, in every file (replay's own validation)
    files = spool_files(run_dir)
    validate(files, skip_bad_lines=False)
    killed = [
        (attrs, span) for path in files for attrs, span in spans_of(path) if int(attrs.get("process.pid", -1)) == pid
    ]

    def of_step(step: int, name: str | None = None) -> list[dict]:
        return [
            span
            for _, span in killed
            if (name is None or span["name"] == name)
            and any(a["key"] == semconv.VERL_STEP and int(a["value"]["intValue"]) == step for a in span["attributes"])
        ]

    # step 1 is complete: its tail (the worker span ends last) can only have been written by the boundary flush
    assert len(of_step(1, semconv.SPAN_WORKER)) == 1
    assert len(of_step(1, semconv.SPAN_REQUEST)) == SHARE
    (counts,) = [c for c in read_counts(run_dir) if c.get("pid") == pid]  # rewritten at each flush: the last one
    step1_file = len(spans_of(run_dir / "step_1" / "worker_0.jsonl"))
    assert counts["spans_spooled"] == counts["spans_ended"] == step1_file == len(of_step(1)) > 0, counts
    # step 2 was in flight: its worker span never ended, only full batches of ended requests reached disk
    assert of_step(2, semconv.SPAN_WORKER) == []
    written = len(of_step(2, semconv.SPAN_REQUEST))
    assert 0 < written < SHARE

    # the analyzer reports the incomplete worker instead of failing
    exe = Path(sys.executable).with_name("otel-verl")
    out = tmp_path / "report"
    r = subprocess.run(
        [str(exe), "analyze", str(run_dir), "--out", str(out)], capture_output=True, text=True, timeout=300
    )
    assert r.returncode == 0, r.stdout + r.stderr
    findings = json.loads((out / "findings.json").read_text())
    items = findings["findings"] if isinstance(findings, dict) else findings
    incomplete = [f for f in items if f["kind"] == "incomplete_worker"]
    assert [(f["step"], f["worker"]) for f in incomplete] == [(2, 0)], incomplete

    # replay sends what the live exporter did not deliver; then every spooled span is in Jaeger exactly once
    spooled = spool_span_ids(run_dir)
    delivered, _ = read_delivered([run_dir])
    keys = {int(trace_id + span_id, 16) for span_id, trace_id in spooled.items()}
    sent, total = sent_of(replay_cli(run_dir, stack.otlp_grpc))
    assert total == len(spooled) and sent == len(keys - delivered)
    killed_ids = {span["spanId"].lower() for _, span in killed}
    unjournaled = {s for s, t in spooled.items() if int(t + s, 16) not in delivered}
    copies = assert_exactly_once_in_jaeger(stack, spooled, allow_unspooled=True, in_flight=killed_ids & unjournaled)
    twice = [s for s in spooled if copies[s] > 1]
    assert len(twice) <= BATCH, twice  # at most the batch in flight when the worker died
    assert sent_of(replay_cli(run_dir, stack.otlp_grpc)) == (0, len(spooled))
    all_counts = read_counts(run_dir)
    report.record(
        "3. worker SIGKILLed mid-step",
        created_at_last_flushes=sum(int(c["spans_ended"]) for c in all_counts),
        spooled=len(spooled),
        delivered_live=len(delivered),
        delivered_live_not_spooled=len(delivered - keys),
        in_jaeger_not_spooled=copies["<not in spool>"],
        replayed=sent,
        in_jaeger_once=sum(1 for s in spooled if copies[s] == 1),
        in_jaeger_twice_in_flight_batch=len(twice),
        second_replay_sent=0,
        killed_worker_step1_requests=f"{SHARE}/{SHARE}",
        killed_worker_step2_requests_spooled=f"{written}/{SHARE}",
    )
