"""missing_worker: a worker rank that sent spans in other steps of the run sent none in this one.

Why: an AgentLoopWorker holds its finished request spans in memory while its rollout chunk is open
(:mod:`otel_verl.export.hold`), so a worker killed mid-chunk (OOM, node loss) leaves no worker or
request span of that step at all, not even orphans (request spans without their worker span are
``incomplete_worker``). Without this finding such a step just looks as if it had fewer workers.
No trainer-side span records how many workers a run has, so the expected ranks are the ones seen in
the run's other steps (validation rollouts left out, like everywhere in the analysis).
"""

from __future__ import annotations

from collections import defaultdict

import pandas as pd

from otel_verl.analysis.findings.common import kinds
from otel_verl.analysis.findings.common.record import Finding, evidence
from otel_verl.analysis.findings.steps.step_summary import StepSummary

MIN_OTHER_STEPS = 1
"""A rank is expected in a step once it sent spans in at least this many other steps: a single-step run
cannot tell a worker that died from one that never existed, so it reports nothing."""


def find_missing_workers(summaries: list[StepSummary]) -> list[Finding]:
    """One warning per (step, rank) with no worker or request span, for ranks seen in other steps."""
    present: set[tuple[int, int]] = set()
    steps_of: dict[int, set[int]] = defaultdict(set)
    for s in summaries:
        ranks = {*s.workers["worker"].to_numpy(dtype=float), *s.requests["worker"].to_numpy(dtype=float)}
        for rank in ranks:
            if pd.isna(rank) or int(rank) < 0:  # no rank read, or -1: the process did not know
                continue
            present.add((s.step, int(rank)))
            steps_of[int(rank)].add(s.step)
    out: list[Finding] = []
    for s in summaries:
        here = sum(1 for rank in steps_of if (s.step, rank) in present)
        for rank in sorted(steps_of):
            seen = len(steps_of[rank])  # all of them other steps: the rank is not in this one
            if (s.step, rank) in present or seen < MIN_OTHER_STEPS:
                continue
            plural = "" if seen == 1 else "s"
            out.append(
                Finding(
                    kind=kinds.MISSING_WORKER,
                    severity="warning",
                    step=s.step,
                    worker=rank,
                    metric="steps_with_worker",
                    value=float(seen),
                    baseline=float(len(summaries) - 1),
                    evidence=evidence(s.trace_id, s.span_id),
                    details={"steps_with_worker": seen, "workers_in_step": here, "workers_in_run": len(steps_of)},
                    message=(
                        f"worker {rank} sent no spans for step {s.step} (it did in {seen} other step{plural}): "
                        "it may have died mid-rollout (OOM, node loss) while holding its finished requests in "
                        "memory; its requests are not in this step's figures"
                    ),
                )
            )
    return out
