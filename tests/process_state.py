"""Resetting otel_verl's per-process state between tests, by the modules' public functions and, where a module
keeps no public way back (it has no need of one in a run), by setting its attributes from here."""

from __future__ import annotations

from otel_verl.export import flush, tracing
from otel_verl.recording import delivery


def reset_tracing() -> None:
    """Drop this process's tracing state (its held spans flushed first, its provider shut down) without
    touching the global provider: the next wrapper, or ``setup_tracing``, builds anew."""
    current = tracing.get_state()
    if current is not None:
        try:
            flush.release_held(current)
            current.provider.shutdown()
        except Exception:
            pass
    tracing.set_state(None)
    delivery.install(None)
