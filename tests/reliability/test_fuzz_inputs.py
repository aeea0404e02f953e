"""Bad input: ``analyze``, ``replay`` and ``import-legacy`` on mutated real files (hypothesis).

The inputs are real: a spool written by otel_verl's own exporter while verl's AgentLoopWorker ran
two steps (once per session), and logs written in the seed's SGLangLogManager format. In one to
three files at once, lines are truncated, corrupted (a NUL or an invalid UTF-8 byte: never valid
again), given wrong-typed values, reordered, duplicated, dropped, or cut off by a kill. Each line
keeps a flag saying whether it was made bad, so every run is checked exactly:

* never a traceback (no exception escapes, "Traceback" nowhere in stdout/stderr);
* without ``--skip-bad-lines``: exit 2 with one ``error: <file>:<line>: ...`` line naming a line
  that was made bad, when any was; exit 0 when none was;
* with it: exit 0 and the skip count equals the number of bad lines (lines with only a wrong-typed
  value may or may not be bad for a tool: the count is then bounded by them);
* reordered/duplicated lines only: the same findings.json (analyze) and the same set of spans,
  each sent once (replay), as the unmutated input.

Plus minimal valid spools (request spans without their worker, worker spans only, step spans only).
"""

from __future__ import annotations

import json
import os
import re
import tempfile
import traceback
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from otel_verl import semconv
from otel_verl.cli import app
from otel_verl.config import OtelVerlConfig
from otel_verl.demo import runner
from otel_verl.export import flush
from otel_verl.export.spool import SpoolSpanExporter
from tests.otlp_receiver import Receiver, start_grpc
from tests.reliability.traced_run import traced

