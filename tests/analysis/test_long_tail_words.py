"""The long tail's sentence holds when a run has no tail to speak of (issue 51, item 17).

A clean demo's finding read "the request that ended each rollout … took 2.4 s (median 2.5 s)" (the last request
faster than the median one, unexplained) and "(partial rollout) saves the same, carrying 0 tokens over" (a saving,
of what?). The figures here are that demo's, per step: (seconds saved, rollouts cut off, tokens still to decode).
"""

from __future__ import annotations

import numpy as np

from otel_verl.analysis.findings.patterns.long_tail import _compare, _what_if

LAST = np.array([3.0, 244.0, 0.15, 2.4, 1.9])
"""The request that ended each rollout: turns, tokens, tool seconds, seconds, seconds into the rollout it started."""
MEDIAN = np.array([2.0, 153.0, 0.06, 2.5, 0.2])


def test_a_last_request_no_longer_than_the_median_is_said_to_have_started_late() -> None:
    said = _compare(LAST, MEDIAN)
    assert "took 2.4 s, no longer than the median request (2.5 s): it ended last because it started late, 1.9 s" in (
        said
    ), said
    longer = _compare(np.array([3.0, 244.0, 0.15, 4.0, 0.1]), MEDIAN)
    assert longer.endswith("took 4.0 s (median 2.5 s)"), longer


def test_a_partial_rollout_with_nothing_left_to_decode_carries_rollouts_not_zero_tokens() -> None:
    said = _what_if([(0.05, 6.0, 0.0), (0.06, 6.0, 0.0), (0.04, 6.0, 0.0)])
    assert "carrying 6 rollouts over, their decoding already done" in said and "0 tokens" not in said, said
    assert "with 22 tokens still to decode" in _what_if([(0.05, 6.0, 22.0)] * 3)


def test_no_tail_saves_nothing_and_says_so() -> None:
    said = _what_if([(0.0, 6.0, 0.0), (0.001, 6.0, 0.0), (0.0, 6.0, 0.0)])
    assert said.startswith("The last 10 % of requests ended with the rest") and "saved 0" not in said, said
