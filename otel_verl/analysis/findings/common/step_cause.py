"""A cause as a step tells it: its name and what it cost that step, from this one place for the steps table
(:mod:`otel_verl.analysis.report.step_rows`), the verdict (its headlines, what it says the problems cost) and the live
account's line and ``cause_s``, so that none of them calls one cause by two names or gives it two costs.

One cause, one name (issue 51): a slow decode, a long response or a slow engine call whose worker stood still
meanwhile is told "worker 0 stalled …" (:mod:`..causes.messages`), so it is a ``stall``: its name, and its
``kind`` in findings.json (:func:`as_stall`), as ``demo --stall`` plants one. Which part of the engine call the
time sat in (the diagnosis's judgement before it was told as a stall) stays in ``details.part`` and
``details.engine_kind``.

The seconds are what the cause cost the step: how much sooner the step would have ended without it (the peel's
drop: a finding's ``seconds``, a recurring one's ``details.per_step``). Two other figures are told beside it and
are not it: the step's excess (took − usual: the rest of the step can run a little short or long too) and a
stall's length (how long nothing moved on the worker).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from otel_verl.analysis.findings.common import kinds as k

ENGINE_PARTS = (
    k.PART_DECODE,
    k.PART_ENGINE,
    k.PART_ENGINE_QUEUE,
    k.PART_PREFILL,
    k.PART_ENGINE_OTHER,
    k.PART_ENGINE_BEFORE,
)
"""The parts of an engine call: a worker that stood still while its requests sat in one is told as a stall."""


def _field(f: Any, name: str) -> Any:
    """A finding's field, from a :class:`~.record.Finding` or its findings.json dict alike."""
    return f.get(name) if isinstance(f, Mapping) else getattr(f, name, None)


def told_as_stall(kind: str, details: Mapping[str, Any]) -> bool:
    """Whether a cause of ``kind`` is told as its worker's stall (it waited in an engine call while nothing else
    moved on the worker): the message leads with the stall, and its name is ``stall``."""
    if kind == k.STALL:
        return bool(details.get("engine_kind"))  # a finding :func:`as_stall` named
    return bool(details.get("stalled_s")) and details.get("part") in ENGINE_PARTS


def as_stall(kind: str, details: dict[str, Any]) -> str:
    """A finding's ``kind``: ``stall`` for a cause told as its worker's stall, the engine's judgement of it kept as
    ``details.engine_kind``; else ``kind``."""
    if kind == k.STALL or not told_as_stall(kind, details):
        return kind
    details["engine_kind"] = kind
    return k.STALL


def cause_name(f: Any) -> str:
    """``stall``, ``slow reward``, ``slow phase``: a cause's name, as its message tells it."""
    kind = str(_field(f, "kind") or "")
    details = _field(f, "details") or {}
    return "stall" if told_as_stall(kind, details) else kind.replace("_", " ")


def cause_seconds(f: Any, step: int) -> float:
    """What a cause cost ``step``: its ``details.per_step`` figure when it recurs, else its seconds (0 unknown)."""
    per_step = (_field(f, "details") or {}).get("per_step") or {}
    for value in (per_step.get(str(step)), _field(f, "seconds")):
        if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
            return float(value)
    return 0.0
