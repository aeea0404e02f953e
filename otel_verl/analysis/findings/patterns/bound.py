"""Generation-bound or train-bound: which side of an asynchronous run waited for the other (:func:`find_bound`).

Over the run's asynchronous steps (:mod:`.async_account`), the time each side spent waiting for the other is
compared: the trainer waiting for samples (its idle ratio, verl#7601), and the rollout with nothing to generate
(every group it was given done: its idle time outside pauses). A trainer waiting for samples means the run is
**generation-bound**, a rollout out of work means it is **train-bound**. The rollout's pauses (weight syncs; in
colocate_async asleep while the trainer trains) are idle time (its idle ratio says so) but waiting for neither
side's speed: the sync's cost, or colocate_async's design, so they do not decide the verdict. One run-scoped
finding, ``info``, or ``warning`` when lopsided (the waiting side waited at least ``bound_warn_idle`` of the time
and twice the other); none when both sides waited little, or alike. colocate_async's is always ``info``: its
trainer and replicas take turns on the same GPUs by design. The first step's wait for the first samples
is the pipeline filling, not the run's balance: with later steps it is left out (and the message says so). Its message
ends with what verl offers for that side (its config keys), and says what the weight syncs cost and what drove
them (bytes, replicas, backend) and how they grew over the run.
"""

from __future__ import annotations

import numpy as np

from otel_verl.analysis.findings.common import kinds as k
from otel_verl.analysis.findings.common.record import Finding, fmt_s
from otel_verl.analysis.findings.common.thresholds import Thresholds
from otel_verl.analysis.findings.steps.async_account import AsyncStep
from otel_verl.analysis.findings.steps.step_summary import StepSummary

TRY: dict[tuple[str, str], str] = {
    (k.GENERATION_BOUND, "separate_async"): (
        "more rollout replicas (actor_rollout_ref.rollout.nnodes / n_gpus_per_node), lending the trainer's idle "
        "GPUs to the rollout (trainer.v1.separate_async.hybrid_rollout.enable_switch=true), or a larger staleness "
        "budget so generation runs further ahead (trainer.v1.separate_async.num_warmup_batches, "
        "trainer.v1.sampler.max_off_policy_threshold)"
    ),
    (k.GENERATION_BOUND, "colocate_async"): (
        "the trainer waits while the colocated replicas generate: a faster rollout (more replicas, shorter "
        "responses), a larger trainer.v1.colocate_async.num_warmup_batches, or separate_async, where standalone "
        "rollout GPUs generate while the trainer trains"
    ),
    (k.TRAIN_BOUND, "separate_async"): (
        "more trainer GPUs (trainer.nnodes / n_gpus_per_node) or fewer standalone rollout GPUs; when weight syncs "
        "are a large share, a larger trainer.v1.separate_async.parameter_sync_step syncs less often"
    ),
    (k.TRAIN_BOUND, "colocate_async"): (
        "the colocated replicas sleep while the trainer trains (by design in colocate_async): a faster trainer, "
        "or separate_async, where the rollout generates while the trainer trains"
    ),
}


def find_bound(summaries: list[StepSummary], th: Thresholds) -> list[Finding]:
    """The run's one generation-bound or train-bound finding, or none (sync trainers, balanced sides)."""
    acc = [s.async_account for s in summaries if s.async_account is not None]
    every, filling = acc, next((a.step for a in acc if a.fills_pipeline), None) if len(acc) > 1 else None
    acc = [a for a in acc if a.step != filling]  # the first step waits for the pipeline to fill: not the balance
    wall = sum(a.wall_s for a in acc)
    if not acc or wall <= 0:
        return []
    trainer = sum(a.trainer_wait_s for a in acc) / wall
    rollout = sum(a.rollout_idle_s for a in acc) / wall
    paused = sum(a.rollout_paused_s for a in acc) / wall
    no_work = sum(a.rollout_no_work_s for a in acc) / wall
    idle, other = max(trainer, no_work), min(trainer, no_work)
    if idle < th.bound_min_idle or idle - other < th.bound_min_idle / 2:
        return []
    kind = k.GENERATION_BOUND if trainer > no_work else k.TRAIN_BOUND
    mode = max({a.mode for a in acc}, key=[a.mode for a in acc].count)
    # colocate_async time-shares the GPUs: the trainer waits while the replicas generate as they sleep while it
    # trains, by design both ways; its balance is information (what moved is told by the steps' causes)
    warn = idle >= th.bound_warn_idle and idle >= 2 * other and mode != "colocate_async"
    pause_why = "weight syncs, asleep while the trainer trained" if mode == "colocate_async" else "weight syncs"
    over = f"{len(acc)} steps" + (f"; step {filling}, the pipeline filling, left out" if filling is not None else "")
    steps = [a.step for a in acc]
    sync = weight_sync_story(every)  # the syncs of every step: what drove them
    if kind == k.GENERATION_BOUND:
        what = (
            f"Generation-bound: the trainer waited for samples {trainer:.0%} of its step time "
            f"({fmt_s(trainer * wall)} of {fmt_s(wall)} over {over}), while the rollout ran out of work "
            f"{no_work:.0%} (idle {rollout:.0%} in all, paused {paused:.0%}: {pause_why})"
        )
    else:
        what = (
            f"Train-bound: the rollout had nothing to generate {no_work:.0%} of the step time (every group it was "
            f"given done; idle {rollout:.0%} in all, paused {paused:.0%}: {pause_why}), while the trainer waited "
            f"for samples {trainer:.0%} ({fmt_s(trainer * wall)} of {fmt_s(wall)} over {over})"
        )
    evidence = [e for a in acc for e in a.evidence][:20]
    return [
        Finding(
            kind=kind,
            severity="warning" if warn else "info",
            message=f"{what}. {sync['sentence']} To try: {TRY[(kind, mode)]}.",
            metric="wait_ratio",
            value=idle,
            baseline=other,
            steps=steps,
            seconds=trainer * wall if kind == k.GENERATION_BOUND else 0.0,
            peak_s=max(a.trainer_wait_s for a in acc) if kind == k.GENERATION_BOUND else 0.0,
            evidence=evidence,
            details={
                "scope": k.SCOPE_STEP,
                "mode": mode,
                "trainer_idle_ratio": round(trainer, 4),
                "rollout_idle_ratio": round(rollout, 4),
                "rollout_paused_ratio": round(paused, 4),
                "rollout_no_work_ratio": round(no_work, 4),
                "wall_s": round(wall, 4),
                "weight_sync": {key: v for key, v in sync.items() if key != "sentence"},
            },
        )
    ]


