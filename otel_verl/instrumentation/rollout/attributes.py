"""What a request span says about its trajectory: step, sample index, rollout n, validate, agent, rank, status."""

from __future__ import annotations

from typing import Any

from otel_verl import semconv
from otel_verl.recording.recorder import RequestRecorder

ABORTED, TRUNCATED, COMPLETED, FAILED = (
    s.value
    for s in (
        semconv.RequestStatus.ABORTED,
        semconv.RequestStatus.TRUNCATED,
        semconv.RequestStatus.COMPLETED,
        semconv.RequestStatus.FAILED,
    )
)
_TRAJECTORY_INTS = (("sample_index", semconv.VERL_SAMPLE_INDEX), ("rollout_n", semconv.VERL_ROLLOUT_N))


def as_int(value: Any) -> int | None:
    """``value`` as an int (a numpy/torch scalar too); None if it is not a whole number."""
    if type(value) is int:  # the common case, on every trajectory: no checks
        return value
    try:
        if value is None or isinstance(value, bool):
            return None
        return int(value.item() if hasattr(value, "item") else value)
    except Exception:
        return None


def trajectory_attributes(
    trajectory: Any, session_id: Any, agent: Any, chunk_step: int | None, rank: int | None
) -> dict[str, Any]:
    """The request span's descriptive attributes, from ``_run_agent_loop``'s ``trajectory`` dict and keywords."""
    attributes: dict[str, Any] = {}
    if not isinstance(trajectory, dict):
        trajectory = {}
    step = as_int(trajectory.get("step"))
    if step is not None and step >= 0:
        attributes[semconv.VERL_STEP] = step
    elif chunk_step is not None:
        attributes[semconv.VERL_STEP] = chunk_step
    for key, attr in _TRAJECTORY_INTS:
        value = as_int(trajectory.get(key))
        if value is not None:
            attributes[attr] = value
    session = as_int(session_id)
    if session is not None:
        attributes[semconv.VERL_ROLLOUT_N] = session
    attributes[semconv.VERL_VALIDATE] = bool(trajectory.get("validate", False))
    if isinstance(agent, str):
        attributes[semconv.VERL_REQUEST_AGENT] = agent
    if rank is not None:
        attributes[semconv.VERL_WORKER_RANK] = rank
    return attributes


def request_status(recorder: RequestRecorder, response_length: int | None) -> str:
    """aborted (the engine's stop reason), truncated (``length``, or the response filled its budget), else completed."""
    stop = (recorder.last_stop_reason or "").lower()
    if stop in ("aborted", "abort"):
        return ABORTED
    tokens = recorder.root.attributes.get(semconv.VERL_REQUEST_RESPONSE_TOKENS)
    if stop == "length" or (response_length and isinstance(tokens, int) and tokens >= response_length):
        return TRUNCATED
    return COMPLETED