cli = CliRunner()
FUZZ = settings(
    max_examples=int(os.environ.get("OTEL_VERL_FUZZ_EXAMPLES", "25")),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
LINE_ERROR = re.compile(r"^error: (?P<path>.+?\.jsonl):(?P<line>\d+): ")
SKIPPED = re.compile(r"(\d+)\s+bad\s+lines?\s+(?:was\s+|were\s+)?skipped")  # "1 bad line was skipped"; rich may wrap


# ------------------------------------------------------------------ real inputs, made once
class Files(dict):
    """relative path → lines. Its repr is one line: hypothesis prints a failing example's arguments, and
    the files' whole text (~200 kB) pushed the failure message itself out of the CI log."""

    def __repr__(self) -> str:
        return f"<{len(self)} files: {', '.join(f'{rel} ({len(lines)} lines)' for rel, lines in self.items())}>"


@pytest.fixture(scope="module")
def real_spool(tmp_path_factory) -> dict[str, list[bytes]]:
    """A spool written by otel_verl while verl's real AgentLoopWorker ran steps 1 and 2 (small batches)."""
    pytest.importorskip("verl", reason="needs the verl extra")
    from tests.instrumentation.harness import build_worker, run_chunk

    root = tmp_path_factory.mktemp("real-spool")
    old = os.environ.get("OTEL_BSP_MAX_EXPORT_BATCH_SIZE")
    os.environ["OTEL_BSP_MAX_EXPORT_BATCH_SIZE"] = "16"
    try:
        with traced(config=OtelVerlConfig(spool=True, spool_dir=str(root), run_id="real")):
            for step in (1, 2):
                worker, _, opts = build_worker(runner.DemoOptions(prompts=4, n=2, seed=7), remote_reward=True)
                run_chunk(worker, opts, step=step)
            flush.flush()
    finally:
        if old is None:
            os.environ.pop("OTEL_BSP_MAX_EXPORT_BATCH_SIZE")
        else:
            os.environ["OTEL_BSP_MAX_EXPORT_BATCH_SIZE"] = old
    files = Files(
        (str(p.relative_to(root)), p.read_bytes().splitlines(keepends=True))
        for p in sorted((root / "real").rglob("*.jsonl"))
        if not any(part.startswith(".") for part in p.relative_to(root).parts)
    )
    assert len(files) >= 2 and all(len(lines) >= 3 for lines in files.values()), {k: len(v) for k, v in files.items()}
    return files


class SeedLogManager:
    """The seed's SGLangLogManager.log (seed 000), verbatim in what it writes."""

    def __init__(self) -> None:
        self.handles: dict[str, Any] = {}
        self.now = datetime(2025, 8, 11, 23, 18, 21)

    def log(self, log_path, event, duration=None, extra=None, workid=None, step=None, **extra_keys):
        if log_path not in self.handles:
            os.makedirs(os.path.dirname(log_path), exist_ok=True)
            self.handles[log_path] = open(log_path, "a", buffering=1)  # noqa: SIM115 - as the seed does
        self.now += timedelta(seconds=duration or 0.01)
        log_entry = {"timestamp": self.now.isoformat(), "event": event}
        if duration is not None:
            log_entry["duration_sec"] = duration
        if extra is not None:
            log_entry["extra"] = extra
        if workid is not None:
            log_entry["workid"] = workid
        if step is not None:
            log_entry["step"] = step
        for key in extra_keys:
            log_entry[key] = extra_keys[key]
        ordered_keys = ["timestamp", "event", "duration_sec"] + [
            k for k in log_entry if k not in ("timestamp", "event", "duration_sec")
        ]
        self.handles[log_path].write(json.dumps({k: log_entry[k] for k in ordered_keys if k in log_entry}) + "\n")

    def close(self) -> None:
        for handle in self.handles.values():
            handle.close()


@pytest.fixture(scope="module")
def seed_logs(tmp_path_factory) -> dict[str, list[bytes]]:
    """Two steps × two workers of a multi-turn rollout, in the seed's event names and layout."""
    root = tmp_path_factory.mktemp("seed-logs")
    logger = SeedLogManager()
    for step in (1, 2):
        for worker in (0, 1):
            path = str(root / f"step_{step}" / f"worker_{worker}.jsonl")
            for r in range(3):
                rid = f"{step}{worker}{r}-req"
                logger.log(path, "preprocessing_duration", 0.01, workid=worker, step=step, extra={"request_id": rid})
                for turn in range(2):
                    logger.log(
                        path,
                        "engine_async_generate",
                        0.5 + r,
                        workid=worker,
                        step=step,
                        extra={"request_id": rid, "turn": turn},
                    )
                logger.log(
                    path, "reward_calculation_duration", 0.05, workid=worker, step=step, extra={"request_id": rid}
                )
                logger.log(
                    path,
                    "async_rollout_request_complete",
                    2.0 + r,
                    workid=worker,
                    step=step,
                    extra={"request_id": rid, "turns": 2, "turn_timings": [1.0, 1.0 + r]},
                )
            logger.log(
                path,
                "aborted_request_with_cancelled_error",
                3.5,
                workid=worker,
                step=step,
                extra={"request_id": f"{step}{worker}-aborted"},
            )
            logger.log(
                path,
                "async_rollout_with_monitoring_duration",
                6.0,
                workid=worker,
                step=step,
                extra={"total_requests": 4, "target_completion": 3, "completed_count": 3},
            )
            logger.log(path, "barrier_wait_duration", 0.4 * worker, workid=worker, step=step)
    logger.close()
    return Files(
        (str(p.relative_to(root)), p.read_bytes().splitlines(keepends=True)) for p in sorted(root.rglob("*.jsonl"))
    )


# ------------------------------------------------------------------ mutations that know which lines they broke
@dataclass(frozen=True)
class Line:
    data: bytes
    bad: bool = False
    """Made unparsable (not JSON, or not UTF-8): every tool must reject or skip it."""
    retyped: bool = False
    """Valid JSON with a wrong-typed or out-of-range value: a tool may accept or reject it."""


JUNK_VALUES = [None, -1, 0, 2**70, 1e308, "", "x", "zz", "2025-13-45T99:00:00", [], {}, [1, "a"], True]
JUNK = st.sampled_from(JUNK_VALUES)
POSITION = st.integers(0, 10**6)
FRACTION = st.floats(0.0, 1.0)
DAMAGE = st.one_of(
    st.tuples(st.just("truncate"), POSITION, FRACTION),
    st.tuples(st.just("corrupt"), POSITION, FRACTION, st.sampled_from([b"\x00", b"\xff", b"\x01"])),
    st.tuples(st.just("retype"), POSITION, POSITION, JUNK),
    st.tuples(st.just("drop"), POSITION),
    st.tuples(st.just("kill"), FRACTION),
)
SHUFFLE = st.one_of(st.tuples(st.just("swap"), POSITION, POSITION), st.tuples(st.just("duplicate"), POSITION))
OPS = st.lists(st.one_of(DAMAGE, SHUFFLE), min_size=1, max_size=4)
SHUFFLE_OPS = st.lists(SHUFFLE, min_size=1, max_size=4)


def _paths(doc: Any, prefix: tuple = ()) -> list[tuple]:
    out = [prefix]
    if isinstance(doc, dict):
        for key, value in doc.items():
            out += _paths(value, (*prefix, key))
    elif isinstance(doc, list):
        for i, value in enumerate(doc):
            out += _paths(value, (*prefix, i))
    return out


def _set(doc: Any, path: tuple, value: Any) -> Any:
    if not path:
        return value
    node = doc
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    return doc


def _cut(content: bytes, fraction: float) -> bytes:
    """A proper, non-empty prefix of a JSON object line (without newline): never valid JSON. A line an
    earlier op already cut to its first byte stays that byte (cut to nothing it would be a blank line,
    which the loader rightly skips as no line at all)."""
    return content[: max(1, 1 + int(fraction * (len(content) - 2)))]


def mutate(raw: list[bytes], ops: list[tuple]) -> list[Line]:
    lines = [Line(line) for line in raw]
    for op in ops:
        if not lines:
            break
        kind = op[0]
        i = op[1] % len(lines) if isinstance(op[1], int) else len(lines) - 1
        line = lines[i]
        content = line.data.rstrip(b"\n")
        if kind == "truncate":  # cut inside the line, the newline kept (a torn write mid-file)
            lines[i] = Line(_cut(content, op[2]) + b"\n", bad=True)
        elif kind == "corrupt":  # a NUL/control byte or invalid UTF-8 is never valid JSON
            at = int(op[2] * (len(content) - 1))
            lines[i] = Line(content[:at] + op[3] + content[at + 1 :] + b"\n", bad=True)
        elif kind == "retype":  # valid JSON, a value of the wrong type or range somewhere inside
            if line.bad:
                continue
            doc = json.loads(line.data)
            paths = _paths(doc)
            lines[i] = Line((json.dumps(_set(doc, paths[op[2] % len(paths)], op[3])) + "\n").encode(), retyped=True)
        elif kind == "swap":
            j = op[2] % len(lines)
            lines[i], lines[j] = lines[j], lines[i]
        elif kind == "duplicate":
            lines.insert(i, line)
        elif kind == "drop":
            del lines[i]
        elif kind == "kill":  # the writer killed mid-line: the last line has no newline
            last = lines[-1].data.rstrip(b"\n")
            lines[-1] = Line(_cut(last, op[1]), bad=True)
    # A killed tail moved off the end (swap, duplicate) stays its own line: the spool truncates a torn
    # write before appending again, so a file never holds a torn line joined to the next one.
    return [
        line if n == len(lines) - 1 or line.data.endswith(b"\n") else Line(line.data + b"\n", line.bad, line.retyped)
        for n, line in enumerate(lines)
    ]


def write_tree(root: Path, files: dict[str, list[bytes]], plan: dict[str, list[tuple]]) -> dict[str, list[Line]]:
    """Write every file, the ones in ``plan`` mutated; returns the mutated files' lines."""
    mutated = {}
    for rel, raw in files.items():
        lines = mutate(raw, plan[rel]) if rel in plan else [Line(line) for line in raw]
        if rel in plan:
            mutated[rel] = lines
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b"".join(line.data for line in lines))
    return mutated


