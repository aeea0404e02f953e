"""Carrying the trace context across Ray process boundaries without changing what verl sees.

The sender puts a W3C carrier under :data:`semconv.CARRIER_KEY` into the object it hands to a Ray
call (``DataProto.meta_info``, a TensorDict); the receiver's wrapper pops it before verl's own code runs,
so verl never sees the key on either side. The turn's carrier to an engine (a ``sampling_params`` copy,
then SGLang's or vLLM's own header field) is handed in :mod:`otel_verl.instrumentation.engine_link`.
"""

from __future__ import annotations

import json
import logging
from collections.abc import MutableMapping
from typing import Any

from opentelemetry import baggage, trace
from opentelemetry import context as otel_context
from opentelemetry.propagate import extract, inject

from otel_verl import semconv

logger = logging.getLogger(__name__)

TENSORDICT_KEY = semconv.CARRIER_KEY.replace(".", "_")


def current_carrier(ctx: otel_context.Context | None = None) -> dict[str, str]:
    carrier: dict[str, str] = {}
    inject(carrier, context=ctx)
    return carrier


def carrier_dict(carrier: Any) -> dict[str, Any] | None:
    """A carrier as handed over: a dict, or (V1's TensorDict) its JSON text."""
    if isinstance(carrier, str):
        try:
            carrier = json.loads(carrier)
        except ValueError:
            return None
    return carrier if isinstance(carrier, dict) else None


def context_from_carrier(carrier: Any) -> otel_context.Context | None:
    carrier = carrier_dict(carrier)
    if carrier is None or "traceparent" not in carrier:
        return None
    ctx = extract(carrier)
    return ctx if trace.get_current_span(ctx).get_span_context().is_valid else None


def step_from_context(ctx: otel_context.Context | None) -> int | None:
    """``verl.step`` carried as W3C baggage by the sender, if any."""
    if ctx is None:
        return None
    try:
        value = baggage.get_baggage(semconv.VERL_STEP, ctx)
        return int(value) if value is not None else None
    except (TypeError, ValueError):
        return None


def meta_info_of(data: Any) -> MutableMapping[str, Any] | None:
    """``data.meta_info`` when it can be written: a ``dict`` on ``verl.protocol.DataProto``, a live mapping over
    the ref table on verl's NeoProto view (``LocalProxy``, verl#7557: ``from verl import DataProto`` on ``neo``)."""
    meta = getattr(data, "meta_info", None)
    return meta if isinstance(meta, MutableMapping) else None


def put_in_meta_info(data: Any, carrier: dict[str, str]) -> bool:
    meta = meta_info_of(data)
    if meta is not None and carrier:
        meta[semconv.CARRIER_KEY] = carrier
        return True
    return False


def pop_from_meta_info(data: Any) -> Any:
    meta = meta_info_of(data)
    return meta.pop(semconv.CARRIER_KEY, None) if meta is not None else None


def put_in_tensordict(batch: Any, carrier: dict[str, str]) -> bool:
    """TensorDict batches (V1 trainer) carry the carrier as a NonTensorData JSON string."""
    try:
        from tensordict import NonTensorData

        batch[TENSORDICT_KEY] = NonTensorData(json.dumps(carrier))
        return True
    except Exception:
        logger.debug("otel_verl: could not attach carrier to TensorDict", exc_info=True)
        return False


def pop_from_tensordict(batch: Any) -> Any:
    try:
        if TENSORDICT_KEY in batch.keys():  # noqa: SIM118 (TensorDict.__contains__ is not key lookup)
            value = batch.pop(TENSORDICT_KEY)
            return getattr(value, "data", value)
    except Exception:
        logger.debug("otel_verl: could not read carrier from TensorDict", exc_info=True)
    return None


WORKER_INFO_KEY = semconv.CARRIER_KEY + ".worker"
"""``meta_info`` key of a worker chunk's output: its span ids and end time, for the manager's barrier spans
(:mod:`otel_verl.instrumentation.rollout.manager` pops it before verl merges the chunks)."""
