"""Trace cutting: which trace a request's spans go to, decided when the request starts.

Why: a step of a real run (4,096 trajectories × up to 30 turns at ``full`` detail) is 100k-500k spans.
As one trace, Tempo refuses it (``max_bytes_per_trace``, 5 MB by default) and Jaeger's UI struggles
(jaeger#2183: failures near 40k spans). So no trace grows past ``OTEL_VERL_TRACE_MAX_SPANS`` (5,000)
and ``OTEL_VERL_TRACE_MAX_BYTES`` (4 MiB) by default (:meth:`otel_verl.config.OtelVerlConfig.trace_span_budget`).

How: the rollout manager gives each worker chunk its share of the step's trace (in spans, beside the
carrier: :func:`worker_allotment`). A request stays in the step's trace while its estimated spans
fit the chunk's share; past that it goes to a trace of its sample group (the ``rollout.n`` trajectories
of one prompt, which GRPO compares), each request there a root span with two links: its worker span
first (the analyzer's parent, :func:`otel_verl.analysis.read.hierarchy.adopt_linked_requests`) and its
step span (when there is one: a validation before training has none). A group's trace is bounded the
same way (a group too big for one goes on in a second). When a rollout's chunks answer, the manager
charges the step's trace what they really put there, so a later rollout in the step (a validation at
``test_freq``) gets the rest.
The step's trace keeps step, phases, worker spans, barriers and the requests that fit. Each worker
span links to every trace its requests went to (a request there, :data:`CUT_OFF_LINKS` at most): Jaeger
shows a link only on the span that holds it, so this is how the step's trace opens a cut-off request;
and to its slowest requests that went elsewhere (:attr:`TraceBudget.slowest`, slowest first).

verl's V1 sample groups (:mod:`otel_verl.instrumentation.rollout.group`): a request under a group span in
the step's trace is placed like any other, and when it goes elsewhere its first link is that group span
(the parent it would have had); the group span itself stays in the step's trace, where the trainer's
update links to it. A request under an async group, a trace of its own already, is never moved.

When: at the request's start, not its end. A request's trace id leaves the process with its first
carrier (every engine round trip hands SGLang/vLLM one when ``OTEL_VERL_ENGINE_LINK`` is on, the
default; a remote reward gets one too), and the engine's own spans carry the trace id they were
handed: a request moved to another trace at its end would leave its engine spans behind, under a
parent that is not in their trace. So the requests that stay are the first ones dispatched, not the
slowest; the worker span's links to its slowest requests are what stands in for those.

The estimate: the largest request this process has seen (its own spans, plus
:data:`REMOTE_SPANS_PER_CARRIER` for each carrier it handed out), with a quarter's headroom; before any
request finished, a first guess from the detail level and the turn limit (:meth:`RequestSizes.estimate`).
It is an estimate: a request larger than any before can push a trace past the bound by its excess.
"""

from __future__ import annotations

import heapq
import itertools
from typing import Any, Protocol

from opentelemetry.trace import Link, SpanContext, TraceFlags

from otel_verl import semconv
from otel_verl.recording.spans import RecordedSpan, new_trace_id

REMOTE_SPANS_PER_CARRIER = 2
"""Spans another process may add per carrier a request hands out: vLLM's ``llm_request`` (1 per round
trip), the RewardLoopWorker's ``verl.reward.compute`` (1); SGLang's own request spans, or a tool's nested
instrumentation, can be more."""
SPANS_PER_TURN = 6
"""A ``full``-detail turn's own spans: turn, engine round trip, tool parse, tool call, context merge, one spare."""
FIRST_GUESS_TURNS = 32
"""Turns assumed per request before any finished, when verl's ``max_assistant_turns`` is not set."""
HEADROOM = 1.25
"""The estimate is the largest request seen × this."""
SLOWEST_LINKS = 10
"""Links from a worker span to its slowest requests in traces of their own."""
CUT_OFF_LINKS = 1000
"""Links from a worker span to the traces its requests went to, at most: a real step's worker sends 64
(4,096 trajectories, 8 workers, groups of 8), one a request with ``OTEL_VERL_TRACE_PER_REQUEST`` (512).
The provider keeps 4,096 links a span (:data:`otel_verl.export.provider.MAX_LINKS`; the SDK's default
is 128); past this cap a trace is still found by its request id and links back to the worker."""
STRUCTURE_SPANS = 64
"""Spans of a step's trace that are not a worker's: step, phases, validation; the manager keeps them free."""
UNKNOWN_WORKERS = 16
"""Workers assumed when a chunk's carrier names no share (an older manager): it takes 1/16 of the budget."""


