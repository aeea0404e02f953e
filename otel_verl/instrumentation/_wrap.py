"""Applying and undoing wrappers on verl's seams, lazily and defensively.

A seam is ``(module, "Class.method")``. Wrappers are installed with a post-import hook, so nothing
is imported (and nothing costs) until verl itself imports the module. A seam that differs in the
installed verl (version drift: class or method renamed, moved to a base class, turned from a
coroutine into a plain function, or a parameter the wrapper reads renamed, removed or moved, as
declared with :func:`expect`) logs one warning naming what is not recorded, once per seam and
process; that seam is left alone and everything else is still traced. A wrapper that cannot read
a call at run time (drift that only shows in the values verl passes) reports it through
:func:`call_failed`: one warning per seam, and the call goes through unchanged.
"""

from __future__ import annotations

import importlib
import inspect
import logging
import sys
import threading
from collections.abc import Callable, Iterable, Mapping
from typing import Any, NamedTuple

import wrapt

from otel_verl.instrumentation._context import instrumentation_enabled

logger = logging.getLogger(__name__)

Seam = tuple[str, str]
WrapperFactory = Callable[[], Callable[..., Any]]

_applied: dict[Seam, bool] = {}
_pending: dict[str, list[tuple[str, WrapperFactory]]] = {}
_hooked_modules: set[str] = set()
_warned: set[Seam] = set()
_retired: set[Seam] = set()
_call_warned: set[Seam] = set()
_lock = threading.RLock()
_active = False


class Expected(NamedTuple):
    """What a wrapper reads from its seam's parameters, and what is not recorded without them.

    ``params`` follows Python's signature syntax, ``self`` left out: the names before ``"*"`` must be
    the target's leading positional parameters in that order (the wrapper reads ``args[i]`` or the
    keyword), the names after it must exist as keyword parameters anywhere.
    """

    params: tuple[str, ...]
    records: str


_expected: dict[Seam, Expected] = {}


def expect(declared: Mapping[Seam, Expected]) -> Mapping[Seam, Expected]:
    """Register the parameters each seam's wrapper reads (checked when the wrapper is applied)."""
    _expected.update(declared)
    return declared


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


def _resolve(module: Any, path: str) -> tuple[Any, str]:
    parent = module
    *owners, attr = path.split(".")
    for owner in owners:
        parent = getattr(parent, owner)
    return parent, attr


def _apply(module: Any, module_name: str, path: str, factory: WrapperFactory) -> None:
    seam = (module_name, path)
    if _applied.get(seam):
        return
    try:
        owner, attr = _resolve(module, path)
        original = owner.__dict__.get(attr) if isinstance(owner, type) else getattr(owner, attr)
        if original is None:
            raise AttributeError(f"{path} is not defined on {owner!r} itself")
        if _is_wrapped(original):
            _applied[seam] = True
            return
        wrapper = factory()
        function = getattr(original, "__func__", original)  # staticmethod/classmethod in the class dict
        kind = returns(wrapper)
        if kind is not None and not _IS_KIND[kind](function):
            # The wrapper would hand verl a coroutine or generator where it expects a value.
            raise TypeError(f"{path} is no longer a {kind} function (signature changed)")
        expected = _expected.get(seam)
        if expected is not None:
            bound = isinstance(owner, type) and not isinstance(original, staticmethod)
            drift = signature_drift(function, expected.params, bound)
            if drift is not None:
                _warn_signature(seam, drift, expected.records)
                return
        wrapt.wrap_function_wrapper(module, path, wrapper)
        _applied[seam] = True
    except Exception as exc:
        _warn_untraced(seam, exc)


def _records(seam: Seam) -> str:
    expected = _expected.get(seam)
    return f"{expected.records} are not recorded; " if expected is not None else ""


def _warn_untraced(seam: Seam, exc: Exception) -> None:
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


