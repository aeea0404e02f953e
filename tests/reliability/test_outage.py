"""Collector outages with the real otelcol-verl and Jaeger: exactly-once delivery through spool + journal + replay.

1. Collector down for the whole run, twice: a closed port (exports fail at once) and a silent
   endpoint (accepts, never answers: every export runs into its 10 s deadline). The demo returns
   exactly what an untraced run with the same seed returns; a heartbeat on every AgentLoopWorker's
   event loop is never held up more than 300 ms beyond the untraced run's worst lag (the validation
   rollout's first-call warm-up, which includes the tracer provider's set-up, is reported apart);
   the exporter backed off (spans deferred at once, not retried); each process logs at most one
   exporter warning a minute (RAY_DEDUP_LOGS=0: Ray does not fold repeated lines); the spool holds
   every span created; then collector up, ``otel-verl replay``, and Jaeger holds every span exactly
   once; a second replay sends nothing.
2. Collector SIGKILLed mid-run and restarted on the same port (collector/durable.yaml overlay): after
   the run and ``replay`` Jaeger holds every span exactly once, and a second replay sends nothing.

Span counts come from three independent places: each process's count of spans created
(``<run>/.delivery/*.counts``, a span processor's on_end), the spool lines, and Jaeger's raw traces.
They are recorded with :func:`tests.reliability.report.record` (file + end-of-run summary).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Collection
from contextlib import nullcontext
from pathlib import Path

import pytest

from otel_verl.export.journal import JOURNAL_DIR, JOURNAL_SUFFIX, read_delivered
from tests.backends.conftest import REPO, wait_until
from tests.process_state import read_counts
from tests.reliability import report
from tests.reliability.stack import (
    SilentEndpoint,
    Stack,
    jaeger_copies,
    spool_line_spans,
    spool_span_ids,
    wait_while_running,
)

pytest.importorskip("verl", reason="needs the verl extra")
pytestmark = [pytest.mark.backends, pytest.mark.ray, pytest.mark.verl]

HERE = Path(__file__).resolve().parent
DEMO = ["--steps", "2", "--prompts", "4", "--n", "2", "--seed", "7"]
HEARTBEAT = ("--heartbeat", "--val-before-train")
MAX_EXTRA_LAG_S = 0.3
"""An export on the event loop would hold it for a whole export, at the silent endpoint its 10 s deadline (a closed
port fails in milliseconds: that variant is there for the warnings and the replay). The margin sits far below that
and above the hiccups of this 2-core machine, where five processes share the cores and the batch processor's thread
takes the GIL to encode: over four runs on 2026-11-28 the traced worker's worst lag exceeded the untraced twin's by
29, 94, 100 and 128 ms."""
EXPORTER_WARNING = re.compile(r"OTLP export to|Failed to export|Transient error|exporting span", re.IGNORECASE)
RAY_PREFIX = re.compile(r"^\((?P<actor>[^)]*?)pid=(?P<pid>\d+)")
ANSI = re.compile(r"\x1b\[[0-9;]*m")


def demo_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    env.update(
        {
            "OTEL_BSP_SCHEDULE_DELAY": "200",
            "OTEL_VERL_DEMO_RAY_LOGS": "1",  # actor stderr reaches ours, prefixed "(Actor pid=N)"
            "RAY_DEDUP_LOGS": "0",  # else Ray folds identical lines of several actors into one: counts would lie
            "PYTHONPATH": str(REPO),
            **extra,
        }
    )
    return env


def demo_cmd(out: Path, *args: str) -> list[str]:
    return [sys.executable, str(HERE / "demo_child.py"), str(out), *DEMO, *args]


HOLD_STEP_3 = ("--stall", "0:30", "--slow-step", "3")
"""Sample 0 stalls 30 s in step 3: the demo is certainly still running when the collector comes back (the
kill is at step 2; unheld, the last steps could end inside the outage on a fast box), and step 3's other
requests end while the collector is down."""

DEMO_TIMEOUT_S = 900
"""A two-step demo child takes ~80-100 s here; a loaded 2-core CI box has been seen to need over 400."""


def run_demo_child(tmp: Path, name: str, env: dict[str, str], *args: str) -> tuple[dict, str]:
    out = tmp / f"{name}.json"
    r = subprocess.run(demo_cmd(out, *args), env=env, cwd=tmp, capture_output=True, text=True, timeout=DEMO_TIMEOUT_S)
    assert r.returncode == 0, f"{name} demo failed:\n{r.stdout[-3000:]}\n{r.stderr[-5000:]}"
    return json.loads(out.read_text()), r.stdout + r.stderr


def replay_cli(source: Path, endpoint: str) -> str:
    exe = Path(sys.executable).with_name("otel-verl")
    r = subprocess.run(
        [str(exe), "replay", str(source), "--endpoint", endpoint, "--protocol", "grpc"],
        capture_output=True,
        text=True,
        timeout=300,
        env={k: v for k, v in os.environ.items() if not k.startswith("OTEL_")},
    )
    assert r.returncode == 0, r.stdout + r.stderr
    return r.stdout + r.stderr  # the CLI's rich console writes to stderr


def sent_of(output: str) -> tuple[int, int]:
    m = re.search(r"sent (\d+) of (\d+) spans", output)
    assert m, output
    return int(m.group(1)), int(m.group(2))


def exporter_warnings_per_process(log: str) -> Counter[str]:
    per: Counter[str] = Counter()
    for line in log.splitlines():
        if EXPORTER_WARNING.search(line):
            m = RAY_PREFIX.match(ANSI.sub("", line).strip())
            per[m.group("pid") if m else "driver"] += 1
    return per


def assert_exactly_once_in_jaeger(
    stack: Stack, spool: dict[str, str], allow_unspooled: bool = False, in_flight: Collection[str] = ()
) -> Counter[str]:
    """Every spool span once in Jaeger.

    ``allow_unspooled``: Jaeger may also hold spans the spool lost (a kill). ``in_flight``: spans a killed
    process had in an export the collector accepted but that it died before journaling; replay sends them
    again, so they may be stored twice (the documented exactly-once window), never more.
    """

    def settled():
        copies = jaeger_copies(stack, spool)
        return copies if all(copies[s] >= 1 for s in spool) else None

    try:
        copies = wait_until(settled, 90, "every spool span in Jaeger", interval=1.0)
    except AssertionError:
        copies = jaeger_copies(stack, spool)
        missing = sum(1 for s in spool if copies[s] == 0)
        raise AssertionError(f"{missing} of {len(spool)} spans missing from Jaeger\n{stack.logs()}") from None
    time.sleep(3)  # late duplicates would arrive within the collector's batch timeout
    copies = jaeger_copies(stack, spool)
    dupes = {s: n for s, n in copies.items() if s in spool and n > 1}
    unexplained = {s: n for s, n in dupes.items() if s not in in_flight or n > 2}
    assert not unexplained, f"{len(unexplained)} spans stored more than once in Jaeger"
    assert allow_unspooled or copies["<not in spool>"] == 0
    return copies


def totals(run_dir: Path) -> dict[str, int]:
    counts = read_counts(run_dir)
    assert counts, f"no per-process counts under {run_dir / JOURNAL_DIR}"
    return {
        key: sum(int(c[key]) for c in counts)
        for key in ("spans_ended", "spans_spooled", "spans_spool_failed", "spans_delivered", "spans_deferred")
    } | {"processes": len(counts)}


@pytest.fixture
def stack(tmp_path):
    s = Stack(tmp_path / "backends")
    s.workdir.mkdir()
    try:
        yield s
    finally:
        s.stop()


def worst_lag(run: dict, key: str = "max_lag_s") -> float:
    beats = run["heartbeats"]
    assert beats and all(b["beats"] > 0 for b in beats), beats
    return max(b[key] for b in beats)


@pytest.fixture(scope="module")
def untraced(tmp_path_factory) -> dict:
    """The reference run (same seed, heartbeats on), tracing off: shared by both outage variants."""
    tmp = tmp_path_factory.mktemp("untraced")
    doc, _ = run_demo_child(tmp, "untraced", demo_env(OTEL_SDK_DISABLED="true"), *HEARTBEAT)
    return doc


@pytest.mark.parametrize("down", ["closed port", "silent endpoint"])
def test_collector_down_for_the_whole_run(stack: Stack, tmp_path: Path, untraced: dict, down: str):
    stack.start_jaeger()  # the collector's port stays closed during the run
    spool_root = tmp_path / "spool"
    with SilentEndpoint() if down == "silent endpoint" else nullcontext() as silent:
        endpoint = silent.url if silent is not None else stack.otlp_grpc
        traced, log = run_demo_child(
            tmp_path,
            "traced",
            demo_env(OTEL_EXPORTER_OTLP_ENDPOINT=endpoint, OTEL_EXPORTER_OTLP_PROTOCOL="grpc"),
            "--spool",
            str(spool_root),
            *HEARTBEAT,
        )
        if silent is not None:
            assert silent.connections > 0, "the exporter never reached the silent endpoint"

    # training unaffected: the same trajectories, token for token, turn counts and rewards
    assert traced["outputs"] == untraced["outputs"]
    assert traced["turns"] == untraced["turns"] > 0
    # the exporter never held up a worker's event loop (it runs on the batch processor's thread)
    lag, base = worst_lag(traced), worst_lag(untraced)
    assert lag < base + MAX_EXTRA_LAG_S, (traced["heartbeats"], untraced["heartbeats"])
    assert sum(traced["step_seconds"]) < 2 * sum(untraced["step_seconds"]) + 8, (traced, untraced)

    # at most one exporter warning a minute per process, and the outage is reported
    warnings = exporter_warnings_per_process(log)
    assert warnings, f"no exporter warning logged:\n{log[-3000:]}"
    allowed = 1 + int(traced["seconds"] // 60)
    assert max(warnings.values()) <= allowed, warnings

    # the spool holds 100% of the spans created, nothing was delivered live, and the exporter backed off
    run_dir = Path(traced["spool_dir"])
    spool = spool_span_ids(run_dir)
    t = totals(run_dir)
    assert t["spans_ended"] == t["spans_spooled"] == spool_line_spans(run_dir) == len(spool) > 0, t
    assert t["spans_spool_failed"] == 0 and t["spans_delivered"] == 0, t
    assert t["spans_deferred"] > 0, t  # batches skipped at once during the back-off, not retried
    assert read_delivered([run_dir])[0] == set()

    # collector up, replay: every span in Jaeger exactly once; replay again: nothing sent
    stack.start_collector()
    sent, total = sent_of(replay_cli(run_dir, stack.otlp_grpc))
    assert sent == total == len(spool)
    copies = assert_exactly_once_in_jaeger(stack, spool)
    again = replay_cli(run_dir, stack.otlp_grpc)
    assert sent_of(again) == (0, len(spool)) and "nothing to send" in again
    assert_exactly_once_in_jaeger(stack, spool)
    report.record(
        f"1. collector down ({down})",
        created=t["spans_ended"],
        spooled=len(spool),
        delivered_live=t["spans_delivered"],
        deferred_by_backoff=t["spans_deferred"],
        replayed=sent,
        in_jaeger_once=sum(1 for s in spool if copies[s] == 1),
        in_jaeger_duplicated=sum(1 for s in spool if copies[s] > 1),
        second_replay_sent=0,
        processes=t["processes"],
        max_exporter_warnings_per_process=max(warnings.values()),
        loop_lag_ms_traced=round(lag * 1000, 1),
        loop_lag_ms_untraced=round(base * 1000, 1),
        warmup_lag_ms_traced=round(worst_lag(traced, "warmup_max_lag_s") * 1000, 1),
        warmup_lag_ms_untraced=round(worst_lag(untraced, "warmup_max_lag_s") * 1000, 1),
        demo_seconds_untraced_traced=[round(untraced["seconds"]), round(traced["seconds"])],
    )


def test_collector_killed_mid_run_and_restarted(stack: Stack, tmp_path: Path):
    stack.overlays.append(REPO / "collector" / "durable.yaml")
    stack.start_jaeger()
    stack.start_collector()
    spool_root = tmp_path / "spool"
    out = tmp_path / "killed.json"
    # the SDK's per-batch retry budget (standard variable) shorter than the outage: batches fail, go to replay
    env = demo_env(
        OTEL_EXPORTER_OTLP_ENDPOINT=stack.otlp_grpc, OTEL_EXPORTER_OTLP_PROTOCOL="grpc", OTEL_EXPORTER_OTLP_TIMEOUT="2"
    )
    log_path = tmp_path / "killed.log"
    with log_path.open("w") as log:
        child = subprocess.Popen(
            demo_cmd(out, "--spool", str(spool_root), "--steps", "4", *HOLD_STEP_3),
            env=env,
            cwd=tmp_path,
            stdout=log,
            stderr=log,
        )
    try:

        def delivered_mid_run() -> bool:
            journals = list(spool_root.glob(f"*/{JOURNAL_DIR}/*{JOURNAL_SUFFIX}"))
            steps = list(spool_root.glob("*/step_2"))
            return bool(steps) and any(p.stat().st_size > 0 for p in journals)

        try:
            wait_while_running(child, delivered_mid_run, 300, "live deliveries and step 2 under way")
        except AssertionError as exc:
            raise AssertionError(f"{exc}\n{log_path.read_text()[-4000:]}") from None
        assert child.poll() is None, "the demo ended before the collector could be killed"
        stack.kill_collector()
        time.sleep(5.0)
        stack.start_collector()  # same ports
        killed_while_running = child.poll() is None
        assert child.wait(timeout=DEMO_TIMEOUT_S) == 0, log_path.read_text()[-5000:]
    finally:
        if child.poll() is None:
            child.kill()
    traced = json.loads(out.read_text())
    assert killed_while_running

    run_dir = Path(traced["spool_dir"])
    spool = spool_span_ids(run_dir)
    t = totals(run_dir)
    assert t["spans_ended"] == t["spans_spooled"] == len(spool) > 0, t
    delivered, _ = read_delivered([run_dir])
    assert 0 < len(delivered) <= len(spool)

    first = replay_cli(run_dir, stack.otlp_grpc)
    sent, total = sent_of(first)
    spool_keys = {int(trace_id + span_id, 16) for span_id, trace_id in spool.items()}
    assert total == len(spool) and sent == len(spool_keys - delivered)
    assert sent > 0, "nothing was left for replay: the outage did not hit an export"
    copies = assert_exactly_once_in_jaeger(stack, spool)
    assert sent_of(replay_cli(run_dir, stack.otlp_grpc)) == (0, len(spool))
    assert_exactly_once_in_jaeger(stack, spool)
    report.record(
        "2. collector killed mid-run and restarted",
        created=t["spans_ended"],
        spooled=len(spool),
        delivered_live=len(delivered),
        deferred_by_backoff=t["spans_deferred"],
        replayed=sent,
        in_jaeger_once=sum(1 for s in spool if copies[s] == 1),
        in_jaeger_duplicated=sum(1 for s in spool if copies[s] > 1),
        second_replay_sent=0,
        processes=t["processes"],
    )
