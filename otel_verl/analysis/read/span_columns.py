"""Column names of the span table and which contract attribute fills each.

The span table is the analyzer's only input shape: every figure and detector reads these columns,
so a renamed attribute in :mod:`otel_verl.semconv` is a one-line change here.
"""

from __future__ import annotations

from typing import Any, Final

import numpy as np
import orjson
import pandas as pd

from otel_verl import semconv as sc

INT64_LIMIT: Final = 2**63
"""Span times (ns) and integer values are int64 in every table: they stay below this."""


def whole_numbers(values: pd.Series) -> pd.Series:
    """``values`` as nullable int64: what is not a whole number within int64 (text, 1.5, inf, 1e300:
    a corrupt or hand-edited attribute) becomes missing rather than failing the cast."""
    numeric = pd.to_numeric(values, errors="coerce")
    if numeric.dtype.kind == "i":
        return numeric.astype("Int64")
    as_float = numeric.astype("float64")
    whole = np.isfinite(as_float) & (as_float == np.trunc(as_float)) & (as_float.abs() < INT64_LIMIT)
    return as_float.where(whole).astype("Int64")


def extra_attributes(extra: pd.Series) -> list[dict[str, Any]]:
    """The attributes no column holds (the ``extra`` JSON text) of a few spans, as dicts (unreadable: empty)."""
    out = []
    for text in extra.to_numpy(dtype=object):
        try:
            value = orjson.loads(text) if isinstance(text, str) and text else {}
        except orjson.JSONDecodeError:
            value = {}
        out.append(value if isinstance(value, dict) else {})
    return out


# Attribute key -> (column name, kind). kind: "int" | "float" | "str" | "bool" | "strlist".
ATTR_COLUMNS: Final[dict[str, tuple[str, str]]] = {
    sc.VERL_STEP: ("step", "int"),
    sc.VERL_PHASE_NAME: ("phase", "str"),
    sc.VERL_VALIDATE: ("validate", "bool"),
    sc.VERL_WORKER_RANK: ("worker", "int"),
    sc.VERL_WORKER_NUM_REQUESTS: ("num_requests", "int"),
    sc.VERL_WORKER_NUM_COMPLETED: ("num_completed", "int"),
    sc.VERL_WORKER_NUM_ABORTED: ("num_aborted", "int"),
    sc.VERL_REQUEST_ID: ("request_id", "str"),
    sc.VERL_SAMPLE_INDEX: ("sample_index", "int"),
    sc.VERL_ROLLOUT_N: ("rollout_n", "int"),
    sc.VERL_REQUEST_STATUS: ("request_status", "str"),
    sc.VERL_REQUEST_NUM_TURNS: ("num_turns", "int"),
    sc.VERL_REQUEST_RESPONSE_TOKENS: ("response_tokens", "int"),
    sc.VERL_REQUEST_PROMPT_TOKENS: ("prompt_tokens", "int"),
    sc.VERL_TURN_INDEX: ("turn_index", "int"),
    sc.VERL_REWARD_SCORE: ("reward_score", "float"),
    sc.VERL_REWARD_REMOTE: ("reward_remote", "bool"),
    sc.VERL_PREPROCESS_KIND: ("preprocess_kind", "str"),
    sc.VERL_ENGINE_STOP_REASON: ("stop_reason", "str"),
    sc.VERL_BARRIER_SLOWEST_RANK: ("barrier_slowest_rank", "int"),
    sc.VERL_EVENT_ORIGIN: ("event_origin", "str"),
    sc.GEN_AI_OPERATION_NAME: ("operation", "str"),
    sc.GEN_AI_REQUEST_MODEL: ("model", "str"),
    sc.GEN_AI_USAGE_INPUT_TOKENS: ("input_tokens", "int"),
    sc.GEN_AI_USAGE_OUTPUT_TOKENS: ("output_tokens", "int"),
    sc.GEN_AI_RESPONSE_FINISH_REASONS: ("finish_reasons", "strlist"),
    sc.GEN_AI_TOOL_NAME: ("tool_name", "str"),
}

BASE_COLUMNS: Final = (
    "trace_id",
    "span_id",
    "parent_id",
    "name",
    "start_ns",
    "end_ns",
    "duration",
    "status",
    "status_message",
    "service",
    "links",
    "extra",
)
"""``duration`` is in seconds; ``links`` is ``"trace:span,..."`` or empty; ``extra`` is a JSON
object of non-contract attributes (kept so exports lose nothing)."""
