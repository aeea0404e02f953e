"""Shared test settings: Ray workers use this interpreter as is (no `uv run` re-launch)."""

import os
from typing import Any

os.environ.setdefault("RAY_ENABLE_UV_RUN_RUNTIME_ENV", "0")
os.environ.setdefault("RAY_AUTH_MODE", "disabled")
# Tests check the whole span tree (turns and events) unless they pick a level; the default level
# (`request`) has its own tests in tests/instrumentation/test_sampling.py.
os.environ.setdefault("OTEL_VERL_DETAIL", "full")


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: Any) -> None:
    """The reliability scenarios' span counts (created, spooled, delivered, replayed, in Jaeger), also under -q."""
    from tests.reliability import report

    lines = report.summary_lines()
    if lines:
        terminalreporter.section("reliability span counts")
        for line in lines:
            terminalreporter.write_line(line)
        terminalreporter.write_line(f"(written to {report.report_path()})")