class FinishedRecording(Protocol):
    """What the budget reads of a finished request (a :class:`~otel_verl.recording.recorder.RequestRecorder`)."""

    root: RecordedSpan
    trace_id: int
    recorded: list[Any] | None
    carriers: int


class RequestSizes:
    """The largest request this process has seen (spans in its trace): what placing a new one reserves."""

    __slots__ = ("largest",)

    def __init__(self) -> None:
        self.largest = 0

    def observe(self, spans: int) -> None:
        if spans > self.largest:
            self.largest = spans

    def estimate(self, events: bool, max_turns: int | None) -> int:
        """Spans to reserve for a request starting now (``events``: ``full`` detail)."""
        if self.largest:
            return max(1, int(self.largest * HEADROOM + 0.5))
        turns = max_turns if max_turns is not None and max_turns > 0 else FIRST_GUESS_TURNS
        per_turn = (SPANS_PER_TURN if events else 0) + REMOTE_SPANS_PER_CARRIER
        return 2 + turns * per_turn + REMOTE_SPANS_PER_CARRIER  # request + first preprocess, turns, reward


def worker_allotment(budget: int, workers: int | None, used: int) -> tuple[int, int]:
    """(each worker chunk's share of a step trace's spans, spans this rollout takes of the trace).

    ``budget``: the trace's limit; ``workers``: chunks of this rollout (None: unknown); ``used``: spans of
    the trace already given to earlier rollouts in it. A rollout gets half of what is left, so a later one
    in the same step (a validation at ``test_freq``) still finds room even where its chunks' answers do
    not come back to settle the account (V1 collects them through its TransferQueue)."""
    n = workers if workers and workers > 0 else UNKNOWN_WORKERS
    structure = STRUCTURE_SPANS if used == 0 else 0
    free = max(0, budget - used - structure - 2 * n)  # each worker: its span and its barrier
    share = free // 2 // n
    return share, structure + 2 * n + share * n


