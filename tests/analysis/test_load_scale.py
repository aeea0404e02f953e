"""The loader's large-run machinery gives the same table as a plain one-batch load.

Parallel fork workers, compact parts flushed every N spans and the Arrow id lookup exist for 2M-span
spools (benchmarks/bench_analyzer_scale.py); here they are forced onto the small planted run and
compared with the one-process, one-part load, column by column.
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
from builder import PLANTED, TraceBuilder, build_run

from otel_verl.analysis import analyze
from otel_verl.analysis.errors import AnalysisInputError
from otel_verl.analysis.read import LoadStats, load_spans
from otel_verl.analysis.read.id_lookup import lookup
from otel_verl.analysis.read.otlp import documents as otlp
from otel_verl.analysis.read.span_frame import _ids_clean
from otel_verl.analysis.read.spool.files import trace_files


@pytest.fixture(scope="module")
def reference(planted_spool: Path) -> pd.DataFrame:
    return load_spans(planted_spool)


def test_parallel_workers_and_small_parts_give_the_same_table(
    planted_spool: Path, reference: pd.DataFrame, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(otlp, "FLUSH_SPANS", 97)  # many parts, boundaries inside documents' batches
    monkeypatch.setenv("OTEL_VERL_LOAD_JOBS", "3")
    stats = LoadStats()
    df = load_spans(planted_spool, stats=stats)
    pd.testing.assert_frame_equal(df, reference)
    assert stats.files == len(trace_files(planted_spool)) and stats.spans == len(reference)


def test_parallel_load_keeps_file_line_errors(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    build_run(PLANTED).write(tmp_path)
    bad = sorted(tmp_path.rglob("worker_2.jsonl"))[3]
    bad.write_text(bad.read_text() + '{"resourceSpans": [\n')
    monkeypatch.setenv("OTEL_VERL_LOAD_JOBS", "2")
    line = len(bad.read_text().splitlines())
    with pytest.raises(AnalysisInputError, match=rf"{bad.name}:{line}: not JSON"):
        load_spans(tmp_path)
    stats = LoadStats()
    load_spans(tmp_path, skip_bad_lines=True, stats=stats)
    assert stats.bad_lines == 1 and f"{bad.name}:{line}" in stats.first_bad[0]


def test_bad_span_midway_through_a_line_leaves_no_partial_rows(tmp_path: Path) -> None:
    b = TraceBuilder()
    b.span("verl.step", 0, 1, step=1, **{"verl.step": 1})
    run = b.write(tmp_path)
    f = run / "step_1" / "trainer.jsonl"
    good = json.loads(f.read_text())
    spans = good["resourceSpans"][0]["scopeSpans"][0]["spans"]
    broken = dict(spans[0], spanId="00000000000000aa", startTimeUnixNano="not a number")
    ok = dict(spans[0], spanId="00000000000000bb", attributes=[{"key": "verl.step", "value": {"intValue": "1"}}])
    good["resourceSpans"][0]["scopeSpans"][0]["spans"] = [ok, broken]  # ok is added, then broken raises
    f.write_text(f.read_text() + json.dumps(good) + "\n")
    stats = LoadStats()
    df = load_spans(tmp_path, skip_bad_lines=True, stats=stats)
    assert stats.bad_lines == 1
    assert list(df["span_id"]) == [spans[0]["spanId"]]  # the bad line's valid first span was rolled back too
    assert int(df["step"].iloc[0]) == 1


def test_lookup_matches_index_get_indexer() -> None:
    values = pd.Series(["b", "a", "c", "d"], dtype="str")
    keys = pd.Series(["a", "x", "", "d", "b"], dtype="str")
    assert list(lookup(keys, values)) == list(pd.Index(values).get_indexer(keys)) == [1, -1, -1, 3, 0]
    assert list(lookup(keys.astype(object), values)) == [1, -1, -1, 3, 0]


def test_the_cdf_frame_is_thinned_and_its_quantiles_exact(planted_spans: pd.DataFrame, tmp_path: Path) -> None:
    """The request CDF keeps a few hundred ranks a step (its frame must not grow with the run), the slowest 1 %
    whole, and the order statistics its quantile dots need: they equal numpy's quantile of every request."""
    import numpy as np

    from otel_verl.analysis.figures import request_cdf
    from otel_verl.analysis.tables import Tables

    result = analyze(planted_spans, tmp_path)
    df = result.frames["request_cdf"]
    assert len(df) == (planted_spans["kind"] == "request").sum()  # a small run: every request
    for n in (5, 401, 1000, 4096, 100_000):
        ranks = request_cdf.thin_ranks(n)
        assert ranks[0] == 0 and ranks[-1] == n - 1 and (np.diff(ranks) > 0).all()
        assert len(ranks) <= request_cdf.MAX_CDF_POINTS + 2 * len(request_cdf._style.QUANTILES)
        tail = min(max(1, n // 100), request_cdf.MAX_CDF_POINTS // 4)  # the slowest 1 %, a quarter of the ranks at most
        assert n <= request_cdf.MAX_CDF_POINTS or set(range(n - tail, n)) <= set(ranks)
    requests = Tables.build(planted_spans).requests
    step = int(requests["step"].iloc[0])
    t = np.sort(requests.loc[requests["step"] == step, "rel_end_s"].to_numpy(dtype=float))
    rng = np.random.default_rng(3)
    many = pd.DataFrame(
        {
            "step": step,
            "worker": 0,
            "request_id": "r",
            "request_status": "completed",
            "t_rel_s": rng.lognormal(size=5000),
        }
    )
    thin = request_cdf._ranked(many)
    assert len(thin) < 500 and thin["frac"].is_monotonic_increasing and thin["frac"].iat[-1] == 1.0
    q = request_cdf.cdf_quantiles(thin).iloc[0]
    for quantile in request_cdf._style.QUANTILES:
        assert q[f"p{quantile * 100:g}"] == pytest.approx(np.quantile(many["t_rel_s"], quantile), rel=1e-12)
    whole = request_cdf.cdf_quantiles(df[df["step"] == step]).iloc[0]
    assert whole["p50"] == pytest.approx(np.quantile(t, 0.5), rel=1e-12)


def test_nearest_ancestor_by_pointer_doubling_is_the_walk_up_the_tree() -> None:
    """Random forest, a 100-deep chain and a parent cycle: the doubling rounds find what walking up finds."""
    import numpy as np

    from otel_verl.analysis.read.hierarchy import _ancestor

    rng = np.random.default_rng(7)
    n = 3000
    parent = np.array([-1 if i == 0 or rng.random() < 0.02 else int(rng.integers(0, i)) for i in range(n)])
    parent[2000:2100] = np.arange(1999, 2099)  # a chain 100 deep
    parent[10], parent[11] = 11, 10  # corrupt ids: a cycle
    target = rng.random(n) < 0.03
    target[2000:2100] = False
    target[1999] = True

    def walk(i: int) -> int:
        for _ in range(128):
            if i < 0 or target[i]:
                return i
            i = parent[i]
        return -1

    assert list(_ancestor(parent, target)) == [walk(i) for i in range(n)]
    assert _ancestor(parent, target)[2099] == 1999


def test_id_check_on_arrow_buffers_answers_as_the_arrow_kernels() -> None:
    """Lower-case hex of the right length (or empty) needs no normalizing; the buffer scan agrees with Arrow's
    string kernels on sliced arrays, both offset widths, nulls and non-ASCII ids."""
    import pyarrow as pa
    import pyarrow.compute as pc

    def kernels(arr: pa.Array) -> bool:
        lengths = pc.utf8_length(arr)
        odd = pc.and_(pc.not_equal(lengths, 16), pc.not_equal(lengths, 0))
        return not (pc.any(odd).as_py() or pc.any(pc.match_substring_regex(arr, "[A-F]")).as_py())

    cases = [["ab" * 8, "", "cd" * 8], ["AB" * 8, "ab" * 8], ["ab" * 7], ["é" * 16], ["ab" * 8, None], [], ["", ""]]
    for values in cases:
        for typ in (pa.string(), pa.large_string()):
            arr = pa.array(values, type=typ)
            for view in (arr, arr.slice(1)):
                assert _ids_clean(view, 8) == kernels(view), (values, typ, len(view))
