"""verl's validation (``RayPPOTrainer._validate`` and V1 ``PPOTrainer._validate``, verl's own code as the
demo drives it) has a span of its own.

Before training it used to leave the validation rollout's worker spans as roots of traces of their own;
now they sit under ``verl.validate``, and at ``test_freq`` the validation nests in the step's ``testing``
phase, as verl's ``fit`` runs it.
"""

from __future__ import annotations

import pytest

from otel_verl import semconv

pytestmark = pytest.mark.ray


def test_validation_rollouts_hang_under_verl_validate(planted_run):
    """The trainer's planted run (conftest's ``planted_run``): validation before training and at test_freq, in its
    last step."""
    opts, spans = planted_run.opts, planted_run.spans
    by_id = spans.set_index("span_id")
    validations = spans[spans.name == semconv.SPAN_VALIDATE].sort_values("step")
    assert list(validations.step) == [0, opts.steps]  # before training, and at test_freq inside the last step
    before, during = validations.iloc[0], validations.iloc[1]
    assert not isinstance(before.parent_id, str) or before.parent_id == ""  # a root: no trainer span above it
    assert by_id.loc[during.parent_id, "name"] == semconv.phase_span_name("testing")
    workers = spans[spans.name == semconv.SPAN_WORKER]
    validating = workers[workers.validate.fillna(False).astype(bool)]
    assert len(validating) >= 2  # both validation passes (V1 chunks its batch its own way)
    assert set(validating.parent_id) == set(validations.span_id)
    # every span of a validation pass is in its validation span's trace, none left as a root of its own
    roots = spans[spans.parent_id.fillna("") == ""]
    if opts.trainer == "legacy":
        assert sorted(roots.name) == sorted([semconv.SPAN_STEP] * opts.steps + [semconv.SPAN_VALIDATE])
    else:
        # verl's V1 fit validates after its step's timer closed (the same iteration: its verl.step), and syncs
        # the weights once before training
        testing = by_id.loc[during.parent_id]
        assert not isinstance(testing.parent_id, str) or testing.parent_id == ""
        assert testing.step == opts.steps
        extra = [semconv.SPAN_VALIDATE, semconv.phase_span_name("testing"), semconv.SPAN_WEIGHT_SYNC]
        assert sorted(roots.name) == sorted([semconv.SPAN_STEP] * opts.steps + extra)
    requests = spans[(spans.name == semconv.SPAN_REQUEST) & spans.validate.fillna(False).astype(bool)]
    assert len(requests) == 2 * opts.prompts  # n=1 in validation (verl's val_kwargs.n)
    assert set(requests.trace_id) == set(validations.trace_id)
