"""One anomaly row per (occurrence, cause) (``findings/account/one_row.py`` :func:`one_row_each`): the broadest group
that moved tells it, unless the occurrence lies far beyond even the most its groups moved."""

from __future__ import annotations

import pandas as pd

from otel_verl.analysis.findings.account.anomaly_rows import anomaly_rows
from otel_verl.analysis.findings.account.one_row import one_row_each
from otel_verl.analysis.findings.common import kinds as k
from otel_verl.analysis.findings.steps.step_statistics import METRIC_RATE

STALLED_S = 20.0
RATE, USUAL_RATE = 0.309, 0.00163
"""The README demo's stall: a call stalled 20 s decoding 65 tokens, 190× its usual seconds per token."""


def _rows(
    beyond: float, worker_moved: float | None, sample_moved: float, step_moved: float | None = None
) -> pd.DataFrame:
    """One stalled call, as an outlier (its rate ``beyond`` × its fence) and as a member of its prompt's and
    (when it moved) its worker's rollouts: each shifted group gives back ``value × (1 − 1/moved)``."""
    outlier = anomaly_rows(
        [0], k.SLOW_DECODE, k.PART_DECODE, [STALLED_S], k.SCOPE_REQUEST, "", METRIC_RATE, [RATE], [USUAL_RATE], [beyond]
    )
    groups = [(k.SCOPE_SAMPLE, "3", sample_moved)] + ([(k.SCOPE_WORKER, "0", worker_moved)] if worker_moved else [])
    groups += [(k.SCOPE_STEP, "", step_moved)] if step_moved else []
    shifts = [
        anomaly_rows(
            [0],
            k.SLOW_DECODE,
            k.PART_DECODE,
            [STALLED_S * (1 - 1 / moved)],
            scope,
            group,
            METRIC_RATE,
            [RATE],
            [USUAL_RATE],
            moved=[moved],
        )
        for scope, group, moved in groups
    ]
    return pd.concat([outlier, *shifts], ignore_index=True)


def test_a_call_far_beyond_its_groups_moves_is_its_own_whatever_else_moved() -> None:
    """5× its fence, its prompt moved 3.5×: the call's own row (the whole 20 s), not the prompt's 14.4 s; and the
    same when its worker's median moved too (1.4×), whose 5.7 s once stood for the whole stall."""
    for worker in (None, 1.36):
        (row,) = one_row_each(_rows(5.0, worker, 3.55)).itertuples()
        assert row.scope == k.SCOPE_REQUEST and row.x == STALLED_S, worker


def test_a_call_its_group_explains_is_told_by_the_broadest_group() -> None:
    """2× its fence while its worker moved 3×: the worker's move (the broadest group) tells it, with the call's own
    20 s (the worker's share of it, ``1 − 1/3``, is 13.3 s); a call within its fence gives the group's share."""
    (row,) = one_row_each(_rows(2.0, 3.0, 3.55)).itertuples()
    assert row.scope == k.SCOPE_WORKER and row.x == STALLED_S
    within = _rows(2.0, 3.0, 3.55)
    (row,) = one_row_each(within[within["via"] == "shift"]).itertuples()
    assert row.scope == k.SCOPE_WORKER and row.x == STALLED_S * (1 - 1 / 3.0)


def test_a_group_that_moved_a_little_does_not_take_a_call_that_moved_far() -> None:
    """The README demo on 2026-11-29: the whole step decoded 1.43× slower (a short run's step against its others),
    the stalled calls 190×, 5.1× their fence, their prompt's rollouts 6.5×. The step's move gives back 30 % of each
    call, the prompt's 85 %: the prompt tells them (the step told them once: "both workers decoded ...: +6.1 s" of a
    19.4 s excess), with each call's own 20 s (the prompt's share is 17 s). With no other row, the step's is still
    the one."""
    (row,) = one_row_each(_rows(5.1, None, 6.5, step_moved=1.43)).itertuples()
    assert row.scope == k.SCOPE_SAMPLE and row.x == STALLED_S
    for step_moved in (1.43, 3.0):
        step_only = _rows(5.1, None, 6.5, step_moved)
        step_only = step_only[step_only["scope"] == k.SCOPE_STEP]
        (row,) = one_row_each(step_only).itertuples()
        assert row.scope == k.SCOPE_STEP
    # a step that moved 3× gives back 67 % of the call: it is the story, as the broadest group
    (row,) = one_row_each(_rows(2.0, None, 6.5, step_moved=3.0)).itertuples()
    assert row.scope == k.SCOPE_STEP
