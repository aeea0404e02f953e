"""Issue 51.7: output piped or redirected (``otel-verl demo | cat``, ``analyze … > out.txt``) was drawn at rich's
80 columns, so sentences and values broke mid-way ("took 21.6" / "s"). Off a terminal a line is now as long as
what it says (:mod:`otel_verl.cli.consoles`). The real console script, its stdout a pipe, no ``COLUMNS`` set."""

from __future__ import annotations

import itertools
import json
import os
import re
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(sys.executable).with_name("otel-verl")
PIPED = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES", "TERMINAL_WIDTH", "FORCE_COLOR")}
UNIT_FIRST = re.compile(r"^[\s│┃|]*(s|ms|tokens?|requests?|ms/token|s/token)\b")


def split_values(lines: list[str]) -> list[tuple[str, str]]:
    """Pairs of lines where a number ends one line and its unit starts the next."""
    return [(a, b) for a, b in itertools.pairwise(lines) if re.search(r"\d$", a.rstrip()) and UNIT_FIRST.match(b)]


def test_a_piped_console_line_is_never_wrapped() -> None:
    line = "the step took 21.6 s " * 12
    code = f"from otel_verl.cli.consoles import console; console().print({line!r})"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=PIPED, check=True)
    assert done.stdout.splitlines() == [line], done.stdout


def test_analyze_piped_tells_each_sentence_on_one_line(planted_spool: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    done = subprocess.run(
        [str(SCRIPT), "analyze", str(planted_spool), "--out", str(out), "--no-html"],
        capture_output=True,
        text=True,
        env=PIPED,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    lines = done.stdout.splitlines()
    doc = json.loads((out / "findings.json").read_text())
    shown = [f for f in doc["findings"] if f["severity"] != "info"][:10] or doc["findings"][:5]
    assert shown and len(shown[0]["message"]) > 80  # long enough that 80 columns broke it
    for f in shown:  # the causes table's row holds its whole sentence
        assert any(f["message"] in line for line in lines), (f["message"], done.stdout[-3000:])
    assert any(doc["summary"]["verdict"] in line for line in lines), done.stdout[:2000]
    assert not split_values(lines), split_values(lines)