class TraceBudget:
    """One worker chunk's placement of its requests (see the module docstring); pure bookkeeping."""

    __slots__ = (
        "_counter",
        "_groups",
        "allotment",
        "cut_off",
        "limit",
        "links",
        "own_trace",
        "per_request",
        "reserve",
        "sizes",
        "slowest",
        "step_trace_id",
        "used",
        "worker_span_id",
    )

    def __init__(
        self,
        allotment: int,
        limit: int,
        reserve: int,
        sizes: RequestSizes,
        worker: SpanContext | None,
        step: SpanContext | None,
        per_request: bool = False,
    ) -> None:
        self.allotment = allotment
        """Spans this chunk's requests may put in the step's trace."""
        self.limit = limit
        """Spans a trace of sample groups may hold."""
        self.reserve = reserve
        """Spans reserved per request placed (the estimate when the chunk started)."""
        self.sizes = sizes
        self.per_request = per_request
        """``OTEL_VERL_TRACE_PER_REQUEST``: every request a trace of its own, none in the step's."""
        self.used = 0
        """Spans reserved in the step's trace so far."""
        self.own_trace = 0
        """Requests placed in traces of their own."""
        self._groups: dict[Any, list[int]] = {}
        """sample index → [trace id, spans reserved in it] of the group's current trace."""
        links = []
        if worker is not None and worker.is_valid:
            links.append(Link(worker, {semconv.VERL_LINK_KIND: semconv.LinkKind.WORKER.value}))
        if step is not None and step.is_valid and (worker is None or step.span_id != worker.span_id):
            links.append(Link(step, {semconv.VERL_LINK_KIND: semconv.LinkKind.STEP.value}))
        self.links: tuple[Link, ...] = tuple(links)
        """What a request in a trace of its own links to: its worker span, then its step span."""
        valid = worker is not None and worker.is_valid
        self.step_trace_id = worker.trace_id if valid else 0  # type: ignore[union-attr]
        """The step's trace (the worker span's): the one this budget keeps bounded."""
        self.worker_span_id = worker.span_id if valid else 0  # type: ignore[union-attr]
        self.cut_off: dict[int, tuple[int, str | None]] = {}
        """trace id → (span id, request id) of the first request that finished there, for each trace this
        chunk's requests went to (:data:`CUT_OFF_LINKS` at most), in the order they were first seen."""
        self.slowest: list[tuple[int, int, int, int, str | None]] = []
        """Min-heap of the slowest requests placed elsewhere: (duration, order, trace id, span id, request id)."""
        self._counter = itertools.count()

    def cuts(self, parent: SpanContext) -> bool:
        """Whether a request under ``parent`` is placed here: only one in the step's trace (not one under an
        async V1 sample group, a trace of its own already)."""
        return not self.step_trace_id or parent.trace_id == self.step_trace_id

    def links_for(self, parent: SpanContext) -> tuple[Link, ...]:
        """The links of a request moved out from under ``parent``: the parent first when it is not the worker
        span (a V1 sample group), then the worker and step spans."""
        if parent.span_id == self.worker_span_id or not parent.is_valid:
            return self.links
        return (Link(parent, {semconv.VERL_LINK_KIND: semconv.LinkKind.GROUP.value}), *self.links)

    def charge(self, spans: int) -> None:
        """Spans put in the step's trace that are not requests (a V1 sample group's span under this worker)."""
        self.used += spans

    def place(self, sample_index: Any) -> int | None:
        """Where a request starting now goes: None = the step's trace, else the trace id to root it in."""
        reserve = self.reserve
        if not self.per_request and self.used + reserve <= self.allotment:
            self.used += reserve
            return None
        self.own_trace += 1
        if self.per_request or sample_index is None:
            return new_trace_id()
        group = self._groups.get(sample_index)
        if group is None or group[1] + reserve > self.limit:
            group = self._groups[sample_index] = [new_trace_id(), 0]
        group[1] += reserve
        return group[0]

    def request_finished(self, recorder: FinishedRecording) -> None:
        """A request placed here ended (called by the recorder, before its sampling decision)."""
        root = recorder.root
        request_id = root.attributes.get(semconv.VERL_REQUEST_ID)
        if self.step_trace_id:
            in_step = recorder.trace_id == self.step_trace_id
        else:
            in_step = root.parent_id is not None
        self.finished(
            0 if in_step else recorder.trace_id,
            root.span_id,
            (root.end_ns or root.start_ns) - root.start_ns,
            request_id if isinstance(request_id, str) else None,
            1 + len(recorder.recorded or ()) + recorder.carriers * REMOTE_SPANS_PER_CARRIER,
        )

    def finished(self, trace_id: int, span_id: int, duration_ns: int, request_id: str | None, spans: int) -> None:
        """A request ended with ``spans`` spans in its trace: learn its size; in the step's trace (``trace_id``
        0) its reservation becomes what it took, which a request starting later (V1's and partial rollouts'
        resumed requests) may use; elsewhere it is remembered if it is one of the slowest."""
        self.sizes.observe(spans)
        if not trace_id:
            self.used += spans - self.reserve
            return
        if trace_id not in self.cut_off and len(self.cut_off) < CUT_OFF_LINKS:
            self.cut_off[trace_id] = (span_id, request_id)
        entry = (duration_ns, next(self._counter), trace_id, span_id, request_id)
        if len(self.slowest) < SLOWEST_LINKS:
            heapq.heappush(self.slowest, entry)
        elif duration_ns > self.slowest[0][0]:
            heapq.heapreplace(self.slowest, entry)

    def cut_off_links(self) -> list[tuple[SpanContext, dict[str, Any]]]:
        """Links for the worker span: a request in each trace this chunk's requests went to."""
        out = []
        for trace_id, (span_id, request_id) in self.cut_off.items():
            attributes: dict[str, Any] = {semconv.VERL_LINK_KIND: semconv.LinkKind.CUT_OFF.value}
            if request_id is not None:
                attributes[semconv.VERL_REQUEST_ID] = request_id
            out.append((SpanContext(trace_id, span_id, False, _SAMPLED), attributes))
        return out

    def slowest_links(self) -> list[tuple[SpanContext, dict[str, Any]]]:
        """Links for the worker span: its slowest requests in traces of their own, slowest first."""
        out = []
        for _duration, _order, trace_id, span_id, request_id in sorted(self.slowest, reverse=True):
            attributes: dict[str, Any] = {semconv.VERL_LINK_KIND: semconv.LinkKind.SLOW_REQUEST.value}
            if request_id is not None:
                attributes[semconv.VERL_REQUEST_ID] = request_id
            out.append((SpanContext(trace_id, span_id, False, _SAMPLED), attributes))
        return out


_SAMPLED = TraceFlags(TraceFlags.SAMPLED)
