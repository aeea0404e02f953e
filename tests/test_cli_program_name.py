"""Click's own error lines name the program as the CLI's hints do, and ``--version`` answers (issue 51, item 13).

A user's shell without the venv on its PATH ran ``.venv/bin/otel-verl analyze`` and was told "Try 'otel-verl
analyze --help'": a command not found there. The hint it prints must run as printed, in that same shell.
"""

from __future__ import annotations

import re

from otel_verl.version import __version__
from tests.clean_shell import ROOT, VENV_BIN, shell, user_env


def test_usage_error_hint_runs_as_printed() -> None:
    env = user_env()
    cli = (VENV_BIN / "otel-verl").relative_to(ROOT)
    wrong = shell(f"{cli} analyze", env, timeout=120)
    assert wrong.returncode == 2, wrong.stdout + wrong.stderr
    assert f"Usage: {cli} analyze" in wrong.stderr, wrong.stderr
    hint = re.search(r"Try '([^']+)' for help", wrong.stderr)
    assert hint and hint.group(1) == f"{cli} analyze --help", wrong.stderr
    helped = shell(hint.group(1), env, timeout=120)
    assert helped.returncode == 0 and f"Usage: {cli} analyze" in helped.stdout, helped.stdout + helped.stderr


def test_version() -> None:
    done = shell(f"{(VENV_BIN / 'otel-verl').relative_to(ROOT)} --version", user_env(), timeout=120)
    assert done.returncode == 0 and done.stdout.strip() == f"otel-verl {__version__}", done.stdout + done.stderr