def draw_plan(data: st.DataObject, files: dict[str, list[bytes]], ops: st.SearchStrategy) -> dict[str, list[tuple]]:
    targets = data.draw(st.lists(st.sampled_from(sorted(files)), min_size=1, max_size=3, unique=True), "files")
    return {rel: data.draw(ops, f"ops {rel}") for rel in targets}


def check_outcome(result: Any, root: Path, mutated: dict[str, list[Line]], skip: bool) -> int | None:
    """The contract (see the module docstring); returns the skip count printed, if any."""
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        tb = "".join(traceback.format_exception(result.exception))
        pytest.fail(f"traceback escaped the CLI:\n{tb}")
    assert "Traceback" not in result.stdout and "Traceback" not in result.stderr, result.output
    bad = {(rel, n) for rel, lines in mutated.items() for n, line in enumerate(lines, start=1) if line.bad}
    retyped = {(rel, n) for rel, lines in mutated.items() for n, line in enumerate(lines, start=1) if line.retyped}
    if skip:
        assert result.exit_code == 0, result.output
        match = SKIPPED.search(" ".join(result.output.split()))
        skipped = int(match.group(1)) if match else 0
        assert len(bad) <= skipped <= len(bad) + len(retyped), (skipped, sorted(bad), sorted(retyped), result.output)
        return skipped
    if not bad and not retyped:
        assert result.exit_code == 0, result.output
        return None
    assert result.exit_code in (0, 2), result.output
    if result.exit_code == 0:
        assert not bad, f"bad lines {sorted(bad)} accepted without --skip-bad-lines:\n{result.output}"
        return None
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    match = LINE_ERROR.match(lines[0])
    assert match, f"no file:line in {lines[0]!r}"
    named = (str(Path(match.group("path")).relative_to(root)), int(match.group("line")))
    assert named in bad | retyped, f"{lines[0]!r} names a line that was not made bad: {sorted(bad | retyped)}"
    return None


