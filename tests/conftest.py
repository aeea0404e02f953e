"""Shared test settings: Ray workers use this interpreter as is (no `uv run` re-launch)."""

import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

os.environ.setdefault("RAY_ENABLE_UV_RUN_RUNTIME_ENV", "0")
os.environ.setdefault("RAY_AUTH_MODE", "disabled")
# Tests check the whole span tree (turns and events) unless they pick a level; the default level
# (`request`) has its own tests in tests/instrumentation/test_sampling.py.
os.environ.setdefault("OTEL_VERL_DETAIL", "full")
# The live account (otel_verl/live) is on by default for users; here only the tests that are about it turn it on
# (tests/live, the demo's output, the README's demo: each takes OTEL_VERL_LIVE out of its run's environment). Why:
# its collector runs beside the trainer (~5 s of CPU a step at full detail, docs/live-details.md) and on CI's 2 cores it
# competed with every other demo's simulated engine: slower runs, and planted timings moved (a train-bound run read
# 23 % rollout idle instead of > 50 %).
os.environ.setdefault("OTEL_VERL_LIVE", "false")


SERIAL_MARKERS = ("ray", "backends")
"""Tests marked so start a Ray cluster (a demo run) or the Go-built backends."""
SERIAL_FIXTURES = frozenset({"readme_demo", "demo_planted", "demo_clean", "planted_run", "backends", "emitter_runs"})
"""Session fixtures that start one (a test using them is serial whatever its marks)."""


@pytest.hookimpl(tryfirst=True)  # before `-m` deselects by marker
def pytest_collection_modifyitems(config: Any, items: list[Any]) -> None:
    """Mark ``serial`` every test that starts a Ray cluster, a demo process or the backends. scripts/test.sh runs the
    rest first, on both cores (pytest-xdist), then these, one at a time: their planted timings (a stall, a slow
    phase) and loop-lag comparisons need the machine to themselves, as they had when the suite ran in one process."""
    for item in items:
        if any(item.get_closest_marker(m) for m in SERIAL_MARKERS) or SERIAL_FIXTURES & set(item.fixturenames):
            item.add_marker(pytest.mark.serial)


def pytest_configure(config: Any) -> None:
    if os.environ.get("PYTEST_XDIST_WORKER"):
        _refuse_ray_beside_other_tests()


def _refuse_ray_beside_other_tests() -> None:
    """In the parallel part of the run, a test that starts Ray fails at once, naming the fix, instead of making its
    own timings (and its neighbour's) depend on what else runs."""
    try:
        import ray
    except ImportError:
        return

    def refuse(*args: Any, **kwargs: Any) -> None:
        raise RuntimeError(
            "this test starts a Ray cluster beside other tests (pytest-xdist): mark it `ray` "
            "(tests/conftest.py SERIAL_MARKERS), or use a fixture listed in SERIAL_FIXTURES"
        )

    ray.init = refuse


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: Any) -> None:
    """The reliability scenarios' span counts (created, spooled, delivered, replayed, in Jaeger), also under -q."""
    from tests.reliability import report

    lines = report.summary_lines()
    if lines:
        terminalreporter.section("reliability span counts")
        for line in lines:
            terminalreporter.write_line(line)
        terminalreporter.write_line(f"(written to {report.report_path()})")


@pytest.fixture(scope="session")
def readme_demo() -> Iterator[tuple[subprocess.CompletedProcess[str], list[Path]]]:
    """The README's demo line run once, as a user runs it (tests/test_readme_demo.py says how): its finished process
    (stdout and stderr apart) and the report folders it made. Shared by what it should tell (test_readme_demo.py)
    and what it should print and nothing else (analysis/test_demo_output.py): each run costs CI ~2.5 min."""
    from tests.test_readme_demo import ROOT, readme_demo_command, user_environment

    pytest.importorskip("verl")
    reports, spools = ROOT / "otel-verl-report", ROOT / "traces"
    before = set(reports.iterdir()) if reports.exists() else set()
    spooled = set(spools.iterdir()) if spools.exists() else set()
    done = subprocess.run(
        readme_demo_command(), shell=True, cwd=ROOT, env=user_environment(), capture_output=True, text=True,
        timeout=1200,
    )  # fmt: skip
    new = sorted(set(reports.iterdir()) - before) if reports.exists() else []
    try:
        yield done, new
    finally:
        for path in [*new, *(set(spools.iterdir()) - spooled if spools.exists() else [])]:
            shutil.rmtree(path, ignore_errors=True)
