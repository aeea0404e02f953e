"""Read spool and collector-file traces: every trace file under a path, line by line, into span columns.

One job: bytes on disk → :class:`~otel_verl.analysis.read.otlp.documents.SpanColumns`, with ``file:line`` on a bad
line (or counted and skipped), in forked processes for large loads."""

from __future__ import annotations

import gc
import json
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import orjson

from otel_verl.analysis.errors import AnalysisInputError
from otel_verl.analysis.read.otlp.batch import LineBatch, read_lines
from otel_verl.analysis.read.otlp.documents import SpanColumns
from otel_verl.analysis.read.stats import LoadStats
from otel_verl.invocation import otel_verl_command

TRACE_SUFFIXES = (".jsonl", ".json")
READ_BUFFER = 1 << 20


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


def read_files(
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
        # closed below, read line by line for file:line errors; a 1 MiB buffer, as a spool line is up to ~2 MB
        # (one batch): 8 KiB reads cost more CPU a span (docs/performance.md)
        fh = open(path, "rb", buffering=READ_BUFFER)  # noqa: SIM115
    except OSError as exc:
        raise AnalysisInputError(f"{path}: cannot open: {exc.strerror}") from None
    add, loads = cols.add_document, _loads

    def general(raw: bytes, lineno: int) -> None:
        """The general decoder for one line (what the batch decoder does not take), with its file:line error."""
        try:
            add(loads(raw))
        except (ValueError, TypeError, AttributeError, KeyError) as exc:
            if lineno == 1 and _is_findings_file(path):  # no line of it is a span: skipping lines cannot help
                raise AnalysisInputError(f"{path}: {FINDINGS_FILE}") from None
            stats.bad_line(f"{path}:{lineno}: {_why(raw, exc, path if lineno == 1 else None)}", skip_bad_lines)
        cols.maybe_flush()

    def lines() -> Iterator[tuple[bytes, int]]:
        for lineno, raw in enumerate(fh, start=1):
            advance(len(raw))
            if raw.strip():
                stats.lines += 1
                yield raw, lineno

    with fh:
        if cols.batch_decoder:
            read_lines(lines(), LineBatch(), general, cols.add_part)
        else:
            for raw, lineno in lines():
                general(raw, lineno)


PARALLEL_MIN_BYTES = 64 << 20
"""Below this, forking workers costs more than it saves."""


def parallelism(total_bytes: int, n_files: int) -> int:
    """Worker processes for a load: ``OTEL_VERL_LOAD_JOBS``, else one per CPU (at most 4) for loads ≥ 64 MiB.

    Workers return compact parts (Arrow strings, numpy numbers) that pickle as buffers, so a 2-core
    machine gains on a large spool (pickling whole pandas frames used to eat the gain: docs/performance.md).
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
    read_files(files, cols, stats, skip_bad_lines, lambda n: None)
    return cols.take_parts(), stats


def read_parallel(
    files: list[Path], stats: LoadStats, skip_bad_lines: bool, advance: Callable[[int], None], jobs: int
) -> list[dict[str, Any]]:
    """Decode files in ``jobs`` forked processes (JSON decoding is CPU-bound and holds the GIL), keep file order
    (:func:`.forked.map_forked`: a reader that dies is taken over by this process)."""
    from otel_verl.analysis.read.forked import map_forked

    chunks = byte_chunks(files, jobs)
    parts: list[dict[str, Any]] = []
    read = map_forked(_read_chunk, jobs, chunks, [skip_bad_lines] * len(chunks))
    for chunk, (chunk_parts, part) in zip(chunks, read, strict=True):
        parts.extend(chunk_parts)
        advance(sum(f.stat().st_size for f in chunk))
        stats.add(part)
    return parts


SEED_HINT = (
    "analyze reads seed logs from the directory that holds their step_<n>/ directories (and nothing else); "
    "or convert them: {otel_verl} import-legacy LOGDIR --spool DIR"
)


FINDINGS_FILE = (
    "an otel-verl findings file (what analyze writes), not spans: analyze the trace source it was made from "
    "(a spool dir, a collector file export, a Jaeger or Tempo URL); its report is report.html beside it"
)
"""Why: given findings.json, analyze called it a pretty-printed JSON document and hinted ``jq -c``, whose output
failed again as 'not an OTLP/JSON trace line'."""


MULTILINE_CHECK_BYTES = 256 << 20
"""A file whose first line is not JSON is parsed whole, up to this size, to tell a pretty-printed document apart."""


def _why(raw: bytes, exc: Exception, whole_file: Path | None = None) -> str:
    """Why a line is not a span batch, in words. ``whole_file``: the file, when ``raw`` is its first line (a JSON
    document written over several lines fails there, and is named as such, not as "not JSON")."""
    if isinstance(exc, json.JSONDecodeError):
        if whole_file is not None and _one_multiline_document(whole_file):
            return (
                "a JSON document written over several lines (pretty-printed); trace files hold one OTLP/JSON "
                "request per line (JSON Lines, as the collector's file exporter writes them): `jq -c . FILE` "
                "writes it so"
            )
        if not raw.endswith(b"\n"):
            return f"truncated last line ({exc.msg}); was the writer killed?"
        return f"not JSON ({exc.msg} at column {exc.colno})"
    if _is_seed_line(raw):
        hint = SEED_HINT.format(otel_verl=otel_verl_command())
        return f"a seed SGLangLogManager log line (timestamp/event/duration_sec), not OTLP/JSON; {hint}"
    return f"not an OTLP/JSON trace line ({exc})"


def _one_multiline_document(path: Path) -> bool:
    """The whole file is one JSON document over several lines."""
    try:
        if path.stat().st_size > MULTILINE_CHECK_BYTES:
            return False
        data = path.read_bytes()
        _loads(data)
    except (OSError, ValueError):
        return False
    return data.strip().count(b"\n") > 0


def _is_findings_file(path: Path) -> bool:
    """The file is a findings.json of ``otel-verl analyze`` (pretty-printed or on one line)."""
    try:
        if path.stat().st_size > MULTILINE_CHECK_BYTES:
            return False
        doc = _loads(path.read_bytes())
    except (OSError, ValueError):
        return False
    return isinstance(doc, dict) and {"findings", "summary"} <= doc.keys() and "resourceSpans" not in doc


def _is_seed_line(raw: bytes) -> bool:
    """The seed profiler's ``{"timestamp", "event", "duration_sec", ...}`` line (import-legacy's input)."""
    try:
        doc = _loads(raw)
    except ValueError:
        return False
    return isinstance(doc, dict) and "event" in doc and "timestamp" in doc and "resourceSpans" not in doc


def byte_chunks(files: list[Path], jobs: int) -> list[list[Path]]:
    """About 4 chunks per job of similar byte size, in file order (results keep that order)."""
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
    return chunks
