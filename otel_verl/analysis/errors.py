"""The analyzer's one exception type: bad input fails loudly with a one-line message (file:line)."""

from __future__ import annotations


class AnalysisInputError(Exception):
    """Input the analyzer cannot use: unreadable source, malformed line, wrong format, empty run.

    The CLI turns it into one line on stderr and exit code 2; it never becomes a traceback.
    """
