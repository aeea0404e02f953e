"""What a streamed analysis keeps of each part: summaries whose big frames wait on disk, read back as they went in;
a store whose memory stays a few values per kind; the engine's orphans of all parts told once."""

from __future__ import annotations

from dataclasses import fields
from pathlib import Path

import numpy as np
import pandas as pd

from otel_verl.analysis.findings.common.record import Finding
from otel_verl.analysis.findings.quality.engine_orphans import merge_engine_orphans
from otel_verl.analysis.findings.steps.step_summary import summarize_steps
from otel_verl.analysis.read.step_split import split_by_step
from otel_verl.analysis.stream.store import CACHED, PartStore
from otel_verl.analysis.stream.summaries import KEPT, SPILLED, SpilledSummary
from otel_verl.analysis.tables import Tables


def test_spilled_summary_reads_back_what_went_in(planted_spans, tmp_path: Path) -> None:
    parts = list(split_by_step(planted_spans))[:4]
    summaries = [s for p in parts for s in summarize_steps(Tables.build(p.spans))]
    with PartStore(tmp_path) as store:
        spilled = [SpilledSummary(s, store) for s in summaries]
        assert not any(name in s.__dict__ for s in spilled for name in SPILLED)  # not in memory
        # every frame of a summary is spilled or named as small: a new frame that grows with the step's spans
        # (as ``ids`` did) must be put in one of the two, or memory grows with the run again
        frames = {f.name for f in fields(summaries[0]) if isinstance(getattr(summaries[0], f.name), pd.DataFrame)}
        assert frames == set(SPILLED) | set(KEPT)
        for s, orig in zip(spilled, summaries, strict=True):
            assert isinstance(s, type(orig))
            for f in fields(orig):
                a, b = getattr(s, f.name), getattr(orig, f.name)
                if isinstance(b, pd.DataFrame):
                    pd.testing.assert_frame_equal(a, b)  # dtypes too: object text stays object
                    assert list(a.dtypes) == list(b.dtypes)
                else:
                    assert a == b or (a != a and b != b), f.name
        assert all(len(cache) <= CACHED for cache in store._cache.values())
        assert len(list(store.dir.iterdir())) == len(summaries) * len(SPILLED)
        where = store.dir
    assert not where.exists()


def _orphans(n: int, calls: int, services: list[str], span: str) -> Finding:
    from otel_verl.analysis.findings.quality.engine_orphans import _finding

    return _finding(n, calls, n - 1, services, ["r0"], [{"trace_id": "t" * 32, "span_id": span}])


def test_engine_orphans_of_all_parts_are_one_finding() -> None:
    found = merge_engine_orphans([_orphans(3, 10, ["vllm"], "a" * 16), _orphans(2, 4, ["sglang"], "b" * 16)], 30)
    assert len(found) == 1
    f = found[0]
    assert (f.value, f.baseline) == (5.0, 30.0)
    assert f.details["orphans"] == 5 and f.details["without_parent"] == 3 and f.details["parent_not_ours"] == 2
    assert f.details["services"] == ["sglang", "vllm"] and len(f.evidence) == 2
    assert f.message.startswith("5 of 30 engine spans")
    assert merge_engine_orphans([], 30) == []


def test_factorize_rows_is_multiindex_factorize() -> None:
    from otel_verl.analysis.findings.common.row_codes import factorize_rows

    rng = np.random.default_rng(3)
    a = pd.Series(rng.choice(["decode", "tool", "reward", None], 5000)).astype(object)
    b = rng.choice(["0", "1", "", "calc"], 5000).astype(object)
    b[7] = np.nan
    c = pd.Series(rng.integers(0, 2000, 5000).astype(str))  # many distinct rows: codes folded, not multiplied
    d = rng.choice([1.0, 2.0, np.nan, 0.5], 5000)  # numbers factorized as numbers, given back as Python numbers
    e = pd.Series(rng.integers(0, 3, 5000))
    for cols in ([a, b], [a, b, c], [d, a], [e, d, b]):
        codes, uniques = pd.MultiIndex.from_arrays(cols).factorize()
        got_codes, got = factorize_rows(cols)
        assert np.array_equal(got_codes, codes)
        same = [tuple("NA" if pd.isna(v) else v for v in t) for t in got]
        assert same == [tuple("NA" if pd.isna(v) else v for v in t) for t in uniques]
        assert all(type(v) in (str, float, int) or v is None for t in got for v in t)
    empty_codes, empty = factorize_rows([pd.Series([], dtype=object), np.array([], dtype=object)])
    assert len(empty_codes) == 0 and empty == []


def test_store_gives_back_text_columns_exactly(tmp_path: Path) -> None:
    """Repetitive text columns travel packed; missing values, mixed types and many-valued columns come back as
    they went in, each value of its own type."""
    n = 200
    texts = pd.Series(["decode", "queue"] * (n // 2), dtype=object)
    frame = pd.DataFrame(
        {
            "part": texts,
            "with_none": pd.Series([None, "x"] * (n // 2), dtype=object),
            "with_nan": pd.Series([np.nan, "x"] * (n // 2), dtype=object),
            "mixed": pd.Series([1, "x"] * (n // 2), dtype=object),
            "unique": pd.Series([f"r{i}" for i in range(n)], dtype=object),
            "arrow": pd.array(["a"] * n, dtype="str"),
            "value": np.arange(n, dtype=float),
        },
        index=np.arange(n) * 3,
    )
    with PartStore(tmp_path, cached=0) as store:
        store.put("step1", "occurrences", frame)
        back = store.get("step1", "occurrences")
    pd.testing.assert_frame_equal(back, frame, check_exact=True)
    for column in frame:
        assert [type(v) for v in back[column]] == [type(v) for v in frame[column]], column
