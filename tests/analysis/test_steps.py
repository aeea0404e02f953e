"""Reading a run a step at a time (``iter_steps``): for every source and step, exactly the rows (resolved alike)
that the whole-run ``load_spans`` gives that step; spans of no step once; late spans counted; ``--steps``."""

from __future__ import annotations

import json
import random
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from steps_compare import assert_same_steps

from benchmarks.gen_seed_logs import write_seed_logs
from otel_verl.analysis.errors import AnalysisInputError
from otel_verl.analysis.read import LoadStats, load_spans
from otel_verl.analysis.read import step_stream as steps_module
from otel_verl.analysis.read.step_split import owner_steps, split_by_step
from otel_verl.analysis.read.step_stream import iter_steps
from otel_verl.cli.common import parse_step_range
from otel_verl.semconv import ENGINE_SERVICE_SUFFIXES


def _lines(spool: Path) -> list[bytes]:
    return [line for p in sorted(spool.rglob("*.jsonl")) for line in p.read_bytes().splitlines() if line.strip()]


def test_spool_step_by_step_equals_whole_run(planted_spool: Path, planted_spans) -> None:
    stats = LoadStats()
    streamed = list(iter_steps(planted_spool, stats=stats))
    assert_same_steps(streamed, planted_spans)
    assert [s.steps for s in streamed] == [(s,) for s in range(1, 9)]
    assert stats.spans == len(planted_spans) and stats.steps == 8
    assert stats.no_step_spans == stats.late_spans == 0


