"""A finding's message, cause first: "reward took 1.8 s per request on all 12 workers, usually 0.02 s: +22 s"."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pandas as pd

from otel_verl.analysis.findings.causes.waited_for import dispatch_words
from otel_verl.analysis.findings.common import kinds as k
from otel_verl.analysis.findings.common.record import Finding, fmt_per_token, fmt_s
from otel_verl.analysis.findings.common.step_cause import told_as_stall
from otel_verl.analysis.labels import GAP_LABEL

if TYPE_CHECKING:
    from otel_verl.analysis.findings.account.step_account import StepAccount

_WHAT = {
    k.SLOW_REWARD: "reward",
    k.SLOW_PREPROCESS: "preprocessing (chat template, tokenisation)",
    k.SLOW_TOOL_PARSE: "tool-call parsing",
    k.SLOW_PREFILL: "prefill",
    k.SLOW_ENGINE: "engine calls",
    k.ENGINE_QUEUE: "queueing in the engine",
    k.ENGINE_WAIT: "the way to the engine (Ray hops, load balancer)",
    k.SLOW_GAP: GAP_LABEL,
}
"""What a per-request part is called in a sentence."""
PHASE_WORDS = {"update_weights": "the weight sync (update_weights)"}
"""Trainer phases named by what they do where their timer's name does not say it (issue 50)."""


def describe(f: Finding, a: StepAccount, reqs: pd.DataFrame) -> str:
    """The message of one cause: what moved, by how much against usual, where, when, and what it cost."""
    d = f.details
    who = _subject(f, a, reqs)
    usual, value = d.get("usual"), d.get("value")
    when = _steps(f.steps) + dispatch_words(d, f.steps)
    cost = f": +{fmt_s(f.seconds)}" if f.seconds > 0 else ""
    if d.get("degraded"):
        cost = f"; it cost the step only {fmt_s(f.seconds)} because requests overlapped"
        cost += ": info, below a warning's floor, shown so it is seen before it costs more"
    turn = d.get("turn_index")
    of_turn = f" in the engine call of turn index {turn}" if isinstance(turn, int) else ""
    still = f"; the worker stalled: nothing else moved on it for {fmt_s(d['stalled_s'])}" if d.get("stalled_s") else ""
    stall_cost = _stall_cost(d.get("stalled_s") or d.get("value"), f.seconds)
    if told_as_stall(f.kind, d):
        return _stalled_in_engine(f, who, when, stall_cost, of_turn)
    plural = d.get("scope") in (k.SCOPE_STEP, k.SCOPE_SAMPLE) or (d.get("scope") == k.SCOPE_REQUEST and len(reqs) > 1)
    their = "their" if plural else "its"
    if f.kind == k.SLOW_PHASE:
        upto = "up to " if len(f.steps) > 1 else ""
        phase = PHASE_WORDS.get(str(d.get("phase")), str(d.get("phase")))
        return f"{phase} took {upto}{fmt_s(value)} (usually {fmt_s(usual)}) {when}{cost}"
    if f.kind == k.STALL:
        n = d.get("occurrences", "several")
        still_for = f"nothing started or ended for {fmt_s(value)}"
        return f"{who} stalled: {n} requests in flight and {still_for} {when}{stall_cost}"
    if f.kind == k.SLOW_DECODE and d.get("metric") == "rate":
        ratio = d.get("ratio", float("nan"))
        return (
            f"{who} decoded at {_rate(value)}, {ratio:.1f}× the usual {_rate(usual)}{of_turn} {when}{cost}"
            f"{still}{_tail(d)}"
        )
    if f.kind in (k.LONG_RESPONSE, k.SLOW_DECODE) and d.get("metric") == "tokens":
        return f"{who} decoded {value:,.0f} tokens (usually ~{usual:,.0f}){of_turn} {when}{cost}{still}{_tail(d)}"
    if f.kind == k.SLOW_START:
        return (
            f"{who} started {their} first request {fmt_s(value)} into the rollout (usually {fmt_s(usual)}): "
            f"preprocessing, data loading {when}{cost}"
        )
    if f.kind == k.SLOW_FINISH:
        return f"{who} took {fmt_s(value)} after {their} last request to finish (usually {fmt_s(usual)}) {when}{cost}"
    if f.kind == k.SLOW_ROLLOUT_OVERHEAD:
        return f"the rollout ran on {fmt_s(value)} after its last worker finished (usually {fmt_s(usual)}) {when}{cost}"
    if f.kind == k.SLOW_OUTSIDE_PHASES:
        return f"the step spent {fmt_s(value)} outside any trainer phase (usually {fmt_s(usual)}) {when}{cost}"
    what = _WHAT.get(f.kind) or (str(d.get("key")) if f.kind == k.SLOW_TOOL and d.get("key") else "tool calls")
    per = " per request" if d.get("occurrences", 1) > 1 else ""
    place = f"on {who}" if d.get("scope") in (k.SCOPE_STEP, k.SCOPE_WORKER, k.SCOPE_REPLICA) else f"for {who}"
    return f"{what} took {fmt_s(value)}{per}{of_turn} {place}, usually {fmt_s(usual)}, {when}{cost}{still}{_tail(d)}"


