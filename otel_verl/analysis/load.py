"""One entry point, :func:`load_spans`, for every trace source: spool, collector file export, Jaeger, Tempo.

The result is a pandas DataFrame, one row per span (see :mod:`otel_verl.analysis.columns`), with
the tree resolved: each span knows its step, worker, request and turn even when only the request
span carried those attributes.
"""

from __future__ import annotations

import gc
import json
import os
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import orjson
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from otel_verl import semconv as sc
from otel_verl.analysis import volume
from otel_verl.analysis.errors import AnalysisInputError
from otel_verl.analysis.formats import seed_fast, seed_read
from otel_verl.analysis.otlp import SpanColumns, frame_from_parts
from otel_verl.analysis.progress import Bar

SOURCE_TYPES = ("auto", "spool", "file", "jaeger", "tempo")
TRACE_SUFFIXES = (".jsonl", ".json")


@dataclass
class LoadStats:
    """What a load read and skipped; reported in the summary so silent data loss is visible."""

    files: int = 0
    lines: int = 0
    spans: int = 0
    bad_lines: int = 0
    duplicates: int = 0
    first_bad: list[str] = field(default_factory=list)
    seconds: float = 0.0
    warnings: list[str] = field(default_factory=list)
    """Things the user must know about the data (e.g. a backend's trace limit reached); shown and saved."""


def detect_source_type(source: str) -> str:
    """Pick the reader from SOURCE: a URL is asked which API it serves (Jaeger or Tempo), a dir is a
    spool, a file a collector export."""
    if source.startswith(("http://", "https://")):
        from otel_verl.analysis import remote

        return remote.probe(source)
    path = Path(source)
    if not path.exists():
        raise AnalysisInputError(f"{source}: no such file or directory")
    return "spool" if path.is_dir() else "file"


def trace_files(root: Path) -> list[Path]:
    """Every trace file under ``root`` in a stable order (spool: run/step_n/*.jsonl; collector: rotated files)."""
    if root.is_file():
        return [root]
    files = sorted(
        p for p in root.rglob("*") if p.is_file() and p.suffix in TRACE_SUFFIXES and not p.name.startswith(".")
    )
    if not files:
        raise AnalysisInputError(f"{root}: no .jsonl/.json trace files found (empty or wrong directory)")
    return files


def _read_files(
    files: list[Path], cols: SpanColumns, stats: LoadStats, skip_bad_lines: bool, advance: Callable[[int], None]
) -> None:
    # The cyclic GC would rescan every decoded dict still alive each few thousand allocations (3-5x slower
    # on a 2M-span load); nothing built here has cycles, so it is paused for the load.
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        for path in files:
            _read_file(path, cols, stats, skip_bad_lines, advance)
    finally:
        if was_enabled:
            gc.enable()


def _loads(raw: bytes) -> Any:
    """orjson (several times faster), but whatever it refuses goes to ``json`` so results and errors stay the same."""
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError:
        return json.loads(raw)


def _read_file(
    path: Path, cols: SpanColumns, stats: LoadStats, skip_bad_lines: bool, advance: Callable[[int], None]
) -> None:
    stats.files += 1
    try:
        fh = open(path, "rb")  # noqa: SIM115 - closed below, read line by line for file:line errors
    except OSError as exc:
        raise AnalysisInputError(f"{path}: cannot open: {exc.strerror}") from None
    add, loads = cols.add_document, _loads
    with fh:
        for lineno, raw in enumerate(fh, start=1):
            advance(len(raw))
            if not raw.strip():
                continue
            stats.lines += 1
            try:
                add(loads(raw))
            except (ValueError, TypeError, AttributeError, KeyError) as exc:
                msg = f"{path}:{lineno}: {_why(raw, exc)}"
                if not skip_bad_lines:
                    raise AnalysisInputError(msg + " (use --skip-bad-lines to skip it)") from None
                stats.bad_lines += 1
                if len(stats.first_bad) < 5:
                    stats.first_bad.append(msg)
            cols.maybe_flush()


PARALLEL_MIN_BYTES = 64 << 20
"""Below this, forking workers costs more than it saves."""


