"""One run at a time (issue 41): a spool folder holding two runs is never merged; ``--run`` picks one, the newest by
default with a line naming the others; ``analyze`` writes to ``./otel-verl-report/<run>`` without ``--out``; and
``--steps`` in every form on a spool with spans of no step (a weight sync, as verl's V1 trainer writes)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from builder import PLANTED, Plan, TraceBuilder, build_run
from typer.testing import CliRunner

from otel_verl.cli import app

runner = CliRunner()


@pytest.fixture(scope="module")
def two_runs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``spool/big`` (8 steps, 4 workers, the planted run) and ``spool/small`` (5 steps, 2 workers), ``small``
    written last."""
    root = tmp_path_factory.mktemp("spool")
    build_run(PLANTED).write(root, run="big")
    build_run(Plan(steps=5, workers=2, requests=8, seed=3)).write(root, run="small")
    for run, when in (("big", 1_800_000_000), ("small", 1_800_000_100)):
        for path in (root / run).rglob("*.jsonl"):
            os.utime(path, (when, when))
    return root


def _analyze(*args: str) -> tuple[object, dict]:
    res = runner.invoke(app, ["analyze", *args, "--no-html"])
    assert res.exit_code == 0, res.output
    out = Path(args[args.index("--out") + 1]) if "--out" in args else None
    return res, json.loads((out / "findings.json").read_text()) if out else {}


def test_each_run_is_analysed_on_its_own(two_runs: Path, tmp_path: Path) -> None:
    _, big = _analyze(str(two_runs), "--run", "big", "--out", str(tmp_path / "big"))
    _, small = _analyze(str(two_runs), "--run", "small", "--out", str(tmp_path / "small"))
    assert big["summary"]["steps"] == list(range(1, 9)) and len(big["summary"]["workers"]) == 4
    assert small["summary"]["steps"] == list(range(1, 6)) and len(small["summary"]["workers"]) == 2
    assert big["summary"]["requests"] == 8 * 4 * 24 and small["summary"]["requests"] == 5 * 2 * 8
    # the run's own folder reads the same as --run
    _, own = _analyze(str(two_runs / "big"), "--out", str(tmp_path / "own"))
    assert own["summary"]["requests"] == big["summary"]["requests"]


def test_the_newest_run_by_default_and_a_line_says_so(two_runs: Path, tmp_path: Path) -> None:
    res, doc = _analyze(str(two_runs), "--out", str(tmp_path / "o"))
    assert doc["summary"]["steps"] == list(range(1, 6))  # small: written last
    first = res.stdout.splitlines()[0]
    assert first.startswith("run small (the newest of 2 runs in") and "the others: big" in first
    assert "--run NAME" in first


