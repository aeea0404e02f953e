"""Benchmark-only ``seed`` mode: verl's rollout logging the events ``full`` records, the way seed 000 did.

One JSON line per span that ``full`` would record (request, turn, engine round trip, tool parse, tool
call, preprocess, remote reward), each written when its event ends with seed 000's
:class:`benchmarks.bench_event_cost.SGLangLogManager`: a dict with an ISO timestamp, event,
``duration_sec``, ``extra``, ``workid``, ``step`` → ``json.dumps`` → ``write`` → ``flush``, inline on the
event loop. The wrappers sit on the same verl methods as otel_verl's (``otel_verl.instrumentation.targets``)
and are plain function replacements, put back by the function :func:`install` returns. Nothing of
otel_verl is used, so the side-by-side harness can compare the CPU each adds to the same rollout.
"""

from __future__ import annotations

import functools
import importlib
import itertools
import time
from collections.abc import Callable
from contextvars import ContextVar
from pathlib import Path
from typing import Any

from benchmarks.bench_event_cost import SGLangLogManager

AGENT_LOOP = "verl.experimental.agent_loop.agent_loop"
TOOL_AGENT_LOOP = "verl.experimental.agent_loop.tool_agent_loop"
TOOL_PARSER = "verl.experimental.agent_loop.tool_parser"
LLM_SERVER = "verl.workers.rollout.llm_server"

_request_id: ContextVar[str | None] = ContextVar("bench_seed_request", default=None)
_turn: ContextVar[int] = ContextVar("bench_seed_turn", default=0)


class SeedLog:
    """The seed's logger for one process, and how many events it wrote (the ``spans`` of a seed chunk)."""

    def __init__(self, root: Path, worker: int = 0) -> None:
        self.manager = SGLangLogManager()
        self.root = root
        self.worker = worker
        self.step = 0
        """Set by the harness before each chunk."""
        self.events = 0
        self.requests = itertools.count()

    def log(self, event: str, duration: float, extra: dict | None, **keys: Any) -> None:
        self.events += 1
        path = str(self.root / f"step_{self.step}" / f"worker_{self.worker}.jsonl")
        self.manager.log(path, event, duration, extra, self.worker, self.step, **keys)


def _extra_of(event: str, instance: Any, args: tuple, kwargs: dict, result: Any) -> dict | None:
    """A small ``extra`` like the seed's: what each event's span carries that is cheap to read."""
    if event == "generate":
        return {"output_tokens": len(getattr(result, "token_ids", None) or ())}
    if event == "tool_parse":
        calls = result[1] if isinstance(result, tuple) and len(result) > 1 else None
        return {"num_calls": len(calls) if calls is not None else 0}
    if event == "tool_call":
        call = args[0] if args else kwargs.get("tool_call")
        return {"tool": getattr(call, "name", None)}
    return None


def _seeded(log: SeedLog, event: str, original: Callable[..., Any], extra: dict | None = None) -> Callable[..., Any]:
    """``original`` (a coroutine method) logging one seed event at its end."""

    @functools.wraps(original)
    async def wrapper(self: Any, *args: Any, **kwargs: Any) -> Any:
        if event == "turn":
            _turn.set(_turn.get() + 1)
        t0 = time.perf_counter()
        result = await original(self, *args, **kwargs)
        duration = time.perf_counter() - t0
        details = extra if extra is not None else _extra_of(event, self, args, kwargs, result)
        log.log(event, duration, details, request_id=_request_id.get(), turn=_turn.get())
        return result

    return wrapper


def _seeded_request(log: SeedLog, original: Callable[..., Any]) -> Callable[..., Any]:
    """The request event; it also sets the request id and turn counter the other events log."""

    @functools.wraps(original)
    async def wrapper(self: Any, *args: Any, **kwargs: Any) -> Any:
        _request_id.set(f"req-{next(log.requests)}")
        _turn.set(0)
        t0 = time.perf_counter()
        result = await original(self, *args, **kwargs)
        log.log("request", time.perf_counter() - t0, None, request_id=_request_id.get())
        return result

    return wrapper


def _seeded_reward(log: SeedLog, original: Callable[..., Any]) -> Callable[..., Any]:
    """The reward event, only where ``full`` records one: scored by remote reward workers."""
    seeded = _seeded(log, "reward", original, {"remote": True})

    @functools.wraps(original)
    async def wrapper(self: Any, *args: Any, **kwargs: Any) -> Any:
        if getattr(self, "reward_loop_worker_handles", None) is None:
            return await original(self, *args, **kwargs)
        return await seeded(self, *args, **kwargs)

    return wrapper


def _seams(log: SeedLog) -> list[tuple[str, str, Callable[[Callable[..., Any]], Callable[..., Any]]]]:
    from otel_verl.instrumentation.targets import _TOOL_PARSERS

    return [
        (AGENT_LOOP, "AgentLoopWorker._run_agent_loop", lambda f: _seeded_request(log, f)),
        (AGENT_LOOP, "AgentLoopWorker._compute_score", lambda f: _seeded_reward(log, f)),
        (TOOL_AGENT_LOOP, "ToolAgentLoop._handle_generating_state", lambda f: _seeded(log, "turn", f)),
        (LLM_SERVER, "LLMServerClient.generate", lambda f: _seeded(log, "generate", f)),
        (TOOL_AGENT_LOOP, "ToolAgentLoop._call_tool", lambda f: _seeded(log, "tool_call", f)),
        *(
            (AGENT_LOOP, f"AgentLoopBase.{name}", lambda f, k=kind: _seeded(log, "preprocess", f, {"kind": k}))
            for name, kind in (
                ("ct_build_initial_tokens", "initial_prompt"),
                ("ct_merge_assistant_token", "merge_assistant"),
                ("ct_merge_context_msg", "merge_context"),
            )
        ),
        *(
            (TOOL_PARSER, f"{parser}.extract_tool_calls", lambda f: _seeded(log, "tool_parse", f))
            for parser in _TOOL_PARSERS
        ),
    ]


def install(root: Path) -> tuple[SeedLog, Callable[[], None]]:
    """Wrap the seams with seed logging into ``root``; returns the log and what puts the originals back."""
    log = SeedLog(root)
    undo: list[tuple[type, str, Any]] = []
    for module, path, make in _seams(log):
        owner_name, method = path.split(".")
        owner = getattr(importlib.import_module(module), owner_name, None)
        if owner is None or method not in owner.__dict__:
            continue
        original = owner.__dict__[method]
        undo.append((owner, method, original))
        setattr(owner, method, make(original))

    def restore() -> None:
        for owner, method, original in reversed(undo):
            setattr(owner, method, original)
        log.manager.close_all()

    return log, restore