def _parallelism(total_bytes: int, n_files: int) -> int:
    """Worker processes for a load: ``OTEL_VERL_LOAD_JOBS``, else one per CPU (at most 4) for loads ≥ 64 MiB.

    Workers return compact parts (Arrow strings, numpy numbers) that pickle as buffers, so a 2-core
    machine gets ~2x on a large spool (pickling whole pandas frames used to eat the gain).
    """
    env = os.environ.get("OTEL_VERL_LOAD_JOBS", "").strip()
    if env:
        try:
            return max(1, min(int(env), n_files))
        except ValueError:
            return 1
    if total_bytes < PARALLEL_MIN_BYTES:
        return 1
    return max(1, min(os.cpu_count() or 1, 4, n_files))


def _read_chunk(files: list[Path], skip_bad_lines: bool) -> tuple[list[dict[str, Any]], LoadStats]:
    """Worker-process body: decode some files into compact parts of the span table."""
    cols, stats = SpanColumns(), LoadStats()
    _read_files(files, cols, stats, skip_bad_lines, lambda n: None)
    return cols.take_parts(), stats


def _read_parallel(
    files: list[Path], stats: LoadStats, skip_bad_lines: bool, advance: Callable[[int], None], jobs: int
) -> list[dict[str, Any]]:
    """Decode files in ``jobs`` forked processes (JSON decoding is CPU-bound and holds the GIL), keep file order.

    fork, not spawn: spawn re-imports the caller's ``__main__`` (breaks unguarded user scripts) and
    pays the pandas import per worker.
    """
    import multiprocessing as mp
    from concurrent.futures import ProcessPoolExecutor

    sizes = [f.stat().st_size for f in files]
    target = max(1, sum(sizes) // (jobs * 4))
    chunks: list[list[Path]] = [[]]
    acc = 0
    for f, size in zip(files, sizes, strict=True):
        if acc >= target and chunks[-1]:
            chunks.append([])
            acc = 0
        chunks[-1].append(f)
        acc += size
    parts: list[dict[str, Any]] = []
    with ProcessPoolExecutor(max_workers=jobs, mp_context=mp.get_context("fork")) as pool:
        for chunk, (chunk_parts, part) in zip(
            chunks, pool.map(_read_chunk, chunks, [skip_bad_lines] * len(chunks)), strict=True
        ):
            parts.extend(chunk_parts)
            advance(sum(f.stat().st_size for f in chunk))
            stats.files += part.files
            stats.lines += part.lines
            stats.bad_lines += part.bad_lines
            stats.first_bad.extend(part.first_bad[: max(0, 5 - len(stats.first_bad))])
    return parts


SEED_HINT = "convert such logs first: otel-verl import-legacy LOGDIR --spool DIR, then analyze DIR"


def _why(raw: bytes, exc: Exception) -> str:
    if isinstance(exc, json.JSONDecodeError):
        if not raw.endswith(b"\n"):
            return f"truncated last line ({exc.msg}); was the writer killed?"
        return f"not JSON ({exc.msg} at column {exc.colno})"
    if _is_seed_line(raw):
        return f"a seed SGLangLogManager log line (timestamp/event/duration_sec), not OTLP/JSON; {SEED_HINT}"
    return f"not an OTLP/JSON trace line ({exc})"


def _is_seed_line(raw: bytes) -> bool:
    """The seed profiler's ``{"timestamp", "event", "duration_sec", ...}`` line (import-legacy's input)."""
    try:
        doc = _loads(raw)
    except ValueError:
        return False
    return isinstance(doc, dict) and "event" in doc and "timestamp" in doc and "resourceSpans" not in doc


def load_spans(
    source: str | os.PathLike[str],
    *,
    source_type: str = "auto",
    service: str | None = None,
    since_ns: int | None = None,
    until_ns: int | None = None,
    skip_bad_lines: bool = False,
    progress: bool = False,
    stats: LoadStats | None = None,
    max_traces: int = 10000,
) -> pd.DataFrame:
    """Load SOURCE into the span table; raise :class:`AnalysisInputError` on anything unusable.

    ``since_ns``/``until_ns`` keep whole traces and steps that overlap the window (:func:`in_window`);
    ``max_traces`` caps what a Jaeger/Tempo query returns (reaching it is a warning in ``stats``).
    """
    t0 = time.perf_counter()
    stats = stats if stats is not None else LoadStats()
    source = str(source)
    if source_type not in SOURCE_TYPES:
        raise AnalysisInputError(f"unknown source type {source_type!r}; valid: {', '.join(SOURCE_TYPES)}")
    kind = detect_source_type(source) if source_type == "auto" else source_type
    cols = SpanColumns()
    if kind in ("spool", "file"):
        path = Path(source)
        if not path.exists():
            raise AnalysisInputError(f"{source}: no such file or directory")
        files = trace_files(path)
        total = sum(f.stat().st_size for f in files)
        jobs = _parallelism(total, len(files))
        with Bar(progress and total > 20_000_000, "loading spans", total, "bytes") as bar:
            if path.is_dir() and seed_read.looks_like_seed_dir(path):  # the seed's logs, read as import-legacy does
                results, steps = seed_fast.convert_dir(path, "legacy", skip_bad_lines, stats, True, bar.advance)
                frame = frame_from_parts(seed_fast.table_parts(results, steps))
            elif jobs > 1 and hasattr(os, "fork"):
                frame = frame_from_parts(_read_parallel(files, stats, skip_bad_lines, bar.advance, jobs))
            else:
                _read_files(files, cols, stats, skip_bad_lines, bar.advance)
                frame = None
    else:
        from otel_verl.analysis import remote

        now = time.time_ns()
        lo = since_ns if since_ns is not None else now - 24 * 3600 * 10**9
        hi = until_ns if until_ns is not None else now
        fetch = remote.jaeger_documents if kind == "jaeger" else remote.tempo_documents
        unit = "services" if kind == "jaeger" else "traces"
        with Bar(progress, f"fetching from {kind.capitalize()} ({unit})") as bar:
            for doc in fetch(source, service, lo, hi, max_traces, bar, stats.warnings.append):
                stats.lines += 1
                try:
                    cols.add_document(doc)
                except (ValueError, TypeError, AttributeError, KeyError) as exc:
                    raise AnalysisInputError(f"{source}: unexpected response ({exc})") from None
                cols.maybe_flush()
    if kind not in ("spool", "file") or frame is None:
        frame = cols.frame()
    if service and kind in ("spool", "file"):
        frame = frame[frame["service"] == service]
    if since_ns is not None or until_ns is not None:
        frame = in_window(frame, since_ns, until_ns)
    dup = frame.duplicated(subset=["trace_id", "span_id"], keep="first").to_numpy()
    stats.duplicates = int(dup.sum())
    if stats.duplicates:  # a filter copies the whole table: only when there is something to drop
        frame = frame[~dup]
    if frame.empty:
        where = f" for service {service!r}" if service else ""
        skipped = f" ({stats.bad_lines} bad lines skipped; first: {stats.first_bad[0]})" if stats.first_bad else ""
        raise AnalysisInputError(f"{source}: no spans found{where} in the selected time window{skipped}")
    frame = resolve_hierarchy(frame.reset_index(drop=True))
    _release_memory()
    stats.spans = len(frame)
    stats.seconds = time.perf_counter() - t0
    return frame


def in_window(frame: pd.DataFrame, since_ns: int | None, until_ns: int | None) -> pd.DataFrame:
    """Whole traces (and whole steps) that overlap [since, until], never single spans.

    Why: cutting by span start splits a step (its worker span starts before the window, its requests
    inside), and the half step then looks like a worker that died. A trace is kept when its time range
    overlaps the window; a step is kept whole when any trace of it is.
    """
    if frame.empty:
        return frame
    lo = since_ns if since_ns is not None else np.iinfo(np.int64).min
    hi = until_ns if until_ns is not None else np.iinfo(np.int64).max
    codes, _ = pd.factorize(frame["trace_id"], use_na_sentinel=False)
    first = np.full(codes.max() + 1, np.iinfo(np.int64).max)
    last = np.full(codes.max() + 1, np.iinfo(np.int64).min)
    np.minimum.at(first, codes, frame["start_ns"].to_numpy(dtype=np.int64))
    np.maximum.at(last, codes, frame["end_ns"].to_numpy(dtype=np.int64))
    keep_trace = (last >= lo) & (first <= hi)
    keep = keep_trace[codes]
    if "step" in frame and frame["step"].notna().any():
        step = frame["step"]
        kept_steps = pd.unique(step[keep & step.notna().to_numpy()])
        in_step = step.isin(kept_steps).fillna(False).to_numpy(dtype=bool)
        keep_trace[np.unique(codes[in_step])] = True  # every trace that holds a span of a kept step
        keep = keep_trace[codes]
    return frame if keep.all() else frame[keep]


def _release_memory() -> None:
    """Hand the load's freed temporaries back to the OS (Arrow's pool and glibc keep them for reuse otherwise),
    so the analysis that follows starts from the table's real size."""
    pa.default_memory_pool().release_unused()
    try:
        import ctypes

        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):  # not glibc
        pass


