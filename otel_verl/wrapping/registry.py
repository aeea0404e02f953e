"""Applying and undoing wrappers on seams, lazily and defensively.

A seam is ``(module, "Class.method")``. Wrappers are installed with a post-import hook, so nothing
is imported (and nothing costs) until the target module is imported by its own users. A seam that
differs from what its wrapper expects (:mod:`otel_verl.wrapping.signatures`) is left alone with one
warning; every other seam is still wrapped. Which seams to wrap is not decided here but by the
caller (:mod:`otel_verl.instrumentation.policy`): this module knows nothing of verl.
"""

from __future__ import annotations

import inspect
import logging
import sys
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any

import wrapt

from otel_verl.wrapping.context import instrumentation_enabled
from otel_verl.wrapping.signatures import Seam, expected, signature_drift, warn_signature, warn_untraced

logger = logging.getLogger(__name__)

WrapperFactory = Callable[[], Callable[..., Any]]
SeamSpec = Sequence[Any]
"""``(module, "Class.method", wrapper_factory, ...)``: the first three fields are read."""

_applied: dict[Seam, bool] = {}
_alternatives: dict[Seam, str] = {}
"""seam → the path of the same seam under another verl's name (one of the two exists in any one verl)."""
_pending: dict[str, list[tuple[str, WrapperFactory]]] = {}
_hooked_modules: set[str] = set()
_lock = threading.RLock()
_active = False


def resolve(module: Any, path: str) -> tuple[Any, str]:
    """The object owning ``path``'s last attribute, and that attribute's name."""
    parent = module
    *owners, attr = path.split(".")
    for owner in owners:
        parent = getattr(parent, owner)
    return parent, attr


def is_wrapped(obj: Any) -> bool:
    return isinstance(obj, wrapt.ObjectProxy) or getattr(obj, "_self_wrapper", None) is not None


def _apply(module: Any, module_name: str, path: str, factory: WrapperFactory) -> None:
    seam = (module_name, path)
    if _applied.get(seam):
        return
    try:
        owner, attr = resolve(module, path)
        original = owner.__dict__.get(attr) if isinstance(owner, type) else getattr(owner, attr)
        if original is None:
            raise AttributeError(f"{path} is not defined on {owner!r} itself")
        if is_wrapped(original):
            _applied[seam] = True
            return
        wrapper = factory()
        function = getattr(original, "__func__", original)  # staticmethod/classmethod in the class dict
        kind = returns(wrapper)
        if kind is not None and not _IS_KIND[kind](function):
            # The wrapper would hand verl a coroutine or generator where it expects a value.
            raise TypeError(f"{path} is no longer a {kind} function (signature changed)")
        declared = expected(seam)
        if declared is not None:
            bound = isinstance(owner, type) and not isinstance(original, staticmethod)
            drift = signature_drift(function, declared.params, bound)
            if drift is not None:
                warn_signature(seam, drift, declared.records)
                return
        wrapt.wrap_function_wrapper(module, path, wrapper)
        _applied[seam] = True
    except Exception as exc:
        alternative = alternative_present(module, seam) if isinstance(exc, AttributeError) else None
        if alternative is None:
            warn_untraced(seam, exc)
        else:  # this verl names the seam the other way; that one is wrapped instead
            logger.debug("otel_verl: %s.%s is absent; %s stands in for it", *seam, alternative)


def alternatives(pairs: Mapping[Seam, str]) -> None:
    """Declare seams that other verl versions name differently (``(module, path)`` → the other path)."""
    _alternatives.update(pairs)


def alternative_present(module: Any, seam: Seam) -> str | None:
    """The other name of ``seam`` when ``module`` defines that one (None: no alternative, or it is absent too)."""
    other = _alternatives.get(seam)
    if other is None:
        return None
    try:
        owner, attr = resolve(module, other)
    except AttributeError:
        return None
    found = owner.__dict__.get(attr) if isinstance(owner, type) else getattr(owner, attr, None)
    return other if found is not None else None


def _on_import(module: Any) -> None:
    with _lock:
        if not _active:
            return
        for path, factory in _pending.get(module.__name__, []):
            _apply(module, module.__name__, path, factory)


def wrap_seams(seams: Iterable[SeamSpec]) -> None:
    """Install wrappers now for imported modules, on import for the others."""
    global _active
    with _lock:
        _active = True
        for seam in seams:
            module_name, path, factory = seam[0], seam[1], seam[2]
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
    if is_wrapped(current) and hasattr(current, "__wrapped__"):
        setattr(owner, attr, current.__wrapped__)
        return True
    return False


def unwrap_all() -> None:
    """Undo every wrapper; post-import hooks stay registered but do nothing while inactive."""
    global _active
    with _lock:
        _active = False
        for (module_name, path), applied in list(_applied.items()):
            if not applied:
                continue
            module = sys.modules.get(module_name)
            if module is None:
                continue
            try:
                _unwrap(*resolve(module, path))
            except Exception:
                logger.debug("otel_verl: unwrap of %s.%s failed", module_name, path, exc_info=True)
            _applied[(module_name, path)] = False
        _pending.clear()


def applied_methods() -> Iterator[tuple[Any, str, WrapperFactory]]:
    """``(module, "Class.method", factory)`` of every applied method seam (for per-class copies, see
    :mod:`otel_verl.wrapping.ray_actors`); empty while inactive. Call it holding :data:`lock`."""
    if not _active:
        return
    for module_name, entries in _pending.items():
        module = sys.modules.get(module_name)
        if module is None:
            continue
        for path, factory in entries:
            if "." in path and _applied.get((module_name, path)):  # drifted seams stay unwrapped
                yield module, path, factory


lock = _lock
"""Held while seams are applied or undone."""


_RETURNS = "_otel_verl_returns"
_IS_KIND: dict[str, Callable[[Any], bool]] = {
    "coroutine": inspect.iscoroutinefunction,
    "generator": inspect.isgeneratorfunction,
}


def fits_kind(wrapper: Callable[..., Any], function: Any) -> bool:
    """``function`` is the kind of function ``wrapper`` must wrap (coroutine, generator, or any)."""
    kind = returns(wrapper)
    return kind is None or _IS_KIND[kind](function)


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
