"""Trace cutting's decisions (:mod:`otel_verl.recording.cutting`) and what the recorder makes of them."""

from __future__ import annotations

from opentelemetry.trace import SpanContext, TraceFlags

from otel_verl import semconv
from otel_verl.config import OtelVerlConfig
from otel_verl.recording import cutting
from otel_verl.recording.cutting import RequestSizes, TraceBudget, worker_allotment
from otel_verl.recording.recorder import RequestRecorder

SAMPLED = TraceFlags(TraceFlags.SAMPLED)
STEP_TRACE = 0xABC
WORKER = SpanContext(STEP_TRACE, 0x11, False, SAMPLED)
STEP = SpanContext(STEP_TRACE, 0x22, False, SAMPLED)


def _budget(allotment: int, limit: int = 5000, reserve: int = 10, per_request: bool = False) -> TraceBudget:
    return TraceBudget(allotment, limit, reserve, RequestSizes(), WORKER, STEP, per_request)


def _link_kinds(links) -> list[str]:
    return [link.attributes[semconv.VERL_LINK_KIND] for link in links]


def test_requests_stay_in_the_step_trace_while_they_fit_then_go_to_a_trace_per_sample_group() -> None:
    budget = _budget(allotment=35, reserve=10)
    placed = [budget.place(sample) for sample in (0, 0, 0, 1, 1, 2)]
    assert placed[:3] == [None, None, None]  # 3 × 10 ≤ 35
    assert placed[3] is not None and placed[3] == placed[4]  # sample 1's two rollouts share a trace
    assert placed[5] not in (None, placed[3])  # sample 2 has its own
    assert budget.own_trace == 3 and budget.used == 30
    assert _link_kinds(budget.links) == ["worker", "step"]
    assert [link.context for link in budget.links] == [WORKER, STEP]


def test_a_sample_group_too_big_for_one_trace_goes_on_in_another() -> None:
    budget = _budget(allotment=0, limit=25, reserve=10)
    first = [budget.place(7) for _ in range(2)]
    third = budget.place(7)
    assert first[0] == first[1] and third not in (None, first[0])


def test_per_request_and_unknown_samples_each_get_a_trace() -> None:
    budget = _budget(allotment=10**6, per_request=True)
    traces = {budget.place(3) for _ in range(4)}
    assert None not in traces and len(traces) == 4  # nothing stays, even with room
    plain = _budget(allotment=0)
    assert len({plain.place(None) for _ in range(3)}) == 3


def test_a_finished_request_frees_its_reservation_and_the_slowest_cut_ones_are_linked_slowest_first() -> None:
    budget = _budget(allotment=20, reserve=10)
    assert budget.place(0) is None and budget.place(0) is None and budget.place(0) is not None
    budget.finished(0, 1, 5, "a", spans=3)  # stayed: took 3 of its 10
    assert budget.used == 13 and budget.sizes.largest == 3
    for i in range(cutting.SLOWEST_LINKS + 5):
        budget.finished(0x99, 100 + i, duration_ns=i, request_id=f"r{i}", spans=4)
    links = budget.slowest_links()
    assert len(links) == cutting.SLOWEST_LINKS
    assert [attrs[semconv.VERL_REQUEST_ID] for _, attrs in links][:3] == ["r14", "r13", "r12"]
    assert {attrs[semconv.VERL_LINK_KIND] for _, attrs in links} == {"slow_request"}
    assert links[0][0].trace_id == 0x99 and links[0][0].span_id == 114


def test_the_estimate_starts_from_the_turn_limit_then_learns() -> None:
    sizes = RequestSizes()
    full, request = sizes.estimate(True, 4), sizes.estimate(False, 4)
    assert full > request > 1
    assert sizes.estimate(True, None) > full  # no limit known: a generous guess
    sizes.observe(40)
    sizes.observe(12)
    assert sizes.estimate(True, 4) == 50  # the largest seen, with a quarter's headroom


def test_each_rollout_gets_half_of_what_the_step_trace_has_left_split_over_its_workers() -> None:
    share, taken = worker_allotment(5000, 8, used=0)
    assert share == (5000 - cutting.STRUCTURE_SPANS - 16) // 2 // 8 and taken <= 5000
    later, more = worker_allotment(5000, 8, used=taken)  # a validation in the same step still finds room
    assert 0 < later < share and taken + more <= 5000
    unknown, _ = worker_allotment(5000, None, used=0)
    assert unknown == (5000 - cutting.STRUCTURE_SPANS - 2 * cutting.UNKNOWN_WORKERS) // 2 // cutting.UNKNOWN_WORKERS


