"""Hand-made traces with known numbers, written as spool files in the exact OTLP/JSON line format.

The encoder here is deliberately independent of the package's own writer, so the loader is tested
against the format (int64 as strings, typed AnyValues, optional fields) rather than against itself.
"""

from __future__ import annotations

import json
import random
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from otel_verl import semconv as sc

T0_NS = 1_700_000_000_000_000_000


def any_value(v: Any) -> dict[str, Any]:
    if isinstance(v, bool):
        return {"boolValue": v}
    if isinstance(v, int):
        return {"intValue": str(v)}
    if isinstance(v, float):
        return {"doubleValue": v}
    if isinstance(v, (list, tuple)):
        return {"arrayValue": {"values": [any_value(x) for x in v]}}
    return {"stringValue": str(v)}


@dataclass
class Span:
    trace_id: str
    span_id: str
    parent_id: str
    name: str
    start: float  # seconds after T0
    end: float
    attrs: dict[str, Any]
    file: str  # spool file name, e.g. worker_1.jsonl
    step: int | None
    status: int = 0
    links: list[tuple[str, str]] = field(default_factory=list)

    def otlp(self) -> dict[str, Any]:
        d: dict[str, Any] = {
            "traceId": self.trace_id,
            "spanId": self.span_id,
            "name": self.name,
            "kind": 1,
            "startTimeUnixNano": str(T0_NS + round(self.start * 1e9)),
            "endTimeUnixNano": str(T0_NS + round(self.end * 1e9)),
            "attributes": [{"key": k, "value": any_value(v)} for k, v in self.attrs.items()],
        }
        if self.parent_id:
            d["parentSpanId"] = self.parent_id
        if self.status:
            d["status"] = {"code": self.status, "message": "boom" if self.status == 2 else ""}
        if self.links:
            d["links"] = [{"traceId": t, "spanId": s, "attributes": []} for t, s in self.links]
        return d


class TraceBuilder:
    """Collects spans and writes ``<spool>/<run>/step_<n>/<file>`` with a few spans per line."""

    def __init__(self, seed: int = 0) -> None:
        self.rng = random.Random(seed)
        self.spans: list[Span] = []

    def new_id(self, nbytes: int) -> str:
        return f"{self.rng.getrandbits(8 * nbytes):0{2 * nbytes}x}"

    def span(
        self,
        name: str,
        start: float,
        end: float,
        parent: Span | None = None,
        *,
        trace_id: str | None = None,
        file: str = "trainer.jsonl",
        step: int | None = None,
        status: int = 0,
        **attrs: Any,
    ) -> Span:
        sp = Span(
            trace_id=trace_id or (parent.trace_id if parent else self.new_id(16)),
            span_id=self.new_id(8),
            parent_id=parent.span_id if parent else "",
            name=name,
            start=start,
            end=end,
            attrs=attrs,
            file=file,
            step=step,
            status=status,
        )
        self.spans.append(sp)
        return sp

    def one_turn(self, ends: tuple[float, float, float, float, float], step: int = 1) -> Span:
        """The chain a hand-made request's turn sits in: step ``step`` → phase ``gen`` → worker 0 → request ``r0``
        → turn index 0 (the last three in ``worker_0.jsonl``), starting at 0.0, 0.1, 0.2, 0.3 and 0.3 s and ending
        at ``ends``. Returns the turn span, for the engine calls below it."""
        on_step = {sc.VERL_STEP: step}
        top = self.span(sc.SPAN_STEP, 0.0, ends[0], step=step, **on_step)
        gen = self.span(
            sc.phase_span_name("gen"), 0.1, ends[1], top, step=step, **{"verl.phase.name": "gen"}, **on_step
        )
        w = "worker_0.jsonl"
        worker = self.span(sc.SPAN_WORKER, 0.2, ends[2], gen, step=step, file=w, **{sc.VERL_WORKER_RANK: 0}, **on_step)
        req = self.span(sc.SPAN_REQUEST, 0.3, ends[3], worker, step=step, file=w, **{sc.VERL_REQUEST_ID: "r0"})
        return self.span(sc.SPAN_TURN, 0.3, ends[4], req, step=step, file=w, **{sc.VERL_TURN_INDEX: 0})

    def write(self, spool: Path, run: str = "run1", per_line: int = 7) -> Path:
        groups: dict[tuple[str, str], list[Span]] = defaultdict(list)
        for sp in self.spans:
            sub = f"step_{sp.step}" if sp.step is not None else "no_step"
            groups[(sub, sp.file)].append(sp)
        for (sub, fname), spans in groups.items():
            path = spool / run / sub / fname
            path.parent.mkdir(parents=True, exist_ok=True)
            service = fname.split(".")[0].split("_")[0]
            with path.open("a") as fh:
                for i in range(0, len(spans), per_line):
                    doc = {
                        "resourceSpans": [
                            {
                                "resource": {
                                    "attributes": [{"key": "service.name", "value": {"stringValue": f"verl-{service}"}}]
                                },
                                "scopeSpans": [
                                    {
                                        "scope": {"name": "otel_verl"},
                                        "spans": [s.otlp() for s in spans[i : i + per_line]],
                                    }
                                ],
                            }
                        ]
                    }
                    fh.write(json.dumps(doc) + "\n")
        return spool / run