def _warn_signature(seam: Seam, drift: str, records: str) -> None:
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
    expected = _expected.get(seam)
    lost = expected.records if expected is not None else "its spans"
    logger.warning(
        "otel_verl: a call of %s.%s could not be read (%s); %s of such calls are not recorded "
        "(the call itself is unaffected; warned once)",
        *seam,
        reason,
        lost,
    )


def reset_warnings() -> None:
    """Forget which seams warned (tests; a fresh ``instrument()`` after ``uninstrument()``)."""
    _warned.clear()
    _call_warned.clear()


def _on_import(module: Any) -> None:
    with _lock:
        if not _active:
            return
        for path, factory in _pending.get(module.__name__, []):
            _apply(module, module.__name__, path, factory)


def wrap_seams(seams: Iterable[tuple[str, str, WrapperFactory]]) -> None:
    """Install wrappers now for imported modules, on import for the others."""
    global _active
    with _lock:
        _active = True
        for module_name, path, factory in seams:
            entries = _pending.setdefault(module_name, [])
            if all(p != path for p, _ in entries):
                entries.append((path, factory))
            if module_name in sys.modules:
                _apply(sys.modules[module_name], module_name, path, factory)
            elif module_name not in _hooked_modules:
                _hooked_modules.add(module_name)
                wrapt.register_post_import_hook(_on_import, module_name)


def _unwrap(owner: Any, attr: str) -> bool:
    """Put back exactly what was wrapped: for a class, the entry of its own ``__dict__`` (False: not ours).

    ``getattr`` would return the descriptor's result, so a wrapped ``staticmethod`` came back as a
    plain function, i.e. an instance method (``DataProto.concat`` after ``uninstrument()``).
    """
    current = owner.__dict__.get(attr) if isinstance(owner, type) else getattr(owner, attr, None)
    if _is_wrapped(current) and hasattr(current, "__wrapped__"):
        setattr(owner, attr, current.__wrapped__)
        return True
    return False


def retire(seams: Iterable[Seam]) -> None:
    """Unwrap applied seams this process turned out not to need (see :mod:`otel_verl.instrumentation.idle`);
    :func:`restore` wraps them again."""
    with _lock:
        for seam in seams:
            module = sys.modules.get(seam[0])
            if not _applied.get(seam) or module is None:
                continue
            try:
                if not _unwrap(*_resolve(module, seam[1])):
                    continue  # someone else's wrapper sits on top (Ray's tracing shim): ours stays
            except Exception:
                logger.debug("otel_verl: %s.%s could not be retired", *seam, exc_info=True)
                continue
            _applied[seam] = False
            _retired.add(seam)


def restore(seams: Iterable[Seam]) -> None:
    """Wrap again the seams :func:`retire` took off (nothing after :func:`unwrap_all`)."""
    with _lock:
        for module_name, path in seams:
            if (module_name, path) not in _retired:
                continue
            _retired.discard((module_name, path))
            module = sys.modules.get(module_name)
            factory = next((f for p, f in _pending.get(module_name, []) if p == path), None)
            if _active and module is not None and factory is not None:
                _apply(module, module_name, path, factory)


def retired_seams() -> set[Seam]:
    return set(_retired)


def unwrap_all() -> None:
    """Undo every wrapper; post-import hooks stay registered but do nothing while inactive."""
    global _active
    with _lock:
        _active = False
        _retired.clear()
        for (module_name, path), applied in list(_applied.items()):
            if not applied:
                continue
            module = sys.modules.get(module_name)
            if module is None:
                continue
            try:
                _unwrap(*_resolve(module, path))
            except Exception:
                logger.debug("otel_verl: unwrap of %s.%s failed", module_name, path, exc_info=True)
            _applied[(module_name, path)] = False
        _pending.clear()


# ------------------------------------------------------------------ Ray actor classes
RAY_FUNCTION_MANAGER = "ray._private.function_manager"


def _is_wrapped(obj: Any) -> bool:
    return isinstance(obj, wrapt.ObjectProxy) or getattr(obj, "_self_wrapper", None) is not None


