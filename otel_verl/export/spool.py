"""The spool: a ``SpanExporter`` writing OTLP/JSON lines to local disk, always available.

Layout follows the seed profiler: ``<root>/<run>/step_<n>/<file>.jsonl`` where ``<file>`` is
``worker_<rank>`` in an AgentLoopWorker, ``trainer`` in the trainer (or demo) process and
``<role>_<pid>`` elsewhere; spans without a step go to ``<root>/<run>/no_step/``. One line is one
``ExportTraceServiceRequest`` (what the collector's ``file`` exporter writes), so ``replay`` can
send it unchanged and the analyzer reads spool and collector archives alike.

Files are 0600 in 0700 directories. The exporter never raises: a full or unwritable disk is
logged (once a minute) and reported as FAILURE to the span processor.

A write that fails part-way (ENOSPC after a short write) is undone: the file is truncated back to
its size before that line, so the next line does not join a torn one. If even that fails, or a
file opened for appending does not end with a newline (a writer killed mid-line), the next line
starts with a newline: the torn fragment stays a line of its own, which readers report as a bad
line (file:line) or count with ``--skip-bad-lines``, and every later line parses.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections import OrderedDict
from collections.abc import Sequence
from pathlib import Path
from typing import BinaryIO

from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

from otel_verl import semconv
from otel_verl.export.encoding import request_line

logger = logging.getLogger(__name__)

NO_STEP_DIR = "no_step"
MAX_OPEN_FILES = 4
"""Open step files kept per exporter. Spans arrive for the current step (and a straggler or two from the
one before), so a few handles are enough; older ones are fsynced and closed so a long run holds no
growing set of descriptors and a flush syncs only files written since the last one."""
MAX_CACHED_PATHS = 16
"""Step → file path entries kept per exporter. Steps only move forward, so a handful is plenty; a larger
map grows the worker's heap step after step until it is full (docs/performance.md)."""


def make_private_dirs(directory: Path) -> None:
    """``mkdir -p`` with every directory it creates 0700 (``Path.mkdir(parents=True)`` gives the parents
    the umask's default, e.g. 0755, so others could list run and step names). Existing ones are left as they are."""
    missing = []
    current = directory
    while not current.exists():
        missing.append(current)
        if current.parent == current:
            break
        current = current.parent
    for path in reversed(missing):
        try:
            path.mkdir(mode=0o700)
        except FileExistsError:  # another process made it meanwhile
            pass


def open_private_append(path: Path) -> BinaryIO:
    """``open(path, "ab")`` for another spool writer (``import-legacy``), keeping the spool's promise: the
    file 0600 when created, missing directories 0700 (:func:`make_private_dirs`), whatever the umask."""
    make_private_dirs(path.parent)
    return os.fdopen(os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600), "ab")


class SpoolSpanExporter(SpanExporter):
    """Append spans to ``<root>/<run>/step_<n>/<file_stem>.jsonl``."""

    def __init__(self, root: str | os.PathLike[str], run_id: str, file_stem: str) -> None:
        self.run_dir = Path(root) / run_id
        self.file_stem = file_stem
        self._handles: OrderedDict[Path, int] = OrderedDict()
        self._paths: dict[int | None, Path] = {}
        self._dirty: set[Path] = set()
        self._torn: set[Path] = set()
        """Files whose last line may lack its newline: the next line starts with one."""
        self._lock = threading.Lock()
        self._shutdown = False
        self._last_warning = float("-inf")
        self.spans_written = 0
        self.spans_failed = 0

    # -- routing
    def path_for(self, span: ReadableSpan) -> Path:
        step = (span.attributes or {}).get(semconv.VERL_STEP)
        if type(step) is not int:  # bool, float, str …: not a step number
            step = None
        path = self._paths.get(step)
        if path is None:  # one Path per step, not two joins per span
            sub = f"step_{step}" if step is not None else NO_STEP_DIR
            if len(self._paths) >= MAX_CACHED_PATHS:
                self._paths.clear()
            path = self._paths[step] = self.run_dir / sub / f"{self.file_stem}.jsonl"
        return path

    def _fd(self, path: Path) -> int:
        fd = self._handles.get(path)
        if fd is not None:
            self._handles.move_to_end(path)
            return fd
        make_private_dirs(path.parent)
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        self._handles[path] = fd
        if os.fstat(fd).st_size and not _ends_with_newline(path):
            self._torn.add(path)
        while len(self._handles) > MAX_OPEN_FILES:
            self._close(*self._handles.popitem(last=False))
        return fd

    def _close(self, path: Path, fd: int) -> None:
        try:
            if path in self._dirty:
                os.fsync(fd)
            os.close(fd)
        except OSError:
            pass
        self._dirty.discard(path)

    # -- SpanExporter contract
    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        if self._shutdown:
            return SpanExportResult.FAILURE
        groups: dict[Path, list[ReadableSpan]] = {}
        for span in spans:
            groups.setdefault(self.path_for(span), []).append(span)
        result = SpanExportResult.SUCCESS
        with self._lock:
            for path, group in groups.items():
                try:
                    data = request_line(group)
                    fd = self._fd(path)
                    if path in self._torn:
                        data = b"\n" + data
                    written = 0
                    try:
                        while written < len(data):
                            written += os.write(fd, data[written:])
                    except OSError:
                        if written:
                            self._undo_partial(path, fd, written)
                        raise
                    self._torn.discard(path)
                    self._dirty.add(path)
                    self.spans_written += len(group)
                except Exception as exc:  # disk full, permissions, bad value: never raise
                    self.spans_failed += len(group)
                    result = SpanExportResult.FAILURE
                    self._warn(f"otel_verl: spool write to {path} failed ({exc}); {len(group)} spans not spooled")
        return result

    def _undo_partial(self, path: Path, fd: int, written: int) -> None:
        """Cut a line that was only partly written; failing that, isolate it with the next newline."""
        try:
            os.ftruncate(fd, os.fstat(fd).st_size - written)
        except OSError:
            self._torn.add(path)

    def _warn(self, message: str) -> None:
        now = time.monotonic()
        if now - self._last_warning >= 60.0:
            self._last_warning = now
            logger.warning(message)

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        with self._lock:
            for path in self._dirty:
                try:
                    os.fsync(self._handles[path])
                except (KeyError, OSError):
                    pass
            self._dirty.clear()
        return True

    def shutdown(self) -> None:
        with self._lock:
            self._shutdown = True
            while self._handles:
                self._close(*self._handles.popitem(last=False))


def _ends_with_newline(path: Path) -> bool:
    try:
        with open(path, "rb") as handle:
            handle.seek(-1, os.SEEK_END)
            return handle.read(1) == b"\n"
    except OSError:
        return True  # unreadable: nothing to repair from here
