"""The Arrow seed reader (read/seed/arrow*) makes exactly the spans the line-by-line reader makes.

Every comparison converts the same files both ways (``_convert(..., arrow=False)`` is the line-by-line reader
alone) and compares the span table column for column, the steps' time bounds, the counts and the errors, with
and without ``--skip-bad-lines``. The inputs: the benchmark's generated logs, the accuracy benchmark's random
seed-format runs, an older seed layout (per-turn engine lines, ``turn_timings`` as numbers, aborted requests,
the worker's rollout line, a barrier), and random edits of both: keys dropped or null, alternates used
(``turn_index``, ``generated_tokens``, a top-level ``request_id``), values retyped, lines duplicated, moved to
another step or worker, turned into other events, damaged. A clean file must go through Arrow (so that the
comparisons are not between the line-by-line reader and itself); an edited one may go either way.
"""

from __future__ import annotations

import json
import random
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from benchmarks.diagnosis.run_model import build_run
from benchmarks.diagnosis.shape import SEED
from benchmarks.diagnosis.write_seed import write_seed
from benchmarks.gen_seed_logs import Plant, write_seed_logs
from otel_verl.analysis.read.seed import arrow as seed_arrow
from otel_verl.analysis.read.seed import convert, log_file
from otel_verl.analysis.read.seed.batch import build
from otel_verl.analysis.read.seed.rows import LEGACY_SERVICE
from otel_verl.analysis.read.seed.sinks import SeedSpanColumns, add_to_table
from otel_verl.analysis.read.span_frame import frame_from_parts


def _convert(root: Path, arrow: bool, skip: bool) -> tuple[Any, ...]:
    res = convert._convert(log_file.seed_files(root), root, "legacy", skip, True, None, False, arrow=arrow)
    if res.error is not None:
        return (res.error,)
    return frame_from_parts(res.parts), res.bounds, res.spans, res.stats


def assert_same(root: Path) -> None:
    for skip in (False, True):
        old, new = _convert(root, False, skip), _convert(root, True, skip)
        assert len(old) == len(new), old[0] if len(old) == 1 else new[0]
        if len(old) == 1:
            assert new == old
            continue
        pd.testing.assert_frame_equal(new[0], old[0])
        assert new[1:] == old[1:]


def assert_all_through_arrow(root: Path) -> None:
    files = log_file.seed_files(root)
    assert files and all(seed_arrow.read_columns(path) is not None for path in files)


def test_generated_logs_read_the_same(tmp_path: Path) -> None:
    plants = {(2, 1): Plant(slow_turn=(0, 4.0)), (3, 0): Plant(reward=2.0)}
    root = write_seed_logs(tmp_path, steps=3, workers=3, requests=12, seed=3, stall={(1, 2): 5.0}, plants=plants)
    assert_all_through_arrow(root)
    assert_same(root)


@pytest.mark.parametrize("seed", range(6))
def test_the_accuracy_benchmarks_seed_runs_read_the_same(tmp_path: Path, seed: int) -> None:
    root = write_seed(build_run(seed, SEED, max_spans=6_000), tmp_path / "run")
    assert_all_through_arrow(root)
    assert_same(root)


class _Log:
    """One file of the older seed layout, written as the seed's logger writes (naive ISO end time first)."""

    def __init__(self, step: int, worker: int) -> None:
        self.step, self.worker, self.t, self.lines = step, worker, 1_752_000_000.0 + 100 * step, []

    def __call__(self, event: str, dur: float, **extra: Any) -> None:
        self.t += dur
        stamp = datetime.fromtimestamp(self.t, timezone.utc).replace(tzinfo=None).isoformat()
        line = {"timestamp": stamp, "event": event, "duration_sec": dur, "workid": self.worker, "step": self.step}
        self.lines.append(json.dumps(line | ({"extra": extra} if extra else {})))


def _older_layout(root: Path, rng: random.Random) -> None:
    """The older seed names: per-turn engine lines, numeric ``turn_timings``, aborted requests, a rollout line."""
    for step in (1, 2):
        for worker in (0, 1):
            log = _Log(step, worker)
            log("preprocessing_duration", 0.2)
            for r in range(rng.randint(1, 4)):
                rid = f"{step}-{worker}-{r}"
                for turn in range(2):
                    log("engine_async_generate", 0.5, request_id=rid, turn=turn, model="m", output_tokens=30 + r)
                    log("tool_call_duration", 0.1, request_id=rid, turn=turn, tool_name="search")
                log("reward_calculation_duration", 0.05, request_id=rid)
                log("async_rollout_request_complete", 2.0, request_id=rid, turns=2, turn_timings=[1.0, 0.5 + r])
            log("aborted_request_with_cancelled_error", 1.0, request_id=f"{step}-{worker}-x", status="aborted")
            log("async_rollout_with_monitoring_duration", 6.0, total_requests=5, completed_count=4)
            log("barrier_wait_duration", 0.3)
            log("broadcast_duration", 0.01)
            path = root / f"step_{step}" / f"worker_{worker}.jsonl"
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text("\n".join(log.lines) + "\n")


def test_the_older_seed_layout_reads_the_same(tmp_path: Path) -> None:
    _older_layout(tmp_path, random.Random(0))
    (tmp_path / "val_step_1").mkdir()  # a validation rollout's logs: their own traces, no gen phase parent
    for path in (tmp_path / "step_1").iterdir():
        (tmp_path / "val_step_1" / path.name).write_bytes(path.read_bytes())
    assert_all_through_arrow(tmp_path)
    assert_same(tmp_path)


