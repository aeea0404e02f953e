"""Write a synthetic spool of a long multi-turn RL run, in the exact format the instrumentation writes.

Why: issue #5 target 4 needs the analyzer measured on ~2M spans; no real run of that size exists
here. Spans follow the contract the instrumentation emits (names and attributes of
:mod:`otel_verl.semconv`, one trace per step, barrier spans in ``trainer.jsonl``), are written by the
spool's own encoder (:mod:`otel_verl.export.encoding`, the one every otel_verl writer uses) and lines are
``ExportTraceServiceRequest`` batches of up to 512 spans in end-time order, like the SDK's batch
processor feeding :class:`~otel_verl.export.spool.SpoolSpanExporter`.

Shape per step: ``workers`` AgentLoopWorkers × ``requests`` trajectories of 1-8 turns (request →
preprocess, turn → text_completion + tool_parse [+ execute_tool + preprocess merge], reward),
lognormal engine times with a heavy tail (truncated requests), over-sampling aborts on every 10th
step, rare failed requests, and planted anomalies so every detector has work: a 60 s engine stall
on one worker (idle gap → straggler → slow step), a 25 s reward, a 40 s turn-2 engine call.

Usage: ``python benchmarks/gen_spool.py OUT [--spans 2000000 | --steps N --workers W --requests R]``
or ``generate(out, steps=..., ...)`` from Python.
"""

from __future__ import annotations

import argparse
import math
import random
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.util.instrumentation import InstrumentationScope
from opentelemetry.trace import SpanKind, StatusCode

from otel_verl import semconv as sc
from otel_verl.export.encoding import document_line, fields_json

T0_NS = 1_800_000_000_000_000_000
SPANS_PER_REQUEST = 11.2
"""Mean spans per trajectory with the turn mix below (5·turns + 1; mean turns 2.05)."""
TURN_WEIGHTS = {1: 0.40, 2: 0.33, 3: 0.17, 4: 0.06, 5: 0.02, 6: 0.01, 8: 0.01}
PHASES_AFTER = (("reward", 0.8), ("old_log_prob", 2.0), ("adv", 0.3), ("update_actor", 4.0), ("update_weights", 1.0))
MODEL = "qwen2.5-7b"


@dataclass(frozen=True)
class Planted:
    """Anomalies the analyzer must find (steps/workers are clamped to the generated run)."""

    stall: tuple[int, int, float, float] = (37, 5, 6.0, 60.0)
    """step, worker, seconds after the worker start, stall length: every span after it shifts."""
    slow_reward: tuple[int, int, int, float] = (58, 2, 17, 25.0)
    """step, worker, request index, reward seconds."""
    slow_turn: tuple[int, int, int, float] = (73, 6, 40, 40.0)
    """step, worker, request index, turn-2 engine seconds."""
    abort_every: int = 10
    """Every n-th step over-samples: the last 5% of each worker's requests are aborted."""

    def fit(self, steps: int, workers: int, requests: int) -> Planted:
        """The same anomalies moved inside a smaller run (step, worker and request indices wrapped around)."""

        def wrap(p: tuple) -> tuple:
            return (
                1 + (p[0] - 1) % steps,
                p[1] % workers,
                *(((p[2] % requests),) if isinstance(p[2], int) else (p[2],)),
                *p[3:],
            )

        return Planted(wrap(self.stall), wrap(self.slow_reward), wrap(self.slow_turn), self.abort_every)


@dataclass
class GenStats:
    """What was written."""

    spans: int = 0
    lines: int = 0
    files: int = 0
    bytes: int = 0
    seconds: float = 0.0
    requests: int = 0
    planted: dict[str, Any] = field(default_factory=dict)


class SpanIds:
    def __init__(self, rng: random.Random) -> None:
        self.bits = rng.getrandbits

    def span(self) -> str:
        return f"{self.bits(64) | 1:016x}"

    def trace(self) -> str:
        return f"{self.bits(128) | 1:032x}"


class OtlpSpan(dict):
    """A span's fields until it is written (the aborting step still cuts ends and changes statuses); written by
    the spool's own encoder (:func:`otel_verl.export.encoding.fields_json`) in :func:`write_spans`."""


