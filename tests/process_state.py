"""otel_verl's per-process state for tests: reset between tests, and read where a run needs no way to read it.

Only the modules' public functions are used where they exist; where a module keeps no public way back (a run
never needs one), its attributes are set from here, so the package carries no code for tests only.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from otel_verl import content
from otel_verl.export import dropped, flush, provider, tracing
from otel_verl.export.journal import COUNTS_SUFFIX, JOURNAL_DIR
from otel_verl.recording import delivery
from otel_verl.wrapping import registry, signatures


def reset_tracing() -> None:
    """Drop this process's tracing state (its held spans flushed first, its provider shut down) without
    touching the global provider: the next wrapper, or ``setup_tracing``, builds anew."""
    with provider._lock:  # as setup and shutdown hold it
        current = tracing.get_state()
        if current is not None:
            try:
                flush.release_held(current)
                current.provider.shutdown()
            except Exception:
                pass
        tracing.set_state(None)
        delivery.install(None)


def dropped_so_far() -> int:
    """Spans dropped by full (or shut-down) export queues in this process so far."""
    return dropped._dropped


def reset_dropped() -> None:
    with dropped._lock:
        dropped._dropped = 0


def reset_redactors() -> None:
    """Forget the loaded ``OTEL_VERL_REDACT`` hooks and the warnings given about them."""
    with content._lock:
        content._hooks.clear()
        content._warned.clear()


def reset_seam_warnings() -> None:
    """Forget which seams warned (drifted signatures, unreadable calls): each warns again once."""
    signatures._warned.clear()
    signatures._call_warned.clear()


def wrapped_seams() -> set[tuple[str, str]]:
    """The seams of otel_verl's table wrapped now in this process (in the modules imported so far)."""
    from otel_verl.instrumentation.targets import TARGETS

    found = set()
    for target in TARGETS:
        module = sys.modules.get(target.module)
        if module is None:
            continue
        try:
            owner, attr = registry.resolve(module, target.method)
        except AttributeError:
            continue
        current = owner.__dict__.get(attr) if isinstance(owner, type) else getattr(owner, attr, None)
        if current is not None and registry.is_wrapped(current):
            found.add((target.module, target.method))
    return found


def read_counts(run_dir: Path) -> list[dict[str, object]]:
    """Every process's last ``*.counts`` file of one spool run (written by ``flush.write_run_counts``)."""
    directory = Path(run_dir) / JOURNAL_DIR
    out = []
    for path in sorted(directory.glob(f"*{COUNTS_SUFFIX}")) if directory.is_dir() else []:
        try:
            out.append(json.loads(path.read_text()))
        except (OSError, ValueError):
            continue
    return out
