"""Bad input: ``analyze``, ``replay`` and ``import-legacy`` on mutated real files (hypothesis).

The inputs are real: a spool written by otel_verl's own exporter while verl's AgentLoopWorker ran
(once per session), and logs written in the seed's SGLangLogManager format. Lines are truncated,
corrupted, given wrong-typed values, reordered, duplicated and dropped. Every run must end with
exit 0, or exit 2 and exactly one ``error: ...`` line naming file:line for a bad line — never a
traceback. With ``--skip-bad-lines`` bad lines are counted and the rest is used.
"""

from __future__ import annotations

import json
import os
import re
import tempfile
import traceback
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from otel_verl.cli import app
from otel_verl.config import OtelVerlConfig
from otel_verl.demo import runner
from otel_verl.export import setup
from tests.otlp_receiver import Receiver, start_grpc
from tests.reliability.traced_run import run, traced

cli = CliRunner()
FUZZ = settings(
    max_examples=int(os.environ.get("OTEL_VERL_FUZZ_EXAMPLES", "25")),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
LINE_ERROR = re.compile(r"^error: .+\.jsonl:(\d+): ")

# ------------------------------------------------------------------ real inputs, made once


@pytest.fixture(scope="module")
def real_spool(tmp_path_factory) -> dict[str, list[bytes]]:
    """A spool written by otel_verl while verl's real AgentLoopWorker ran (small batches: many lines)."""
    pytest.importorskip("verl", reason="needs the verl extra")
    root = tmp_path_factory.mktemp("real-spool")
    old = os.environ.get("OTEL_BSP_MAX_EXPORT_BATCH_SIZE")
    os.environ["OTEL_BSP_MAX_EXPORT_BATCH_SIZE"] = "16"
    try:
        with traced(config=OtelVerlConfig(spool=True, spool_dir=str(root), run_id="real")):
            run(runner.DemoOptions(prompts=4, n=2, seed=7))
            setup.flush()
    finally:
        if old is None:
            os.environ.pop("OTEL_BSP_MAX_EXPORT_BATCH_SIZE")
        else:
            os.environ["OTEL_BSP_MAX_EXPORT_BATCH_SIZE"] = old
    files = {
        str(p.relative_to(root)): p.read_bytes().splitlines(keepends=True)
        for p in sorted((root / "real").rglob("*.jsonl"))
        if not any(part.startswith(".") for part in p.relative_to(root).parts)
    }
    assert sum(len(lines) for lines in files.values()) >= 6
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
    return {str(p.relative_to(root)): p.read_bytes().splitlines(keepends=True) for p in sorted(root.rglob("*.jsonl"))}


# ------------------------------------------------------------------ mutations
JUNK = st.sampled_from([None, -1, 0, 2**70, 1e308, "", "x", "zz", "2025-13-45T99:00:00", [], {}, [1, "a"], True])


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


OPS = st.lists(
    st.one_of(
        st.tuples(st.just("truncate"), st.integers(0, 10**6), st.floats(0.0, 1.0)),
        st.tuples(st.just("corrupt"), st.integers(0, 10**6), st.floats(0.0, 1.0), st.binary(min_size=1, max_size=3)),
        st.tuples(st.just("retype"), st.integers(0, 10**6), st.integers(0, 10**6), JUNK),
        st.tuples(st.just("swap"), st.integers(0, 10**6), st.integers(0, 10**6)),
        st.tuples(st.just("duplicate"), st.integers(0, 10**6)),
        st.tuples(st.just("drop"), st.integers(0, 10**6)),
        st.tuples(st.just("kill"), st.floats(0.0, 1.0)),
    ),
    min_size=1,
    max_size=4,
)


def mutate(lines: list[bytes], ops: list[tuple]) -> list[bytes]:
    lines = list(lines)
    for op in ops:
        if not lines:
            break
        kind, i = op[0], (op[1] % len(lines) if isinstance(op[1], int) else len(lines) - 1)
        line = lines[i]
        if kind == "truncate":  # cut inside the line, the newline kept (a torn write mid-file)
            lines[i] = line[: int(op[2] * (len(line) - 1))] + b"\n"
        elif kind == "corrupt":
            at = int(op[2] * (len(line) - 1))
            lines[i] = line[:at] + op[3] + line[at + 1 :]
        elif kind == "retype":  # valid JSON, a value of the wrong type or range somewhere inside
            try:
                doc = json.loads(line)
            except ValueError:
                continue
            paths = _paths(doc)
            lines[i] = (json.dumps(_set(doc, paths[op[2] % len(paths)], op[3])) + "\n").encode()
        elif kind == "swap":
            j = op[2] % len(lines)
            lines[i], lines[j] = lines[j], lines[i]
        elif kind == "duplicate":
            lines.insert(i, line)
        elif kind == "drop":
            del lines[i]
        elif kind == "kill":  # the writer killed mid-line: the last line has no newline
            last = lines[-1]
            lines[-1] = last[: int(op[1] * (len(last) - 1))]
    return lines


def write_tree(root: Path, files: dict[str, list[bytes]], target: str, ops: list[tuple]) -> list[bytes]:
    mutated = []
    for rel, lines in files.items():
        if rel == target:
            lines = mutated = mutate(lines, ops)
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b"".join(lines))
    return mutated