def otlp_span(
    trace_id: str,
    span_id: str,
    parent: str | None,
    name: str,
    start_ns: int,
    end_ns: int,
    attrs: dict[str, Any],
    kind: SpanKind = SpanKind.INTERNAL,
    error: str | None = None,
) -> OtlpSpan:
    return OtlpSpan(t=trace_id, s=span_id, p=parent, n=name, start=start_ns, end=end_ns, a=attrs, k=kind, e=error)


def _encoded(span: OtlpSpan) -> str:
    status = StatusCode.ERROR if span["e"] else StatusCode.UNSET
    return fields_json(
        span["t"], span["s"], span["p"], span["n"], span["start"], span["end"], span["a"], span["k"], status, span["e"]
    )


def otlp_resource(role: str, pid: int, run: str, rank: int | None) -> Resource:
    attrs: dict[str, Any] = {
        "telemetry.sdk.language": "python",
        "telemetry.sdk.name": "opentelemetry",
        "telemetry.sdk.version": "1.45.2",
        "service.instance.id": f"{pid:08x}-bench",
        sc.VERL_PROCESS_ROLE: role,
        sc.VERL_RUN_ID: run,
        "process.pid": pid,
        "telemetry.distro.name": "otel_verl",
        "telemetry.distro.version": "0.1.0",
    }
    if rank is not None:
        attrs[sc.VERL_WORKER_RANK] = rank
    attrs["service.name"] = "verl"
    return Resource(attrs)


_SCOPE = InstrumentationScope("otel_verl", "0.1.0")


def write_spans(
    path: Path,
    resource: Resource,
    spans: list[OtlpSpan],
    rng: random.Random,
    st: GenStats,
    scope: InstrumentationScope | None = None,
) -> None:
    """Spans in end-time order, batched into lines of 64-512 spans (the batch processor's export calls);
    ``scope``: the instrumentation scope of every line (default otel_verl's)."""
    spans.sort(key=lambda s: s["end"])
    path.parent.mkdir(parents=True, exist_ok=True)
    scope = scope or _SCOPE
    out = []
    i = 0
    while i < len(spans):
        n = rng.randint(64, 512)
        out.append(document_line(resource, scope, [_encoded(s) for s in spans[i : i + n]]))
        i += n
        st.lines += 1
    data = b"".join(out)
    path.write_bytes(data)
    st.files += 1
    st.bytes += len(data)
    st.spans += len(spans)


def _turns(rng: random.Random) -> int:
    return rng.choices(list(TURN_WEIGHTS), weights=list(TURN_WEIGHTS.values()))[0]


