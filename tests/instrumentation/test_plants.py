"""Every planted problem of the demo (``DemoOptions.step_plants``) shows up in the spans that cover its work.

One CPU-demo run per trainer (tests/instrumentation/planted_run.py), one plant per step after a clean step 1;
each check compares the planted step's span with the same span of step 1: the planted span is longer by about
the planted seconds, the spans the plant does not touch are not. Margins are wide (the machine is shared): a plant
adds seconds, the run's ordinary spans last tenths of a second.
"""

from __future__ import annotations

import json

import pandas as pd
import pytest

from otel_verl import semconv as sc
from tests.instrumentation.planted_run import DECODE_K, LONG_TOKENS, PHASE_S, REWARD_S, SECONDS_PER_TOKEN, START_S

pytestmark = pytest.mark.ray


@pytest.fixture
def planted(planted_run):
    """The spans of the trainer's planted run (conftest's ``planted_run``, shared with test_validation.py)."""
    return planted_run.spans


def _phases(spans: pd.DataFrame, step: int) -> dict[str, float]:
    rows = spans[(spans.kind == "phase") & (spans.step == step)]
    return rows.groupby("phase").seconds.sum().to_dict()


def _engine(spans: pd.DataFrame, step: int) -> pd.DataFrame:
    """The step's engine spans (``llm_request``) with their attributes and their request's sample index."""
    rows = spans[(spans.name == sc.ENGINE_SPAN_REQUEST) & (spans.step == step)].copy()
    attrs = rows.extra.map(json.loads)
    rows["completion_tokens"] = attrs.map(lambda a: a[sc.ENGINE_USAGE_COMPLETION_TOKENS])
    rows["decode_s"] = attrs.map(lambda a: a[sc.ENGINE_LATENCY_DECODE])
    rows["sample"] = spans.sample_index.to_numpy()[rows.request_span.to_numpy()]
    rows["turn"] = rows.turn_index
    return rows


def test_slow_phase(planted) -> None:
    base, slow = _phases(planted, 1), _phases(planted, 2)
    assert PHASE_S - 0.5 < slow["update_actor"] - base["update_actor"] < PHASE_S + 1.5, (base, slow)
    for phase, seconds in slow.items():
        if phase != "update_actor":
            assert seconds - base[phase] < PHASE_S / 3, (phase, base, slow)


def test_slow_start(planted) -> None:
    """Worker 1's span starts with worker 0's; its first request starts the planted seconds later."""
    for step, late in ((1, 0.0), (3, START_S)):
        workers = planted[(planted.kind == "worker") & (planted.step == step)].set_index("worker")
        requests = planted[(planted.kind == "request") & (planted.step == step)]
        first = requests.groupby("worker").start_ns.min()
        wait = {int(w): (first[w] - workers.loc[w, "start_ns"]) / 1e9 for w in workers.index}
        assert abs(workers.loc[1, "start_ns"] - workers.loc[0, "start_ns"]) / 1e9 < START_S / 2
        assert wait[0] < START_S / 2, wait
        assert late - 0.3 < wait[1] < late + START_S / 2, (step, wait)


def test_long_response(planted) -> None:
    """Sample 5's first engine calls decode the planted tokens at the usual seconds per token; verl keeps
    the whole response; the other samples' calls stay short."""
    engine = _engine(planted, 4)
    first = engine[engine.turn == 0]
    long, other = first[first["sample"] == 5], first[first["sample"] != 5]
    assert len(long) == 2  # rollout.n
    assert (long.completion_tokens >= LONG_TOKENS).all(), long.completion_tokens
    expected = LONG_TOKENS * SECONDS_PER_TOKEN
    assert ((long.decode_s > 0.8 * expected) & (long.decode_s < 3 * expected)).all(), long.decode_s
    assert other.completion_tokens.max() < 1000 and other.seconds.max() < expected / 2
    requests = planted[(planted.kind == "request") & (planted.step == 4)]
    assert (requests[requests.sample_index == 5].response_tokens >= LONG_TOKENS).all()


def test_step_slow_decode(planted) -> None:
    """Every engine call of step 5 decodes at the planted multiple of the usual seconds per token."""
    per_token = {step: (e.decode_s / e.completion_tokens).median() for step in (1, 5) for e in [_engine(planted, step)]}
    assert DECODE_K / 2 < per_token[5] / per_token[1] < DECODE_K * 2, per_token
    rewards = planted[(planted.name == sc.SPAN_REWARD) & (planted.step == 5)]
    assert rewards.seconds.max() < 1.0


def test_step_slow_reward(planted) -> None:
    rewards = planted[planted.name == sc.SPAN_REWARD]
    assert (rewards[rewards.step == 6].seconds > REWARD_S - 0.1).all()
    assert rewards[rewards.step.isin([1, 2, 3, 4, 5])].seconds.max() < 1.0
    assert _engine(planted, 6).decode_s.median() < 2 * _engine(planted, 1).decode_s.median()