# ------------------------------------------------------------------ tree resolution
KIND_BY_NAME = {
    sc.SPAN_STEP: "step",
    sc.SPAN_WORKER: "worker",
    sc.SPAN_REQUEST: "request",
    sc.SPAN_TURN: "turn",
    sc.SPAN_TOOL_PARSE: "tool_parse",
    sc.SPAN_PREPROCESS: "preprocess",
    sc.SPAN_REWARD: "reward",
    sc.SPAN_BARRIER: "barrier",
}


def classify(names: pd.Series) -> np.ndarray:
    """Span kind from its name: step/phase/worker/request/turn/engine/tool/... or ``other``."""
    # a run has a few dozen distinct names: classify those, then spread (2M rows cost one factorize)
    codes, uniques = pd.factorize(names, use_na_sentinel=True)
    u = pd.Series(uniques, dtype=object)
    kinds = u.map(KIND_BY_NAME).to_numpy(dtype=object)
    s = u.astype(str)
    kinds[pd.isna(kinds) & s.str.startswith(sc.SPAN_PHASE_PREFIX + " ").to_numpy()] = "phase"
    kinds[pd.isna(kinds) & s.str.startswith(sc.GEN_AI_OP_TEXT_COMPLETION).to_numpy()] = "engine"
    kinds[pd.isna(kinds) & s.str.startswith(sc.GEN_AI_OP_EXECUTE_TOOL).to_numpy()] = "tool"
    kinds[pd.isna(kinds)] = "other"
    return np.append(kinds, "other")[codes]  # code -1 (a missing name) -> "other"


