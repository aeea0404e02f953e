"""Fixtures: planted and clean synthetic runs written as spools, loaded once per session."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from builder import PLANTED, Plan, build_run

from otel_verl.analysis.read import load_spans
from tests.process_state import reset_tracing


@pytest.fixture(scope="session")
def planted_spool(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("planted")
    build_run(PLANTED).write(root)
    return root


@pytest.fixture(scope="session")
def clean_spool(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("clean")
    build_run(Plan(seed=7)).write(root)
    return root


@pytest.fixture(scope="session")
def planted_spans(planted_spool: Path):
    return load_spans(planted_spool)


@pytest.fixture(scope="session")
def clean_spans(clean_spool: Path):
    return load_spans(clean_spool)


# One planted and one clean CPU-demo run per session (each ~1 min), shared by test_demo_findings.py
# and test_legacy_contract.py. Planted, in step 3 only: sample 3 (worker 0's chunk: samples 0-3)
# stalls 24 s on its first engine call (idle gap → straggler worker → slow step, tail requests); on
# the same stalled worker, before its gap, sample 0 spends 8 s extra on the engine call of turn index
# 0 and sample 2 5 s extra in its reward; on worker 1, sample 5 spends 6 s extra on turn index 1's
# engine call and sample 6 3 s extra in its reward. Every step over-samples by 1/8: 2 of 16 requests
# aborted. A validation rollout (step 0) runs first, as in verl, so the workers' warm-up is not in step 1.
DEMO_SIZE = {
    "steps": 4,
    "workers": 2,
    "prompts": 8,
    "n": 2,
    "ray_cpus": 2,
    "val_before_train": True,
    "trainer": "legacy",  # over-sampling and the barrier spans these findings read are the legacy rollout's
}
DEMO_PLANTED = {
    "stall": {3: 24.0},
    "slow_turn": {5: (1, 6.0), 0: (0, 8.0)},
    "slow_reward": {6: 3.0, 2: 5.0},
    "slow_step": 3,
    "oversample": 0.125,
}


def _demo_run(tmp_path_factory: pytest.TempPathFactory, name: str, **planted):
    pytest.importorskip("verl")
    from otel_verl.analysis import analyze
    from otel_verl.demo.runner import DemoOptions, run_demo

    reset_tracing()
    spool = tmp_path_factory.mktemp(f"demo-{name}")
    opts = DemoOptions(spool=str(spool), **{**DEMO_SIZE, **planted})  # planted may resize the run
    try:
        result = run_demo(opts)
    finally:
        reset_tracing()
    spans = load_spans(result.spool_dir)
    out = tmp_path_factory.mktemp(f"report-{name}")
    return opts, spans, analyze(spans, out), out


@pytest.fixture(scope="session")
def demo_planted(tmp_path_factory: pytest.TempPathFactory):
    """(options, span table, analysis result, report dir) of the planted demo run."""
    return _demo_run(tmp_path_factory, "planted", **DEMO_PLANTED)


@pytest.fixture(scope="session")
def demo_clean(tmp_path_factory: pytest.TempPathFactory):
    """The same demo without planted slowness or over-sampling."""
    return _demo_run(tmp_path_factory, "clean")


def demo_spans(tmp_path_factory: pytest.TempPathFactory, name: str, **options):
    """The span table of one CPU-demo run of ``DEMO_SIZE`` with ``options`` on top (no analysis)."""
    pytest.importorskip("verl")
    from otel_verl.demo.runner import DemoOptions, run_demo

    reset_tracing()
    spool = tmp_path_factory.mktemp(f"demo-{name}")
    try:
        result = run_demo(DemoOptions(spool=str(spool), **{**DEMO_SIZE, **options}))
    finally:
        reset_tracing()
    return load_spans(result.spool_dir)


@pytest.fixture(scope="session")
def demo_v1(tmp_path_factory: pytest.TempPathFactory):
    """The span table of a clean run of verl's V1 sync trainer, the default (its updates, weight syncs, sample groups
    and barriers that outlive their worker spans), 2 steps: the Perfetto export's and the README tree's checks."""
    return demo_spans(tmp_path_factory, "v1", trainer="v1-sync", steps=2, ray_cpus=None, val_before_train=False)