@dataclass
class Plan:
    """What to plant; ``None`` means a clean run."""

    steps: int = 8
    workers: int = 4
    requests: int = 24
    straggler: tuple[int, int, float, float] | None = None  # step, worker, gap start (s after worker start), gap length
    slow_reward: tuple[int, int, int | tuple[int, ...], float] | None = None  # step, worker, request(s), seconds
    slow_turn: tuple[int, int, int, float] | None = None  # step, worker, request index, turn-1 engine seconds
    aborted: tuple[int, int] | None = None  # step, aborted requests per worker
    pause: tuple[int, int, float, float] | None = None  # step, worker, pause start (s after worker start), length
    slow_phase: tuple[int, str, float] | None = None  # step, trainer phase, extra seconds
    late_start: tuple[int, int, float] | None = (
        None  # step, worker, seconds its requests start late (its preprocessing)
    )
    step_reward: tuple[int, float] | None = None  # step, seconds of every reward in it
    step_decode: tuple[int, float] | None = None  # step, factor on every engine call's seconds (same tokens)
    first_calls: tuple[int, float, float] | None = None  # step, factor on its turn-0 engine calls, on its later ones
    seed: int = 1


PHASES_AFTER = (("reward", 0.8), ("old_log_prob", 2.0), ("update_actor", 4.0), ("update_weights", 1.0))


