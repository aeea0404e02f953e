"""Perfetto export: lanes never hold overlapping requests; every span is an event."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from otel_verl.analysis.formats.perfetto import assign_lanes, write_perfetto


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
    n = write_perfetto(planted_spans, tmp_path / "t.json")
    ev = json.loads((tmp_path / "t.json").read_text())["traceEvents"]
    assert n == int(planted_spans["worker"].notna().sum())
    reqs = [e for e in ev if e.get("cat") == "request"]
    procs = {e["args"]["name"] for e in ev if e["ph"] == "M" and e["name"] == "process_name"}
    assert procs == {f"worker {w}" for w in range(4)}
    by_lane: dict = {}
    for e in reqs:
        by_lane.setdefault((e["pid"], e["args"]["step"], e["tid"]), []).append((e["ts"], e["ts"] + e["dur"]))
    for ivs in by_lane.values():
        ivs.sort()
        assert all(b[0] >= a[1] - 1e-3 for a, b in itertools.pairwise(ivs))