_EVENTS = (
    "async_rollout_with_monitoring_duration",
    "async_generate_duration",
    "barrier_wait_duration",
    "turn_end",
    "turn_engine_call",
    "engine_async_generate_actual",
    "tool_call_duration",
    "preprocess_tokenize",
    "tool_response_processing",
    "reward_calculation",
    "aborted_request_with_cancelled_error",
    "async_rollout_request_complete",
    "something_else",
)
_JUNK = (None, 0, -1, 7, 2**40, 1.0, 1.5, "1", "", "x", True, [1], {"a": 1}, float("nan"))
_KEYS = ("step", "workid", "duration_sec", "timestamp", "event", "extra", "validate", "request_id")
_EXTRA_KEYS = ("request_id", "turn", "turn_index", "model", "output_tokens", "generated_tokens", "input_tokens")
_STAMPS = ("2025-07-13T11:04:27", "2025-07-13 11:04:27", "2025-07-13T11:04:27+00:00", "2025-02-30T00:00:00")
_STAMPS += ("2025-07-13T11:04:27.123", "1969-12-31T23:59:59", "2025-07-13T11:04:27.1234567")
_EXTRA_KEYS += ("tool_name", "tool", "kind", "turn_timings", "total_requests", "status")


def _edit(rng: random.Random, lines: list[str], others: list[str]) -> list[str]:
    """One random edit of a file's lines (kept JSON unless the edit damages a line)."""
    i = rng.randrange(len(lines))
    op = rng.randrange(12)
    if op == 10:  # damage: blank line, garbage, truncation, a second object on a line
        lines[i] = rng.choice(
            ["", "{", "not json", lines[i][: len(lines[i]) // 2], lines[i] + lines[i], " " + lines[i]]
        )
        return lines
    if op == 11:  # a line copied in from elsewhere (another file: another step or worker)
        lines.insert(i, rng.choice(others + lines))
        return lines
    try:
        d = json.loads(lines[i])
    except ValueError:  # a line an earlier edit damaged
        return lines
    if not isinstance(d, dict):
        return lines
    extra = d.get("extra")
    if not isinstance(extra, dict):
        extra = {}
        if op in (2, 3, 4, 6):
            d["extra"] = extra
    if op == 0:
        d.pop(rng.choice(_KEYS), None)
    elif op == 1:
        d[rng.choice(_KEYS)] = rng.choice(_JUNK)
    elif op == 2:
        extra.pop(rng.choice(_EXTRA_KEYS), None)
    elif op == 3:
        extra[rng.choice(_EXTRA_KEYS)] = rng.choice(_JUNK)
    elif op == 4:  # the alternates, with or without the first choice left as a null
        for key, alt in (("turn", "turn_index"), ("output_tokens", "generated_tokens"), ("tool_name", "tool")):
            if key in extra:
                extra[alt] = extra.pop(key)
                if rng.random() < 0.5:
                    extra[key] = None
        if "request_id" in extra and rng.random() < 0.5:
            d["request_id"] = extra.pop("request_id")
    elif op == 5:
        d["event"] = rng.choice(_EVENTS)
    elif op == 6:
        extra["turn"] = rng.choice([0, 1, 2, 50, -3, 2**33])
    elif op == 7:
        d["step"] = d.get("step", 1) + rng.choice([1, -1]) if isinstance(d.get("step"), int) else 3
    elif op == 8:
        d["validate"] = rng.choice([True, False])
    else:
        d["timestamp"] = rng.choice(_STAMPS)
    lines[i] = json.dumps(d)
    return lines


def _edited_tree(tmp_path: Path, seed: int) -> tuple[Path, list[Path]]:
    """Seed logs with 0-5 random edits per file; (their root, the files edited)."""
    rng = random.Random(seed)
    src = tmp_path / "src"
    if seed % 2:
        _older_layout(src, rng)
    else:
        write_seed_logs(src, steps=2, workers=2, requests=3, seed=seed)
    files = {p.relative_to(src): p.read_text().splitlines() for p in log_file.seed_files(src)}
    every = [line for lines in files.values() for line in lines]
    root, edited = tmp_path / "edited", []
    for rel, lines in files.items():
        edits = rng.choice([0, 1, 1, 2, 5])
        for _ in range(edits):
            lines = _edit(rng, lines, every)
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text("\n".join(lines) + ("\n" if rng.random() < 0.9 else ""))
        if edits:
            edited.append(root / rel)
    return root, edited


@pytest.mark.parametrize("seed", range(40))
def test_random_edits_read_the_same(tmp_path: Path, seed: int) -> None:
    assert_same(_edited_tree(tmp_path, seed)[0])


def test_many_edited_files_go_through_arrow(tmp_path: Path) -> None:
    """The edits above compare Arrow with the line-by-line reader only where Arrow takes the file: over the
    same 40 trees it takes about a third of the edited files (218 of 639 over 200 trees when measured)."""
    taken = edited = 0
    for seed in range(40):
        for path in _edited_tree(tmp_path / str(seed), seed)[1]:
            got = seed_arrow.read_columns(path)
            cols = SeedSpanColumns(LEGACY_SERVICE)
            if got is not None:
                add_to_table(build(seed_arrow.arrow_rows(got, "legacy", path.name, "")), cols)
                taken += 1
            edited += 1
    assert edited > 100 and taken / edited > 0.2, (taken, edited)