def _worker(
    step: int,
    w: int,
    requests: int,
    trace_id: str,
    gen_id: str,
    ws_ns: int,
    rng: random.Random,
    ids: SpanIds,
    plant: Planted,
    aborting: bool,
    turns: int | None = None,
) -> tuple[list[OtlpSpan], str, int]:
    """One AgentLoopWorker chunk: worker span + every trajectory below it. Returns spans, worker span id, end."""
    spans: list[OtlpSpan] = []
    wid = ids.span()
    stall_at, stall = -1, 0
    if plant.stall[:2] == (step, w):
        stall_at, stall = ws_ns + int(plant.stall[2] * 1e9), int(plant.stall[3] * 1e9)

    def warp(t: float) -> int:
        ns = int(t)
        return ns + stall if stall_at >= 0 and ns >= stall_at else ns

    base = {sc.VERL_STEP: step, sc.VERL_WORKER_RANK: w}
    reqs: list[tuple[int, OtlpSpan, list[OtlpSpan], int]] = []  # end, request span, children, tokens
    for r in range(requests):
        rid = f"{step:04d}{w:02d}{r:05d}{rng.getrandbits(48):012x}"
        ev = {**base, sc.VERL_REQUEST_ID: rid}
        req_id = ids.span()
        t = ws_ns + r * 8e6 + rng.uniform(0, 2e6)  # submitted ~8 ms apart
        rs = t
        kids: list[OtlpSpan] = []
        pre = rng.lognormvariate(math.log(0.04), 0.3) * 1e9
        kids.append(
            otlp_span(
                trace_id,
                ids.span(),
                req_id,
                sc.SPAN_PREPROCESS,
                warp(t),
                warp(t + pre),
                {**ev, "verl.preprocess.kind": "initial_prompt"},
            )
        )
        t += pre
        n_turns = turns or _turns(rng)
        slow_turn = plant.slow_turn[:3] == (step, w, r)
        if slow_turn:
            n_turns = max(n_turns, 2)
        tokens = 0
        status = "completed"
        prompt = rng.randint(300, 900)
        for ti in range(n_turns):
            turn_id = ids.span()
            ts = t
            out_tok = int(rng.lognormvariate(math.log(250), 0.6))
            dur = out_tok * 0.006 * rng.lognormvariate(0, 0.15)
            reason = "completed"
            if rng.random() < 0.002:  # long tail: generation runs to max_tokens
                out_tok, dur, reason, status = 4096, 4096 * 0.006 * rng.uniform(1.0, 1.6), "length", "truncated"
            if slow_turn and ti == 1:
                dur = plant.slow_turn[3]
            tokens += out_tok
            eng = {
                **ev,
                sc.GEN_AI_OPERATION_NAME: sc.GEN_AI_OP_TEXT_COMPLETION,
                sc.GEN_AI_REQUEST_MODEL: MODEL,
                sc.GEN_AI_SYSTEM: "sglang",
                sc.GEN_AI_USAGE_INPUT_TOKENS: prompt + tokens,
                sc.GEN_AI_USAGE_OUTPUT_TOKENS: out_tok,
                sc.VERL_ENGINE_STOP_REASON: reason,
                sc.GEN_AI_RESPONSE_FINISH_REASONS: [reason],
                sc.VERL_ENGINE_NUM_PREEMPTED: 0,
            }
            kids.append(
                otlp_span(
                    trace_id,
                    ids.span(),
                    turn_id,
                    sc.generate_span_name(MODEL),
                    warp(t),
                    warp(t + dur * 1e9),
                    eng,
                    SpanKind.CLIENT,
                )
            )
            t += dur * 1e9
            last = ti == n_turns - 1 or reason == "length"
            tp = rng.uniform(0.5e6, 2e6)
            kids.append(
                otlp_span(
                    trace_id,
                    ids.span(),
                    turn_id,
                    sc.SPAN_TOOL_PARSE,
                    warp(t),
                    warp(t + tp),
                    {**ev, sc.VERL_TOOL_PARSER: "HermesToolParser", sc.VERL_TOOL_CALL_COUNT: 0 if last else 1},
                )
            )
            t += tp
            if not last:
                tool = rng.lognormvariate(math.log(0.3), 0.5) * 1e9
                kids.append(
                    otlp_span(
                        trace_id,
                        ids.span(),
                        turn_id,
                        sc.tool_span_name("python"),
                        warp(t),
                        warp(t + tool),
                        {**ev, sc.GEN_AI_OPERATION_NAME: sc.GEN_AI_OP_EXECUTE_TOOL, sc.GEN_AI_TOOL_NAME: "python"},
                    )
                )
                t += tool
                merge = rng.lognormvariate(math.log(0.02), 0.3) * 1e9
                kids.append(
                    otlp_span(
                        trace_id,
                        ids.span(),
                        turn_id,
                        sc.SPAN_PREPROCESS,
                        warp(t),
                        warp(t + merge),
                        {**ev, sc.VERL_PREPROCESS_KIND: "merge_context"},
                    )
                )
                t += merge
            kids.append(
                otlp_span(trace_id, turn_id, req_id, sc.SPAN_TURN, warp(ts), warp(t), {**ev, sc.VERL_TURN_INDEX: ti})
            )
            if reason == "length":
                n_turns = ti + 1
                break
        failed = rng.random() < 0.001
        score = 0.0 if failed else float(rng.random() < 0.6)
        if failed:
            status = "failed"
        else:
            rdur = rng.lognormvariate(math.log(0.05), 0.4)
            if plant.slow_reward[:3] == (step, w, r):
                rdur = plant.slow_reward[3]
            kids.append(
                otlp_span(
                    trace_id,
                    ids.span(),
                    req_id,
                    sc.SPAN_REWARD,
                    warp(t),
                    warp(t + rdur * 1e9),
                    {**ev, sc.VERL_REWARD_REMOTE: False, sc.VERL_REWARD_SCORE: score},
                )
            )
            t += rdur * 1e9
        attrs = {
            sc.VERL_STEP: step,
            sc.VERL_SAMPLE_INDEX: (w * requests + r) // 8,
            sc.VERL_ROLLOUT_N: r % 8,
            sc.VERL_VALIDATE: False,
            sc.VERL_REQUEST_AGENT: "tool_agent",
            sc.VERL_WORKER_RANK: w,
            sc.VERL_REQUEST_ID: rid,
            sc.VERL_REQUEST_RESPONSE_TOKENS: tokens,
            sc.VERL_REQUEST_PROMPT_TOKENS: prompt,
            sc.VERL_REWARD_SCORE: score,
            sc.VERL_REQUEST_STATUS: status,
            sc.VERL_REQUEST_NUM_TURNS: n_turns,
        }
        req = otlp_span(
            trace_id,
            req_id,
            wid,
            sc.SPAN_REQUEST,
            warp(rs),
            warp(t),
            attrs,
            error="RuntimeError: tool server unreachable" if failed else None,
        )
        reqs.append((warp(t), req, kids, tokens))
    n_abort = max(1, requests // 20) if aborting else 0
    if n_abort:
        # over-sampling: once all but n_abort requests are done, the rest are cut where they stand
        order = sorted(range(requests), key=lambda i: reqs[i][0])
        cut = reqs[order[requests - n_abort - 1]][0]
        for i in order[requests - n_abort :]:
            _, req, kids, _ = reqs[i]
            kids = [k for k in kids if k["start"] < cut]
            for k in kids:
                k["end"] = min(k["end"], cut)
            req["end"] = cut
            req["a"] = {**req["a"], sc.VERL_REQUEST_STATUS: "aborted"}
            reqs[i] = (cut, req, kids, 0)
    w_end = max(e for e, *_ in reqs) + int(rng.uniform(5e6, 20e6))
    for _, req, kids, _ in reqs:
        spans.append(req)
        spans.extend(kids)
    done = requests - n_abort
    spans.append(
        otlp_span(
            trace_id,
            wid,
            gen_id,
            sc.SPAN_WORKER,
            ws_ns,
            w_end,
            {
                sc.VERL_WORKER_RANK: w,
                sc.VERL_STEP: step,
                sc.VERL_VALIDATE: False,
                sc.VERL_WORKER_NUM_REQUESTS: requests,
                sc.VERL_WORKER_NUM_COMPLETED: done,
                sc.VERL_WORKER_NUM_ABORTED: n_abort,
            },
        )
    )
    return spans, wid, w_end


def generate(
    out: str | Path,
    *,
    steps: int = 100,
    workers: int = 8,
    requests: int = 224,
    seed: int = 0,
    run: str = "bench",
    planted: Planted | None = None,
    progress: bool = False,
    turns: int | None = None,
) -> GenStats:
    """Write ``<out>/<run>/step_<n>/{worker_<rank>,trainer}.jsonl``; returns counts (≈ 11.2 spans per request;
    ``turns``: every request has that many turns instead of the mix, 5·turns + 1 spans each)."""
    t_start = time.perf_counter()
    plant = (planted or Planted()).fit(steps, workers, requests)
    rng = random.Random(seed)
    ids = SpanIds(rng)
    run_dir = Path(out) / run
    st = GenStats(requests=steps * workers * requests)
    st.planted = {
        "stall": plant.stall,
        "slow_reward": plant.slow_reward,
        "slow_turn": plant.slow_turn,
        "aborted_steps": [s for s in range(1, steps + 1) if s % plant.abort_every == 0],
    }
    res_trainer = otlp_resource("trainer", 1000, run, None)
    res_workers = [otlp_resource("agent_loop_worker", 2000 + w, run, w) for w in range(workers)]
    t = T0_NS
    for step in range(1, steps + 1):
        trace_id = ids.trace()
        step_id, gen_id = ids.span(), ids.span()
        gen_start = t + int(0.2e9)
        ends: dict[int, int] = {}
        wids: dict[int, str] = {}
        for w in range(workers):
            spans, wids[w], ends[w] = _worker(
                step,
                w,
                requests,
                trace_id,
                gen_id,
                gen_start + int(rng.uniform(20e6, 80e6)),
                rng,
                ids,
                plant,
                step % plant.abort_every == 0,
                turns,
            )
            write_spans(run_dir / f"step_{step}" / f"worker_{w}.jsonl", res_workers[w], spans, rng, st)
        last = max(ends.values())
        slowest = max(ends, key=lambda k: ends[k])
        trainer: list[OtlpSpan] = [
            otlp_span(
                trace_id,
                ids.span(),
                wids[w],
                sc.SPAN_BARRIER,
                ends[w],
                last,
                {sc.VERL_WORKER_RANK: w, sc.VERL_BARRIER_SLOWEST_RANK: slowest, sc.VERL_STEP: step},
            )
            for w in range(workers)
        ]
        gen_end = last + int(0.05e9)
        trainer.append(
            otlp_span(
                trace_id,
                gen_id,
                step_id,
                sc.phase_span_name("gen"),
                gen_start,
                gen_end,
                {sc.VERL_PHASE_NAME: "gen", sc.VERL_STEP: step},
            )
        )
        cur = gen_end
        for name, dur in PHASES_AFTER:
            d = int(dur * rng.uniform(0.95, 1.05) * 1e9)
            trainer.append(
                otlp_span(
                    trace_id,
                    ids.span(),
                    step_id,
                    sc.phase_span_name(name),
                    cur,
                    cur + d,
                    {sc.VERL_PHASE_NAME: name, sc.VERL_STEP: step},
                )
            )
            cur += d
        step_end = cur + int(0.1e9)
        trainer.append(otlp_span(trace_id, step_id, None, sc.SPAN_STEP, t, step_end, {sc.VERL_STEP: step}))
        write_spans(run_dir / f"step_{step}" / "trainer.jsonl", res_trainer, trainer, rng, st)
        t = step_end + int(0.5e9)
        if progress and step % 10 == 0:
            print(f"  step {step}/{steps}: {st.spans} spans, {st.bytes / 1e6:.0f} MB", file=sys.stderr)
    st.seconds = time.perf_counter() - t_start
    return st


GEN_VERSION = 2
"""Bump when the generated shape changes, so cached spools are rebuilt."""


def cached_spool(spans: int, cache_dir: str | Path | None = None, seed: int = 0) -> tuple[Path, int]:
    """A spool of about ``spans`` spans, generated once under ``cache_dir`` (default ~/.cache/otel_verl/bench).

    Returns (spool root, exact span count). A marker file is written last, so a killed generation is redone.
    """
    steps, workers, requests = shape_for(spans)
    root = Path(cache_dir or Path.home() / ".cache" / "otel_verl" / "bench")
    spool = root / f"spool-{steps}x{workers}x{requests}-seed{seed}-v{GEN_VERSION}"
    marker = spool / ".complete"
    if marker.exists():
        return spool, int(marker.read_text())
    import shutil

    shutil.rmtree(spool, ignore_errors=True)
    st = generate(spool, steps=steps, workers=workers, requests=requests, seed=seed)
    marker.write_text(str(st.spans))
    return spool, st.spans


def shape_for(spans: int, workers: int = 8, requests: int = 224) -> tuple[int, int, int]:
    """(steps, workers, requests) giving about ``spans`` spans: the run gets longer, each step keeps its shape."""
    steps = max(1, round(spans / (workers * requests * SPANS_PER_REQUEST)))
    return steps, workers, requests


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("out", type=Path, help="spool root to write (<out>/<run>/step_<n>/*.jsonl)")
    p.add_argument("--spans", type=int, default=None, help="about this many spans (sets --steps; default 2,000,000)")
    p.add_argument("--steps", type=int, default=None, help="training steps (default: from --spans)")
    p.add_argument("--workers", type=int, default=8, help="AgentLoopWorkers per step (default 8)")
    p.add_argument("--requests", type=int, default=224, help="trajectories per worker per step (default 224)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--run", default="bench", help="run directory name (default bench)")
    p.add_argument("--turns", type=int, default=None, help="turns of every request (default: a mix, mean 2.05)")
    a = p.parse_args(argv)
    steps = a.steps or shape_for(a.spans or 2_000_000, a.workers, a.requests)[0]
    st = generate(
        a.out, steps=steps, workers=a.workers, requests=a.requests, seed=a.seed, run=a.run, progress=True, turns=a.turns
    )
    print(
        f"wrote {st.spans} spans ({st.requests} requests, {steps} steps × {a.workers} workers × {a.requests}) "
        f"in {st.files} files, {st.lines} lines, {st.bytes / 1e6:.0f} MB to {Path(a.out) / a.run} "
        f"in {st.seconds:.1f} s"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
