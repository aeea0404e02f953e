"""Engine calls (``text_completion <model>``), in the AgentLoopWorker: one GenAI span per engine submission.

``LLMServerClient.generate`` is one GenAI span under the current turn. ``FullyAsyncLLMServerClient.generate``
resumes after aborts by calling it again: its round trip is a ``verl.generate`` span (the resumes counted, no
``gen_ai.*``) and each attempt under it is the GenAI span with its own usage. So each engine call is counted
once by any sum over GenAI spans, and the engine's own span (handed the attempt's carrier) nests under the call
it answered. When the rollout server is SGLang or vLLM, the GenAI span hands its carrier on to the engine: see
:mod:`otel_verl.instrumentation.engine_link`.
"""

from __future__ import annotations

import logging
from contextvars import ContextVar
from typing import Any, NamedTuple

from opentelemetry.trace import SpanKind

from otel_verl import semconv
from otel_verl.config import OtelVerlConfig
from otel_verl.content import capture_text
from otel_verl.export import tracing
from otel_verl.instrumentation.engine_link import LINKED_ENGINES, with_carrier
from otel_verl.recording.recorder import SPAN_ID, Event, current_request
from otel_verl.wrapping.registry import coroutine_wrapper, enabled
from otel_verl.wrapping.signatures import call_failed

logger = logging.getLogger(__name__)

LLM_SERVER_MODULE = "verl.workers.rollout.llm_server"

CLIENT_GENERATE = (LLM_SERVER_MODULE, "LLMServerClient.generate")

_generate_node: ContextVar[Event | None] = ContextVar("otel_verl_generate", default=None)
_config: OtelVerlConfig | None = None
_ATTEMPTS = "_otel_verl.attempts"  # scratch counter on a round trip's event, removed before export


def _cfg() -> OtelVerlConfig:
    global _config
    if _config is None:
        _config = tracing.current_config()
    return _config


def _rollout_config(client: Any) -> Any:
    try:
        return client.config.actor_rollout_ref.rollout
    except Exception:
        return None


def _read_model_name(client: Any) -> str | None:
    if _cfg().model_name:
        return _cfg().model_name
    try:
        path = str(client.config.actor_rollout_ref.model.path)
        return path.rstrip("/").rsplit("/", 1)[-1] or None
    except Exception:
        return None


def _read_engine_name(client: Any) -> str | None:
    rollout = _rollout_config(client)
    try:
        return str(rollout.name) if rollout is not None else None
    except Exception:
        return None


class _ClientNames(NamedTuple):
    config: Any
    settings: OtelVerlConfig
    span_name: str
    """The GenAI span's name (a plain round trip, or an attempt of a fully-async one)."""
    linked: bool
    """The engine is SGLang or vLLM and ``OTEL_VERL_ENGINE_LINK`` is on: hand it the carrier."""
    attributes: dict[str, Any]
    """What every round trip of this client starts with (copied per span)."""
    fully_async: bool
    """A ``FullyAsyncLLMServerClient`` (or subclass): its round trips nest attempts (resumes after aborts)."""


_names: dict[int, _ClientNames] = {}
"""id(client) -> what its config says: OmegaConf lookups are slow (docs/performance.md), and a turn asks twice."""


def _client_names(client: Any) -> _ClientNames:
    config = getattr(client, "config", None)
    cached = _names.get(id(client))
    # a new client (or a reused id), or otel_verl's settings were read again: look again
    if cached is None or cached.config is not config or cached.settings is not _config:
        if len(_names) > 256:
            _names.clear()
        model, engine = _read_model_name(client), _read_engine_name(client)
        settings = _cfg()
        linked = settings.engine_link and engine in LINKED_ENGINES
        span_name = semconv.generate_span_name(model)
        attributes: dict[str, Any] = {semconv.GEN_AI_OPERATION_NAME: semconv.GEN_AI_OP_TEXT_COMPLETION}
        if model:
            attributes[semconv.GEN_AI_REQUEST_MODEL] = model
        if engine:
            attributes[semconv.GEN_AI_SYSTEM] = engine
        fully_async = any(c.__name__ == "FullyAsyncLLMServerClient" for c in type(client).__mro__)
        cached = _names[id(client)] = _ClientNames(config, settings, span_name, linked, attributes, fully_async)
    return cached


