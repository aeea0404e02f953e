"""Collector outages with the real otelcol-verl and Jaeger: exactly-once delivery through spool + journal + replay.

1. Collector down for the whole run: the demo returns exactly what an untraced run with the same seed
   returns, steps are not slowed by the exporter, each process logs at most one exporter warning a
   minute, the spool holds every span created; then collector up, ``otel-verl replay``, and Jaeger
   holds every span exactly once; a second replay sends nothing.
2. Collector SIGKILLed mid-run and restarted on the same port (collector/durable.yaml overlay): after
   the run and ``replay`` Jaeger holds every span exactly once, and a second replay sends nothing.

Span counts come from three independent places: each process's count of spans created
(``<run>/.delivery/*.counts``, a span processor's on_end), the spool lines, and Jaeger's raw traces.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from otel_verl.export.journal import JOURNAL_DIR, JOURNAL_SUFFIX, read_counts, read_delivered
from tests.backends.conftest import REPO, wait_until
from tests.reliability.stack import Stack, jaeger_copies, spool_line_spans, spool_span_ids, wait_while_running

pytest.importorskip("verl", reason="needs the verl extra")
pytestmark = [pytest.mark.backends, pytest.mark.ray, pytest.mark.verl]

HERE = Path(__file__).resolve().parent
DEMO = ["--steps", "2", "--prompts", "4", "--n", "2", "--seed", "7"]
EXPORTER_WARNING = re.compile(r"OTLP export to|Failed to export|Transient error|exporting span", re.IGNORECASE)
RAY_PREFIX = re.compile(r"^\((?P<actor>[^)]*?)pid=(?P<pid>\d+)")
ANSI = re.compile(r"\x1b\[[0-9;]*m")


def demo_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    env.update(
        {
            "OTEL_BSP_SCHEDULE_DELAY": "200",
            "OTEL_VERL_DEMO_RAY_LOGS": "1",  # actor stderr reaches ours, prefixed "(Actor pid=N)"
            "PYTHONPATH": str(REPO),
            **extra,
        }
    )
    return env


def demo_cmd(out: Path, *args: str) -> list[str]:
    return [sys.executable, str(HERE / "demo_child.py"), str(out), *DEMO, *args]


def run_demo_child(tmp: Path, name: str, env: dict[str, str], *args: str) -> tuple[dict, str]:
    out = tmp / f"{name}.json"
    r = subprocess.run(demo_cmd(out, *args), env=env, cwd=tmp, capture_output=True, text=True, timeout=400)
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


def assert_exactly_once_in_jaeger(stack: Stack, spool: dict[str, str]) -> Counter[str]:
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
    assert not dupes, f"{len(dupes)} spans stored more than once in Jaeger"
    assert copies["<not in spool>"] == 0
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


def test_collector_down_for_the_whole_run(stack: Stack, tmp_path: Path):
    stack.start_jaeger()  # the collector's port stays closed during the run
    untraced, _ = run_demo_child(tmp_path, "untraced", demo_env(OTEL_SDK_DISABLED="true"))
    spool_root = tmp_path / "spool"
    traced, log = run_demo_child(
        tmp_path,
        "traced",
        demo_env(OTEL_EXPORTER_OTLP_ENDPOINT=stack.otlp_grpc, OTEL_EXPORTER_OTLP_PROTOCOL="grpc"),
        "--spool",
        str(spool_root),
    )

    # training unaffected: the same trajectories, token for token, turn counts and rewards
    assert traced["outputs"] == untraced["outputs"]
    assert traced["turns"] == untraced["turns"] > 0
    # the exporter never held up the event loop: one blocked export costs >= 10 s (the OTLP timeout)
    assert sum(traced["step_seconds"]) < 2 * sum(untraced["step_seconds"]) + 8, (traced, untraced)

    # at most one exporter warning a minute per process, and the outage is reported
    warnings = exporter_warnings_per_process(log)
    assert warnings, f"no exporter warning logged:\n{log[-3000:]}"
    allowed = 1 + int(traced["seconds"] // 60)
    assert max(warnings.values()) <= allowed, warnings

    # the spool holds 100% of the spans created, and nothing was delivered live
    run_dir = Path(traced["spool_dir"])
    spool = spool_span_ids(run_dir)
    t = totals(run_dir)
    assert t["spans_ended"] == t["spans_spooled"] == spool_line_spans(run_dir) == len(spool) > 0, t
    assert t["spans_spool_failed"] == 0 and t["spans_delivered"] == 0, t
    assert read_delivered([run_dir])[0] == set()

    # collector up, replay: every span in Jaeger exactly once; replay again: nothing sent
    stack.start_collector()
    sent, total = sent_of(replay_cli(run_dir, stack.otlp_grpc))
    assert sent == total == len(spool)
    assert_exactly_once_in_jaeger(stack, spool)
    again = replay_cli(run_dir, stack.otlp_grpc)
    assert sent_of(again) == (0, len(spool)) and "nothing to send" in again
    assert_exactly_once_in_jaeger(stack, spool)
    print(
        f"\n[outage] created={t['spans_ended']} spooled={len(spool)} live=0 replayed={sent} "
        f"jaeger={len(spool)} (each once) second_replay=0 warnings/process={dict(warnings)} "
        f"demo seconds untraced/traced={untraced['seconds']:.0f}/{traced['seconds']:.0f}"
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
            demo_cmd(out, "--spool", str(spool_root), "--steps", "4"), env=env, cwd=tmp_path, stdout=log, stderr=log
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
        assert child.wait(timeout=400) == 0, log_path.read_text()[-5000:]
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
    assert_exactly_once_in_jaeger(stack, spool)
    assert sent_of(replay_cli(run_dir, stack.otlp_grpc)) == (0, len(spool))
    assert_exactly_once_in_jaeger(stack, spool)
    print(
        f"\n[collector killed] created={t['spans_ended']} spooled={len(spool)} live={len(delivered)} "
        f"replayed={sent} jaeger={len(spool)} (each once) second_replay=0"
    )
