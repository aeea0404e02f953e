"""Every figure is decomposable by step (issue 31): its frame on a whole run equals the combine of its parts, one
part per step (or per window of steps) as the step-at-a-time read hands them out, the spans of no step last."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
from whole_run import assert_same_frames

from benchmarks.gen_seed_logs import write_seed_logs
from otel_verl.analysis.figures import outliers
from otel_verl.analysis.figures.catalog import FIGURES, PARTS
from otel_verl.analysis.read import load_spans
from otel_verl.analysis.read.step_split import split_by_step
from otel_verl.analysis.stream.held import OutlierHold
from otel_verl.analysis.stream.store import PartStore
from otel_verl.analysis.tables import Tables


@pytest.fixture(scope="module")
def seed_spans(tmp_path_factory: pytest.TempPathFactory) -> pd.DataFrame:
    logs = write_seed_logs(tmp_path_factory.mktemp("seed"), steps=5, workers=3, requests=10, seed=4)
    return load_spans(logs)


def _parts(spans: pd.DataFrame, window: int) -> list[Tables]:
    return [Tables.build(p.spans) for p in split_by_step(spans, window)]


def test_every_figure_but_the_outliers_has_parts() -> None:
    assert set(PARTS) == {name for name, *_ in FIGURES} - {"outliers"}


@pytest.mark.parametrize("window", [1, 3])
@pytest.mark.parametrize("run", ["planted_spans", "seed_spans"])
def test_combined_parts_equal_the_whole_run(run: str, window: int, request: pytest.FixtureRequest) -> None:
    spans = request.getfixturevalue(run)
    whole = Tables.build(spans)
    parts = _parts(spans, window)
    assert len(parts) >= 2
    expected = {name: compute(spans, tables=whole) for name, compute, *_ in FIGURES if name in PARTS}
    got = {name: combine([part(t) for t in parts]) for name, (part, combine) in PARTS.items()}
    assert_same_frames(got, expected)
    # the test means something (no engine spans in these runs; async_timeline: sync trainers)
    assert all(len(frame) for name, frame in got.items() if name not in ("engine_phases", "async_timeline"))


@pytest.mark.parametrize("top", [1, 3, 30])
def test_outliers_top_k_and_named_requests(planted_spans, tmp_path: Path, top: int) -> None:
    """The slowest requests kept as the parts stream by, the named ones read back from the store at the end."""
    whole = Tables.build(planted_spans)
    r = whole.requests.sort_values("duration")
    named = [*r["request_id"].iloc[:5], "not-a-request", r["request_id"].iloc[-1], *r["request_id"].iloc[40:50]]
    expected = outliers.compute_outliers(planted_spans, top, whole, named)
    with PartStore(tmp_path) as store:
        hold = OutlierHold(store, top)
        for i, t in enumerate(_parts(planted_spans, 1)):
            hold.add(i, t)
        assert hold.top["request_id"].nunique() == min(top, len(r))  # only the slowest are held
        got = hold.frame(named)
    assert_same_frames({"outliers": got}, {"outliers": expected})
    why = got.drop_duplicates("request_id")["why"]
    # 15 named besides the slowest (in every top) and the id of no request; at most 24 requests drawn
    assert (why == "named by a finding").sum() == min(15, max(0, outliers.MAX_REQUESTS - top))
    assert got["request_id"].nunique() == min(top + 15, outliers.MAX_REQUESTS)