def _stall_cost(still: float | None, cost: float) -> str:
    """What a stall cost the step, its length named apart: a stall has two figures, how long nothing moved on the
    worker and how much sooner the step would have ended without it (the peel's drop). Told as "19.2 s" and
    "it cost the step 19.5 s" with nothing saying which was which, a reader saw two numbers for one loss (issue 51):
    one figure when they read alike, else each named in the same clause."""
    if cost <= 0:
        return ""
    if still is None or fmt_s(still) == fmt_s(cost):
        return f"; it cost the step {fmt_s(cost)}"
    return (
        f"; it cost the step {fmt_s(cost)} (the step would have ended that much sooner without it; "
        f"{fmt_s(still)} is how long it stood still)"
    )


_WHERE_IN_ENGINE = {
    k.PART_DECODE: "decoding",
    k.PART_ENGINE_QUEUE: "its queue",
    k.PART_PREFILL: "prefill",
    k.PART_ENGINE_BEFORE: "the way to it",
}


def _stalled_in_engine(f: Finding, who: str, when: str, cost: str, of_turn: str) -> str:
    """The worker stood still while these requests were in an engine call: the stall first (what the user sees
    on the worker), then where the engine's own account (or, without engine spans, the call's tokens) put it."""
    d = f.details
    worker = f"worker {f.workers[0]}" if len(f.workers) == 1 else "the worker"
    head = (
        f"{worker} stalled {when}: nothing else moved on it for {fmt_s(d['stalled_s'])} while {who} waited"
        f"{of_turn or ' in an engine call'}"
    )
    source = "the engine's own account puts the time in" if d.get("by_engine") else "by its tokens, the call spent it"
    where = _WHERE_IN_ENGINE.get(str(d.get("part")), "the engine's other work")
    if d.get("metric") == "rate":
        how = f"{_rate(d.get('value'))}, {d.get('ratio', float('nan')):.1f}× the usual {_rate(d.get('usual'))}"
    elif d.get("metric") == "tokens":
        how = f"{d.get('value', 0):,.0f} tokens, usually ~{d.get('usual', 0):,.0f}"
    else:
        how = f"{fmt_s(d.get('value'))}, usually {fmt_s(d.get('usual'))}"
    return f"{head}; {source} {where}: {how}{cost}"


def _subject(f: Finding, a: StepAccount, reqs: pd.DataFrame) -> str:
    """Who the cause happened to: all workers, a worker, a replica, a prompt's rollouts, a request."""
    d = f.details
    scope = d.get("scope")
    if scope == k.SCOPE_STEP:
        return f"{_all(len(a.summary.workers))} workers"
    if scope == k.SCOPE_WORKER:
        return f"worker {f.worker}"
    if scope == k.SCOPE_REPLICA:
        return f"replica {d.get('replica')}"
    ids = _ids(reqs)
    on = _on(f, d, _shared(reqs, a.summary.requests if a is not None else None))
    if scope == k.SCOPE_SAMPLE:
        return f"{_all(len(reqs))} rollouts of prompt {d.get('sample_index')}{on}"
    if len(ids) == 1:
        return f"request {ids[0]}{on}"
    return f"{len(reqs) or 'several'} requests{on}"


def _all(n: int) -> str:
    return "both" if n == 2 else f"all {n}"


