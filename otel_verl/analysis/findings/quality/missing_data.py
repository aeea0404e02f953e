"""missing_data: what the input lacked, said plainly, so a verdict never calls an incomplete run healthy.

Lines skipped with ``--skip-bad-lines`` and steps whose trace holds no worker or no request leave parts of the
account unknown: each is one finding naming what is missing and where, and the verdict says so instead of
"No problems found".
"""

from __future__ import annotations

from otel_verl.analysis.findings.common import kinds
from otel_verl.analysis.findings.common.record import Finding, evidence
from otel_verl.analysis.findings.steps.step_summary import StepSummary
from otel_verl.analysis.read.stats import LoadStats


def find_missing_data(summaries: list[StepSummary], stats: LoadStats | None) -> list[Finding]:
    out: list[Finding] = []
    if stats is not None and stats.bad_lines:
        first = "; ".join(stats.first_bad[:3])
        out.append(
            Finding(
                kind=kinds.MISSING_DATA,
                severity="warning",
                metric="bad_lines_skipped",
                value=float(stats.bad_lines),
                details={"bad_lines_skipped": stats.bad_lines, "first_bad_lines": stats.first_bad[:5]},
                message=(
                    f"{stats.bad_lines} bad input line{'s were' if stats.bad_lines > 1 else ' was'} skipped "
                    f"(--skip-bad-lines), so the spans on {'them' if stats.bad_lines > 1 else 'it'} are missing from "
                    f"the account; first: {first}"
                ),
            )
        )
    no_workers = [s.step for s in summaries if s.workers.empty and s.requests.empty]
    no_requests = [s.step for s in summaries if len(s.workers) and s.requests.empty]
    for steps, what in (
        (no_workers, "no rollout worker or request spans: only the trainer's side of the step is accounted for"),
        (
            no_requests,
            "worker spans but no request spans (a detail level of `worker`, or sampled out): the rollout "
            "is accounted for per worker only",
        ),
    ):
        if steps:
            s0 = next(s for s in summaries if s.step == steps[0])
            out.append(
                Finding(
                    kind=kinds.MISSING_DATA,
                    severity="info",
                    step=steps[0] if len(steps) == 1 else None,
                    steps=steps,
                    metric="steps",
                    value=float(len(steps)),
                    evidence=evidence(s0.trace_id, s0.span_id),
                    details={"steps": steps},
                    message=f"step{'s' if len(steps) > 1 else ''} {', '.join(map(str, steps))} had {what}",
                )
            )
    return out
