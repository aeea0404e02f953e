"""A simulated run as the seed's logs: ``step_<n>/worker_<rank>.jsonl`` as its ``SGLangLogManager`` writes them.

The lines are written by ``benchmarks/gen_seed_logs.py`` (:func:`log_worker_step`, :func:`close_step`) from the
run model's timings instead of its own draws, so event names, ``extra`` keys and key order are the seed's.
How the model's parts map onto the seed's events:

=======================================  ==========================================================
model                                    seed event
=======================================  ==========================================================
worker's preprocessing (``start``)       ``preprocessing_duration``
request start → its first turn           ``pending_state_handling`` (and ``tool_creation_pending_state``)
turn 0's initial preprocessing            ``turn_pre_process`` of turn 0 (later turns: the loop's own step)
call start → engine received it          ``engine_generate_setup``
inside the engine (queue … decode)       ``engine_async_generate_actual``
engine end → our call's end              the rest of ``turn_engine_call``
tool-call parsing / the rest             ``turn_tool_parsing`` (tool turns) / ``turn_post_process``
tool call, merge of its answer           ``tool_execution``, ``tool_response_processing``
reward, finalization                     ``reward_calculation``, ``finalization``
last request → the worker's end          the end of ``async_generate_duration``
=======================================  ==========================================================

The seed's logs have no trainer phases, no engine spans and (in this model) no over-sampling aborts. A stall
moves every line of the worker after it (:class:`~benchmarks.gen_seed_logs.SeedLines`' ``warp``).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from benchmarks.diagnosis.run_model import SimRun
from benchmarks.diagnosis.simulate import RequestTimeline, WorkerTimeline
from benchmarks.gen_seed_logs import SeedRequest, SeedTurn, SeedWorkerStep, close_step, log_worker_step


def seed_request(rq: RequestTimeline) -> SeedRequest:
    d = rq.draw
    turns = []
    for t in rq.turns:
        finish = "TOOL_CALL" if t.has_tool else "LENGTH" if t.truncated else "STOP"
        parse = t.parse_end - t.call_end if t.has_tool else 0.0
        turns.append(
            SeedTurn(
                pre=t.call_start - t.start,
                setup=t.arrival - t.call_start,
                gen=t.engine_end - t.arrival,
                tokens=t.tokens,
                engine_tail=t.call_end - t.engine_end,
                parse=parse,
                finish=finish,
                post=t.post_end - t.call_end - parse,
                tool=t.tool_end - t.post_end if t.has_tool else None,
                merge=t.end - t.tool_end,
                tool_tokens=t.draw.tool_tokens,
            )
        )
    reward = rq.end - d.finalization - rq.reward_start
    return SeedRequest(
        d.request_id, d.prompt_tokens, d.prompt_tokens, d.pending, turns, reward, d.finalization, d.actual_share
    )


def _warp(wt: WorkerTimeline, origin: float) -> Callable[[float], float] | None:
    if not wt.stall_s:
        return None
    at, seconds = origin + wt.stall_at, wt.stall_s
    return lambda t: t + seconds if t >= at else t


def write_seed(run: SimRun, root: str | Path) -> Path:
    """Write ``<root>/step_<n>/worker_<rank>.jsonl`` for every step; returns ``root``."""
    root = Path(root)
    t = 0.0
    for step in run.steps:
        gen_start = t + step.lead
        release = gen_start + step.seed_release
        for wt in step.workers:
            draws = SeedWorkerStep(
                preprocessing=wt.first_request - wt.start,
                requests=[(rq.start - wt.first_request, seed_request(rq)) for rq in wt.requests],
                finish=wt.finish,
                sorting=wt.draw.sorting,
            )
            batch_ids = [rq.draw.sample_index for rq in wt.requests]
            lines = log_worker_step(wt.worker, step.step, gen_start + wt.start, draws, _warp(wt, gen_start), batch_ids)
            lines.warp = None  # the release and what follows are written in the stalled timeline already
            close_step(lines, release, wt.draw.tail)
            path = root / f"step_{step.step}" / f"worker_{wt.worker}.jsonl"
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(lines.text())
        t += step.end + step.draw.between
    return root
