"""Shared test settings: Ray workers use this interpreter as is (no `uv run` re-launch)."""

import os

os.environ.setdefault("RAY_ENABLE_UV_RUN_RUNTIME_ENV", "0")
os.environ.setdefault("RAY_AUTH_MODE", "disabled")
