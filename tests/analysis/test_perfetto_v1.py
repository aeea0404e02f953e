"""Perfetto export of real V1 runs (verl's own PPOTrainer, the CPU demo; sync and separate-async): the trainer's inner
updates and weight syncs sit on the trainer's tracks, not under "spans of no worker / lane 1"; the sample groups on
tracks of their own (a group spans several requests), an async run's overlapping chunks too; every slice on a track
nested; every slice named by a label, no raw span name."""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path

import pandas as pd
import pytest

from otel_verl.analysis.write.perfetto import write_perfetto

pytestmark = pytest.mark.ray  # each run starts Ray and verl: serial (tests/conftest.py)


@pytest.fixture(scope="module", params=["v1-sync", "v1-separate-async"])
def v1_spans(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> pd.DataFrame:
    """The default trainer's run (shared with the README tree's test), and a separate-async one: its chunks and
    requests overlap across steps (a request lane packed per step overlapped the next step's on the same lane)."""
    from conftest import demo_spans

    if request.param == "v1-sync":
        spans = request.getfixturevalue("demo_v1")
    else:
        spans = demo_spans(tmp_path_factory, "v1-async", trainer="v1-separate-async", steps=3, ray_cpus=None,
                           val_before_train=False)  # fmt: skip
    assert {"update", "weight_sync", "group"} <= set(spans["kind"].astype(str))
    return spans


def _nested(intervals: list[tuple[float, float]]) -> bool:
    """Slices on one track either nest or follow each other (what Perfetto draws as a stack)."""
    stack: list[float] = []
    for start, end in sorted(intervals, key=lambda iv: (iv[0], -iv[1])):
        while stack and stack[-1] <= start + 1e-3:  # µs as floats: ts + dur may pass the next ts by rounding
            stack.pop()
        if stack and end > stack[-1] + 1e-3:
            return False
        stack.append(end)
    return True


def test_chrome_json_puts_the_trainers_spans_on_the_trainer(v1_spans: pd.DataFrame, tmp_path: Path) -> None:
    write_perfetto(v1_spans, tmp_path / "t.json")
    ev = json.loads((tmp_path / "t.json").read_text())["traceEvents"]
    procs = {e["pid"]: e["args"]["name"] for e in ev if e["ph"] == "M" and e["name"] == "process_name"}
    lanes = {(e["pid"], e["tid"]): e["args"]["name"] for e in ev if e["ph"] == "M" and e["name"] == "thread_name"}
    slices = [e for e in ev if e["ph"] == "X"]
    assert "spans of no worker" not in procs.values()
    by_cat = defaultdict(set)
    for e in slices:
        by_cat[e["cat"]].add((procs[e["pid"]], lanes[(e["pid"], e["tid"])], e["name"]))
    assert by_cat["update"] == {("trainer", "inner updates", "inner update (its phases)")}
    assert by_cat["weight_sync"] == {("trainer", "weight syncs", "weight sync")}
    assert {lane.split(",")[0] for _, lane, _ in by_cat["group"]} == {"sample groups"}
    assert not [e["name"] for e in slices if e["name"].startswith("verl.")]
    tracks = defaultdict(list)
    for e in slices:
        tracks[(e["pid"], e["tid"])].append((e["ts"], e["ts"] + e["dur"]))
    assert all(_nested(ivs) for ivs in tracks.values()), [lanes[k] for k, ivs in tracks.items() if not _nested(ivs)]


def test_protobuf_puts_the_trainers_spans_on_the_trainer(v1_spans: pd.DataFrame, tmp_path: Path) -> None:
    from test_perfetto_proto import pb, read_trace

    from otel_verl.analysis.write.perfetto_proto import write_perfetto_proto

    write_perfetto_proto(v1_spans, tmp_path / "t.pftrace")
    tracks, events = read_trace(tmp_path / "t.pftrace")
    names = {d.name for d in tracks.values()}
    assert "spans of no worker" not in names and {"inner updates", "weight syncs", "sample groups"} <= names
    trainer = next(u for u, d in tracks.items() if d.name == "trainer")
    under_trainer = {d.name for d in tracks.values() if d.parent_uuid == trainer}
    assert {"inner updates", "weight syncs"} <= under_trainer
    # each slice ends where its span ends: begin/end pairs match span for span, so the slices on a track nest
    end_of = dict(zip(v1_spans["span_id"], v1_spans["end_ns"].astype("int64"), strict=True))
    open_: dict[int, list[str]] = defaultdict(list)
    for p in events:
        ev = p.track_event
        if ev.type == pb.TrackEvent.TYPE_SLICE_BEGIN:
            assert not ev.name.startswith("verl."), ev.name
            span_id = next(a.string_value for a in ev.debug_annotations if a.name == "span_id")
            open_[ev.track_uuid].append(span_id)
        elif ev.type == pb.TrackEvent.TYPE_SLICE_END:
            span_id = open_[ev.track_uuid].pop()
            assert p.timestamp == end_of[span_id], (tracks[ev.track_uuid].name, span_id)