def test_the_budget_follows_both_bounds() -> None:
    assert OtelVerlConfig(trace_max_spans=5000).trace_span_budget() == 5000
    assert OtelVerlConfig(trace_max_spans=0).trace_span_budget() == 0
    small = OtelVerlConfig(trace_max_spans=5000, trace_max_bytes=60_000)
    assert small.trace_span_budget() == 60_000 // 600
    text = OtelVerlConfig(trace_max_spans=5000, capture_content=True, content_max_chars=2048)
    assert text.trace_span_budget() == 4 * 1024 * 1024 // (600 + 2048)


def test_a_cut_request_is_a_root_linked_to_worker_and_step_and_its_children_follow() -> None:
    budget = _budget(allotment=0, reserve=10)
    attrs = {semconv.VERL_STEP: 3, semconv.VERL_SAMPLE_INDEX: 5, semconv.VERL_REQUEST_ID: "q"}
    rec = RequestRecorder(WORKER, dict(attrs), budget=budget)
    sibling = RequestRecorder(WORKER, dict(attrs), budget=budget)
    turn = rec.open_turn()
    rec.carrier(rec.start("text_completion m"))
    rec.finish("completed")
    nodes = rec.nodes
    root = nodes[0]
    assert root.parent is None and rec.trace_id != STEP_TRACE and rec.trace_id == sibling.trace_id
    assert _link_kinds(root.links) == ["worker", "step"]
    assert all(n.context.trace_id == rec.trace_id for n in nodes)
    assert nodes[1].span_id == turn[1] and nodes[1].parent.span_id == root.span_id
    assert budget.sizes.largest == 3 + cutting.REMOTE_SPANS_PER_CARRIER  # request, turn, round trip + 1 carrier
    assert [attrs[semconv.VERL_REQUEST_ID] for _, attrs in budget.slowest_links()] == ["q"]


def test_a_request_that_fits_stays_under_its_worker() -> None:
    budget = _budget(allotment=100, reserve=10)
    rec = RequestRecorder(WORKER, {semconv.VERL_SAMPLE_INDEX: 1}, budget=budget)
    rec.finish("completed")
    assert rec.trace_id == STEP_TRACE and rec.root.parent_id == WORKER.span_id and rec.root.links == ()
    assert budget.slowest_links() == [] and budget.used == 1


def test_the_worker_links_to_every_trace_its_requests_went_to_once() -> None:
    budget = _budget(allotment=0, reserve=10)
    recorders = [
        RequestRecorder(WORKER, {semconv.VERL_SAMPLE_INDEX: sample, semconv.VERL_REQUEST_ID: f"r{i}"}, budget=budget)
        for i, sample in enumerate((0, 0, 1, 2, 2))
    ]
    for rec in recorders:
        rec.finish("completed")
    links = budget.cut_off_links()
    traces = list(dict.fromkeys(rec.trace_id for rec in recorders))  # three sample groups, in order
    assert [context.trace_id for context, _ in links] == traces
    assert [attrs[semconv.VERL_REQUEST_ID] for _, attrs in links] == ["r0", "r2", "r3"]
    first = {rec.trace_id: rec.root.span_id for rec in reversed(recorders)}
    assert [context.span_id for context, _ in links] == [first[t] for t in traces]  # a request of that trace
    assert {attrs[semconv.VERL_LINK_KIND] for _, attrs in links} == {"cut_off"}


def test_the_cut_off_links_stop_at_their_cap() -> None:
    budget = _budget(allotment=0, reserve=1)
    for i in range(cutting.CUT_OFF_LINKS + 3):
        budget.finished(0x1000 + i, 1 + i, 5, None, spans=2)
    links = budget.cut_off_links()
    assert len(links) == cutting.CUT_OFF_LINKS and links[0][0].trace_id == 0x1000


def test_a_request_under_a_v1_group_in_the_step_trace_links_to_the_group_first() -> None:
    group = SpanContext(STEP_TRACE, 0x33, False, SAMPLED)
    budget = _budget(allotment=0, reserve=10)
    rec = RequestRecorder(group, {semconv.VERL_SAMPLE_INDEX: 4}, budget=budget)
    rec.finish("completed")
    assert rec.trace_id != STEP_TRACE and rec.root.parent_id is None
    assert _link_kinds(rec.root.links) == ["group", "worker", "step"]
    assert rec.root.links[0].context == group  # the analyzer's parent: the group, as if it had not been cut


def test_a_request_under_an_async_group_trace_is_never_moved_nor_charged_to_the_step() -> None:
    group = SpanContext(0xDEF, 0x44, False, SAMPLED)  # an async V1 group: a trace of its own
    budget = _budget(allotment=0, reserve=10)
    rec = RequestRecorder(group, {semconv.VERL_SAMPLE_INDEX: 4, semconv.VERL_REQUEST_ID: "a"}, budget=budget)
    rec.finish("completed")
    assert rec.trace_id == 0xDEF and rec.root.parent_id == 0x44 and rec.root.links == ()
    assert budget.used == 0 and budget.own_trace == 0
    assert [context.trace_id for context, _ in budget.cut_off_links()] == [0xDEF]  # the step's side reaches it
