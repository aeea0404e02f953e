"""One cause, one name: what a pattern across steps or peers tells is not told again by the step's own causes.

* a persistent straggler (:mod:`.stragglers`) is the cause of its worker's (replica's) slow part in every step:
  that place's findings of that part go, but in a step where the part ran beyond the pattern (a cause of its own);
  so do its requests' (samples') findings there of that part and measure no further from the norm than the pattern
  reaches (:attr:`Held.fence_ratio`): a worker whose tools take 25× its peers' makes each of its
  requests' tool calls 25× the usual, and told step by step beside the straggler they were warnings that ranked
  it fourth (``bench_diagnosis --classes --seed 11504``, a straggler run); a request 100× the usual there stays;
* a step where the policy behaved differently (:mod:`.behaviour_shift`) explains its parts that behaviour drives:
  the step's findings there that are its usual path running long or its move as a whole step go; an outlier of one
  request or worker stays (it is more than the step's new habit);
* every answer of a step longer than usual (a ``long_response`` of the whole step: its tokens moved on every
  worker) is such a step: told as a behaviour shift.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace
from typing import NamedTuple

from otel_verl.analysis.findings.common import kinds as k
from otel_verl.analysis.findings.common.record import Finding, fmt_s


class Held(NamedTuple):
    """Where a straggler holds (:func:`.stragglers.find_stragglers`): the step causes at its place and part it tells."""

    scope: str
    place: str
    part: str
    beyond: frozenset[int]
    """Steps where the part ran beyond the pattern: a cause of their own there."""
    metric: str
    fence_ratio: float
    """The most its ratio to its peers reaches within the pattern (median + ``shift_z`` × noise): a request's or
    sample's finding there at no more than this is the straggler seen from one request."""


def fold(
    findings: list[Finding],
    stragglers: Iterable[Held],
    shifts: list[Finding],
    explained: Iterable[tuple[int, frozenset[str], bool]],
) -> list[Finding]:
    """``findings`` less those a straggler (scope, place, part; but in the steps beyond its pattern) or a behaviour
    shift (step, parts it explains, whether its answers grew) already tells, with the ``shifts`` (a whole step's
    longer answers told once)."""
    held = list(stragglers)
    places: dict[tuple[str, str, str], frozenset[int]] = {}
    for h in held:
        places[(h.scope, h.place, h.part)] = places.get((h.scope, h.place, h.part), frozenset()) | h.beyond
    by_step = {step: (parts, tokens) for step, parts, tokens in explained}
    out = []
    for f in findings:
        d = f.details
        if f.kind in k.PATTERNS or f.kind not in k.CAUSES:
            out.append(f)
            continue
        scope, part = d.get("scope"), d.get("part")
        place = str(d.get("replica")) if scope == k.SCOPE_REPLICA else str(f.worker)
        if (scope, place, part) in places and not set(f.steps) & places[(scope, place, part)]:
            continue
        if any(_echoes(f, h) for h in held):
            continue
        if len(f.steps) == 1 and f.steps[0] in by_step:
            parts, _ = by_step[f.steps[0]]
            if part in parts and (d.get("tail") or scope == k.SCOPE_STEP):
                continue
        if f.kind == k.LONG_RESPONSE and scope == k.SCOPE_STEP and d.get("metric") == "tokens":
            f = as_behaviour_shift(f)
        out.append(f)
    told = {(s, "tokens") for f in out if f.kind == k.BEHAVIOUR_SHIFT for s in f.steps}
    return out + [f for f in shifts if (f.steps[0], f.details.get("factor")) not in told]


def _echoes(f: Finding, h: Held) -> bool:
    """Whether ``f``, a finding of one request (sample) in a step within the straggler's pattern, is the straggler
    seen from that request: its place and part, its metric, and a ratio to the usual the pattern reaches."""
    d = f.details
    if d.get("scope") in (k.SCOPE_WORKER, k.SCOPE_REPLICA, k.SCOPE_STEP) or d.get("part") != h.part:
        return False
    if d.get("metric") != h.metric or set(f.steps) & h.beyond:
        return False
    if h.scope == k.SCOPE_REPLICA:
        here = d.get("replica") is not None and str(d.get("replica")) == h.place
    else:
        here = f.worker is not None and str(f.worker) == h.place and set(f.workers or [f.worker]) == {f.worker}
    value, usual = d.get("value"), d.get("usual")
    ratio = d.get("ratio") or (value / usual if value and usual else None)
    return here and ratio is not None and 0 < float(ratio) <= h.fence_ratio


def as_behaviour_shift(f: Finding) -> Finding:
    """A whole step's longer answers (a ``long_response`` at step scope) as the behaviour shift it is."""
    d = dict(f.details) | {"factor": "tokens", "metric": "tokens_per_call", "from_kind": f.kind}
    steps = ", ".join(map(str, f.steps))
    message = (
        f"the policy behaved differently in step{'s' if len(f.steps) > 1 else ''} {steps}: every worker's answers "
        f"were longer, {d.get('value', float('nan')):,.0f} tokens against a usual ~{d.get('usual', float('nan')):,.0f}"
        f" per engine call, so the step had more to do, not a slower system: +{fmt_s(f.seconds)}"
    )
    return replace(f, kind=k.BEHAVIOUR_SHIFT, details=d, message=message)
