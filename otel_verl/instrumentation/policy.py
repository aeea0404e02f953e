"""The one place that decides which seams a process wraps: by detail level and, where known, process role.

Decided once, when ``instrument()`` runs; nothing is unwrapped or re-wrapped at run time. Per detail
level (``OTEL_VERL_DETAIL``; each level records what the one before it does, and more):

==========  ========================================================================================
``step``    trainer, logger, chunk, receiver, thread and Ray seams: step, phase, worker and barrier spans;
            the live account.
            Nothing the rollout calls per trajectory is wrapped (benchmarks/RESULTS.md, row 2e).
``worker``  + the request seams (trajectory, engine round trip, reward): requests are summarized on
            the worker span.
``request`` the same seams as ``worker``; the request spans are emitted.
``full``    + the event seams: turns, preprocess, tool-parse and tool-call spans.
==========  ========================================================================================

Process role: a Ray worker's ``worker_process_setup_hook`` runs ``instrument()`` before the process
knows which actor it will host, so the role is usually unknown then and every seam of the level is
wrapped; a wrapper whose process cannot record (a timer outside any trainer, a reward seam without
reward actors) returns after one check. Where the tracing state exists before ``instrument()`` (a
process set up with ``setup_tracing(role)`` first), :data:`ROLE_SKIPS` leaves out what that role
never records.
"""

from __future__ import annotations

from otel_verl import semconv
from otel_verl.config import DETAIL_LEVELS
from otel_verl.instrumentation.targets import TARGETS, Kind, Target

_EVERY_LEVEL = frozenset({Kind.TRAINER, Kind.LOGGER, Kind.CHUNK, Kind.RECEIVER, Kind.THREADS, Kind.RAY})
KINDS_AT: dict[str, frozenset[Kind]] = {
    "step": _EVERY_LEVEL,
    "worker": _EVERY_LEVEL | {Kind.REQUEST},
    "request": _EVERY_LEVEL | {Kind.REQUEST},
    "full": frozenset(Kind),
}
"""The kinds of seam wrapped at each detail level."""

ROLE_SKIPS: dict[str, frozenset[Kind]] = {
    semconv.ProcessRole.REWARD.value: frozenset({Kind.TRAINER, Kind.LOGGER, Kind.REQUEST, Kind.EVENT}),
    semconv.ProcessRole.SERVER.value: frozenset({Kind.TRAINER, Kind.LOGGER, Kind.REQUEST, Kind.EVENT}),
}
"""Kinds a process of a known role never records with: a reward or rollout-server actor runs no
trainer and no trajectory. (An AgentLoopWorker may share its process with a trainer, as in tests and
single-process runs, so its role skips nothing.)"""


def seams_for(detail: str, role: str | None = None) -> tuple[Target, ...]:
    """The targets a process at ``detail`` (and of ``role``, None: not known yet) wraps."""
    if detail not in KINDS_AT:
        raise ValueError(f"detail must be one of {DETAIL_LEVELS}, not {detail!r}")
    kinds = KINDS_AT[detail] - ROLE_SKIPS.get(role or "", frozenset())
    return tuple(target for target in TARGETS if target.kind in kinds)