def wrap_actor_class(actor_class: type) -> None:
    """Apply our seams to an actor class Ray just loaded in this process.

    Ray gives every actor class its own copy of each method (its tracing shim, bound to the
    function as it was when the class was unpickled), which shadows wrappers on the base class.
    So the seams of any base class are applied again on the actor class's own attributes.
    """
    with _lock:
        if not _active:
            return
        for module_name, entries in _pending.items():
            module = sys.modules.get(module_name)
            if module is None:
                continue
            for path, factory in entries:
                *owners, attr = path.split(".")
                if not owners or not _applied.get((module_name, path)):  # drifted seams stay unwrapped
                    continue
                try:
                    owner, _ = _resolve(module, path)
                    if not isinstance(owner, type) or actor_class is owner or not issubclass(actor_class, owner):
                        continue
                    own = actor_class.__dict__.get(attr)
                    if own is None or _is_wrapped(own):
                        continue
                    wrapt.wrap_function_wrapper(actor_class, attr, factory())
                except Exception:
                    logger.debug("otel_verl: cannot wrap %s.%s on actor class", actor_class, path, exc_info=True)


def _inject_tracing_wrapper(wrapped: Any, instance: Any, args: tuple, kwargs: dict) -> Any:
    """After Ray set its per-class method copies, and before it builds the method executors."""
    result = wrapped(*args, **kwargs)
    actor_class = args[0] if args else kwargs.get("_cls")
    try:
        if isinstance(actor_class, type):
            wrap_actor_class(actor_class)
    except Exception:
        logger.debug("otel_verl: actor class not instrumented", exc_info=True)
    return result


# Only the actor-process side (function_manager's reference); the driver-side class is pickled.
RAY_SEAMS = ((RAY_FUNCTION_MANAGER, "_inject_tracing_into_class", lambda: _inject_tracing_wrapper),)
SIGNATURES = expect(
    {(RAY_FUNCTION_MANAGER, "_inject_tracing_into_class"): Expected(("_cls",), "spans of Ray actor methods")}
)


def applied_seams() -> list[Seam]:
    return [seam for seam, ok in _applied.items() if ok]


def import_optional(name: str) -> Any | None:
    try:
        return importlib.import_module(name)
    except Exception:
        return None


_RETURNS = "_otel_verl_returns"
_IS_KIND: dict[str, Callable[[Any], bool]] = {
    "coroutine": inspect.iscoroutinefunction,
    "generator": inspect.isgeneratorfunction,
}
"""What a wrapper hands verl → the kind of function it may wrap (else verl would get the wrong object)."""


def coroutine_wrapper(wrapper: Callable[..., Any]) -> Callable[..., Any]:
    """Mark a plain ``def`` wrapper that returns the coroutine it is handed (or one of its own).

    An ``async def`` wrapper is one more frame that every suspension of the wrapped coroutine passes
    through (~30 per trajectory); a wrapper that only needs to act before the call, or that records
    nothing at the current detail level, hands verl the original coroutine instead. Like an async
    wrapper it is applied only to coroutine functions.
    """
    setattr(wrapper, _RETURNS, "coroutine")
    return wrapper


def generator_wrapper(wrapper: Callable[..., Any]) -> Callable[..., Any]:
    """Mark a wrapper that returns a generator of its own (``yield from`` the wrapped one).

    Applied only to generator functions: verl's ``_timer`` is one, iterated by ``yield from`` inside
    its ``@contextmanager`` timers. Were it to become a plain function returning something else, the
    seam is left alone and warned about, as an async wrapper on a function that is no longer a coroutine.
    """
    setattr(wrapper, _RETURNS, "generator")
    return wrapper


def returns(wrapper: Callable[..., Any]) -> str | None:
    """``"coroutine"`` (an ``async def`` or :func:`coroutine_wrapper`), ``"generator"`` or None (a value)."""
    if inspect.iscoroutinefunction(wrapper):
        return "coroutine"
    return getattr(wrapper, _RETURNS, None)


enabled = instrumentation_enabled
"""False inside ``suppress_instrumentation`` (e.g. while an exporter runs)."""