def analyze(root: Path, out: Path, skip: bool = False) -> Any:
    args = ["analyze", str(root), "--out", str(out), "--no-html"]
    return cli.invoke(app, [*args, "--skip-bad-lines"] if skip else args)


def findings_of(out: Path) -> dict[str, Any]:
    """findings.json less the load statistics (line and duplicate counts differ by construction)."""
    doc = json.loads((out / "findings.json").read_text())
    doc["summary"].pop("load", None)
    return doc


def load_stats(out: Path) -> dict[str, Any]:
    return json.loads((out / "findings.json").read_text())["summary"]["load"]


def span_ids(lines: list[bytes]) -> set[str]:
    out = set()
    for line in lines:
        doc = json.loads(line)
        out |= {s["spanId"] for rs in doc["resourceSpans"] for ss in rs["scopeSpans"] for s in ss["spans"]}
    return out


# ------------------------------------------------------------------ the commands
@pytest.fixture(scope="module")
def baseline(real_spool, tmp_path_factory) -> dict[str, Any]:
    """findings.json of the unmutated spool."""
    tmp = tmp_path_factory.mktemp("baseline")
    write_tree(tmp / "spool", real_spool, {})
    result = analyze(tmp / "spool", tmp / "out")
    assert result.exit_code == 0, result.output
    return findings_of(tmp / "out")


@FUZZ
@given(data=st.data(), skip=st.booleans())
def test_analyze_never_tracebacks(real_spool, data, skip):
    plan = draw_plan(data, real_spool, OPS)
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "spool"
        mutated = write_tree(root, real_spool, plan)
        result = analyze(root, Path(tmp) / "out", skip)
        skipped = check_outcome(result, root, mutated, skip)
        if skipped is not None:  # the report's own count agrees
            assert load_stats(Path(tmp) / "out")["bad_lines_skipped"] == skipped


