"""What each wrapper reads from its seam, checked against the installed verl, and the warnings of drift.

A seam that differs in the installed verl (class or method renamed, moved to a base class, turned
from a coroutine into a plain function, or a parameter the wrapper reads renamed, removed or moved,
as declared in :mod:`otel_verl.instrumentation.targets`) logs one warning naming what is not
recorded, once per seam and process; that seam is left alone and everything else is still traced.
A wrapper that cannot read a call at run time (drift that only shows in the values verl passes)
reports it through :func:`call_failed`: one warning per seam, and the call goes through unchanged.
"""

from __future__ import annotations

import inspect
import logging
import sys
from collections.abc import Callable, Mapping
from typing import Any, NamedTuple

logger = logging.getLogger(__name__)

Seam = tuple[str, str]
"""``(module, "Class.method")``."""


class Expected(NamedTuple):
    """What a wrapper reads from its seam's parameters, and what is not recorded without them.

    ``params`` follows Python's signature syntax, ``self`` left out: the names before ``"*"`` must be
    the target's leading positional parameters in that order (the wrapper reads ``args[i]`` or the
    keyword), the names after it must exist as keyword parameters anywhere.
    """

    params: tuple[str, ...]
    records: str


_expected: dict[Seam, Expected] = {}
_warned: set[Seam] = set()
_call_warned: set[Seam] = set()


def expect(declared: Mapping[Seam, Expected]) -> Mapping[Seam, Expected]:
    """Register the parameters each seam's wrapper reads (checked when the wrapper is applied)."""
    _expected.update(declared)
    return declared


def expected(seam: Seam) -> Expected | None:
    return _expected.get(seam)


_POSITIONAL = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
_BY_KEYWORD = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)


def signature_drift(function: Callable[..., Any], params: tuple[str, ...], bound: bool) -> str | None:
    """Why ``function``'s signature no longer fits ``params`` (None: it fits, or it cannot be inspected)."""
    try:
        parameters = list(inspect.signature(function).parameters.values())
    except (TypeError, ValueError):
        return None
    if bound and parameters and parameters[0].kind in _POSITIONAL:
        parameters = parameters[1:]  # self / cls
    positional = [p.name for p in parameters if p.kind in _POSITIONAL]
    names = {p.name for p in parameters}
    star = params.index("*") if "*" in params else len(params)
    for index, name in enumerate(params[:star]):
        if name not in names:
            return f"missing parameter {name!r}"
        if index >= len(positional) or positional[index] != name:
            return f"parameter {name!r} is no longer positional argument {index + 1}"
    by_keyword = {p.name for p in parameters if p.kind in _BY_KEYWORD}
    for name in params[star + 1 :]:
        if name not in by_keyword:
            return f"missing parameter {name!r}"
    return None


def _records(seam: Seam) -> str:
    declared = _expected.get(seam)
    return f"{declared.records} are not recorded; " if declared is not None else ""


def warn_untraced(seam: Seam, exc: Exception) -> None:
    """One warning per seam and process, naming exactly what is not traced."""
    if seam in _warned:
        return
    _warned.add(seam)
    module_name, path = seam
    logger.warning(
        "otel_verl: %s.%s is not traced: the installed verl differs (%s); %severything else is still traced",
        module_name,
        path,
        exc,
        _records(seam),
    )


def warn_signature(seam: Seam, drift: str, records: str) -> None:
    """The seam exists but a parameter its wrapper reads changed: not wrapped, one warning."""
    if seam in _warned:
        return
    _warned.add(seam)
    module_name, path = seam
    logger.warning(
        "otel_verl: %s.%s changed its signature (%s); %s are not recorded; everything else is still traced",
        module_name,
        path,
        drift,
        records,
    )


def call_failed(seam: Seam, reason: str | None = None) -> None:
    """A wrapper could not read a call of ``seam`` (from its ``except`` block, or with ``reason``).

    Drift that the wrap-time check cannot see (other values, other types) shows up here; logging it
    at debug would let a seam silently stop being traced, so the first one per seam is a warning.
    """
    if seam in _call_warned:
        return
    _call_warned.add(seam)
    if reason is None:
        exc = sys.exc_info()[1]
        reason = f"{type(exc).__name__}: {str(exc)[:200]}" if exc is not None else "unknown reason"
        logger.debug("otel_verl: %s.%s call not readable", *seam, exc_info=True)
    declared = _expected.get(seam)
    lost = declared.records if declared is not None else "its spans"
    logger.warning(
        "otel_verl: a call of %s.%s could not be read (%s); %s of such calls are not recorded "
        "(the call itself is unaffected; warned once)",
        *seam,
        reason,
        lost,
    )
