"""Ray actor classes get the seams of their base classes on their own per-class method copies.

Ray gives every actor class its own copy of each method (its tracing shim, bound to the function as
it was when the class was unpickled), which shadows wrappers on the base class. So, when Ray loads an
actor class in a worker process, the applied seams of any base class are applied again on the actor
class's own attributes. Ray's hook for that moment is private (``ray._private.function_manager``):
it is one seam like any other, warned about and skipped if it changes.
"""

from __future__ import annotations

import importlib
import logging
import sys
from typing import Any

import wrapt

from otel_verl.wrapping import registry

logger = logging.getLogger(__name__)

RAY_FUNCTION_MANAGER = "ray._private.function_manager"
INJECT_TRACING = "_inject_tracing_into_class"


def _import_bases(actor_class: type) -> None:
    """Import the modules of ``actor_class``'s bases, so their seams are applied before its copies are wrapped.

    A base that Ray shipped by value (a class only reachable through its ``@ray.remote`` wrapper, such as verl's
    ``AgentLoopWorkerTQ``) arrives without its module being imported in this process."""
    for base in actor_class.__mro__[1:]:
        name = getattr(base, "__module__", None)
        if isinstance(name, str) and name not in sys.modules and name != "builtins":
            try:
                importlib.import_module(name)
            except Exception:
                logger.debug("otel_verl: cannot import %s for actor class %s", name, actor_class, exc_info=True)


def _derives(actor_class: type, owner: type) -> bool:
    """``actor_class`` is ``owner``'s subclass, or of a copy of it (same module and qualified name) that Ray
    unpickled by value."""
    if issubclass(actor_class, owner):
        return True
    module, name = owner.__module__, owner.__qualname__
    return any(getattr(c, "__module__", None) == module and c.__qualname__ == name for c in actor_class.__mro__)


def wrap_actor_class(actor_class: type) -> None:
    """Apply the seams applied on ``actor_class``'s base classes to its own method copies."""
    _import_bases(actor_class)
    with registry.lock:
        for module, path, factory in registry.applied_methods():
            attr = path.rsplit(".", 1)[1]
            try:
                owner, _ = registry.resolve(module, path)
                if not isinstance(owner, type) or actor_class is owner or not _derives(actor_class, owner):
                    continue
                own = actor_class.__dict__.get(attr)
                if own is None or registry.is_wrapped(own):
                    continue
                wrapt.wrap_function_wrapper(actor_class, attr, factory())
            except Exception:
                logger.debug("otel_verl: cannot wrap %s.%s on actor class", actor_class, path, exc_info=True)


def inject_tracing_wrapper(wrapped: Any, instance: Any, args: tuple, kwargs: dict) -> Any:
    """After Ray set its per-class method copies, and before it builds the method executors."""
    result = wrapped(*args, **kwargs)
    actor_class = args[0] if args else kwargs.get("_cls")
    try:
        if isinstance(actor_class, type):
            wrap_actor_class(actor_class)
    except Exception:
        logger.debug("otel_verl: actor class not instrumented", exc_info=True)
    return result