@settings(FUZZ, max_examples=min(FUZZ.max_examples, 8))  # each example is a whole analyze (~5 s on CI)
@given(data=st.data())
def test_analyze_reordered_or_duplicated_lines_same_findings(real_spool, baseline, data):
    plan = draw_plan(data, real_spool, SHUFFLE_OPS)
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "spool"
        write_tree(root, real_spool, plan)
        result = analyze(root, Path(tmp) / "out")
        assert result.exit_code == 0, result.output
        assert findings_of(Path(tmp) / "out") == baseline


@pytest.fixture(scope="module")
def receiver():
    rec = Receiver()
    server, endpoint = start_grpc(rec)
    yield rec, endpoint
    server.stop(0)


def replay(root: Path, endpoint: str, skip: bool = False) -> Any:
    args = ["replay", str(root), "--endpoint", endpoint, "--protocol", "grpc"]
    return cli.invoke(app, [*args, "--skip-bad-lines"] if skip else args)


@FUZZ
@given(data=st.data(), skip=st.booleans())
def test_replay_never_tracebacks(real_spool, receiver, data, skip):
    rec, endpoint = receiver
    plan = draw_plan(data, real_spool, OPS)
    before = len(rec.spans())
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "spool"
        mutated = write_tree(root, real_spool, plan)
        result = replay(root, endpoint, skip)
        check_outcome(result, root, mutated, skip)
    got = [bytes(s.span_id).hex() for s in rec.spans()[before:]]
    if result.exit_code != 0:  # a bad line stops replay before anything is sent
        assert got == []
        return
    match = re.search(r"sent (\d+) (?:of \d+ )?spans", result.output)
    assert match and int(match.group(1)) == len(got), result.output
    if not any(line.retyped for lines in mutated.values() for line in lines):
        # exactly the spans of the lines left intact, each once
        intact = [line.data for lines in mutated.values() for line in lines if not line.bad]
        intact += [line for rel, raw in real_spool.items() if rel not in mutated for line in raw]
        assert sorted(got) == sorted(span_ids(intact))


@FUZZ
@given(data=st.data())
def test_replay_reordered_or_duplicated_lines_same_spans(real_spool, receiver, data):
    rec, endpoint = receiver
    plan = draw_plan(data, real_spool, SHUFFLE_OPS)
    before = len(rec.spans())
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "spool"
        write_tree(root, real_spool, plan)
        result = replay(root, endpoint)
    assert result.exit_code == 0, result.output
    got = [bytes(s.span_id).hex() for s in rec.spans()[before:]]
    everything = span_ids([line for raw in real_spool.values() for line in raw])
    assert sorted(got) == sorted(everything)  # each span once, whatever the order and duplicates


@FUZZ
@given(data=st.data(), skip=st.booleans())
def test_import_legacy_never_tracebacks(seed_logs, data, skip):
    plan = draw_plan(data, seed_logs, OPS)
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "logs"
        mutated = write_tree(root, seed_logs, plan)
        args = ["import-legacy", str(root), "--spool", str(Path(tmp) / "spool")]
        result = cli.invoke(app, [*args, "--skip-bad-lines"] if skip else args)
        check_outcome(result, root, mutated, skip)
    if result.exit_code == 0:
        assert re.search(r"wrote \d+ spans", result.stdout), result.output


def test_mutated_bad_lines_are_never_blank():
    """The model's own invariant: a line it marks bad holds bytes the loader must reject. A killed last
    line cut again once produced a blank line, which the loader rightly skips (hypothesis, CI)."""
    raw = [b'{"name": "a"}\n', b'{"name": "b"}\n']
    for ops in ([("kill", 0.0), ("truncate", 1, 1.0)], [("truncate", 0, 0.0), ("truncate", 0, 1.0)]):
        bad = [line for line in mutate(raw, ops) if line.bad]
        assert bad and all(line.data.strip() for line in bad), ops