def _on(f: Finding, d: dict[str, Any], shared: str) -> str:
    bits = [shared] if shared else []
    if f.workers:
        bits.append(f"worker {f.workers[0]}" if len(f.workers) == 1 else f"workers {', '.join(map(str, f.workers))}")
    if d.get("replica"):
        bits.append(f"replica {d['replica']}")
    return f" ({', '.join(bits[1:] + bits[:1] if shared else bits)})" if bits else ""


STATUS_WORDS = {"truncated": "cut off at the response length limit"}
"""A request status (``verl.request.status``) in plain words where its name is not plain: verl's ``truncated``
is an answer that reached ``rollout.response_length`` (or the engine's ``length`` stop)."""


def _shared(reqs: pd.DataFrame, step_requests: pd.DataFrame | None = None) -> str:
    """How the requests ended when it was not plain completion, said of one or of all: "cut off at the response
    length limit" for one request, "all cut off at …" for several (a cold trial read "all truncated" of a single
    request, issue 51), and how many of the step's requests ended so (``step_requests``): a third of the demo's
    requests reach the length limit in every step, and "all truncated" beside a stall read as the stall's doing."""
    if reqs.empty or "status" not in reqs:
        return ""
    status = {s for s in reqs["status"] if isinstance(s, str)}
    if len(status) != 1 or "completed" in status:
        return ""
    ended = next(iter(status))
    said = STATUS_WORDS.get(ended, ended)
    n = len(_distinct(reqs)) or len(reqs)
    said = said if n == 1 else f"{'both' if n == 2 else 'all'} {said}"
    step = _distinct(step_requests) if step_requests is not None and "status" in step_requests else None
    if step is None or step.empty:
        return said
    alike = int((step["status"] == ended).sum())
    if alike < n:  # an asynchronous cause told where the trainer waited: its requests are another step's
        return said
    if alike == n:
        return f"{said}, the only {'one' if n == 1 else 'ones'} of the step's {len(step)} requests"
    return f"{said}, as were {alike} of the step's {len(step)} requests"


NAMED_REQUESTS = 20
"""Requests a finding's ``details`` name at most."""


def _distinct(reqs: pd.DataFrame) -> pd.DataFrame:
    """One row per request with a request id. Told apart by their span (its id; a sampled-out one's row), not by
    verl's id: ids repeat (``rollout.full_determinism`` names every request ``det-{priority}``, in every step)."""
    if reqs.empty or "request_id" not in reqs:
        return pd.DataFrame(columns=["request_id", "span_id"])
    named = reqs[[isinstance(r, str) for r in reqs["request_id"]]]
    spans = named["span_id"] if "span_id" in named else pd.Series([None] * len(named), index=named.index)
    rows = named["request_span"] if "request_span" in named else pd.Series([None] * len(named), index=named.index)
    keys = [s if isinstance(s, str) else (r, row) for s, r, row in zip(spans, named["request_id"], rows, strict=True)]
    return named[~pd.Series(keys, index=named.index, dtype=object).duplicated().to_numpy()]


def requests_named(reqs: pd.DataFrame) -> dict[str, list[Any]]:
    """A finding's ``request_ids`` (one per request, so they repeat where verl's do) and ``request_spans`` (each
    one's span id, unique in the run: what the outlier figure picks them by), of its first requests."""
    d = _distinct(reqs).head(NAMED_REQUESTS)
    spans = d["span_id"] if "span_id" in d else pd.Series([None] * len(d), dtype=object)
    return {"request_ids": list(d["request_id"]), "request_spans": [x if isinstance(x, str) else None for x in spans]}


def _ids(reqs: pd.DataFrame) -> list[str]:
    return list(_distinct(reqs)["request_id"])


def _steps(steps: list[int]) -> str:
    if not steps:
        return ""
    return f"in step {steps[0]}" if len(steps) == 1 else f"in steps {', '.join(map(str, steps))}"


def _rate(v: Any) -> str:
    return fmt_per_token(v)


def _tail(d: dict[str, Any]) -> str:
    if not d.get("tail"):
        return ""
    turns = d.get("turns")
    more = f" ({turns} turns)" if turns else ""
    who = "the worker" if d.get("scope") == k.SCOPE_WORKER else "the request"
    ended = (
        "that ended the rollout"
        if d.get("ended_rollout", True)
        else "that would have ended the rollout but for the causes above"
    )
    return f" — {who} {ended}{more}: its path ran long, though none of its calls stood out on its own"
