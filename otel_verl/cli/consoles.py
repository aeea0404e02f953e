"""The rich consoles the CLI prints on: a terminal's width on a terminal, no hard wrap in a pipe or a file.

Why: rich draws at 80 columns when its file is not a terminal, so piped or redirected output (``otel-verl demo |
cat``, ``analyze … > out.txt``) broke sentences and values at column 80 ("took 21.6" / "s", issue 51.7). Where
the output goes to a pipe or a file, a line is as long as what it says: a sentence, a table row and its cells stay
whole, and the reader (a pager, an editor, a log viewer, ``grep``) wraps it if it wants. A ``COLUMNS`` the user set
still wins (rich reads it): asking for a width gets that width, wrapped at words, never inside a value
(:mod:`otel_verl.cli.prose`).
"""

from __future__ import annotations

import os
from typing import IO

from rich.console import Console

UNWRAPPED_WIDTH = 100_000
"""A pipe's width: wider than any line the CLI prints, so nothing wraps (rich pads no line to it)."""


def console(stderr: bool = False, file: IO[str] | None = None) -> Console:
    """A console on ``file`` (default: stdout, or stderr when ``stderr``) that wraps only on a terminal."""
    probe = Console(stderr=stderr, file=file)
    if probe.is_terminal or os.environ.get("COLUMNS"):
        return probe
    return Console(stderr=stderr, file=file, width=UNWRAPPED_WIDTH, soft_wrap=True)
