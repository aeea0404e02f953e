"""The run's norms (``findings/account/baselines.py``): a step where a whole part moved does not widen that part's
fence."""

from __future__ import annotations

import numpy as np

from otel_verl.analysis.findings.account.baselines import fence, part_norm, steady
from otel_verl.analysis.findings.common.histograms import N_BINS, LogHistogram
from otel_verl.analysis.findings.common.thresholds import Thresholds


def _steps(rng: np.random.Generator, n_steps: int, per_step: int, drift: float = 0.0) -> list[LogHistogram]:
    """Rewards of ~20 ms with a heavy right tail, their median growing by ``drift`` (log) per step."""
    return [LogHistogram.of(0.02 * np.exp(drift * s + rng.normal(0, 0.5, per_step))) for s in range(n_steps)]


def test_a_step_that_moved_whole_is_left_out_of_the_fence() -> None:
    """11 steps, every reward of one step 10 s: merged, that step is 9 % of the values and carries q95 past 10 s,
    hiding a single 10 s reward in another step; left out, the fence of the other steps stays near the run's own
    tail."""
    th = Thresholds()
    for seed in range(20):
        rng = np.random.default_rng(seed)
        hs = _steps(rng, 11, 16)
        moved = int(rng.integers(11))
        hs[moved] = LogHistogram.of(np.full(16, 10.0))
        merged = LogHistogram()
        for h in hs:
            merged.merge(h)
        assert fence(merged, th).fence > 10.0
        assert fence(steady(hs, th)[0], th).fence < 1.0, seed
        # the moved step's own rewards are judged against every step's fence: its move tells them, once
        norm = part_norm(list(enumerate(hs)), th)
        assert norm.moved == {moved} and norm.fence_in(moved) > 10.0 > 1.0 > norm.fence_in(moved - 1)


def test_a_part_that_drifts_keeps_its_steps() -> None:
    """Answers growing over training (the median ×8 from the first step to the last) move no step out: the fence
    of a drifting part is the fence of all its steps."""
    th = Thresholds()
    for seed in range(20):
        hs = _steps(np.random.default_rng(seed), 12, 16, drift=np.log(8) / 11)
        merged = LogHistogram()
        for h in hs:
            merged.merge(h)
        assert fence(steady(hs, th)[0], th).fence == fence(merged, th).fence


def test_too_few_steps_or_too_many_moved_keep_every_step() -> None:
    th = Thresholds()
    rng = np.random.default_rng(0)
    few = _steps(rng, 3, 16)
    few[0] = LogHistogram.of(np.full(16, 10.0))
    assert steady(few, th)[0].n == 48
    half = _steps(rng, 8, 16)
    for i in range(5):  # more than half the steps "moved": that is the run, not a move
        half[i] = LogHistogram.of(np.full(16, 10.0))
    assert steady(half, th)[0].n == 128


def test_the_engine_queue_is_fenced_per_replica() -> None:
    """Replica ``a`` (fewer slots) queues ~1 s on half its calls, ``b`` never queues: over both, the fence of turn
    index 0 lies past 3 s and an 8 s wait on ``b`` barely passes it under load; ``b``'s own fence is a few ms. A
    replica with too few values falls back to the turn's fence."""
    from otel_verl.analysis.findings.account.baselines import MIN_KEY_COUNT, Baselines
    from otel_verl.analysis.findings.common import kinds as k
    from otel_verl.analysis.findings.steps.step_statistics import replica_keys

    th = Thresholds()
    rng = np.random.default_rng(1)
    n = 200
    a = np.where(rng.random(n) < 0.5, rng.lognormal(0, 0.5, n), 1e-5)
    b = rng.uniform(5e-6, 2e-5, n)
    steps = lambda v: [(s, LogHistogram.of(c)) for s, c in enumerate(np.array_split(v, 10))]  # noqa: E731
    norms = {
        (k.PART_ENGINE_QUEUE, "0", "s"): part_norm(steps(np.r_[a, b]), th),
        (k.PART_ENGINE_QUEUE, "0@a", "s"): part_norm(steps(a), th),
        (k.PART_ENGINE_QUEUE, "0@b", "s"): part_norm(steps(b), th),
        (k.PART_ENGINE_QUEUE, "0@c", "s"): part_norm(steps(b[: MIN_KEY_COUNT - 1]), th),
    }
    base = Baselines(norms=norms)
    turn = base.norm(k.PART_ENGINE_QUEUE, "0", "s")
    assert turn is not None and turn.fence > 3.0
    on_b = base.replica_norm(k.PART_ENGINE_QUEUE, "0", "b", "s")
    assert on_b is not None and on_b.fence < 0.1
    assert base.replica_norm(k.PART_ENGINE_QUEUE, "0", "a", "s").fence > 3.0
    assert base.replica_norm(k.PART_ENGINE_QUEUE, "0", "c", "s") is turn
    keys = replica_keys(
        np.array([k.PART_ENGINE_QUEUE, k.PART_ENGINE_QUEUE, k.PART_DECODE], dtype=object),
        np.array(["0", "2", "0"], dtype=object),
        np.array(["sim-1", None, "sim-1"], dtype=object),
    )
    assert list(keys) == ["0@sim-1", None, None]


def test_a_compact_histogram_reads_as_its_dense_self() -> None:
    """A step's histograms are kept packed to the run's end (``LogHistogram.compact``): the same counts, quantiles
    and merges as the dense one, empty, sparse or full, and dense again where a count does not fit the packing."""
    rng = np.random.default_rng(5)
    for i in range(400):
        counts = rng.integers(0, 6, N_BINS) * (rng.random(N_BINS) < rng.random())
        if i % 10 == 0:
            counts[rng.integers(0, N_BINS)] = 2**41
        dense, compact = LogHistogram(counts.copy(), i % 3), LogHistogram.compact(counts, i % 3)
        assert (compact.counts == dense.counts).all() and compact.n == dense.n
        assert [compact.quantile(q) for q in (0.0, 0.5, 0.99)] == [dense.quantile(q) for q in (0.0, 0.5, 0.99)]
        merged = LogHistogram()
        merged.merge(compact)
        compact.merge(dense)
        assert (merged.counts == counts).all() and (compact.counts == 2 * counts).all()


def test_a_clean_runs_most_extreme_value_is_rarely_strong_evidence() -> None:
    """The chance an occurrence is judged by is a clean run's of the same size (:mod:`.chance`): over random clean
    runs (log-normal values of 4-12 keys of 30-300 each, widths 0.3-1.0), the run's most extreme value falls below
    ``evidence_chance`` about that often, not once per few runs. Counted per key with the key's own width, a run
    of 8 keys of 45 answers did in 1 run of 7 (the benchmark's clean false warnings, issue 40)."""
    from otel_verl.analysis.findings.account.baselines import Baselines
    from otel_verl.analysis.findings.common.chance import run_chance

    th, rng, hits, runs = Thresholds(), np.random.default_rng(7), 0, 400
    for _ in range(runs):
        width, keys = rng.uniform(0.3, 1.0), int(rng.integers(4, 13))
        values = [300.0 * np.exp(rng.normal(0, width, int(rng.integers(30, 301)))) for _ in range(keys)]
        every = LogHistogram.of(np.concatenate(values))
        b = Baselines(part_norms={("decode", "tokens"): fence(every, th)})
        least = 1.0
        for v in values:
            norm = fence(LogHistogram.of(v), th)
            least = min(least, float(run_chance(norm.z(np.array([v.max()]))[0], b.tested("decode", "tokens"))))
        hits += least <= th.evidence_chance
    assert hits / runs <= 2.5 * th.evidence_chance, hits
