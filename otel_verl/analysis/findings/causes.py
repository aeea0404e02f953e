"""One finding per cause: the detectors' findings that tell one story are grouped under the most specific one.

Why: one stalled engine call used to come out five ways (the call's turn, its wrapper spans, the straggling
worker, the slow step, the tail request), and the real culprits of other steps fell below the top ranks.
Here each group becomes one finding (the *cause*) with the others as its ``symptoms``, and causes are
ranked by the seconds of step rollout time they lost (:attr:`Finding.seconds`).

Grouping, step by step (only findings of the same step are grouped):

1. *Primary* findings (an idle gap or process stall, a slow engine call of a turn, a slow reward, tool,
   preprocess or tool parse) are causes; a slow *unknown* span (the seed's ``main_loop``, ``turn_end``,
   ``engine_async_generate_actual`` wrappers) on the same worker, overlapping in time and sharing a request
   (or overlapping an idle gap) is a symptom of the more specific one.
2. A tail request is a symptom of the cause naming it (or of the idle gap it was in flight across).
3. A straggling worker is a symptom of the cause on that worker that lost its step most time.
4. A slow step is a symptom of its costliest cause.
Whatever is left over (a straggler with no specific event, a slow step of its own) is a cause itself.
"""

from __future__ import annotations

from otel_verl.analysis.findings.record import SEVERITIES, Finding, fmt_s
from otel_verl.analysis.tables import Tables

SPECIFIC_EVENT_KINDS = ("idle_gap", "turn_anomaly", "slow_event")
ENGINE_ACCOUNT_KIND = "engine_phase"
"""The engine's own split of a slow call (queued / prefill / decode / before it arrived): it refines the
cause naming that call, or is a cause itself when nothing else named it."""
"""Detector kinds that name a call or a gap (causes); the rest describe what a cause did to a step."""

_KNOWN_EVENTS = ("engine", "reward", "preprocess", "tool_parse")
"""slow_event labels of spans otel_verl knows (events.event_label, plus ``tool <name>``); any other label is
an unknown span."""


def specificity(f: Finding) -> int:
    """0 = names the call or the gap, 1 = an unknown (wrapper) span, 2 = a request, 3 = a worker, 4 = a step."""
    if f.kind == "idle_gap" or f.kind == "turn_anomaly":
        return 0
    if f.kind == "slow_event":
        label = str(f.event or "")
        return 0 if label in _KNOWN_EVENTS or label.startswith("tool ") else 1
    return {"tail_request": 2, "straggler_worker": 3, "slow_step": 4}.get(f.kind, 0)


def group_causes(t: Tables, findings: list[Finding]) -> list[Finding]:
    """The detectors' findings grouped into causes, each with its symptoms, ranked by :func:`rank`."""
    ends = _worker_ends(t)
    causes: list[Finding] = []
    by_kind: dict[int, list[Finding]] = {}
    for f in findings:
        by_kind.setdefault(specificity(f) if f.step is not None else 0, []).append(f)
    accounts = [f for f in by_kind.get(0, []) if f.kind == ENGINE_ACCOUNT_KIND]
    for f in sorted(by_kind.get(0, []) + by_kind.get(1, []), key=lambda f: (specificity(f), -f.impact_s)):
        if f.kind == ENGINE_ACCOUNT_KIND:
            continue
        host = next((c for c in causes if specificity(f) == 1 and _same_story(c, f)), None)
        if host is None:
            causes.append(f)
        else:
            host.symptoms.append(f)
    for f in accounts:  # the engine's own account of a slow call refines the cause that names that call
        host = next((c for c in causes if _same_engine_call(c, f)), None)
        if host is None:
            causes.append(f)
        else:
            host.symptoms.append(f)
            if account := f.details.get("engine_account"):
                host.message += f"; by the engine's own account, {account}"
    for f in by_kind.get(2, []):
        host = next((c for c in causes if _explains_request(c, f)), None)
        (host.symptoms if host else causes).append(f)
    for c in causes:
        c.seconds = _step_seconds_lost(ends, c.step, c.worker, _delay(c))
    for f in by_kind.get(3, []):
        host = _costliest([c for c in causes if c.step == f.step and c.worker == f.worker and c.seconds > 0])
        if host is None:
            f.seconds = _step_seconds_lost(ends, f.step, f.worker, f.impact_s)
            causes.append(f)
        else:
            host.symptoms.append(f)
    for f in by_kind.get(4, []):
        host = _costliest([c for c in causes if c.step == f.step and c.seconds > 0])
        if host is None:
            f.seconds = max(0.0, f.impact_s)
            causes.append(f)
        else:
            host.symptoms.append(f)
    for c in causes:  # severity stays the cause's own (what it cost, docs/analyzer.md), not its symptoms'
        if c.kind == "idle_gap" and (turns := stretched_turns(c)):
            c.message += f"; every one of them was in the engine call of turn index {turns}, far slower than usual"
        if c.seconds >= 0.05 and c.step is not None:
            c.message += f"; this cost step {c.step} {fmt_s(c.seconds)} of rollout time"
    return rank(causes)


