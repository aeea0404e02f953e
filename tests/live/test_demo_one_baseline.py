"""A real ``otel-verl demo --plant stall --logger wandb`` (wandb offline) as a new user runs it (issue 51): the live
line of each step shows on the console though no console logger was asked for; the slow step's live line names its
usual as the steps seen so far (``the step before's``), where ``analyze`` names the whole run's (``its parts'
usual``), and ``analyze --steps`` of that step names the same other steps as the whole run; the wandb hint is a
command that reads the run back as printed; a synchronous trainer logs no staleness."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from otel_verl.analysis.findings.common.record import fmt_range, fmt_s
from otel_verl.analysis.findings.verdict import ratio_words
from otel_verl.analysis.pipeline import write_analysis
from otel_verl.analysis.read import load_spans
from otel_verl.live import names as n
from otel_verl.live.backends import CONSOLE_PREFIX
from tests.clean_shell import shell, user_env

pytest.importorskip("verl", reason="needs the verl extra")
pytest.importorskip("wandb", reason="needs wandb")

STEPS = 3
SLOW = 2  # --plant stall: prompt 3's rollouts stall in step 2


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> tuple[subprocess.CompletedProcess[str], Path]:
    tmp = tmp_path_factory.mktemp("demo-wandb")
    env = user_env(OTEL_SDK_DISABLED="false", WANDB_MODE="offline", WANDB_SILENT="true")
    exe = Path(sys.executable).with_name("otel-verl")
    cmd = [str(exe), "demo", "--steps", str(STEPS), "--plant", "stall", "--logger", "wandb"]
    cmd += ["--spool", str(tmp / "spool"), "--report", str(tmp / "report")]
    done = subprocess.run(cmd, cwd=tmp, env=env, capture_output=True, text=True, timeout=1200)
    assert done.returncode == 0, f"{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return done, tmp


def _live_lines(stdout: str) -> dict[int, str]:
    found = re.finditer(rf"^{re.escape(CONSOLE_PREFIX)}(step (\d+): .*)$", stdout, re.M)
    return {int(m.group(2)): m.group(1) for m in found}


@pytest.mark.ray
def test_the_live_line_shows_without_a_console_logger(demo) -> None:
    """``--logger wandb`` alone printed no live line (verl's console backend was the only one that printed it)."""
    done, _ = demo
    assert sorted(_live_lines(done.stdout)) == list(range(1, STEPS + 1)), done.stdout[-3000:]


@pytest.mark.ray
def test_one_step_is_told_against_one_baseline_named_for_what_it_is(demo, tmp_path: Path) -> None:
    """The live line of step 2 said "12.3× the other step's 1.79 s" where the run's verdict said "9.9× its parts'
    usual 2.213 s", and ``analyze --steps 2`` "(usually 3.3 s)" where the whole run said "(the other steps 2.7-2.8
    s)". Now the live line says its usual is the step before's (the steps so far), and the --steps cut names the
    whole run's other steps, as the whole run does."""
    done, tmp = demo
    live = _live_lines(done.stdout)[SLOW]
    findings = json.loads((tmp / "report" / "findings.json").read_text())
    rows = {s["step"]: s for s in findings["steps"]}
    before = ratio_words(rows[SLOW]["rollout_s"], rows[SLOW - 1]["rollout_s"])[1]
    assert f"the step before's {before};" in live and "the other step" not in live, live
    assert f"(the step before {fmt_s(rows[SLOW - 1]['duration_s'])})" in live, live
    (spool,) = list((tmp / "spool").iterdir())
    spans = load_spans(spool)
    headline = {}
    for name, steps in (("run", None), ("cut", range(SLOW, SLOW + 1))):
        write_analysis(spans, tmp_path / name, steps=steps)
        said = json.loads((tmp_path / name / "findings.json").read_text())["summary"]["headlines"]
        headline[name] = next(h for h in said if h.startswith(f"step {SLOW}:"))
    usual = ratio_words(rows[SLOW]["rollout_s"], rows[SLOW]["rollout_baseline_s"])[1]
    assert f"its parts' usual {usual};" in headline["run"], headline
    assert headline["cut"] == headline["run"], headline  # one baseline, the same words, with --steps or without
    others = sorted(rows[s]["duration_s"] for s in rows if s != SLOW)
    assert f"(the other steps {fmt_range(others[0], others[-1])})" in headline["run"], headline


@pytest.mark.ray
def test_the_wandb_hint_reads_the_offline_run_back(demo) -> None:
    """The demo named wandb's ``files/`` folder (run.dir), where no wandb reader finds the run; it names the
    offline run's folder, and the command under it, run as printed in a user's shell, reads each step's account."""
    done, tmp = demo
    place = re.search(r"^wandb wrote to (.+)$", done.stdout, re.M)
    hint = re.search(r"^wandb wrote to .*\n  read it back: (.+?)   # upload it: (.+)$", done.stdout, re.M)
    assert place is not None and hint is not None, done.stdout[-3000:]
    run_dir = Path(place.group(1))
    assert re.fullmatch(r"offline-run-.*", run_dir.name) and list(run_dir.glob("run-*.wandb")), run_dir
    read = shell(f"{hint.group(1)} --json", user_env(), cwd=tmp)
    assert read.returncode == 0, read.stderr[-2000:]
    summary = json.loads(read.stdout)
    text = json.dumps(summary)
    assert n.STEP_S in text and n.VERDICT in text, text[:2000]
    assert f"{n.PREFIX}async/staleness" not in text  # a synchronous trainer: staleness means nothing there