def test_unmutated_inputs_are_accepted(real_spool, seed_logs, tmp_path):
    """The baseline the fuzzing departs from: the real files pass all three commands."""
    write_tree(tmp_path / "spool", real_spool, {})
    write_tree(tmp_path / "logs", seed_logs, {})
    assert analyze(tmp_path / "spool", tmp_path / "o").exit_code == 0
    result = cli.invoke(app, ["import-legacy", str(tmp_path / "logs"), "--spool", str(tmp_path / "imp")])
    assert result.exit_code == 0, result.output


# ------------------------------------------------------------------ minimal valid spools
def only(files: dict[str, list[bytes]], names: set[str]) -> list[bytes]:
    """The real spool's lines with only the spans named ``names`` (resources and scopes kept)."""
    out = []
    for raw in files.values():
        for line in raw:
            doc = json.loads(line)
            for rs in doc["resourceSpans"]:
                for ss in rs["scopeSpans"]:
                    ss["spans"] = [s for s in ss["spans"] if s["name"] in names]
            if any(ss["spans"] for rs in doc["resourceSpans"] for ss in rs["scopeSpans"]):
                out.append((json.dumps(doc) + "\n").encode())
    return out


def step_spans(root: Path) -> None:
    """Three ``verl.step`` spans (and nothing else), written by otel_verl's own spool exporter."""
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor

    provider = TracerProvider()
    spool = SpoolSpanExporter(root, "steps", "trainer")
    provider.add_span_processor(SimpleSpanProcessor(spool))
    tracer = provider.get_tracer("otel_verl")
    for step in (1, 2, 3):
        tracer.start_span(semconv.SPAN_STEP, attributes={semconv.VERL_STEP: step}).end()
    provider.shutdown()


@pytest.mark.parametrize("kind", ["request-only", "worker-only", "step-only"])
def test_minimal_valid_spools(real_spool, receiver, tmp_path, kind):
    """Valid spools with parts of the tree missing: analyze reports on them (exit 0), replay sends every span."""
    root = tmp_path / "spool"
    if kind == "step-only":
        step_spans(root)
    else:
        name = semconv.SPAN_REQUEST if kind == "request-only" else semconv.SPAN_WORKER
        lines = only(real_spool, {name})
        assert lines
        path = root / "run" / "step_1" / "worker_0.jsonl"
        path.parent.mkdir(parents=True)
        path.write_bytes(b"".join(lines))
    files = sorted(root.rglob("*.jsonl"))
    expected = span_ids([line for f in files for line in f.read_bytes().splitlines()])
    assert expected

    result = analyze(root, tmp_path / "out")
    assert result.exception is None or isinstance(result.exception, SystemExit), "".join(
        traceback.format_exception(result.exception)
    )
    assert "Traceback" not in result.output
    assert result.exit_code == 0, result.output
    assert load_stats(tmp_path / "out")["bad_lines_skipped"] == 0

    rec, endpoint = receiver
    before = len(rec.spans())
    result = replay(root, endpoint)
    assert result.exit_code == 0, result.output
    assert sorted(bytes(s.span_id).hex() for s in rec.spans()[before:]) == sorted(expected)


# ------------------------------------------------------------------ every field, every junk value
def _field_shapes(files: dict[str, list[bytes]], label: Any) -> list[tuple[str, int, tuple]]:
    """(file, line index, path) once per kind of field: a path's keys with list positions replaced by
    what they hold (an attribute's key, a span's name, ``label(doc)`` for the line itself)."""

    def shape(doc: Any, path: tuple) -> tuple:
        out, node = [label(doc)], doc
        for key in path:
            node = node[key]
            if isinstance(key, int):
                key = node.get("key", node.get("name", "#")) if isinstance(node, dict) else "#"
            out.append(key if isinstance(key, str) else "#")
        return tuple(out)

    seen, picked = set(), []
    for rel, lines in files.items():
        for i, raw in enumerate(lines):
            doc = json.loads(raw)
            for path in _paths(doc)[1:]:
                key = shape(doc, path)
                if key not in seen:
                    seen.add(key)
                    picked.append((rel, i, path))
    return picked


