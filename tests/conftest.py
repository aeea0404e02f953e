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
# its collector runs beside the trainer (~5 s of CPU a step at full detail, docs/live.md) and on CI's 2 cores it
# competed with every other demo's simulated engine: slower runs, and planted timings moved (a train-bound run read
# 23 % rollout idle instead of > 50 %).
os.environ.setdefault("OTEL_VERL_LIVE", "false")


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
