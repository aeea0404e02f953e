"""Perfetto's protobuf export, checked against Perfetto's schema: the file parses as Perfetto's own ``Trace``
message (the ``perfetto`` package's classes, generated from Perfetto's .proto files), and holds what trace
processor needs to import it: every event on a declared track, each track's begin/end balanced and nested,
every track named; one track per request, named by its sample, request id and replica."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

import pandas as pd
import pytest
from typer.testing import CliRunner

from otel_verl.analysis.write.perfetto_proto import write_perfetto_proto
from otel_verl.cli import app

pb = pytest.importorskip("perfetto.protos.perfetto.trace.perfetto_trace_pb2")


def read_trace(path: Path) -> tuple[dict[int, object], list[object]]:
    """(track descriptors by uuid, track events' packets), after checking the packets as trace processor reads
    them: one sequence, every event's track declared, begin/end balanced and nested per track in time order."""
    trace = pb.Trace.FromString(path.read_bytes())
    tracks, events = {}, []
    for packet in trace.packet:
        assert packet.trusted_packet_sequence_id == 1
        if packet.HasField("track_descriptor"):
            d = packet.track_descriptor
            assert d.uuid not in tracks and d.name, d
            tracks[d.uuid] = d
        else:
            assert packet.HasField("track_event") and packet.timestamp > 0
            events.append(packet)
    for d in tracks.values():
        assert not d.HasField("parent_uuid") or d.parent_uuid in tracks, d
    assert [p.timestamp for p in events] == sorted(p.timestamp for p in events)
    open_: dict[int, list] = defaultdict(list)
    for p in events:
        ev = p.track_event
        assert ev.track_uuid in tracks
        if ev.type == pb.TrackEvent.TYPE_SLICE_BEGIN:
            assert ev.name
            open_[ev.track_uuid].append(p.timestamp)
        elif ev.type == pb.TrackEvent.TYPE_SLICE_END:
            assert open_[ev.track_uuid], f"an end with no open slice on {tracks[ev.track_uuid].name}"
            open_[ev.track_uuid].pop()
        else:
            assert ev.type == pb.TrackEvent.TYPE_INSTANT and ev.name
    assert not any(open_.values())
    return tracks, events


def test_every_span_is_a_slice_on_a_named_track(planted_spans: pd.DataFrame, tmp_path: Path) -> None:
    n = write_perfetto_proto(planted_spans, tmp_path / "t.pftrace")
    tracks, events = read_trace(tmp_path / "t.pftrace")
    starts = [p for p in events if p.track_event.type != pb.TrackEvent.TYPE_SLICE_END]
    assert n == len(starts) == len(planted_spans)
    names = {d.name for d in tracks.values()}
    assert {"trainer", "steps", "phases"} <= names and {f"worker {w}" for w in range(4)} <= names
    # one track per request, named by its sample and full id, under its worker
    requests = planted_spans[planted_spans["kind"] == "request"]
    by_name = {d.name: d for d in tracks.values()}
    for rid, w in zip(requests["request_id"], requests["worker"], strict=True):
        (name,) = [x for x in by_name if f"request {rid}" in x.split(" · ")]
        assert tracks[by_name[name].parent_uuid].name == f"worker {int(w)}"
    slices = {p.track_event.name for p in starts}
    assert {"engine call", "barrier wait", "turn", "reward"} <= slices
    assert any(s.startswith("request ") for s in slices) and "request" not in slices  # named by status
    engine = next(p.track_event for p in starts if p.track_event.name == "engine call")
    notes = {a.name: a for a in engine.debug_annotations}
    assert notes["span.name"].string_value.startswith("text_completion") and len(notes["trace_id"].string_value) == 32
    # a request's turns and events ride on its own track
    turn = next(p.track_event for p in starts if p.track_event.name == "turn")
    assert tracks[turn.track_uuid].name.split(" · ")[0].startswith(("prompt", "request"))


def test_requests_named_by_sample_and_replica(tmp_path: Path) -> None:
    """A request whose engine span carries ``verl.engine.replica`` has it in its track's name."""
    rows = [
        # kind, name, span, parent-row, start, end, extra
        ("worker", "verl.rollout.worker", 0, -1, 0, 100, ""),
        ("request", "verl.rollout.request", 1, 0, 10, 90, ""),
        ("engine", "text_completion m", 2, 1, 20, 80, ""),
        ("other", "llm_request", 3, 1, 25, 75, '{"verl.engine.replica":"replica-1"}'),
    ]
    spans = pd.DataFrame(
        {
            "trace_id": ["a" * 32] * 4,
            "span_id": [f"{i:016x}" for i in range(4)],
            "parent_id": [""] + [f"{p:016x}" for _, _, _, p, *_ in rows[1:]],
            "name": [r[1] for r in rows],
            "kind": [r[0] for r in rows],
            "start_ns": [10**18 + r[4] for r in rows],
            "end_ns": [10**18 + r[5] for r in rows],
            "step": pd.array([2] * 4, dtype="Int64"),
            "worker": pd.array([1] * 4, dtype="Int64"),
            "request_id": [None, "req-77", "req-77", "req-77"],
            "sample_index": pd.array([None, 5, 5, 5], dtype="Int64"),
            "request_status": [None, "completed", None, None],
            "num_turns": pd.array([None, 1, None, None], dtype="Int64"),
            "request_span": [-1, 1, 1, 1],
            "extra": [r[6] for r in rows],
        }
    )
    write_perfetto_proto(spans, tmp_path / "t.pftrace")
    tracks, events = read_trace(tmp_path / "t.pftrace")
    named = {d.name: d for d in tracks.values()}
    assert "prompt 5 · request req-77 · replica replica-1" in named
    assert named["prompt 5 · request req-77 · replica replica-1"].description == "step 2, completed, 1 turn"
    assert named["worker 1"].description == "replicas: replica-1"
    on_request = [p.track_event.name for p in events if p.track_event.track_uuid == named[
        "prompt 5 · request req-77 · replica replica-1"].uuid and p.track_event.name]  # fmt: skip
    assert on_request == ["request completed", "engine call", "inside the engine (its own span)"]


@pytest.mark.parametrize("out, fmt, magic", [("t.pftrace", [], b"\x0a"), ("t.json", [], b"{"),
                                             ("t.bin", ["--format", "json"], b"{")])  # fmt: skip
def test_the_command_picks_the_format(planted_spool: Path, tmp_path: Path, out: str, fmt: list, magic: bytes):
    res = CliRunner().invoke(
        app, ["export-perfetto", str(planted_spool), "--steps", "3", "--out", str(tmp_path / out), *fmt]
    )
    assert res.exit_code == 0, res.output
    assert (tmp_path / out).read_bytes().startswith(magic)
    if magic == b"\x0a":
        tracks, _ = read_trace(tmp_path / out)
        assert any(" · request " in d.name for d in tracks.values())
