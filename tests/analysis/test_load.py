"""Loader: OTLP/JSON decoding, tree resolution, id formats, bad input with file:line."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pandas as pd
import pytest
from builder import PLANTED, TraceBuilder, build_run

from otel_verl.analysis.errors import AnalysisInputError
from otel_verl.analysis.read import LoadOptions, LoadStats, load_spans
from otel_verl.analysis.read.step_stream import iter_steps


def test_counts_and_columns_match_builder(planted_spool: Path, planted_spans) -> None:
    built = build_run(PLANTED).spans
    assert len(planted_spans) == len(built)
    assert (planted_spans["kind"] == "request").sum() == sum(s.name == "verl.rollout.request" for s in built)
    req = planted_spans[planted_spans["request_id"] == "s5w2r4"]
    reward = req[req["kind"] == "reward"]
    assert len(reward) == 1
    assert reward["duration"].iloc[0] == pytest.approx(25.0, abs=1e-6)
    assert int(reward["step"].iloc[0]) == 5 and int(reward["worker"].iloc[0]) == 2  # inherited from the request


def test_turn_index_inherited_by_engine_spans(planted_spans) -> None:
    eng = planted_spans[(planted_spans["kind"] == "engine") & (planted_spans["request_id"] == "s6w0r7")]
    assert sorted(eng["turn_index"].astype(int)) == [0, 1]
    slow = eng[eng["turn_index"] == 1]
    assert slow["duration"].iloc[0] == pytest.approx(30.0, abs=1e-6)


def test_typed_attributes_decoded(planted_spans) -> None:
    eng = planted_spans[planted_spans["kind"] == "engine"]
    assert (eng["finish_reasons"] == "stop").all()
    assert eng["output_tokens"].notna().all() and eng["input_tokens"].eq(200).all()
    req = planted_spans[planted_spans["kind"] == "request"]
    assert set(req["request_status"]) == {"completed", "aborted"}
    assert req["reward_score"].isin([0.0, 1.0]).all()


def test_base64_ids_and_status_and_links(tmp_path: Path) -> None:
    tid, sid, pid = "0af7651916cd43dd8448eb211c80319c", "b7ad6b7169203331", "00f067aa0ba902b7"
    b64 = lambda h: base64.b64encode(bytes.fromhex(h)).decode()  # noqa: E731
    doc = {
        "resourceSpans": [
            {
                "scopeSpans": [
                    {
                        "spans": [
                            {
                                "traceId": b64(tid),
                                "spanId": b64(pid),
                                "name": "verl.rollout.worker",
                                "startTimeUnixNano": "1",
                                "endTimeUnixNano": "2000000001",
                                "attributes": [{"key": "verl.worker.rank", "value": {"intValue": "3"}}],
                            },
                            {
                                "traceId": b64(tid),
                                "spanId": b64(sid),
                                "parentSpanId": b64(pid),
                                "name": "verl.rollout.request",
                                "startTimeUnixNano": "1",
                                "endTimeUnixNano": "1000000001",
                                "status": {"code": 2, "message": "x"},
                                "links": [{"traceId": tid, "spanId": pid}],
                            },
                        ]
                    }
                ]
            }
        ]
    }
    f = tmp_path / "export.json"
    f.write_text(json.dumps({"result": doc}) + "\n")
    df = load_spans(f)
    req = df[df["kind"] == "request"].iloc[0]
    assert req["trace_id"] == tid and req["span_id"] == sid and req["parent_id"] == pid
    assert req["status"] == 2 and int(req["worker"]) == 3 and req["links"] == f"{tid}:{pid}"
    assert req["duration"] == pytest.approx(1.0)


def test_async_sample_group_hangs_under_the_worker_that_dispatched_it(tmp_path: Path) -> None:
    """An async V1 sample group is the root of its own trace, linked to the worker span that dispatched it
    (otel_verl/instrumentation/rollout/group.py): the loader takes the link for its parent, so its samples
    and their events keep their worker and step; the inner update linking to the group is its own kind."""
    step_trace, group_trace = "0af7651916cd43dd8448eb211c80319c", "5b8aa5a2d2c872e8321cf37308d69df2"
    step, update, worker, group, request, engine = (f"{i:016x}" for i in range(1, 7))

    def span(trace, sid, parent, name, attrs=(), links=()):
        return {
            "traceId": trace,
            "spanId": sid,
            "parentSpanId": parent,
            "name": name,
            "startTimeUnixNano": "1",
            "endTimeUnixNano": "2",
            "attributes": [{"key": k, "value": {"intValue": str(v)}} for k, v in attrs],
            "links": [{"traceId": t, "spanId": s} for t, s in links],
        }

    spans = [
        span(step_trace, step, "", "verl.step", [("verl.step", 4)]),
        span(step_trace, update, step, "verl.update", [("verl.update.index", 0)], [(group_trace, group)]),
        span(step_trace, worker, step, "verl.rollout.worker", [("verl.worker.rank", 1)]),
        span(group_trace, group, "", "verl.rollout.group", links=[(step_trace, worker)]),
        span(group_trace, request, group, "verl.rollout.request"),
        span(group_trace, engine, request, "text_completion model"),
    ]
    f = tmp_path / "export.json"
    f.write_text(json.dumps({"resourceSpans": [{"scopeSpans": [{"spans": spans}]}]}) + "\n")
    df = load_spans(f).set_index("span_id")
    assert df.loc[group, "kind"] == "group" and df.loc[update, "kind"] == "update"
    for sid in (group, request, engine):
        assert int(df.loc[sid, "worker"]) == 1 and int(df.loc[sid, "step"]) == 4, sid
    assert df.loc[engine, "kind"] == "engine"


def test_truncated_last_line_names_file_and_line(tmp_path: Path) -> None:
    b = TraceBuilder()
    b.span("verl.step", 0, 1, step=1, **{"verl.step": 1})
    run = b.write(tmp_path)
    f = run / "step_1" / "trainer.jsonl"
    f.write_text(f.read_text() + '{"resourceSpans": [')
    with pytest.raises(AnalysisInputError, match=r"trainer\.jsonl:2: truncated"):
        load_spans(tmp_path)
    stats = LoadStats()
    df = load_spans(tmp_path, skip_bad_lines=True, stats=stats)
    assert len(df) == 1 and stats.bad_lines == 1


@pytest.mark.parametrize(
    "content, pattern",
    [
        ("not json at all\n", r"x\.jsonl:1: not JSON"),
        ('{"hello": 1}\n', r"x\.jsonl:1: not an OTLP/JSON"),
        ("[1, 2]\n", r"x\.jsonl:1: not an OTLP/JSON"),
    ],
)
def test_wrong_format(tmp_path: Path, content: str, pattern: str) -> None:
    (tmp_path / "x.jsonl").write_text(content)
    with pytest.raises(AnalysisInputError, match=pattern):
        load_spans(tmp_path)


def _one_span_line(**fields: object) -> str:
    span = {"traceId": "0af7651916cd43dd8448eb211c80319c", "spanId": "b7ad6b7169203331", "name": "verl.step"}
    span.update({"startTimeUnixNano": "1", "endTimeUnixNano": "2000000001", **fields})
    return json.dumps({"resourceSpans": [{"scopeSpans": [{"spans": [span]}]}]}) + "\n"


@pytest.mark.parametrize("field", ["startTimeUnixNano", "endTimeUnixNano"])
@pytest.mark.parametrize("value", [2**70, -1, "1e400"])
def test_a_span_time_outside_int64_names_its_line(tmp_path: Path, field: str, value: object) -> None:
    """Checked as the line is read: numpy's int64 conversion, later and for many lines at once, raised
    an OverflowError that named no line (found by the fuzz test)."""
    (tmp_path / "x.jsonl").write_text(_one_span_line() + _one_span_line(**{field: value}))
    with pytest.raises(AnalysisInputError, match=r"x\.jsonl:2: "):
        load_spans(tmp_path)
    stats = LoadStats()
    assert len(load_spans(tmp_path, skip_bad_lines=True, stats=stats)) == 1 and stats.bad_lines == 1


@pytest.mark.parametrize("name, text", [([], "[]"), ({"a": 1}, '{"a":1}'), (7, "7"), (None, "null")])
def test_a_span_name_that_is_not_a_string_loads_as_its_json_text(tmp_path: Path, name: object, text: str) -> None:
    """A list or dict as a name was unhashable where span kinds are classified (a traceback)."""
    (tmp_path / "x.jsonl").write_text(_one_span_line(name=name))
    df = load_spans(tmp_path)
    assert list(df["name"]) == [text] and list(df["kind"]) == ["other"]


def test_empty_and_missing(tmp_path: Path) -> None:
    with pytest.raises(AnalysisInputError, match=r"no \.jsonl"):
        load_spans(tmp_path)
    with pytest.raises(AnalysisInputError, match="no such file"):
        load_spans(tmp_path / "missing")


def test_one_options_object_reads_alike_everywhere(planted_spool: Path, planted_spans) -> None:
    """``LoadOptions`` is what every reader takes: given whole, or as keywords on top of it, the same spans."""
    cut = int(planted_spans["start_ns"].median())
    options = LoadOptions(service="verl-worker", since_ns=cut)
    whole = load_spans(planted_spool, options)
    assert whole.equals(load_spans(planted_spool, service="verl-worker", since_ns=cut))
    assert whole.equals(load_spans(planted_spool, LoadOptions(service="verl-worker"), since_ns=cut))
    by_step = pd.concat([s.spans for s in iter_steps(planted_spool, options)])
    assert sorted(by_step["span_id"]) == sorted(whole["span_id"])
    with pytest.raises(AnalysisInputError, match="unknown source type 'zipkin'; valid: auto, spool"):
        load_spans(planted_spool, source_type="zipkin")
    with pytest.raises(TypeError, match="services"):
        load_spans(planted_spool, services="verl-worker")


def test_service_and_time_window(planted_spool: Path, planted_spans) -> None:
    only = load_spans(planted_spool, service="verl-worker")
    assert set(only["service"]) == {"verl-worker"}
    cut = int(planted_spans["start_ns"].median())
    later = load_spans(planted_spool, since_ns=cut)
    # whole traces: every trace kept ends after the cut, and is kept with all its spans
    kept = planted_spans[planted_spans["trace_id"].isin(set(later["trace_id"]))]
    assert len(kept) == len(later) and (later.groupby("trace_id")["end_ns"].max() >= cut).all()
    dropped = planted_spans[~planted_spans["trace_id"].isin(set(later["trace_id"]))]
    assert len(dropped) and (dropped["end_ns"] < cut).all()


def test_window_keeps_whole_steps(planted_spool: Path, planted_spans) -> None:
    """--since 1 s into step 3's worker spans and --until 1 s into step 5's: steps 3-5 come back whole.
    Cutting single spans by start time used to keep step 3's requests without their worker span, and
    the analyzer then reported a critical incomplete_worker that never happened."""
    from builder import all_findings

    def worker_start(step: int) -> int:
        w = planted_spans[(planted_spans["kind"] == "worker") & (planted_spans["step"] == step)]
        return int(w["start_ns"].min())

    got = load_spans(planted_spool, since_ns=worker_start(3) + 10**9, until_ns=worker_start(5) + 10**9)
    want = planted_spans[planted_spans["step"].isin([3, 4, 5])]
    assert set(got["span_id"]) == set(want["span_id"]) and len(got) == len(want)
    assert not [f for f in all_findings(got) if f.kind == "incomplete_worker"]
    assert [f.steps for f in all_findings(got) if f.kind == "stall" and f.worker == 1] == [[3]]


def test_ids_written_as_numbers_or_lists_are_kept_as_text():
    """A span whose traceId/spanId/parentSpanId is not a string (a retyped line) never crashes the loader."""
    from otel_verl.analysis.read.span_frame import normalize_id

    assert normalize_id("ABCDEF0123456789", 8) == "abcdef0123456789"
    assert normalize_id(None, 8) == normalize_id("", 8) == ""
    assert normalize_id(1.5, 8) == "1.5" and normalize_id([1], 16) == "[1]"