def _ancestor(parent_idx: np.ndarray, is_target: np.ndarray) -> np.ndarray:
    """Row index of each span's nearest ancestor-or-self with ``is_target`` (-1 if none), by pointer jumping."""
    n = len(parent_idx)
    found = np.where(is_target, np.arange(n), -1)
    cur = parent_idx.copy()
    for _ in range(64):
        todo = (found < 0) & (cur >= 0)
        if not todo.any():
            break
        hit = todo & is_target[np.where(cur >= 0, cur, 0)]
        found[hit] = cur[hit]
        nxt = np.where(cur >= 0, parent_idx[np.where(cur >= 0, cur, 0)], -1)
        cur = np.where(todo & ~hit, nxt, -1)
    return found


def _arrow(values: pd.Series) -> pa.Array:
    """The Arrow array behind a "str" column (no copy), or a converted one."""
    try:
        arr = pa.array(values.array)
    except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError):
        arr = None
    if arr is None or not (pa.types.is_string(arr.type) or pa.types.is_large_string(arr.type)):
        arr = pa.array([None if pd.isna(v) else str(v) for v in values.to_numpy(dtype=object)], type=pa.string())
    return arr


def lookup(keys: pd.Series, values: pd.Series) -> np.ndarray:
    """Position of each key's first occurrence in ``values``, -1 where absent (``Index.get_indexer`` for unique
    values). Arrow's hash lookup: 3x faster than pandas' on 2M ids, and no Python set of 2M strings."""
    k, v = _arrow(keys), _arrow(values)
    if k.type != v.type:
        k = k.cast(v.type)
    found = pc.index_in(k, value_set=v)
    return found.fill_null(-1).to_numpy(zero_copy_only=False).astype(np.int64)


