"""No measured cost figure in otel_verl's docstrings and comments (issue 52, "no rot"): "~38 µs a span", "~4 MiB a
step", "~10× slower" go stale as the code moves on, and one place should hold them. They live in
docs/performance.md ("Figures quoted from code"); the code keeps one "why" line that points there.

A figure is ``~`` or ``≈`` before a number with a unit of time or memory, or a ratio (``~4×``). Sizes that are facts
of the data or of a planted scenario are written without ``~`` (``up to 2 MB``) or are listed below.
"""

from __future__ import annotations

import io
import re
import tokenize
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "otel_verl"
COST = re.compile(r"[~≈]\s?\d[\d.,]*\s?(?:[x×]|µs|us|ns|ms|s|MB|KB|kB|GB|GiB|MiB|KiB)(?!\w)")

ALLOWED: dict[str, str] = {
    "otel_verl/demo/plants.py": "a planted problem's message to the user (what the plant does), not a measurement",
    "otel_verl/analysis/read/spool/files.py": "a spool line's size (up to ~2 MB, one batch) sizes the read buffer",
}
"""Files whose figures stay, with why (path relative to the repository)."""


def cost_figures(source: str) -> list[tuple[int, str]]:
    """``(line, figure)`` of each cost figure in ``source``'s strings and comments."""
    found = []
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type in (tokenize.STRING, tokenize.COMMENT):
            for match in COST.finditer(token.string):
                found.append((token.start[0] + token.string.count("\n", 0, match.start()), match.group(0)))
    return found


def test_no_cost_figure_in_code() -> None:
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE.parent).as_posix()
        if rel not in ALLOWED:
            found += [f"{rel}:{line} {figure}" for line, figure in cost_figures(path.read_text())]
    assert found == [], "cost figures belong in docs/performance.md (Figures quoted from code):\n" + "\n".join(found)


def test_the_checker_sees_figures() -> None:
    source = '"""Costs ~38 µs a span and ~4 MiB a step."""\nx = 1  # ~10× slower\nlimit = 200_000  # 5 items\n'
    assert cost_figures(source) == [(1, "~38 µs"), (1, "~4 MiB"), (2, "~10×")]
    assert all((PACKAGE.parent / rel).is_file() for rel in ALLOWED)