def _start_generate(recorder: Any, names: _ClientNames, kwargs: dict) -> Event:
    request_id = kwargs.get("request_id")
    if isinstance(request_id, str):
        recorder.root.attributes.setdefault(semconv.VERL_REQUEST_ID, request_id)
    outer = _generate_node.get()
    if outer is None:
        recorder.round_trip_turn()
    else:  # an attempt inside FullyAsyncLLMServerClient.generate; the 2nd+ are resumes
        outer_attributes = recorder.attributes_of(outer)
        attempts = outer_attributes.get(_ATTEMPTS, 0)
        if attempts:
            recorder.resumes += 1
        outer_attributes[_ATTEMPTS] = attempts + 1
    if not recorder.events:  # below full detail the round trip is counted, not recorded
        return recorder.detached()
    if outer is None and names.fully_async:  # the round trip holding the attempts: no GenAI span itself
        return recorder.start(semconv.SPAN_GENERATE, attributes={})
    attributes = names.attributes.copy()
    prompt_ids = kwargs.get("prompt_ids")
    if prompt_ids is not None:
        try:
            attributes[semconv.GEN_AI_USAGE_INPUT_TOKENS] = len(prompt_ids)
        except TypeError:
            pass
    parent_id = outer[SPAN_ID] if outer is not None else None
    return recorder.start(names.span_name, parent_id=parent_id, attributes=attributes, kind=SpanKind.CLIENT)


_FINISH_REASONS: dict[str, tuple[str]] = {}
"""stop reason -> ``(stop,)``, made once: the cyclic GC untracks a tuple of strings, and a span's attribute
dict holding only untracked values stays untracked itself (a fresh ``[stop]`` per round trip kept two
objects per span on the GC's lists until the chunk's spans were exported; see
``rollout.trajectory._recorded_trajectory``)."""


def _finish_reasons(stop: str) -> tuple[str]:
    reasons = _FINISH_REASONS.get(stop)
    if reasons is None:
        reasons = (stop,)
        if len(_FINISH_REASONS) < 64:  # a handful of reasons in practice; never grows without bound
            _FINISH_REASONS[stop] = reasons
    return reasons


def _finish_generate(recorder: Any, names: _ClientNames, node: Event, output: Any, holder: bool) -> None:
    """End the span: a GenAI span with its usage, or (``holder``) a fully-async round trip's ``verl.generate``
    with the final stop reason and the resumes, and no ``gen_ai.*`` (its attempts carry them)."""
    stop = getattr(output, "stop_reason", None)
    if stop is not None:
        stop = recorder.last_stop_reason = str(stop)
    attempts = recorder.attributes_of(node).pop(_ATTEMPTS, 0)
    if not recorder.events:
        return
    attrs: dict[str, Any] = {}
    if holder:
        if stop is not None:
            attrs[semconv.VERL_ENGINE_STOP_REASON] = stop
        attrs[semconv.VERL_REQUEST_NUM_RESUMES] = max(attempts - 1, 0)
        recorder.end(node, attrs)
        return
    token_ids = getattr(output, "token_ids", None)
    if token_ids is not None:
        attrs[semconv.GEN_AI_USAGE_OUTPUT_TOKENS] = len(token_ids)
    if stop is not None:
        attrs[semconv.VERL_ENGINE_STOP_REASON] = stop
        attrs[semconv.GEN_AI_RESPONSE_FINISH_REASONS] = _finish_reasons(stop)
    preempted = getattr(output, "num_preempted", None)
    if isinstance(preempted, int):
        attrs[semconv.VERL_ENGINE_NUM_PREEMPTED] = preempted
    extra = getattr(output, "extra_fields", None)
    version = extra.get("global_steps") if isinstance(extra, dict) else None
    if isinstance(version, int) and not isinstance(version, bool):  # the weights the engine served
        attrs[semconv.VERL_POLICY_VERSION] = version
    if names.settings.capture_content and token_ids is not None:
        completion = capture_text(" ".join(map(str, token_ids)), names.settings)
        if completion is not None:
            attrs[semconv.GEN_AI_COMPLETION] = completion
    recorder.end(node, attrs)


