"""The current OTel context in one C call, where the SDK's runtime context allows it.

Why: ``opentelemetry.context.get_current``/``attach``/``detach`` and ``is_instrumentation_enabled``
are two to four Python frames around one ``ContextVar`` operation, and the wrappers ask ~15 times
per trajectory, on the rollout's event loop. With the SDK's default runtime context
(``contextvars``) its ``ContextVar`` is used directly; any other runtime context (set through
``OTEL_PYTHON_CONTEXT``) goes through the public API, unchanged (what it saved: docs/performance.md).

This is the one module that reads OpenTelemetry's private names (``_RUNTIME_CONTEXT``, the suppression
keys); ``tests/instrumentation/test_context_fastpath.py`` checks it against the public API.
"""

from __future__ import annotations

from collections.abc import Callable
from contextvars import ContextVar, Token
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry.context import _SUPPRESS_INSTRUMENTATION_KEY
from opentelemetry.context.contextvars_context import ContextVarsRuntimeContext
from opentelemetry.instrumentation.utils import _SUPPRESS_INSTRUMENTATION_KEY_PLAIN


def _runtime_var() -> ContextVar[otel_context.Context] | None:
    runtime = getattr(otel_context, "_RUNTIME_CONTEXT", None)
    var = getattr(runtime, "_current_context", None) if type(runtime) is ContextVarsRuntimeContext else None
    return var if isinstance(var, ContextVar) else None


_VAR = _runtime_var()

get_current: Callable[[], otel_context.Context] = _VAR.get if _VAR is not None else otel_context.get_current
"""``opentelemetry.context.get_current``."""

attach: Callable[[otel_context.Context], Token[Any]] = _VAR.set if _VAR is not None else otel_context.attach
"""``opentelemetry.context.attach``."""


def detach(token: Token[Any]) -> None:
    """``opentelemetry.context.detach`` (never raises)."""
    if _VAR is None:
        otel_context.detach(token)
        return
    try:
        _VAR.reset(token)
    except Exception:
        otel_context.detach(token)  # the SDK's path: logs the failure, raises nothing


def instrumentation_enabled() -> bool:
    """``opentelemetry.instrumentation.utils.is_instrumentation_enabled``: False under ``suppress_instrumentation``."""
    ctx = get_current()
    return not (ctx.get(_SUPPRESS_INSTRUMENTATION_KEY) or ctx.get(_SUPPRESS_INSTRUMENTATION_KEY_PLAIN))