def weight_sync_story(acc: list[AsyncStep]) -> dict:
    """What the weight syncs cost per step, what drove them (bytes, replicas, backend) and how they grew:
    the first step's sync against the last's (verl#4896: "why did parameter sync grow")."""
    synced = [a for a in acc if a.weight_syncs]
    if not synced:
        return {"sentence": "No weight sync was traced in these steps."}
    secs = np.array([a.weight_sync_s for a in synced])
    share = secs.sum() / sum(a.wall_s for a in synced)
    first, last = synced[0], synced[-1]
    sizes = np.array([a.weight_sync_bytes for a in synced], dtype=float)
    size = _bytes(float(np.median(sizes[np.isfinite(sizes)]))) if np.isfinite(sizes).any() else ""
    rate = first.weight_sync_bytes / first.weight_sync_s if first.weight_sync_s > 0 else float("nan")
    over = f" over {first.weight_sync_backend}" if first.weight_sync_backend else ""
    n = int(last.weight_sync_replicas) if np.isfinite(last.weight_sync_replicas) else 0
    replicas = f" to {n} replica{'s' if n > 1 else ''}" if n else ""
    moved = f"{size}{replicas}{over}".strip() + (f", {_bytes(rate)}/s" if np.isfinite(rate) else "")
    growth = last.weight_sync_s / first.weight_sync_s if first.weight_sync_s > 0 else float("nan")
    if len(synced) > 1 and np.isfinite(growth) and growth >= 1.5:
        drivers = []
        if _ratio(last.weight_sync_bytes, first.weight_sync_bytes) >= 1.2:
            drivers.append(f"bytes {_bytes(first.weight_sync_bytes)} → {_bytes(last.weight_sync_bytes)}")
        if _ratio(last.weight_sync_replicas, first.weight_sync_replicas) > 1:
            drivers.append(f"replicas {int(first.weight_sync_replicas)} → {int(last.weight_sync_replicas)}")
        if first.weight_sync_backend != last.weight_sync_backend:
            drivers.append(f"backend {first.weight_sync_backend} → {last.weight_sync_backend}")
        why = (
            "with " + ", ".join(drivers)
            if drivers
            else "with the same bytes, replicas and backend: the transfer itself slowed"
        )
        trend = f"; it grew from {fmt_s(first.weight_sync_s)} (step {first.step}) to {fmt_s(last.weight_sync_s)} " + (
            f"(step {last.step}), {why}"
        )
    else:
        trend = "; steady over the run" if len(synced) > 1 else ""
    sentence = f"Weight syncs took {fmt_s(float(np.median(secs)))} a step ({share:.0%} of it; {moved}){trend}."
    return {
        "sentence": sentence,
        "median_s": round(float(np.median(secs)), 4),
        "share": round(float(share), 4),
        "first_s": round(first.weight_sync_s, 4),
        "last_s": round(last.weight_sync_s, 4),
        "growth": None if not np.isfinite(growth) else round(float(growth), 3),
        "bytes": None if not np.isfinite(last.weight_sync_bytes) else int(last.weight_sync_bytes),
        "replicas": None if not np.isfinite(last.weight_sync_replicas) else int(last.weight_sync_replicas),
        "backend": last.weight_sync_backend,
    }


def _ratio(a: float, b: float) -> float:
    return a / b if np.isfinite(a) and np.isfinite(b) and b > 0 else float("nan")


def _bytes(n: float) -> str:
    if not np.isfinite(n):
        return "? bytes"
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{n:.0f} B"
