"""One cause in one step, as :mod:`.naming` names it before recurring ones are merged."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pandas as pd


@dataclass
class Cause:
    """One cause in one step, before recurring ones are merged."""

    kind: str
    scope: str
    where: str
    step: int
    seconds: float
    part: str
    workers: list[int] = field(default_factory=list)
    requests: pd.DataFrame = field(default_factory=pd.DataFrame)
    """The requests it happened in (``request_span``, ``request_id``, ``worker``, ``sample_index``...)."""
    details: dict[str, Any] = field(default_factory=dict)
    evidence: list[dict[str, str]] = field(default_factory=list)
