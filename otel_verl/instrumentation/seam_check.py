"""Which of otel_verl's seams still fit a verl (the installed one, or a source tree on ``sys.path``), and why not.

The same checks the registry makes before it wraps a seam (:mod:`otel_verl.wrapping.registry`), made for every
seam of :mod:`otel_verl.instrumentation.targets` without wrapping anything: the module imports, the class and
method exist (on the class itself, not only inherited), the method is still the kind of function its wrapper
expects (coroutine / generator / plain), and the parameters the wrapper reads are where it reads them
(:mod:`otel_verl.wrapping.signatures`). A seam in a package that is not installed (SGLang, vLLM) is
``absent``, not a misfit: a run without that engine loses nothing; so is a seam this verl names the other
way (``Target.alternative``), whose other name is wrapped instead.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
from dataclasses import asdict, dataclass
from typing import Any

from otel_verl.wrapping.registry import alternative_present, fits_kind, resolve, returns
from otel_verl.wrapping.signatures import expected, signature_drift

FITS, MISFIT, ABSENT = "fits", "misfit", "absent"


@dataclass(frozen=True)
class SeamFit:
    """One seam against the verl at hand."""

    module: str
    method: str
    status: str
    """:data:`FITS`, :data:`MISFIT` or :data:`ABSENT` (its package is not installed)."""
    why: str
    """What does not fit ("" when it fits)."""
    records: str
    """What otel_verl records through it (what a misfit loses)."""

    def as_dict(self) -> dict[str, str]:
        return asdict(self)


def _problem(module: Any, module_name: str, path: str, wrapper: Any) -> str | None:
    try:
        owner, attr = resolve(module, path)
    except AttributeError as exc:
        return f"not found: {exc}"
    original = owner.__dict__.get(attr) if isinstance(owner, type) else getattr(owner, attr, None)
    if original is None:
        if getattr(owner, attr, None) is None:
            return f"not found: {path}"
        return f"{path} is not defined on {getattr(owner, '__qualname__', owner)} itself (moved to a base class)"
    function = getattr(original, "__func__", original)
    if not fits_kind(wrapper, function):
        return f"no longer a {returns(wrapper)} function"
    declared = expected((module_name, path))
    if declared is not None:
        bound = isinstance(owner, type) and not isinstance(original, staticmethod)
        return signature_drift(function, declared.params, bound)
    return None


ENGINES = ("vllm", "sglang")
"""Engines whose seams (in the engine, or in verl's server module for it) need the engine installed."""


def _needs(module_name: str) -> list[str]:
    """The packages a seam's module needs: its top package, and the engine verl's server module is for."""
    top = module_name.split(".", 1)[0]
    parts = module_name.split(".")
    return [top, *(e for e in ENGINES if e != top and f"{e}_rollout" in parts)]


def check_seam(module_name: str, path: str, factory: Any, records: str) -> SeamFit:
    for package in _needs(module_name):
        if package not in sys.modules and importlib.util.find_spec(package) is None:
            return SeamFit(module_name, path, ABSENT, f"{package} is not installed", records)
    try:
        module = importlib.import_module(module_name)
    except Exception as exc:
        return SeamFit(module_name, path, MISFIT, f"import failed: {type(exc).__name__}: {str(exc)[:160]}", records)
    try:
        why = _problem(module, module_name, path, factory())
    except Exception as exc:
        why = f"{type(exc).__name__}: {str(exc)[:160]}"
    alternative = alternative_present(module, (module_name, path)) if why and _missing(why) else None
    if alternative is not None:
        return SeamFit(module_name, path, ABSENT, f"not in this verl; {alternative} is wrapped instead", records)
    return SeamFit(module_name, path, MISFIT if why else FITS, why or "", records)


def _missing(why: str) -> bool:
    return why.startswith("not found") or "is not defined on" in why


def check_all() -> list[SeamFit]:
    """Every seam of the target table, checked against the importable verl (and engines)."""
    from otel_verl.instrumentation.targets import TARGETS

    return [check_seam(t.module, t.method, t.wrapper, t.records) for t in TARGETS]


def verl_identity() -> dict[str, str]:
    """Which verl was checked: its version and where it was imported from."""
    try:
        import verl

        version = getattr(verl, "__version__", "?")
        return {"version": str(version), "path": str(getattr(verl, "__file__", "?"))}
    except Exception as exc:
        return {"version": "not importable", "path": f"{type(exc).__name__}: {exc}"}


def main() -> None:
    """``python -m otel_verl.instrumentation.seam_check``: the check as one JSON document on stdout (what
    ``otel-verl check-seams --verl-source`` runs with the source tree first on ``PYTHONPATH``)."""
    import json
    import logging
    import warnings

    logging.disable(logging.WARNING)
    warnings.simplefilter("ignore")
    seams = [fit.as_dict() for fit in check_all()]
    print(json.dumps({"verl": verl_identity(), "seams": seams}))


if __name__ == "__main__":
    main()
