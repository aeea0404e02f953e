"""``scripts/demo.sh`` runs the command the README says it runs (issue 51, item 14).

The README said it ran ``.venv/bin/otel-verl demo --steps 3 --spool ./traces --plant stall`` while the script ran
``uv run --frozen otel-verl demo …``: a user who copied the README's line to rerun the demo with other flags ran
something else than the demo had.
"""

from __future__ import annotations

import re

from tests.clean_shell import ROOT, VENV_BIN, shell, user_env


def test_demo_script_runs_the_readmes_command() -> None:
    readme = " ".join((ROOT / "README.md").read_text().split())
    said = re.search(r"`scripts/demo\.sh` makes .*? and runs `([^`]+)`", readme)
    assert said, "the README no longer says what scripts/demo.sh runs"
    script = (ROOT / "scripts" / "demo.sh").read_text().splitlines()
    runs = [line.strip() for line in script if line.strip().startswith("exec ") and '"$PY"' not in line]
    assert [r.removeprefix("exec ").removesuffix(' "$@"') for r in runs[-1:]] == [said.group(1)], runs
    # ...and that command runs from the checkout in a user's shell, the venv off its PATH
    assert said.group(1).startswith(str((VENV_BIN / "otel-verl").relative_to(ROOT)) + " demo ")
    done = shell(f"{said.group(1)} --help", user_env(COLUMNS="200"), timeout=120)
    assert done.returncode == 0 and "--plant" in done.stdout, done.stderr[-1000:]
