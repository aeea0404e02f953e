"""A user's shell for tests that run what the CLI tells the user to run: this checkout's venv off the PATH.

The suite runs under ``uv run`` (scripts/test.sh), whose PATH starts with ``.venv/bin``: a hint spelled
``otel-verl …`` ran there and failed in the user's shell with "command not found" (issue 51).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sysconfig
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
VENV_BIN = Path(sysconfig.get_path("scripts"))
"""The environment the tests run in: its ``bin`` holds ``otel-verl``."""


def clean_path() -> str:
    """This process's PATH without the venv's ``bin``, wherever it appears."""
    dirs = [d for d in os.environ.get("PATH", "").split(os.pathsep) if d and not _same(d, VENV_BIN)]
    return os.pathsep.join(dirs)


def user_env(**extra: str) -> dict[str, str]:
    """A fresh shell's environment: the venv off the PATH, no ``uv run`` markers, none of the suite's settings
    (tests/conftest.py), plus ``extra``. Skips when an ``otel-verl`` from elsewhere is on that PATH: the test would
    prove nothing."""
    drop = ("OTEL_", "RAY_", "PYTEST_", "UV_RUN_", "VIRTUAL_ENV")
    env = {k: v for k, v in os.environ.items() if not k.startswith(drop) and k != "UV"}
    env["PATH"] = clean_path()
    other = shutil.which("otel-verl", path=env["PATH"])
    if other:
        pytest.skip(f"another otel-verl is on the PATH without the venv ({other}): nothing to prove here")
    env.update(extra)
    return env


def shell(command: str, env: dict[str, str], cwd: Path = ROOT, timeout: float = 300) -> subprocess.CompletedProcess:
    """``command`` as a user types it, in bash, in ``cwd``."""
    return subprocess.run(
        ["bash", "-c", command], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout, check=False
    )


def _same(a: str | Path, b: str | Path) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False
