"""What a load read and skipped (:class:`LoadStats`); summaries and findings.json report it, so
silent data loss is visible."""

from __future__ import annotations

from dataclasses import dataclass, field

from otel_verl.analysis.errors import AnalysisInputError


@dataclass
class LoadStats:
    """What a load read and skipped; reported in the summary so silent data loss is visible."""

    files: int = 0
    lines: int = 0
    spans: int = 0
    bad_lines: int = 0
    duplicates: int = 0
    first_bad: list[str] = field(default_factory=list)
    seconds: float = 0.0
    warnings: list[str] = field(default_factory=list)
    """Things the user must know about the data (e.g. a backend's trace limit reached); shown and saved."""
    steps: int = 0
    """Steps read by a step-at-a-time read (:func:`otel_verl.analysis.read.step_stream.iter_steps`)."""
    no_step_spans: int = 0
    """Spans of no step (their trace holds no step): yielded once, after the steps."""
    late_spans: int = 0
    """Spans of a step read after that step was yielded (a file out of the spool's layout); yielded with the
    spans of no step, and a warning says so."""
    outside_steps: int = 0
    """Spans of steps outside ``--steps`` that were read anyway (they shared a file with steps inside)."""

    def add(self, part: LoadStats) -> None:
        """Add a reader's counts (files, lines, bad lines and the first five of them) to these."""
        self.files += part.files
        self.lines += part.lines
        self.bad_lines += part.bad_lines
        self.first_bad.extend(part.first_bad[: max(0, 5 - len(self.first_bad))])

    def bad_line(self, msg: str, skip: bool) -> None:
        """A bad line, ``msg`` = ``file:line: why``: counted (the first five kept) with ``skip``, else raised."""
        if not skip:
            raise AnalysisInputError(msg + " (use --skip-bad-lines to skip it)") from None
        self.bad_lines += 1
        if len(self.first_bad) < 5:
            self.first_bad.append(msg)
