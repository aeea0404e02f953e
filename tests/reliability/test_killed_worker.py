"""A real AgentLoopWorker Ray actor SIGKILLed mid-step: the spool stays readable and the analyzer says so.

The demo runs in a child process (the run itself fails once an actor dies, as verl's would). Its pid
comes from the worker's own spans (resource attribute ``process.pid`` in ``worker_0.jsonl``). The
kill lands in step 2, once the worker has written some of that step's request spans. Then:

* every spool line written before the kill parses (replay's validation, the analyzer's loader);
* loss is bounded by what was not flushed: step 1 of the killed worker is complete (flushed at the
  chunk boundary), and the spool holds at least the spans its last flush counted;
* ``otel-verl analyze`` reports the incomplete worker instead of failing.
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
from otel_verl.export.journal import read_counts
from otel_verl.export.replay import spool_files, validate
from tests.backends.conftest import REPO
from tests.reliability.stack import wait_while_running

pytest.importorskip("verl", reason="needs the verl extra")
pytestmark = [pytest.mark.ray, pytest.mark.verl]

HERE = Path(__file__).resolve().parent
PROMPTS, N, WORKERS = 8, 2, 2
SHARE = PROMPTS * N // WORKERS  # requests per worker per step


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


def test_worker_sigkilled_mid_step(tmp_path: Path):
    spool = tmp_path / "spool"
    run_id = "killed-worker"
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    env.update({"OTEL_BSP_SCHEDULE_DELAY": "100", "PYTHONPATH": str(REPO)})
    cmd = [
        sys.executable,
        str(HERE / "demo_child.py"),
        str(tmp_path / "result.json"),
        *("--spool", str(spool), "--run-id", run_id, "--steps", "3", "--workers", str(WORKERS)),
        *("--prompts", str(PROMPTS), "--n", str(N), "--seconds-per-token", "0.002"),
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

    def of_step(step: int, name: str) -> list[dict]:
        return [
            span
            for _, span in killed
            if span["name"] == name
            and any(a["key"] == semconv.VERL_STEP and int(a["value"]["intValue"]) == step for a in span["attributes"])
        ]

    # step 1 was flushed at its chunk boundary: complete
    assert len(of_step(1, semconv.SPAN_WORKER)) == 1
    assert len(of_step(1, semconv.SPAN_REQUEST)) == SHARE
    # step 2 was in flight: its worker span never ended, some requests did
    assert of_step(2, semconv.SPAN_WORKER) == []
    assert 0 < len(of_step(2, semconv.SPAN_REQUEST)) < SHARE
    # loss bounded by what was not flushed: everything the worker's last flush counted is spooled
    counts = [c for c in read_counts(run_dir) if c.get("pid") == pid]
    assert counts, "the killed worker flushed at its step-1 chunk boundary"
    assert len(killed) >= int(counts[0]["spans_ended"]) > 0

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
    written = len(of_step(2, semconv.SPAN_REQUEST))
    print(
        f"\n[killed worker] pid={pid} spans spooled by it={len(killed)} (last flush counted "
        f"{counts[0]['spans_ended']}), step-2 requests written={written}/{SHARE}; finding: {incomplete[0]['message']}"
    )