@coroutine_wrapper
def client_generate_wrapper(wrapped: Any, instance: Any, args: tuple, kwargs: dict) -> Any:
    recorder = current_request.get()
    if recorder is None or not enabled():
        return wrapped(*args, **kwargs)
    if not recorder.events and _counts_only(instance):
        return _counted_generate(recorder, wrapped, args, kwargs)
    return _recorded_generate(recorder, wrapped, instance, args, kwargs)


_counting: tuple[type, Any, OtelVerlConfig | None, bool] | None = None
"""(client type, its config, otel_verl's settings, answer) of the last :func:`_counts_only` check."""


def _counts_only(client: Any) -> bool:
    """Below full detail, a plain client whose engine gets no carrier only needs counting.

    ``FullyAsyncLLMServerClient`` (resumes nest attempts inside one round trip) and an engine that is
    handed the carrier take the recording path. One client per worker: the answer is kept.
    """
    global _counting
    kind, config = type(client), getattr(client, "config", None)
    known = _counting
    if known is not None and known[0] is kind and known[1] is config and known[2] is _config:
        return known[3]
    names = _client_names(client)
    answer = not names.fully_async and not names.linked
    _counting = (kind, config, _config, answer)
    return answer


async def _counted_generate(recorder: Any, wrapped: Any, args: tuple, kwargs: dict) -> Any:
    """One engine round trip below full detail: a turn counted, the request id and stop reason noted.

    The engine call is made before the first await and the arguments let go: the round trip's kwargs
    dict then does not live, on the cyclic GC's lists, for as long as the engine takes.
    """
    try:
        recorder.turns += 1
        request_id = kwargs.get("request_id")
        if isinstance(request_id, str):
            recorder.root.attributes.setdefault(semconv.VERL_REQUEST_ID, request_id)
    except Exception:
        call_failed(CLIENT_GENERATE)
    call = wrapped(*args, **kwargs)
    del wrapped, args, kwargs
    output = await call
    try:
        stop = getattr(output, "stop_reason", None)
        if stop is not None:
            recorder.last_stop_reason = str(stop)
    except Exception:
        call_failed(CLIENT_GENERATE)
    return output


async def _recorded_generate(recorder: Any, wrapped: Any, instance: Any, args: tuple, kwargs: dict) -> Any:
    """One engine round trip as a span. Only a fully-async client's round trip is made current
    (``_generate_node``): its attempts nest inside it; a plain client's never do, and it pays no context
    variable. As in :func:`_counted_generate`, the arguments are let go before the engine is awaited."""
    node = token = names = None
    holder = False
    call_kwargs = kwargs
    try:
        names = _client_names(instance)
        holder = names.fully_async and _generate_node.get() is None
        node = _start_generate(recorder, names, kwargs)
        if holder:
            token = _generate_node.set(node)
        # the engine is handed the GenAI span's carrier: an attempt's, never the round trip holding them
        if names.linked and not holder and isinstance(kwargs.get("sampling_params"), dict):
            call_kwargs = with_carrier(kwargs, recorder.carrier(node))
    except Exception:
        call_failed(CLIENT_GENERATE)
    try:
        call = wrapped(*args, **call_kwargs)
        del wrapped, args, kwargs, call_kwargs
        output = await call
    except BaseException as exc:
        if node is not None:
            recorder.attributes_of(node).pop(_ATTEMPTS, None)
            recorder.end(node, error=exc)
        raise
    finally:
        if token is not None:
            _generate_node.reset(token)
    if node is not None and names is not None:
        try:
            _finish_generate(recorder, names, node, output, holder)
        except Exception:
            call_failed(CLIENT_GENERATE)
    return output