def resolve_hierarchy(spans: pd.DataFrame) -> pd.DataFrame:
    """Add ``kind``, ``request_span``, ``worker_span``, ``turn_span`` and inherit step/worker/request ids.

    Why: instrumentation only promises ids on the request/worker spans; events below them are
    attributed through the parent chain. Missing parents (sampled spans) simply stay unresolved.
    """
    spans = spans.copy(deep=False)  # only whole columns are added or replaced below
    # object dtype on purpose: pandas 3 would store Arrow strings, and every ``kind.to_numpy()`` of the
    # analysis (a dozen) then rebuilt 2M Python strings; here they point at the ten interned labels
    spans["kind"] = pd.Series(classify(spans["name"]), index=spans.index, dtype=object)
    # span ids are unique across traces in practice; (span, trace) keys only when they are not. Both the
    # check and the lookups hash Arrow strings: a pandas Index of 2M ids cost seconds to build.
    keys = spans["span_id"]
    composite = len(pc.unique(_arrow(keys))) != len(keys)  # count_distinct is 3x slower
    if composite:
        keys = keys.astype(str) + spans["trace_id"].astype(str)
        parent_key = spans["parent_id"].astype(str) + spans["trace_id"].astype(str)
    else:
        parent_key = spans["parent_id"]
    parent_idx = lookup(parent_key, keys)
    kind = spans["kind"].to_numpy()
    parent_idx = volume.adopt_linked_requests(kind, spans["links"], lambda k: lookup(k, keys), parent_idx, composite)
    for target, col in (
        ("request", "request_span"),
        ("worker", "worker_span"),
        ("turn", "turn_span"),
        ("step", "step_span"),
    ):
        spans[col] = _ancestor(parent_idx, kind == target)
    for col, via in (
        ("step", "request_span"),
        ("worker", "request_span"),
        ("request_id", "request_span"),
        ("step", "worker_span"),
        ("worker", "worker_span"),
        ("turn_index", "turn_span"),
        ("step", "step_span"),
        # a validation rollout's events are validation too (verl validates inside training steps)
        ("validate", "request_span"),
        ("validate", "worker_span"),
    ):
        anc = spans[via].to_numpy()
        missing = spans[col].isna().to_numpy() & (anc >= 0)
        if missing.any():
            spans[col] = _inherit(spans[col], missing, anc[missing])
    return spans


def _inherit(column: pd.Series, missing: np.ndarray, source: np.ndarray) -> Any:
    """``column`` with the rows in ``missing`` taken from rows ``source``, same dtype (vectorized for Int64)."""
    if isinstance(column.dtype, (pd.Int64Dtype, pd.BooleanDtype)):
        boolean = isinstance(column.dtype, pd.BooleanDtype)
        data = column.to_numpy(dtype=bool if boolean else np.int64, na_value=False if boolean else 0)
        mask = column.isna().to_numpy().copy()
        data[missing], mask[missing] = data[source], mask[source]
        return pd.arrays.BooleanArray(data, mask) if boolean else pd.arrays.IntegerArray(data, mask)
    if column.dtype == np.float64:
        values = column.to_numpy(copy=True)
        values[missing] = values[source]
        return values
    values = column.to_numpy(dtype=object, copy=True)
    values[missing] = values[source]
    return pd.array(values, dtype=column.dtype) if column.dtype != object else values


def load_many(sources: Iterable[str], **kwargs: Any) -> pd.DataFrame:
    """Concatenate several sources (e.g. a spool and a collector export) into one span table."""
    frames = [load_spans(s, **kwargs) for s in sources]
    return pd.concat(frames, ignore_index=True)
