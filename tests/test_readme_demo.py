"""The first thing a user sees: the README's demo command, run as it stands, tells the planted stall.

The README's first set-up command (``bash scripts/demo.sh``: 3 steps, in step 2 the 4 rollouts of prompt 3 on
worker 0 stall 20 s on their first engine call) once printed "No problems found" beside a step ten times slower
than the others (issue 40). This runs that exact line from the README in the repository root, with the user's
environment (none of the test suite's own settings), and reads what it printed and the findings.json it wrote.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest

from tests.clean_shell import clean_path, shell

ROOT = Path(__file__).resolve().parent.parent
SERIOUS = ("warning", "critical")


def readme_demo_command() -> str:
    """The demo line of the README's "Two commands" block."""
    text = (ROOT / "README.md").read_text()
    block = re.search(r"## Two commands.*?```bash\n(.*?)```", text, re.S)
    assert block, "the README has no 'Two commands' bash block"
    line = next((x for x in block.group(1).splitlines() if "demo" in x), None)
    assert line, "the README's first block has no demo command"
    return line.split("#", 1)[0].strip()


def user_environment() -> dict[str, str]:
    """The environment a user's shell would have: the suite's own settings (tests/conftest.py) taken out, and the
    venv off the PATH (the suite runs under ``uv run``, which put it first: issue 51)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "RAY_", "PYTEST_", "UV_RUN_"))}
    env.pop("VIRTUAL_ENV", None)
    env["PATH"] = clean_path()
    return env


@pytest.mark.ray
@pytest.mark.verl
def test_readme_demo_names_the_planted_stall(readme_demo) -> None:
    assert readme_demo_command() == "bash scripts/demo.sh"
    done, new = readme_demo
    printed = " ".join((done.stdout + done.stderr).split())  # the terminal wraps lines anywhere
    assert done.returncode == 0, printed[-3000:]
    assert len(new) == 1, f"one new report folder expected, got {new}"
    doc = json.loads((new[0] / "findings.json").read_text())
    summary, findings = doc["summary"], doc["findings"]
    top = findings[0]
    # the verdict names a problem in step 2, and the first finding is the stall: step 2, worker 0, prompt 3
    assert "No problems found" not in summary["verdict"], summary["verdict"]
    assert "step 2" in summary["verdict"], summary["verdict"]
    assert top["severity"] in SERIOUS, top
    assert top["steps"] == [2] and top["workers"] == [0], top
    assert not [f for f in findings if f["severity"] in SERIOUS and 2 not in f["steps"]], findings
    # the sample by name, and what the stall cost is most of what step 2 lost. Once in about seven runs (2026-11-28)
    # it read "worker 0 decoded at 0.31 s/token, 169.3× the usual ...: +5.3 s": the worker's decode had moved a
    # little too, and its 1.4× move told the 190× calls (findings/account/one_row.py one_row_each, issue 40).
    # Most, not all: one of 5 runs on 2026-11-29 (in CI) told 16.3 s of 19.3, the other four 0.98-1.03 of the excess
    # (that run's spool was not kept to see where the rest went: issue 40's note)
    (step2,) = [s for s in doc["steps"] if s["step"] == 2]
    assert "prompt 3" in top["message"], top["message"]
    assert top["seconds"] > 0.5 * step2["excess_s"], (top["seconds"], step2["excess_s"], top["message"])
    assert "stalled" in top["message"], top["message"]
    # the usual rate is the one the demo's --help gives (issue 51: "the usual 0.818 ms/token" beside "0.4 ms"): the
    # simulated engine's shared capacity doubles 0.4 ms while the step's 64 rollouts decode together; a loaded
    # machine stretches asyncio's sleeps (1.54 ms/token at a load of 81 on 2 cores, 2026-12-07)
    usual = re.search(r"the usual ([\d.]+) ms/token", top["message"])
    assert usual and 0.6 <= float(usual.group(1)) <= 2.4, top["message"]
    # ...and the user reads it on the screen: the headline of step 2 and the stalled worker
    assert "step 2" in printed and "worker 0 stalled" in printed, printed[-3000:]


@pytest.mark.ray
@pytest.mark.verl
def test_the_demo_tells_its_cause_by_one_name_and_one_cost(readme_demo) -> None:
    """Issue 51 (items 3, 4), as the user reads the demo: the stall was "slow decode (19.5 s)" in the steps table
    beside "worker 0 stalled …" in the causes, and its cost read three ways (verdict, causes, the stall's text) with
    nothing saying which was which; the live line of step 2 compared it with a median that held step 2 itself,
    beside "no baseline yet (2 of 3 steps seen)"; and the summary counted a note it never showed."""
    from otel_verl.analysis.findings.common.record import fmt_s

    done, new = readme_demo
    printed = " ".join((done.stdout + done.stderr).split())
    assert done.returncode == 0, printed[-3000:]
    doc = json.loads((new[0] / "findings.json").read_text())
    top = doc["findings"][0]
    (step2,) = [s for s in doc["steps"] if s["step"] == 2]
    cost = fmt_s(top["seconds"])
    assert step2["top_cause"]["name"] == "stall" and f"stall (cost {cost})" in printed, printed[-3000:]
    # ...and findings.json's kind (it was slow_decode); beside it, nothing on the stalled worker of step 2 is told as
    # a cause of its own (a request of worker 0 that ran 0.06-2.17 s was "the request that ended the rollout" the
    # stall ended at 20.9 s, +0.43 s; a 0.31 s stall of its own cost 0.10 s: the stall's echoes, notes)
    assert top["kind"] == "stall" and top["details"]["engine_kind"] in ("slow_decode", "long_response"), top
    beside = [f for f in doc["findings"][1:] if 2 in f["steps"] and 0 in f["workers"] and f["severity"] in SERIOUS]
    assert not beside, [f["message"] for f in beside]
    assert f"costing {cost} of step time" in doc["summary"]["verdict"], doc["summary"]["verdict"]
    # the stall's length and its cost: one figure when they read alike, else each named (issue 51.3)
    still = fmt_s(top["details"]["stalled_s"])
    assert f"it cost the step {cost}" in top["message"] and top["message"].count(cost) == 1, top["message"]
    assert still == cost or f"{still} is how long it stood still" in top["message"], top["message"]
    live2 = re.search(r"otel_verl \| step 2: (.*?) otel_verl \| step 3", printed)
    assert live2 and "median" not in live2.group(1) and "no baseline yet" not in live2.group(1), printed[:3000]
    assert "compared with the step before alone" in live2.group(1), live2.group(1)
    # the cause's sentence once on the terminal (issue 51, e): the causes table tells it; the live line names it as
    # the steps table does and the headline points at it
    assert "because of stall on worker 0" in live2.group(1) and top["message"] not in live2.group(1), live2.group(1)
    assert "because of cause #1 below: stall" in printed, printed[-3000:]
    told = [line for line in done.stdout.splitlines() if "worker 0 stalled in step 2" in line]
    assert len(told) == 1 and told[0].startswith("│"), told  # the causes table's row
    serious = [f for f in doc["findings"] if f["severity"] in SERIOUS]
    if serious and len(doc["findings"]) > len(serious[:10]):  # the causes table shows the serious ones only
        assert re.search(r"causes: \S.* above; \d+ (info|warnings?)\b.* more in findings.json", printed), printed[-800:]


@pytest.mark.ray
@pytest.mark.verl
def test_readme_demo_hints_run_as_printed(readme_demo, tmp_path: Path) -> None:
    """The commands the demo prints for the user run in the user's shell (issue 51: "otel-verl: command not found"):
    the Perfetto export of the slow step, run; the Jaeger lines name this checkout's script and the demo's spool."""
    done, _ = readme_demo
    printed = " ".join(done.stdout.split())  # the terminal wraps lines anywhere
    found = re.search(r"open #1's steps in Perfetto: (.+?), then Open trace file", printed)
    assert found, printed[-3000:]
    hint = found.group(1)
    assert hint.startswith(".venv/bin/otel-verl export-perfetto "), hint  # the checkout's venv, from its root
    out = tmp_path / "step.pftrace"
    ran = shell(hint.rsplit(" --out ", 1)[0] + f" --out {out}", user_environment())
    assert ran.returncode == 0 and out.stat().st_size > 1000, ran.stderr[-2000:]
    lines = done.stdout.splitlines()
    jaeger = lines[lines.index("see the traces in Jaeger:") + 1 :]
    assert jaeger[0].startswith("  bash scripts/jaeger.sh up ") and jaeger[1].startswith(
        "  .venv/bin/otel-verl replay "
    ), jaeger
