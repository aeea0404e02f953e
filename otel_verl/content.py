"""Opt-in text capture (completions, tool arguments): off by default, then redacted, then capped.

Every call site that could record prompt/response/tool-argument text goes through
:func:`capture_text`, so the three rules hold everywhere: nothing unless
``OTEL_VERL_CAPTURE_CONTENT=true``; the user's ``OTEL_VERL_REDACT=module:function`` hook sees the
full text first (a secret cut in half by the cap would slip past a pattern); then the cap
``OTEL_VERL_CONTENT_MAX_CHARS``. A hook that cannot be imported, raises or returns a non-string
drops the text — never recorded unredacted — and warns once per process; training goes on.
"""

from __future__ import annotations

import importlib
import logging
import threading
from collections.abc import Callable

from otel_verl.config import OtelVerlConfig, truncate_text

logger = logging.getLogger(__name__)

Redactor = Callable[[str], str]

_hooks: dict[str, Redactor | None] = {}
_warned: set[str] = set()
_lock = threading.Lock()


def _warn_once(spec: str, message: str) -> None:
    with _lock:
        if spec in _warned:
            return
        _warned.add(spec)
    logger.warning("otel_verl: OTEL_VERL_REDACT=%s %s; captured text is dropped, training goes on", spec, message)


def load_redactor(spec: str) -> Redactor | None:
    """``module:function`` → the callable (cached), or None (warned) when it cannot be loaded."""
    if spec in _hooks:
        return _hooks[spec]
    hook: Redactor | None = None
    module_name, _, attr = spec.partition(":")
    try:
        if not module_name or not attr:
            raise ValueError("expected module:function")
        target: object = importlib.import_module(module_name)
        for part in attr.split("."):
            target = getattr(target, part)
        if not callable(target):
            raise TypeError(f"{attr} is not callable")
        hook = target  # type: ignore[assignment]
    except Exception as exc:
        _warn_once(spec, f"cannot be loaded ({type(exc).__name__}: {exc})")
    _hooks[spec] = hook
    return hook


def capture_text(text: str, config: OtelVerlConfig) -> str | None:
    """The text to record, or None: capture off, or the redaction hook failed."""
    if not config.capture_content:
        return None
    if config.redact:
        hook = load_redactor(config.redact)
        if hook is None:
            return None
        try:
            text = hook(text)
        except Exception as exc:
            _warn_once(config.redact, f"raised {type(exc).__name__}: {str(exc)[:200]}")
            return None
        if not isinstance(text, str):
            _warn_once(config.redact, f"returned {type(text).__name__}, not str")
            return None
    return truncate_text(text, config)
