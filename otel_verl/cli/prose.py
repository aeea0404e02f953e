"""Sentences on the console that wrap at words but never inside a value.

Why: rich wraps at any space, so a piped summary (80 columns) broke "the step took 21.6 s" into "took 21.6"
and "s" on the next line, and a table cell "+21.9" / "s". :class:`Prose` keeps a number with the word after it
(its unit: ``s``, ``ms``, ``tokens``, ``requests``) on one line, in a sentence printed alone or in a table
cell; a line is longer than the width only where one such value is.
"""

from __future__ import annotations

import re
import textwrap
from collections.abc import Iterator
from typing import Any

from rich.measure import Measurement
from rich.text import Text

_GLUE = "\u00a0"  # textwrap breaks at ASCII whitespace only: a no-break space holds a value together
_VALUE = re.compile(r"(?<=\d) (?=[^\s\d])")
"""The space between a number and the word after it."""


def glued(text: str) -> str:
    """``text`` with each number held to the word after it."""
    return _VALUE.sub(_GLUE, text)


def wrap(text: str, width: int, indent: str = "", hanging: str = "") -> list[str]:
    """``text`` wrapped to ``width`` at words, never inside a value; ``indent`` before the first line,
    ``hanging`` before the others."""
    lines = textwrap.wrap(
        glued(text),
        width=max(width, len(indent) + 8),
        initial_indent=indent,
        subsequent_indent=hanging,
        break_on_hyphens=False,
    )
    return [line.replace(_GLUE, " ") for line in lines] or [indent]


class Prose:
    """A rich renderable: ``text`` in ``style``, wrapped by :func:`wrap` to the width it is given."""

    def __init__(self, text: str, style: str = "", indent: str = "", hanging: str | None = None) -> None:
        self.text, self.style, self.indent = text, style, indent
        self.hanging = indent if hanging is None else hanging

    def __rich_console__(self, console: Any, options: Any) -> Iterator[Text]:
        lines = wrap(self.text, options.max_width, self.indent, self.hanging)
        yield Text("\n".join(lines), style=self.style, no_wrap=True, overflow="ignore")

    def __rich_measure__(self, console: Any, options: Any) -> Measurement:
        longest = max((len(w) for w in glued(self.text).split()), default=0)
        return Measurement(longest + len(self.hanging), len(self.indent) + len(self.text)).clamp(
            max_width=options.max_width
        )