def test_analyze_writes_to_the_runs_report_folder_by_default(two_runs: Path, tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    res = runner.invoke(app, ["analyze", str(two_runs), "--run", "big", "--no-html"])
    assert res.exit_code == 0, res.output
    assert (tmp_path / "otel-verl-report" / "big" / "findings.json").is_file()
    assert "otel-verl-report/big/findings.json" in res.stdout
    assert "others" not in res.stdout  # --run given: nothing to announce


@pytest.mark.parametrize(
    "source, run, needle",
    [
        ("spool", "nope", "no such run in {spool}; its runs: big, small"),
        ("spool/big", "small", "is the folder of run big"),
        ("file", "big", "is not a spool folder"),
    ],
)
def test_a_run_that_does_not_fit_is_one_line(two_runs: Path, tmp_path: Path, source: str, run: str, needle: str):
    path = {"spool": two_runs, "spool/big": two_runs / "big", "file": next((two_runs / "big").rglob("*.jsonl"))}
    for command in ("analyze", "export-perfetto", "export-legacy"):
        res = runner.invoke(app, [command, str(path[source]), "--run", run, "--out", str(tmp_path / "x.json")])
        assert res.exit_code == 2 and "Traceback" not in res.output, res.output
        assert res.stderr.strip().splitlines() == [f"error: --run {run}: " + res.stderr.split(": ", 2)[2].strip()]
        assert needle.format(spool=two_runs) in res.stderr


def test_replay_sends_one_run_when_asked(two_runs: Path) -> None:
    res = runner.invoke(app, ["replay", str(two_runs), "--run", "nope", "--endpoint", "http://127.0.0.1:9"])
    assert res.exit_code == 2 and "no such run" in res.stderr and "big, small" in res.stderr


@pytest.mark.parametrize("protocol", ["grpc", "http/protobuf"])
def test_replay_to_nothing_listening_is_one_line_that_says_what_to_start(
    two_runs: Path, protocol: str, unused_port: int
) -> None:
    """Issue 51: the demo's Jaeger lines run out of order (replay before ``scripts/jaeger.sh up``) printed grpc's
    four-line error dump; now one line, naming the endpoint, the refusal and what to start."""
    endpoint = f"http://127.0.0.1:{unused_port}"
    res = runner.invoke(app, ["replay", str(two_runs), "--endpoint", endpoint, "--protocol", protocol])
    assert res.exit_code == 2, res.output
    (line,) = res.stderr.strip().splitlines()
    assert line.startswith(f"error: {endpoint}") and "export failed" in line and "connection refused" in line, line
    assert "start a collector first (`bash scripts/jaeger.sh up` or `docker compose up -d`)" in line, line


@pytest.fixture
def unused_port() -> int:
    """A port nothing listens on (bound, then closed)."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# ------------------------------------------------------------------ --steps, with spans of no step
@pytest.fixture(scope="module")
def stepless_spool(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A run plus what verl's V1 trainer writes beside its steps: a weight sync with no step, a root span in step 3's
    trace (``no_step/``), and a trace of no step at all."""
    b: TraceBuilder = build_run(Plan(steps=4, workers=2, requests=6, seed=2))
    step3 = next(s for s in b.spans if s.name == "verl.step" and s.step == 3)
    b.span("verl.weight_sync", step3.end, step3.end + 0.5, trace_id=step3.trace_id)
    b.span("verl.weight_sync", 0.0, 0.1)
    root = tmp_path_factory.mktemp("stepless")
    b.write(root)
    return root / "run1"


@pytest.mark.parametrize("steps, expected", [("2", {2}), ("2:3", {2, 3}), ("3:", {3, 4}), (":2", {1, 2})])
def test_export_perfetto_takes_every_steps_form(stepless_spool: Path, tmp_path: Path, steps: str, expected: set):
    out = tmp_path / "t.json"
    res = runner.invoke(app, ["export-perfetto", str(stepless_spool), "--steps", steps, "--out", str(out)])
    assert res.exit_code == 0, res.output
    events = [e for e in json.loads(out.read_text())["traceEvents"] if e["ph"] == "X"]
    assert {e["args"]["verl.step"] for e in events if "verl.step" in e["args"]} == expected
    syncs = [e for e in events if e["args"]["span.name"] == "verl.weight_sync"]
    assert len(syncs) == (3 in expected)  # the sync goes with its trace's step; the one of no step with none


def test_steps_with_no_spans_say_so(stepless_spool: Path, tmp_path: Path) -> None:
    res = runner.invoke(app, ["export-perfetto", str(stepless_spool), "--steps", "9:", "--out", str(tmp_path / "t")])
    assert res.exit_code == 2 and res.stderr.strip() == f"error: {stepless_spool}: no spans found in steps from 9 on"


def test_an_empty_or_pretty_printed_file_is_named_for_what_it_is(tmp_path: Path) -> None:
    (tmp_path / "empty.jsonl").write_text("")
    res = runner.invoke(app, ["analyze", str(tmp_path / "empty.jsonl"), "--out", str(tmp_path / "o")])
    assert res.exit_code == 2 and "no spans found (it holds no trace spans)" in res.stderr
    assert "window" not in res.stderr  # no window was selected
    (tmp_path / "pretty.json").write_text(json.dumps({"resourceSpans": []}, indent=2))
    res = runner.invoke(app, ["analyze", str(tmp_path / "pretty.json"), "--out", str(tmp_path / "o")])
    assert res.exit_code == 2 and "pretty.json:1: a JSON document written over several lines" in res.stderr
    assert "not JSON" not in res.stderr
