"""The current OTel context follows work into threads: ``run_in_executor`` and ``threading.Thread``.

verl runs user code in executor threads — reward functions (``NaiveRewardManager``/``DAPO``/...:
``loop.run_in_executor(None, compute_score)``), tokenizer work, sandbox calls — and
``run_in_executor`` does not copy contextvars (``asyncio.to_thread`` does). Spans a reward function
or a tool makes there (an instrumented HTTP client, a user tracer) would lose their parent and start
a trace of their own. Like opentelemetry-instrumentation-threading (not used: it pins an older
OTel SDK than ours), the context current at ``submit``/``start`` is attached while the function runs,
but only when a valid span is current: untraced work runs exactly as before.
"""

from __future__ import annotations

from functools import partial
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry import trace

from otel_verl.wrapping import context as _context

_CONTEXT_ATTR = "_otel_verl_context"


_last_checked: tuple[otel_context.Context | None, bool] = (None, False)
"""The last context looked at and whether it holds a valid span: OTel contexts are immutable and the
rollout's tasks share one (the worker span's), so each executor submit does not re-derive it."""


_exempt: dict[int, otel_context.Context] = {}
"""Contexts whose executor work is not carried (by id; OTel contexts are dicts, so not hashable)."""


def exempt(ctx: otel_context.Context) -> None:
    """Do not carry ``ctx`` itself into threads (contexts made from it still are).

    A rollout chunk's context: the one current in every trajectory (the worker span's; request spans are
    recorded, never attached), from which verl hands tokenization to executor threads (several submits per
    trajectory, a measurable share of the rollout's time to carry: docs/performance.md). The contexts user code runs in,
    and that its own spans should nest under (``execute_tool``, ``verl.reward.compute``, a trainer
    phase), are other contexts and are carried as before. What is lost: spans that a custom agent loop's
    own executor work makes outside any tool start traces of their own.
    """
    global _last_checked
    _exempt[id(ctx)] = ctx
    _last_checked = (None, False)


def unexempt(ctx: otel_context.Context) -> None:
    """Undo :func:`exempt` (the chunk ended)."""
    global _last_checked
    if _exempt.get(id(ctx)) is ctx:
        del _exempt[id(ctx)]
    _last_checked = (None, False)


def _carried(ctx: otel_context.Context) -> otel_context.Context | None:
    """``ctx`` if it holds a valid span and is not exempt (else nothing is carried)."""
    global _last_checked
    checked, valid = _last_checked
    if ctx is not checked:
        valid = trace.get_current_span(ctx).get_span_context().is_valid and _exempt.get(id(ctx)) is not ctx
        _last_checked = (ctx, valid)  # one tuple, swapped atomically: safe across threads
    return ctx if valid else None


def _traced_context() -> otel_context.Context | None:
    """The current context if it is to be carried."""
    return _carried(_context.get_current())


def _run_in(ctx: otel_context.Context, fn: Any, *args: Any, **kwargs: Any) -> Any:
    """``fn(*args, **kwargs)`` with ``ctx`` attached (bound with ``functools.partial``: one frame, no closure)."""
    token = _context.attach(ctx)
    try:
        return fn(*args, **kwargs)
    finally:
        _context.detach(token)


def submit_wrapper(wrapped: Any, instance: Any, args: tuple, kwargs: dict) -> Any:
    """``ThreadPoolExecutor.submit(fn, ...)``: ``fn`` runs in the submitter's OTel context.

    The common case (the context checked last time, nothing to carry) is answered inline: verl's
    tokenizer work submits ~5 times per trajectory from the exempt chunk context.
    """
    try:
        ctx = _context.get_current()
        checked, valid = _last_checked
        if ctx is checked:
            ctx = ctx if valid else None
        else:
            ctx = _carried(ctx)
    except Exception:
        ctx = None
    if ctx is None or not args:
        return wrapped(*args, **kwargs)
    return wrapped(partial(_run_in, ctx, args[0]), *args[1:], **kwargs)


def _pool_worker(thread: Any) -> bool:
    """A ThreadPoolExecutor's long-lived worker: it must not keep the context of the task that spawned it."""
    import concurrent.futures.thread as pool

    worker = getattr(pool, "_worker", None)
    return worker is not None and getattr(thread, "_target", None) is worker


def thread_start_wrapper(wrapped: Any, instance: Any, args: tuple, kwargs: dict) -> Any:
    """``Thread.start``: remember the starter's context for :func:`thread_run_wrapper`."""
    try:
        ctx = _traced_context()
        if ctx is not None and not _pool_worker(instance):
            setattr(instance, _CONTEXT_ATTR, ctx)
    except Exception:
        pass
    return wrapped(*args, **kwargs)


def thread_run_wrapper(wrapped: Any, instance: Any, args: tuple, kwargs: dict) -> Any:
    """``Thread.run`` (a ``target=`` thread): runs in the context its starter had."""
    ctx = getattr(instance, _CONTEXT_ATTR, None)
    if ctx is None:
        return wrapped(*args, **kwargs)
    return _run_in(ctx, wrapped, *args, **kwargs)