def _retyped(lines: list[bytes], i: int, path: tuple, value: Any) -> list[bytes]:
    return [*lines[:i], (json.dumps(_set(json.loads(lines[i]), path, value)) + "\n").encode(), *lines[i + 1 :]]


def test_every_span_field_retyped_loads_or_names_its_line(real_spool, tmp_path):
    """Hypothesis draws 25 cases per run, so a crash it has not met yet fails CI at random (a list as a
    span's name, a time beyond int64 did). Here each kind of field of the real spool gets each junk
    value, through the loader the analyzer runs (the part that reads values): it loads, or it raises
    the one-line error naming that line, never anything else."""
    from otel_verl.analysis.errors import AnalysisInputError
    from otel_verl.analysis.read import load_spans

    shapes = _field_shapes(real_spool, lambda doc: "line")
    assert len(shapes) > 100, len(shapes)  # spans, attributes, resource, scope: the sweep covers them
    for n, (rel, i, path) in enumerate(shapes):
        for value in JUNK_VALUES:
            root = tmp_path / f"{n}-{JUNK_VALUES.index(value)}"
            # the retyped file alone: the loader reads each file on its own, and the whole spool each time was
            # ~2 min of CI for 1,300+ cases
            write_tree(root, {rel: _retyped(real_spool[rel], i, path, value)}, {})
            try:
                load_spans(root)
            except AnalysisInputError as exc:
                assert f"{rel}:{i + 1}: " in str(exc), (path, value, str(exc))


def test_every_seed_log_field_retyped_imports_or_names_its_line(seed_logs, tmp_path):
    """The same sweep for ``import-legacy`` on the seed's logs, the whole command (it is fast)."""
    shapes = _field_shapes(seed_logs, lambda doc: doc.get("event"))
    assert len(shapes) > 30, len(shapes)
    for n, (rel, i, path) in enumerate(shapes):
        for value in JUNK_VALUES:
            root = tmp_path / f"{n}-{JUNK_VALUES.index(value)}"
            write_tree(root / "logs", {**seed_logs, rel: _retyped(seed_logs[rel], i, path, value)}, {})
            result = cli.invoke(app, ["import-legacy", str(root / "logs"), "--spool", str(root / "spool")])
            assert result.exception is None or isinstance(result.exception, SystemExit), (path, value, result.output)
            if result.exit_code != 0:
                assert result.exit_code == 2 and f"{rel}:{i + 1}: " in result.stderr, (path, value, result.output)


@pytest.mark.parametrize("value", [{"doubleValue": 1.5}, {"doubleValue": 1e300}, {"stringValue": "inf"}])
def test_non_integral_step_and_rank_are_no_value(real_spool, tmp_path, value):
    """Hypothesis found it: a ``verl.step`` (and rank) retyped to 1.5 in one line failed the int64 cast
    of the step table. A value that is not a whole number is no value; the analysis runs on."""
    step_int = b'"key":"verl.step","value":{"intValue":"1"}'
    rank_int = b'"key":"verl.worker.rank","value":{"intValue":"0"}'
    junk = json.dumps(value, separators=(",", ":")).encode()
    files = dict(real_spool)
    rel = next(rel for rel, lines in real_spool.items() if any(step_int in line for line in lines))
    lines = list(files[rel])
    i = next(i for i, line in enumerate(lines) if step_int in line)
    lines[i] = (
        lines[i]
        .replace(step_int, b'"key":"verl.step","value":' + junk)
        .replace(rank_int, b'"key":"verl.worker.rank","value":' + junk)
    )
    files[rel] = lines
    root = tmp_path / "spool"
    write_tree(root, files, {})
    result = analyze(root, tmp_path / "out", False)
    tb = "".join(traceback.format_exception(result.exception)) if result.exception else ""
    assert result.exception is None or isinstance(result.exception, SystemExit), tb
    assert result.exit_code == 0, result.output
