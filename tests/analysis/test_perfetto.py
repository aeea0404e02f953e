"""Perfetto export: lanes never hold overlapping requests; every span is an event."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from otel_verl.analysis.write.perfetto import assign_lanes, write_perfetto


@given(st.lists(st.tuples(st.integers(0, 1000), st.integers(1, 200)), min_size=1, max_size=60))
def test_lanes_never_overlap(ivs: list[tuple[int, int]]) -> None:
    starts = np.array([s for s, _ in ivs])
    ends = starts + np.array([d for _, d in ivs])
    lanes = assign_lanes(starts, ends)
    for lane in set(lanes.tolist()):
        idx = np.flatnonzero(lanes == lane)
        o = idx[np.lexsort((ends[idx], starts[idx]))]
        assert (starts[o][1:] >= ends[o][:-1]).all()
    # greedy partitioning is optimal: lanes == max concurrency
    pts = sorted([(s, 1) for s in starts] + [(e, -1) for e in ends], key=lambda p: (p[0], p[1]))
    conc = max(np.cumsum([p[1] for p in pts]))
    assert len(set(lanes.tolist())) == max(conc, 1)


def test_perfetto_file(planted_spans, tmp_path: Path) -> None:
    """Every span is a slice; a trainer track (steps, phases), a process per worker with named lanes; slices
    named by the one label mapping; every span's attributes in its args."""
    n = write_perfetto(planted_spans, tmp_path / "t.json")
    ev = json.loads((tmp_path / "t.json").read_text())["traceEvents"]
    slices = [e for e in ev if e["ph"] == "X"]
    assert n == len(slices) == len(planted_spans)
    procs = {e["pid"]: e["args"]["name"] for e in ev if e["ph"] == "M" and e["name"] == "process_name"}
    assert {f"worker {w}" for w in range(4)} | {"trainer"} <= set(procs.values())
    lanes = {(e["pid"], e["tid"]) for e in ev if e["ph"] == "M" and e["name"] == "thread_name"}
    assert {(e["pid"], e["tid"]) for e in slices} <= lanes  # every lane a slice is on has a name
    trainer = [e for e in slices if procs[e["pid"]] == "trainer"]
    assert {e["cat"] for e in trainer} == {"step", "phase"}
    assert any(e["name"] == "phase: gen (rollout)" for e in trainer) and any(e["name"] == "step 3" for e in trainer)
    names = {e["name"] for e in slices}
    assert {"engine call", "barrier wait", "request", "turn", "reward"} <= names
    assert not any(x.startswith(("text_completion", "verl.")) for x in names)  # raw names only in args
    engine = next(e for e in slices if e["name"] == "engine call")
    assert engine["args"]["span.name"].startswith("text_completion") and len(engine["args"]["trace_id"]) == 32
    request = next(e for e in slices if e["cat"] == "request")
    assert {"verl.request.id", "verl.worker.rank", "verl.step", "verl.request.num_turns"} <= set(request["args"])
    phase = next(e for e in trainer if e["cat"] == "phase")
    assert phase["args"]["verl.phase.name"] and phase["tid"] != next(e for e in trainer if e["cat"] == "step")["tid"]
    by_lane: dict = {}
    for e in slices:
        if e["cat"] == "request":
            by_lane.setdefault((e["pid"], e["args"]["verl.step"], e["tid"]), []).append((e["ts"], e["ts"] + e["dur"]))
    for ivs in by_lane.values():
        ivs.sort()
        assert all(b[0] >= a[1] - 1e-3 for a, b in itertools.pairwise(ivs))


def test_one_step(planted_spans, tmp_path: Path) -> None:
    n = write_perfetto(planted_spans, tmp_path / "s.json", steps=range(3, 4))
    ev = json.loads((tmp_path / "s.json").read_text())["traceEvents"]
    assert n == int((planted_spans["step"] == 3).sum())
    assert {e["args"]["verl.step"] for e in ev if e["ph"] == "X"} == {3}


def test_slices_on_a_lane_nest(planted_spans, tmp_path: Path) -> None:
    """Perfetto draws a lane's slices as a stack: two slices that cross (neither inside the other) would be
    dropped or misdrawn. Steps, phases, workers, requests and their spans all nest or are apart."""
    write_perfetto(planted_spans, tmp_path / "t.json")
    lanes: dict = {}
    for e in json.loads((tmp_path / "t.json").read_text())["traceEvents"]:
        if e["ph"] == "X":
            lanes.setdefault((e["pid"], e["tid"]), []).append((e["ts"], e["ts"] + e["dur"]))
    for slices in lanes.values():
        slices.sort(key=lambda s: (s[0], -s[1]))
        open_: list = []
        for a, b in slices:
            while open_ and open_[-1][1] <= a + 1e-3:
                open_.pop()
            assert not open_ or b <= open_[-1][1] + 1e-3, (open_[-1], (a, b))
            open_.append((a, b))
