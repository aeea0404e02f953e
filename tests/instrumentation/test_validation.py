"""verl's validation (``RayPPOTrainer._validate`` and V1 ``PPOTrainer._validate``, verl's own code as the
demo drives it) has a span of its own.

Before training it used to leave the validation rollout's worker spans as roots of traces of their own;
now they sit under ``verl.validate``, and at ``test_freq`` the validation nests in the step's ``testing``
phase, as verl's ``fit`` runs it.
"""

from __future__ import annotations

import pytest

from otel_verl import semconv
from tests.process_state import reset_tracing

pytestmark = pytest.mark.ray


@pytest.fixture(scope="module", params=["legacy", "v1-sync"])
def validated_run(request, tmp_path_factory):
    import ray

    from otel_verl.analysis.read import load_spans
    from otel_verl.demo.runner import DemoOptions, run_demo

    if ray.is_initialized():  # an earlier in-process test's cluster: the demo starts its own
        ray.shutdown()
    reset_tracing()
    spool = tmp_path_factory.mktemp("spool_validate")
    trainer = request.param
    opts = DemoOptions(
        steps=1,
        workers=2,
        prompts=2,
        n=2,
        ray_cpus=4 if trainer != "legacy" else 2,
        spool=str(spool),
        val_before_train=True,
        test_freq=1,
        trainer=trainer,
    )
    result = run_demo(opts)
    reset_tracing()
    return opts, load_spans(result.spool_dir)


def test_validation_rollouts_hang_under_verl_validate(validated_run):
    opts, spans = validated_run
    by_id = spans.set_index("span_id")
    validations = spans[spans.name == semconv.SPAN_VALIDATE].sort_values("step")
    assert list(validations.step) == [0, 1]  # before training, and at test_freq=1 inside step 1
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
        assert sorted(roots.name) == sorted([semconv.SPAN_STEP, semconv.SPAN_VALIDATE])
    else:
        # verl's V1 fit validates after its step's timer closed (the same iteration: verl.step 1), and syncs
        # the weights once before training
        testing = by_id.loc[during.parent_id]
        assert not isinstance(testing.parent_id, str) or testing.parent_id == ""
        assert testing.step == 1
        assert sorted(roots.name) == sorted(
            [semconv.SPAN_STEP, semconv.SPAN_VALIDATE, semconv.phase_span_name("testing"), semconv.SPAN_WEIGHT_SYNC]
        )
    requests = spans[(spans.name == semconv.SPAN_REQUEST) & spans.validate.fillna(False).astype(bool)]
    assert len(requests) == 2 * opts.prompts  # n=1 in validation (verl's val_kwargs.n)
    assert set(requests.trace_id) == set(validations.trace_id)