def rank(causes: list[Finding]) -> list[Finding]:
    """Warnings and worse first, then by seconds of step time lost, then severity, then the detector's cost."""
    return sorted(
        causes,
        key=lambda f: (f.severity == "info", -f.seconds, SEVERITIES.index(f.severity), -(f.impact_s or 0.0), f.kind),
    )


def flatten(causes: list[Finding]) -> list[Finding]:
    """Every detector finding, causes and symptoms alike (for code that looks for one kind)."""
    return [f for c in causes for f in c.with_symptoms()]


def stretched_turns(gap: Finding) -> str:
    """``1`` when every request in flight across a gap was in a slow engine call of turn index 1 (slow
    engine calls of many requests at once leave a gap too); else empty."""
    listed = [x for x in gap.details.get("stretched", []) if x.get("kind") == "turn_anomaly"]
    turns = {x.get("turn_index") for x in listed}
    if not listed or len({x["request_id"] for x in listed}) < gap.details.get("in_flight", 0) or None in turns:
        return ""
    return ", ".join(str(t) for t in sorted(turns))


def _same_story(cause: Finding, f: Finding) -> bool:
    """``f`` (an unknown span) overlaps ``cause`` on the same worker and shares a request, or sits in its gap."""
    if (cause.step, cause.worker) != (f.step, f.worker) or not _overlap(cause, f):
        return False
    return cause.kind == "idle_gap" or bool(_requests(cause) & _requests(f))


def _same_engine_call(cause: Finding, account: Finding) -> bool:
    """``account`` (engine_phase) splits the slow engine call that ``cause`` names: same step and worker, a
    shared request, and the cause is about that call (a slow turn, a gap spent in engine calls, a slow
    engine event)."""
    if (cause.step, cause.worker) != (account.step, account.worker):
        return False
    stretched = {x.get("request_id") for x in cause.details.get("stretched", [])}
    if cause.kind == "idle_gap" and (
        _requests(account) & stretched or str(account.details.get("turn_index")) in stretched_turns(cause).split(", ")
    ):
        return True  # a gap spent in slow engine calls of that turn index
    if not (_requests(cause) & _requests(account)):
        return False
    return cause.kind in ("turn_anomaly", "idle_gap") or (cause.kind == "slow_event" and cause.event == "engine")


def _explains_request(cause: Finding, tail: Finding) -> bool:
    if cause.step != tail.step:
        return False
    if tail.request_id in _requests(cause):
        return True
    return cause.kind == "idle_gap" and cause.worker == tail.worker and _overlap(cause, tail)


def _requests(f: Finding) -> set[str]:
    ids = set(f.details.get("request_ids", []))
    return ids | {f.request_id} if f.request_id else ids


def _overlap(a: Finding, b: Finding) -> bool:
    if a.window_ns is None or b.window_ns is None:
        return False
    return min(a.window_ns[1], b.window_ns[1]) > max(a.window_ns[0], b.window_ns[0])


def _costliest(items: list[Finding]) -> Finding | None:
    return max(items, key=lambda c: c.seconds, default=None)


def _delay(c: Finding) -> float:
    """How much later the cause made its worker finish: a gap's length, a slow call's worker delay."""
    if c.kind in SPECIFIC_EVENT_KINDS:
        return max(0.0, float(c.impact_s or 0.0))
    return 0.0


def _worker_ends(t: Tables) -> dict[int, dict[int, int]]:
    """Per step: each worker's end (ns)."""
    out: dict[int, dict[int, int]] = {}
    w = t.workers
    for step, worker, end in zip(w["step"], w["worker"], w["end_ns"], strict=True):
        if step == step and worker == worker and end == end:
            out.setdefault(int(step), {})[int(worker)] = int(end)
    return out


def _step_seconds_lost(ends: dict[int, dict[int, int]], step: int | None, worker: int | None, delay: float) -> float:
    """How much sooner the step's rollout would have ended had ``worker`` finished ``delay`` s sooner.

    The rollout ends with its last worker; without the cause, this worker would have ended ``delay`` s
    earlier and the step when the later of it and every other worker was done. A cause on a worker that
    was not the last one lost the step nothing, however slow it was.
    """
    if delay <= 0 or step is None or worker is None:
        return 0.0
    mine = ends.get(int(step), {})
    if int(worker) not in mine:
        return delay
    end = mine[int(worker)]
    others = [e for w, e in mine.items() if w != int(worker)]
    step_end = max(mine.values())
    without = max([end - delay * 1e9, *others])
    return max(0.0, min(delay, (step_end - without) / 1e9))
