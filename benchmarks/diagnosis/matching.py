"""Does a finding of ``findings.json`` name a planted cause? Kind, step and place, each checked explicitly.

A finding matches a plant when

* **kind**: ``finding.kind == plant.kind``, or one of :data:`EQUIVALENTS` (only where the data cannot tell
  the two apart);
* **step**: the plant's step is in ``finding.steps`` (or is ``finding.step`` when ``steps`` is absent);
* **place**, by the plant's scope:

  ========  ===============================================================================================
  step      ``details.scope == "step"`` (a finding without any ``details.scope`` counts when its
            ``workers`` cover every worker)
  worker    the plant's worker among the finding's ``worker``/``workers``, at most :data:`SMALL_SET` of them,
            and not ``details.scope == "step"``
  request   one of its request ids in ``details.request_ids`` (or ``request_id``), or placed as a worker plant
  sample    ``details.sample_index`` equal, or one of the group's request ids, or placed as a worker plant
  replica   ``details.replica`` equal (compared as text)
  phase     ``details.phase`` equal
  ========  ===============================================================================================

Findings are plain dicts as ``findings.json`` holds them: nothing of the analyzer's classes is imported,
so the benchmark keeps working while the diagnosis's code moves.
"""

from __future__ import annotations

from typing import Any

from benchmarks.diagnosis.effects import Plant
from otel_verl.analysis.findings.common import kinds as k

Finding = dict[str, Any]

EQUIVALENTS: dict[str, frozenset[str]] = {}
"""Planted kind → other finding kinds accepted for it. Empty on purpose: every format the generator writes
carries token counts (so ``slow_decode`` and ``long_response`` can be told from ``slow_engine``) and the
engine-span kinds are planted only where engine spans are written. Add an entry only for a format whose
data cannot tell two kinds apart, and say which."""
INFORMATION_KINDS = frozenset({*k.INFORMATION, k.GENERATION_BOUND, k.TRAIN_BOUND})
"""Kinds that are information, not causes: skipped when asking which finding came first."""
SMALL_SET = 3
"""A worker-local plant is placed right when the finding names at most this many workers, its own among them."""
ALARM_SEVERITIES = frozenset({"warning", "critical"})


def steps_of(f: Finding) -> list[int]:
    steps = f.get("steps")
    if isinstance(steps, list) and steps:
        return [int(s) for s in steps if s is not None]
    return [int(f["step"])] if f.get("step") is not None else []


def workers_of(f: Finding) -> set[int]:
    out = {int(w) for w in f.get("workers") or [] if w is not None}
    if f.get("worker") is not None:
        out.add(int(f["worker"]))
    return out


def details_of(f: Finding) -> dict[str, Any]:
    d = f.get("details")
    return d if isinstance(d, dict) else {}


def request_ids_of(f: Finding) -> set[str]:
    ids = {str(r) for r in details_of(f).get("request_ids") or []}
    if f.get("request_id"):
        ids.add(str(f["request_id"]))
    return ids


def is_cause(f: Finding) -> bool:
    return f.get("kind") not in INFORMATION_KINDS


def is_alarm(f: Finding) -> bool:
    return f.get("severity") in ALARM_SEVERITIES


def kinds_of(f: Finding) -> set[str]:
    """The finding's kind, and for one told as its worker's stall the engine's judgement it kept
    (``details.engine_kind``: a planted slow decode told as the stall it caused still names its plant)."""
    return {str(x) for x in (f.get("kind"), details_of(f).get("engine_kind")) if x}


def kind_matches(plant: Plant, f: Finding) -> bool:
    return bool(kinds_of(f) & {plant.kind, *EQUIVALENTS.get(plant.kind, frozenset())})


def placed(plant: Plant, f: Finding, n_workers: int) -> bool:
    """Whether ``f`` names the place the plant acted on (table in the module docstring)."""
    d = details_of(f)
    scope = d.get("scope")
    workers = workers_of(f)
    if plant.scope == k.SCOPE_STEP:
        return scope == k.SCOPE_STEP or ("scope" not in d and len(workers) >= n_workers)
    if plant.scope == k.SCOPE_PHASE:
        return (d.get("phase") or f.get("phase")) == plant.phase
    if plant.scope == k.SCOPE_REPLICA:
        return d.get("replica") is not None and str(d.get("replica")) == str(plant.replica)
    on_worker = scope != k.SCOPE_STEP and bool(plant.workers) and plant.workers[0] in workers
    on_worker = on_worker and len(workers) <= SMALL_SET
    if plant.scope == k.SCOPE_WORKER:
        return on_worker
    named = bool(request_ids_of(f) & set(plant.request_ids))
    if plant.scope == k.SCOPE_SAMPLE:
        same = d.get("sample_index") is not None and int(d["sample_index"]) == plant.sample_index
        return same or named or on_worker
    if plant.scope == k.SCOPE_REQUEST:
        return named or on_worker
    return False


def matches(plant: Plant, f: Finding, n_workers: int) -> bool:
    return kind_matches(plant, f) and plant.step in steps_of(f) and placed(plant, f, n_workers)


def located(plant: Plant, f: Finding, n_workers: int) -> bool:
    """Right step and place, whatever the kind (how close a wrong answer came)."""
    return is_cause(f) and plant.step in steps_of(f) and placed(plant, f, n_workers)
