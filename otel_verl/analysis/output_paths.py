"""Output paths checked before any work, and write errors as one line naming the path.

Why: an analysis of a large run takes minutes; finding out afterwards that ``--out`` is a file (or
``/proc/...``) and dying with a traceback loses that time and hides which path was wrong.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from otel_verl.analysis.errors import AnalysisInputError


def _why(exc: OSError) -> str:
    return exc.strerror or type(exc).__name__


def prepare_dir(path: str | Path, option: str = "--out") -> Path:
    """Create the output directory (and parents) or raise a one-line error naming it."""
    path = Path(path)
    if path.exists() and not path.is_dir():
        raise AnalysisInputError(f"{option} {path}: exists and is not a directory")
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise AnalysisInputError(f"{option} {path}: cannot create directory: {_why(exc)}") from None
    if not os.access(path, os.W_OK | os.X_OK):
        raise AnalysisInputError(f"{option} {path}: directory is not writable")
    return path


def prepare_file(path: str | Path, option: str = "--out") -> Path:
    """Check an output file path: not a directory, its directory created and writable."""
    path = Path(path)
    if path.is_dir():
        raise AnalysisInputError(f"{option} {path}: is a directory; give a file name (e.g. {path / 'trace.json'})")
    parent = path.parent
    if parent.exists() and not parent.is_dir():
        raise AnalysisInputError(f"{option} {path}: {parent} is not a directory")
    try:
        parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise AnalysisInputError(f"{option} {path}: cannot create {parent}: {_why(exc)}") from None
    if not os.access(parent, os.W_OK | os.X_OK) or (path.exists() and not os.access(path, os.W_OK)):
        raise AnalysisInputError(f"{option} {path}: not writable")
    return path


@contextmanager
def writing(path: str | Path) -> Iterator[Path]:
    """Turn an OSError while writing ``path`` (disk full, permissions) into a one-line error naming it."""
    try:
        yield Path(path)
    except OSError as exc:
        where = exc.filename or path
        raise AnalysisInputError(f"{where}: cannot write: {_why(exc)}") from None