def build_run(plan: Plan) -> TraceBuilder:
    """A synchronous multi-turn run: gen phase with workers, requests, turns and events, then training phases."""
    b = TraceBuilder(plan.seed)
    rng = random.Random(plan.seed + 100)
    t = 0.0
    for step in range(1, plan.steps + 1):
        step_sp = b.span("verl.step", t, t, step=step, **{"verl.step": step})
        gen = b.span(
            "verl.phase gen", t + 0.2, t + 0.2, step_sp, step=step, **{"verl.phase.name": "gen", "verl.step": step}
        )
        ends: dict[int, float] = {}
        worker_spans: dict[int, Span] = {}
        for w in range(plan.workers):
            ws = gen.start + 0.05
            fname = f"worker_{w}.jsonl"
            g0, glen = -1.0, 0.0
            if plan.straggler and plan.straggler[:2] == (step, w):
                g0, glen = ws + plan.straggler[2], plan.straggler[3]

            def warp(x: float, g0: float = g0, glen: float = glen) -> float:
                return x + glen if g0 >= 0 and x >= g0 else x

            wsp = b.span(
                "verl.rollout.worker",
                ws,
                ws,
                gen,
                step=step,
                file=fname,
                **{"verl.worker.rank": w, "verl.step": step, "verl.worker.num_requests": plan.requests},
            )
            worker_spans[w] = wsp
            n_abort = plan.aborted[1] if plan.aborted and plan.aborted[0] == step else 0
            req_ends = []
            late = plan.late_start[2] if plan.late_start and plan.late_start[:2] == (step, w) else 0.0
            if late:
                b.span(
                    "verl.preprocess", ws, ws + late, wsp, step=step, file=fname, **{"verl.preprocess.kind": "batch"}
                )
            for r in range(plan.requests):
                rs = ws + late + 0.01 * r
                slow_turn = plan.slow_turn and plan.slow_turn[:3] == (step, w, r)
                turns = 2 if slow_turn else rng.choice((1, 1, 2, 2, 3))
                req = b.span("verl.rollout.request", warp(rs), 0, wsp, step=step, file=fname)
                cur = rs
                b.span(
                    "verl.preprocess",
                    warp(cur),
                    warp(cur + 0.03),
                    req,
                    step=step,
                    file=fname,
                    **{"verl.preprocess.kind": "initial_prompt"},
                )
                cur += 0.03
                out_tokens = 0
                for ti in range(turns):
                    turn = b.span(
                        "verl.rollout.turn", warp(cur), 0, req, step=step, file=fname, **{"verl.turn.index": ti}
                    )
                    dur = 1.2 * rng.lognormvariate(0, 0.3)
                    if slow_turn and ti == 1:
                        dur = plan.slow_turn[3]
                    toks = int(dur * 100)
                    if plan.step_decode and plan.step_decode[0] == step:
                        dur *= plan.step_decode[1]
                    if plan.first_calls and plan.first_calls[0] == step:  # an engine warming up (under load)
                        dur *= plan.first_calls[1] if ti == 0 else plan.first_calls[2]
                    out_tokens += toks
                    b.span(
                        "text_completion qwen",
                        warp(cur),
                        warp(cur + dur),
                        turn,
                        step=step,
                        file=fname,
                        **{
                            "gen_ai.operation.name": "text_completion",
                            "gen_ai.usage.input_tokens": 200,
                            "gen_ai.usage.output_tokens": toks,
                            "gen_ai.response.finish_reasons": ["stop"],
                            "verl.engine.stop_reason": "completed",
                        },
                    )
                    cur += dur
                    if ti < turns - 1:
                        b.span("verl.tool_parse", warp(cur), warp(cur + 0.005), turn, step=step, file=fname)
                        cur += 0.005
                        tdur = 0.2 * rng.lognormvariate(0, 0.2)
                        b.span(
                            "execute_tool calc",
                            warp(cur),
                            warp(cur + tdur),
                            turn,
                            step=step,
                            file=fname,
                            **{"gen_ai.tool.name": "calc", "gen_ai.operation.name": "execute_tool"},
                        )
                        cur += tdur
                        b.span(
                            "verl.preprocess",
                            warp(cur),
                            warp(cur + 0.02),
                            turn,
                            step=step,
                            file=fname,
                            **{"verl.preprocess.kind": "merge_context"},
                        )
                        cur += 0.02
                    turn.end = warp(cur)
                status = "completed"
                if r >= plan.requests - n_abort:
                    status = "aborted"
                else:
                    rdur = plan.step_reward[1] if plan.step_reward and plan.step_reward[0] == step else 0.05
                    if plan.slow_reward and plan.slow_reward[:2] == (step, w) and r in _many(plan.slow_reward[2]):
                        rdur = plan.slow_reward[3]
                    b.span(
                        "verl.reward",
                        warp(cur),
                        warp(cur + rdur),
                        req,
                        step=step,
                        file=fname,
                        **{"verl.reward.remote": False},
                    )
                    cur += rdur
                req.end = warp(cur)
                req.attrs.update(
                    {
                        "verl.step": step,
                        "verl.worker.rank": w,
                        "verl.request.id": f"s{step}w{w}r{r}",
                        "verl.sample.index": r // 4,
                        "verl.rollout.n": r % 4,
                        "verl.request.status": status,
                        "verl.request.num_turns": turns,
                        "verl.reward.score": 1.0 if r % 3 else 0.0,
                        "verl.request.response_tokens": out_tokens,
                    }
                )
                req_ends.append(req.end)
            if n_abort:
                # over-sampling: the last requests are cut when the others are done
                done = sorted(req_ends[: plan.requests - n_abort])[-1]
                keep = []
                for sp in b.spans:
                    if sp.step == step and sp.file == fname and sp.name not in ("verl.rollout.worker",):
                        if sp.start >= done:
                            continue
                        sp.end = min(sp.end, done)
                    keep.append(sp)
                b.spans = keep
                req_ends = [min(e, done) for e in req_ends]
            if plan.pause and plan.pause[:2] == (step, w):
                _pause_process(b, step, fname, ws + plan.pause[2], plan.pause[3])
                req_ends = [sp.end for sp in b.spans if sp.step == step and sp.file == fname and sp.name == REQ]
            wsp.end = max(req_ends) + 0.02
            ends[w] = wsp.end
        last = max(ends.values())
        for w, wsp in worker_spans.items():
            b.span(
                "verl.barrier",
                wsp.end,
                last,
                gen,
                step=step,
                file=f"worker_{w}.jsonl",
                **{"verl.worker.rank": w, "verl.step": step, "verl.barrier.slowest_rank": max(ends, key=ends.get)},
            )
        gen.end = last + 0.05
        cur = gen.end
        for name, dur in PHASES_AFTER:
            d = dur * rng.uniform(0.95, 1.05)
            if plan.slow_phase and plan.slow_phase[:2] == (step, name):
                d += plan.slow_phase[2]
            b.span(f"verl.phase {name}", cur, cur + d, step_sp, step=step, **{"verl.phase.name": name})
            cur += d
        step_sp.end = cur + 0.1
        t = step_sp.end + 0.5
    return b


REQ = "verl.rollout.request"


def _many(x: int | tuple[int, ...]) -> tuple[int, ...]:
    return x if isinstance(x, tuple) else (x,)


def _pause_process(b: TraceBuilder, step: int, fname: str, at: float, length: float) -> None:
    """The worker process is paused (CPU starvation, GC) during [at, at + length]: every start or end it
    would have recorded then is recorded when it resumes, in order, a few ms apart (2 ms per paused second)."""

    def resume(x: float) -> float:
        return at + length + (x - at) * 0.002 if at <= x < at + length else x

    for sp in b.spans:
        if sp.step == step and sp.file == fname and sp.name != "verl.rollout.worker":
            sp.start, sp.end = resume(sp.start), resume(sp.end)


PLANTED = Plan(
    straggler=(3, 1, 2.0, 60.0),
    slow_reward=(5, 2, 4, 25.0),
    slow_turn=(6, 0, 7, 30.0),
    aborted=(4, 3),
)


def all_findings(spans_or_tables: Any, thresholds: Any = None) -> list[Any]:
    """The diagnosis's findings (causes and information) of a span table or tables."""
    from otel_verl.analysis import diagnose

    return diagnose(spans_or_tables, thresholds)