def test_freed_memory_goes_back_every_few_steps(planted_spool: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Handed back to the OS every ``RELEASE_EVERY`` steps (each step reuses what the one before freed)."""
    stats, handed = LoadStats(), []
    monkeypatch.setattr(steps_module, "RELEASE_EVERY", 3)
    monkeypatch.setattr(steps_module, "release_memory", lambda: handed.append(stats.steps))
    assert len(list(iter_steps(planted_spool, stats=stats))) == 8
    assert handed == [3, 6]


def test_demo_run_step_by_step(demo_planted) -> None:
    """The CPU demo: validation before training (step 0), the engine's spans from its own process in no_step/."""
    opts, spans, _analysis, _out = demo_planted
    streamed = list(iter_steps(opts.spool))
    assert [s.steps for s in streamed] == [(s,) for s in range(opts.steps + 1)]
    assert_same_steps(streamed, spans)
    engine = spans[spans["service"].str.endswith(ENGINE_SERVICE_SUFFIXES, na=False)]  # the demo's: verl.sim-engine
    assert len(engine) and engine["step"].notna().all()  # from no_step/, each joined its step


@pytest.mark.parametrize("jobs", ["1", "2"])
def test_collector_archive_mixing_steps(planted_spool: Path, planted_spans, tmp_path: Path, monkeypatch, jobs) -> None:
    """One OTLP/JSON request a line, lines of all steps shuffled over rotated files: the first pass splits them."""
    monkeypatch.setenv("OTEL_VERL_LOAD_JOBS", jobs)
    lines = _lines(planted_spool)
    random.Random(5).shuffle(lines)
    archive = tmp_path / "archive"
    archive.mkdir()
    for i in range(3):
        (archive / f"traces-{i}.jsonl").write_bytes(b"\n".join(lines[i::3]) + b"\n")
    assert_same_steps(list(iter_steps(archive)), planted_spans)


def test_engine_spans_without_a_step_join_their_step(tmp_path: Path, planted_spool: Path) -> None:
    """A spool's ``no_step/``: spans with no step of their own (an engine's spans under our turns, an orphan whose
    parent is missing) belong to the step of their trace; a trace with no step at all comes once, at the end."""
    spool = tmp_path / "spool"
    whole = load_spans(planted_spool)
    turns = whole[whole["kind"] == "turn"].groupby("step").head(2)
    spans = []
    for i, t in enumerate(turns.itertuples()):
        parent = t.span_id if i % 2 == 0 else "00000000deadbeef"  # every other one an orphan in its trace
        spans.append(_span(t.trace_id, f"{0xE000 + i:016x}", parent, "llm_request", t.start_ns, t.end_ns))
    spans.append(_span("ab" * 16, "00000000000000aa", "", "lonely", 1, 2))
    for src in sorted(planted_spool.rglob("*.jsonl")):
        dest = spool / src.relative_to(planted_spool)
        dest.parent.mkdir(parents=True, exist_ok=True)
        dest.write_bytes(src.read_bytes())
    (spool / "run1" / "no_step").mkdir()
    (spool / "run1" / "no_step" / "server_1.jsonl").write_text(json.dumps(_request(spans)) + "\n")
    whole = load_spans(spool)
    stats = LoadStats()
    streamed = list(iter_steps(spool, stats=stats))
    assert_same_steps(streamed, whole)
    assert streamed[-1].steps == () and list(streamed[-1].spans["name"]) == ["lonely"]
    assert stats.no_step_spans == 1
    engine = whole[whole["name"] == "llm_request"]
    assert engine["step"].notna().sum() == len(engine) // 2  # under a turn: the turn's step; orphans: none ...
    owners = owner_steps(whole)[(whole["name"] == "llm_request").to_numpy()]
    assert not np.isnan(owners).any()  # ... and yet every one belongs to its trace's step


def test_late_spans_are_counted_not_lost(planted_spool: Path, tmp_path: Path) -> None:
    """A file under step_5/ holding spans of step 2 (outside the spool's layout): read after step 2 was handed
    out, they come with the spans of no step, counted and warned about."""
    spool = _copy_spool(planted_spool, tmp_path / "spool")
    moved = spool / "run1" / "step_2" / "trainer.jsonl"
    moved.rename(spool / "run1" / "step_5" / "trainer.from_2.jsonl")
    stats = LoadStats()
    streamed = list(iter_steps(spool, stats=stats))
    n_moved = sum(len(rs_spans) for rs_spans in _spans_of(moved.parent.parent / "step_5" / "trainer.from_2.jsonl"))
    assert stats.late_spans == n_moved > 0  # with a step of their own (phases) or without (barriers of step 2)
    assert stats.no_step_spans == 0
    assert streamed[-1].steps == () and len(streamed[-1].spans) == n_moved
    assert sum(len(s.spans) for s in streamed) == len(load_spans(spool))
    assert any("after their step" in w for w in stats.warnings)


def test_steps_range_and_window(planted_spool: Path, planted_spans) -> None:
    stats = LoadStats()
    streamed = list(iter_steps(planted_spool, steps=parse_step_range("3:6"), window=2, stats=stats))
    assert [s.steps for s in streamed] == [(3, 4), (5, 6)]  # no group of spans of no step with a range
    in_range = planted_spans[planted_spans["step"].isin(range(3, 7)).fillna(False).to_numpy()]
    assert sum(len(s.spans) for s in streamed) == len(in_range)
    full = {s.steps: s.spans for s in split_by_step(planted_spans, 2)}
    for s in streamed:
        assert sorted(s.spans["span_id"]) == sorted(full[s.steps]["span_id"])


def test_steps_range_of_a_collector_archive(planted_spool: Path, tmp_path: Path) -> None:
    """The first pass reads every line; spans of steps outside the range are counted and not kept."""
    archive = tmp_path / "traces.jsonl"
    archive.write_bytes(b"\n".join(_lines(planted_spool)) + b"\n")
    stats = LoadStats()
    streamed = list(iter_steps(archive, steps=range(7, 9), stats=stats))
    assert [s.steps for s in streamed] == [(7,), (8,)]
    assert stats.outside_steps > 0 and stats.spans + stats.outside_steps <= len(load_spans(archive))


def test_window_of_steps_equals_whole_run(planted_spool: Path, planted_spans) -> None:
    assert_same_steps(list(iter_steps(planted_spool, window=3)), planted_spans, window=3)


def test_seed_logs_step_by_step(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("OTEL_VERL_LOAD_JOBS", "2")
    logs = write_seed_logs(tmp_path / "logs", steps=4, workers=3, requests=6, seed=11)
    whole = load_spans(logs, seed_lines=False)
    streamed = list(iter_steps(logs))
    assert [s.steps for s in streamed] == [(1,), (2,), (3,), (4,)]
    assert_same_steps(streamed, whole)


def test_seed_lines_outside_step_directories(tmp_path: Path) -> None:
    """A seed file whose directory carries no step number is read first; its lines go to the step they carry."""
    logs = write_seed_logs(tmp_path / "logs", steps=3, workers=2, requests=4, seed=2)
    (logs / "step_2" / "worker_1.jsonl").rename(logs / "worker_1.jsonl")  # its lines say "step": 2
    whole = load_spans(logs, seed_lines=False)
    streamed = list(iter_steps(logs))
    assert [s.steps for s in streamed] == [(1,), (2,), (3,)]
    assert_same_steps(streamed, whole)


def test_window_and_time_filters_as_load_spans(planted_spool: Path, planted_spans) -> None:
    mid = int(planted_spans["start_ns"].median())
    whole = load_spans(planted_spool, since_ns=mid, service="verl-worker")
    assert_same_steps(list(iter_steps(planted_spool, since_ns=mid, service="verl-worker")), whole)


def test_nothing_found_is_one_clear_error(planted_spool: Path) -> None:
    with pytest.raises(AnalysisInputError, match="no spans found for service 'nobody'"):
        list(iter_steps(planted_spool, service="nobody"))
    with pytest.raises(AnalysisInputError, match="step window 0"):
        list(iter_steps(planted_spool, window=0))


@pytest.mark.parametrize(
    ("text", "expected"),
    [("3:6", range(3, 7)), ("7", range(7, 8)), ("5:", range(5, 2**63)), (":2", range(-(2**63), 3))],
)
def test_parse_step_range(text: str, expected: range) -> None:
    assert parse_step_range(text) == expected


@pytest.mark.parametrize("text", ["a:b", "6:3", "1:2:3", ""])
def test_parse_step_range_rejects(text: str) -> None:
    with pytest.raises(AnalysisInputError, match="--steps"):
        parse_step_range(text)


def _span(trace: str, sid: str, parent: str, name: str, start: int, end: int) -> dict:
    d = {"traceId": trace, "spanId": sid, "name": name, "kind": 3}
    d |= {"startTimeUnixNano": str(start), "endTimeUnixNano": str(end), "attributes": []}
    return d | ({"parentSpanId": parent} if parent else {})


def _request(spans: list[dict]) -> dict:
    resource = {"attributes": [{"key": "service.name", "value": {"stringValue": "verl.vllm"}}]}
    return {"resourceSpans": [{"resource": resource, "scopeSpans": [{"scope": {}, "spans": spans}]}]}


def _copy_spool(spool: Path, dest: Path) -> Path:
    """A copy of ``spool``'s files under ``dest``, to be edited by a test."""
    for src in sorted(spool.rglob("*.jsonl")):
        out = dest / src.relative_to(spool)
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_bytes(src.read_bytes())
    return dest


def _spans_of(path: Path) -> list[list]:
    return [
        ss["spans"]
        for line in path.read_text().splitlines()
        for rs in json.loads(line)["resourceSpans"]
        for ss in rs["scopeSpans"]
    ]


def test_analyze_steps_option(planted_spool: Path, tmp_path: Path) -> None:
    """``analyze --steps 2:3`` analyses those steps only (read a step at a time); a bad range is one line, exit 2."""
    from typer.testing import CliRunner

    from otel_verl.cli import app

    out = tmp_path / "report"
    result = CliRunner().invoke(app, ["analyze", str(planted_spool), "--out", str(out), "--steps", "2:3", "--no-html"])
    assert result.exit_code == 0, result.output
    summary = json.loads((out / "findings.json").read_text())["summary"]
    assert summary["steps"] == [2, 3]
    bad = CliRunner().invoke(app, ["analyze", str(planted_spool), "--out", str(out), "--steps", "3:2"])
    assert bad.exit_code == 2 and "--steps '3:2'" in bad.output


def test_a_filtered_table_is_split_with_its_own_positions(planted_spans) -> None:
    """``spans[mask]`` keeps the whole table's positions in its index: split and analysed, they point at its own
    rows (the same span as before), or -1 where the row they named was left out."""
    from otel_verl.analysis.read.step_split import POSITION_COLUMNS, own_positions

    keep = planted_spans.index.to_numpy() % 3 != 0
    sub = planted_spans[keep]
    own = own_positions(sub)
    assert own.index.equals(pd.RangeIndex(len(sub)))
    whole_ids = planted_spans["span_id"].to_numpy()
    for col in POSITION_COLUMNS:
        before = sub[col].to_numpy()
        after = own[col].to_numpy()
        kept = (before >= 0) & keep[np.maximum(before, 0)]
        assert (after[~kept] == -1).all(), col
        assert (own["span_id"].to_numpy()[after[kept]] == whole_ids[before[kept]]).all(), col
        assert kept.any() and (~kept).any(), col
    assert sum(len(p.spans) for p in split_by_step(own)) == len(sub)


def test_spans_of_no_step_of_an_earlier_trace_in_a_step_file(planted_spool: Path, tmp_path: Path) -> None:
    """step_5/trainer.jsonl also holding step 2's spans that carry no step of their own (barriers): read in one
    part with step 5's spans, they are not step 5's (their trace was step 2's) and come with the spans of no
    step, counted as late."""
    spool = _copy_spool(planted_spool, tmp_path / "spool")
    trainer = spool / "run1" / "step_2" / "trainer.jsonl"
    kept, moved, n_moved = [], [], 0
    for line in trainer.read_text().splitlines():
        doc, late = json.loads(line), json.loads(line)
        for rs, late_rs in zip(doc["resourceSpans"], late["resourceSpans"], strict=True):
            for ss, late_ss in zip(rs["scopeSpans"], late_rs["scopeSpans"], strict=True):
                own = [any(a["key"] == "verl.step" for a in sp.get("attributes", [])) for sp in ss["spans"]]
                late_ss["spans"] = [sp for sp, o in zip(ss["spans"], own, strict=True) if not o]
                ss["spans"] = [sp for sp, o in zip(ss["spans"], own, strict=True) if o]
                n_moved += len(late_ss["spans"])
        kept.append(json.dumps(doc))
        moved.append(json.dumps(late))
    assert n_moved > 0
    trainer.write_text("\n".join(kept) + "\n")
    with (spool / "run1" / "step_5" / "trainer.jsonl").open("a") as fh:
        fh.write("\n".join(moved) + "\n")
    stats = LoadStats()
    streamed = list(iter_steps(spool, stats=stats))
    assert stats.late_spans == n_moved and stats.no_step_spans == 0
    assert streamed[-1].steps == () and len(streamed[-1].spans) == n_moved
    step5 = next(s for s in streamed if s.steps == (5,))
    assert not set(step5.spans["trace_id"]) & set(streamed[-1].spans["trace_id"])
    assert sum(len(s.spans) for s in streamed) == len(load_spans(spool))