def first_non_json(lines: list[bytes]) -> int | None:
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            json.loads(line)
        except ValueError:
            return number
    return None


def check_outcome(result: Any, mutated: list[bytes], target: str, skip: bool) -> None:
    """The contract: exit 0, or exit 2 with one ``error:`` line (file:line for a bad line); no traceback."""
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        tb = "".join(traceback.format_exception(result.exception))
        pytest.fail(f"traceback escaped the CLI:\n{tb}")
    assert result.exit_code in (0, 2), result.output
    bad_json = first_non_json(mutated)
    if result.exit_code == 2:
        lines = result.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
        match = LINE_ERROR.match(lines[0])
        if bad_json is not None and not skip:
            assert match and target in lines[0] and int(match.group(1)) <= bad_json, lines[0]
        if skip:  # with --skip-bad-lines, only "nothing usable left" may stop it
            assert not match, lines[0]
    elif bad_json is not None:
        assert skip, "a line that is not JSON was accepted without --skip-bad-lines"
        assert re.search(r"\d+\s+bad\s+lines\s+skipped", result.output), result.output  # rich may wrap


def target_file(files: dict[str, list[bytes]]) -> str:
    return max(files, key=lambda rel: len(files[rel]))


# ------------------------------------------------------------------ the commands
@FUZZ
@given(ops=OPS, skip=st.booleans())
def test_analyze_never_tracebacks(real_spool, ops, skip):
    target = target_file(real_spool)
    with tempfile.TemporaryDirectory() as tmp:
        mutated = write_tree(Path(tmp) / "spool", real_spool, target, ops)
        args = ["analyze", str(Path(tmp) / "spool"), "--out", str(Path(tmp) / "out"), "--no-html"]
        result = cli.invoke(app, [*args, "--skip-bad-lines"] if skip else args)
    check_outcome(result, mutated, target, skip)


@pytest.fixture(scope="module")
def receiver():
    rec = Receiver()
    server, endpoint = start_grpc(rec)
    yield rec, endpoint
    server.stop(0)


@FUZZ
@given(ops=OPS, skip=st.booleans())
def test_replay_never_tracebacks(real_spool, receiver, ops, skip):
    rec, endpoint = receiver
    target = target_file(real_spool)
    before = len(rec.spans())
    with tempfile.TemporaryDirectory() as tmp:
        mutated = write_tree(Path(tmp) / "spool", real_spool, target, ops)
        args = ["replay", str(Path(tmp) / "spool"), "--endpoint", endpoint, "--protocol", "grpc"]
        result = cli.invoke(app, [*args, "--skip-bad-lines"] if skip else args)
    check_outcome(result, mutated, target, skip)
    sent = len(rec.spans()) - before
    if result.exit_code == 0:
        match = re.search(r"sent (\d+) (?:of \d+ )?spans", result.output)
        assert match and int(match.group(1)) == sent, result.output
    else:  # a bad line stops replay before anything is sent
        assert sent == 0


@FUZZ
@given(ops=OPS, skip=st.booleans())
def test_import_legacy_never_tracebacks(seed_logs, ops, skip):
    target = target_file(seed_logs)
    with tempfile.TemporaryDirectory() as tmp:
        mutated = write_tree(Path(tmp) / "logs", seed_logs, target, ops)
        args = ["import-legacy", str(Path(tmp) / "logs"), "--spool", str(Path(tmp) / "spool")]
        result = cli.invoke(app, [*args, "--skip-bad-lines"] if skip else args)
    check_outcome(result, mutated, target, skip)
    if result.exit_code == 0:
        assert re.search(r"wrote \d+ spans", result.stdout), result.output


def test_unmutated_inputs_are_accepted(real_spool, seed_logs, tmp_path):
    """The baseline the fuzzing departs from: the real files pass all three commands."""
    write_tree(tmp_path / "spool", real_spool, "", [])
    write_tree(tmp_path / "logs", seed_logs, "", [])
    assert (
        cli.invoke(app, ["analyze", str(tmp_path / "spool"), "--out", str(tmp_path / "o"), "--no-html"]).exit_code == 0
    )
    result = cli.invoke(app, ["import-legacy", str(tmp_path / "logs"), "--spool", str(tmp_path / "imp")])
    assert result.exit_code == 0, result.output
