"""What a user reads at 80 columns, in a terminal or piped: help that says what an option takes, a hook line
that copies whole, thresholds apart from the everyday options, and no value split across two lines."""

from __future__ import annotations

import itertools
import json
import os
import re
import subprocess
import sys
from dataclasses import fields
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from otel_verl.analysis import Thresholds
from otel_verl.cli import app
from otel_verl.cli.analyze import THRESHOLDS_PANEL
from otel_verl.cli.help_format import HOOK
from otel_verl.cli.prose import wrap

runner = CliRunner()
NARROW = {"COLUMNS": "80", "TERMINAL_WIDTH": "80"}
PIPED = {**{k: v for k, v in os.environ.items() if k not in ("TERMINAL_WIDTH", "FORCE_COLOR")}, "COLUMNS": "80"}
DOCS = Path(__file__).resolve().parents[2] / "docs" / "analyzer.md"


def _help_80(monkeypatch, *args: str) -> str:
    import typer.rich_utils

    monkeypatch.setattr(typer.rich_utils, "MAX_WIDTH", 80)  # read from TERMINAL_WIDTH once, at its import
    res = runner.invoke(app, [*args, "--help"], env=NARROW)
    assert res.exit_code == 0, res.output
    return res.output


@pytest.mark.parametrize("name", ["", *typer.main.get_command(app).commands])
def test_a_flag_shows_no_value(name: str, monkeypatch) -> None:
    """`--no-html <bool>` read as taking a value, and `--no-html true` is an error: a flag's row shows none."""
    out = _help_80(monkeypatch, *([name] if name else []))
    assert "<bool>" not in out
    assert "range>" not in out  # a ranged number shows its range alone: `[x>=1]`


def test_a_flag_given_a_value_is_refused() -> None:
    res = runner.invoke(app, ["analyze", "x", "--no-html", "true"])
    assert res.exit_code == 2


def test_the_hook_copies_whole_at_80_columns(monkeypatch) -> None:
    """The 85-character override was folded in two by rich (`otel_verl.activate.` / `setup`): it is a line."""
    out = _help_80(monkeypatch)
    assert HOOK in [line.strip() for line in out.splitlines()]
    assert len(HOOK) > 80


def test_the_hook_copies_whole_from_the_console_script() -> None:
    """The real script, piped at COLUMNS=80 (rich's own width then)."""
    exe = Path(sys.executable).with_name("otel-verl")
    done = subprocess.run([str(exe), "--help"], capture_output=True, text=True, env=PIPED)
    assert done.returncode == 0, done.stderr
    assert HOOK in [line.strip() for line in done.stdout.splitlines()]


def test_demo_help_is_grouped_and_readable(monkeypatch) -> None:
    """173 lines with a 24-character help column before: the planting and shaping options have panels, list
    options name what they take."""
    out = _help_80(monkeypatch, "demo")
    lines = out.splitlines()
    assert len(lines) <= 125, len(lines)  # 140 on ad1bccf, 40 of them --plant's; 122 with its names alone
    plant = next(i for i, line in enumerate(lines) if line.startswith("│ --plant "))
    told = list(itertools.takewhile(lambda line: not line.startswith(("│ --", "╰")), lines[plant + 1 :]))
    assert len(told) <= 7 and "docs/trainer-details.md#planted-problems" in "".join(told), told  # details: docs
    logger = out.split("--logger", 1)[1][:400]
    assert all(name in logger for name in ("console", "wandb", "mlflow", "tensorboard")), logger  # what it takes
    assert "Shape of the run" in out and "Plant a problem" in out
    assert "IDX:TURN:SEC" in out and "<list[str]>" not in out
    row = next(line for line in lines if line.startswith("│ --no-val-before-train"))
    assert re.search(r"before-train\s+Skip", row) and len(row) - row.index("Skip") >= 34


def test_thresholds_sit_in_their_own_panel(monkeypatch) -> None:
    """~30 `name=value` thresholds were listed among the options a user needs: now two options in a last panel,
    and every threshold with its default in docs/analyzer.md."""
    out = _help_80(monkeypatch, "analyze")
    before, panel = out.split(THRESHOLDS_PANEL)
    for f in fields(Thresholds):
        assert f.name not in before, f.name
    assert "--set" not in before.split("╭─ Options")[1] and "--set" in panel and "--thresholds" in panel
    assert "NAME=VALUE" in panel
    docs = DOCS.read_text()
    for f in fields(Thresholds):
        assert f"| `{f.name}` | {f.default} |" in docs, f.name


def test_wrap_keeps_a_value_with_its_unit() -> None:
    text = "step 6: the step took 39.8 s (the median step 14.3 s), because request s6w0r7 decoded 3,000 tokens"
    for width in range(20, 90):
        lines = wrap(text, width, "  ", "    ")
        assert " ".join(line.strip() for line in lines) == text
        assert not any(re.search(r"\d$", line) for line in lines[:-1]), (width, lines)


def test_piped_summary_splits_no_value(planted_spool: Path, tmp_path: Path) -> None:
    """Piped at 80 columns the summary printed "took 21.6" / "s": every number with its unit in a headline or a
    cause shown is on one line."""
    exe = Path(sys.executable).with_name("otel-verl")
    out_dir = tmp_path / "out"
    done = subprocess.run(
        [str(exe), "analyze", str(planted_spool), "--out", str(out_dir), "--no-html"],
        capture_output=True,
        text=True,
        env=PIPED,
    )
    assert done.returncode == 0, done.stderr
    doc = json.loads((out_dir / "findings.json").read_text())
    texts = doc["summary"]["headlines"] + [f["message"] for f in doc["findings"] if f["severity"] != "info"]
    values = {m.group(0) for t in texts for m in re.finditer(r"[+−-]?[\d,.]+ (s|tokens)\b", t)}
    assert len(values) >= 5
    lines = done.stdout.splitlines()
    for value in values:
        assert any(value in line for line in lines), (value, done.stdout)
