"""What a load read and skipped (:class:`LoadStats`); summaries and findings.json report it, so
silent data loss is visible."""

from __future__ import annotations

from dataclasses import dataclass, field


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
