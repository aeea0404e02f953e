"""The one row type every benchmark returns, so ``benchmarks/run.py`` can print a single table."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Result:
    """One measured target: what it is, what it must reach, what it reached."""

    target: str
    """Short name, numbered as in issue #5 ("1. per-event cost vs seed logger")."""
    goal: str
    """The bound in words ("≤ 1.0× (aim 0.5×)")."""
    measured: str
    """The figure measured in this run ("0.42×")."""
    ok: bool
    """Whether ``measured`` meets ``goal``."""
    detail: str = ""
    """Raw numbers behind the ratio (times, counts, sizes), for the README and the closing note."""
    gate: bool = True
    """False for a stricter check we added beyond issue #5's targets (e.g. instructions where the target is
    wall time): shown with its ✅/❌ and marked "(stricter)", but not part of the suite's exit code."""
    info: bool = False
    """A figure kept for information, no gate (e.g. the rollout against an engine that answers at once, which
    no deployment runs): shown with its ✅/❌ against its old target, marked "(info)", never failing the suite."""

    @property
    def label(self) -> str:
        if self.info:
            return f"{self.target} (info)"
        return self.target if self.gate else f"{self.target} (stricter)"

    @property
    def gating(self) -> bool:
        """Whether this row decides the suite's exit code."""
        return self.gate and not self.info
