"""Settings, read once per process: explicit argument > environment variable > default.

Standard ``OTEL_*`` variables (endpoint, protocol, headers, service name, resource attributes,
sampler, ``OTEL_SDK_DISABLED``) are left to the OTel SDK/exporters; only otel_verl's own knobs
live here. A bad value is logged and the default used: configuration must never stop training.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass, field, replace

logger = logging.getLogger(__name__)

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off"}


def _env_bool(name: str, default: bool | None) -> bool | None:
    raw = os.environ.get(name)
    if raw is None or raw.strip() == "" or raw.strip().lower() == "auto":
        return default
    value = raw.strip().lower()
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    logger.warning("otel_verl: %s=%r is not a boolean; using %r", name, raw, default)
    return default


def _env_int(name: str, default: int) -> int:
    raw = os.environ.get(name)
    if raw is None or raw.strip() == "":
        return default
    try:
        return int(raw)
    except ValueError:
        logger.warning("otel_verl: %s=%r is not an integer; using %d", name, raw, default)
        return default


def _env_count(name: str, default: int) -> int:
    """A whole number ≥ 0 (a negative one is logged and the default used)."""
    value = _env_int(name, default)
    if value < 0:
        logger.warning("otel_verl: %s=%d is negative; using %d", name, value, default)
        return default
    return value


def _env_float(name: str, default: float, lo: float = 0.0, hi: float = 1.0) -> float:
    raw = os.environ.get(name)
    if raw is None or raw.strip() == "":
        return default
    try:
        value = float(raw)
    except ValueError:
        value = float("nan")
    if not lo <= value <= hi:  # also rejects nan
        logger.warning("otel_verl: %s=%r is not a number in [%g, %g]; using %g", name, raw, lo, hi, default)
        return default
    return value


SPAN_BYTES = 600
"""OTLP/protobuf bytes of one of otel_verl's spans, generously (its ids, times, name, 3-10 attributes):
what ``OTEL_VERL_TRACE_MAX_BYTES`` is counted in. The load test measures the real figure
(benchmarks/bench_real_size.py)."""

DETAIL_LEVELS = ("step", "worker", "request", "full")
_DETAIL_RANK = {level: rank for rank, level in enumerate(DETAIL_LEVELS)}
"""OTEL_VERL_DETAIL values, each adding spans to the one before (see :class:`OtelVerlConfig`)."""

DEFAULT_DETAIL = "request"
"""Issue #5's rule: the richest level within 1 % of the rollout's wall time on the CPU demo with an
engine that answers at once (the worst case). ``request`` (step, phase, worker, barrier and request spans, each
request with its status, token counts, turn count and engine link) is within it, with little margin. ``worker``
needs the same per-request seams, so leaving the request spans out saves almost nothing. At ``step`` a worker's
rollout wraps no per-request seam (:mod:`otel_verl.instrumentation.policy`), but a trace without workers cannot
name the straggler, which is what the product is for. ``full`` adds a span per turn, engine call, tool call, tool
parse and tokenization step: noise against a real engine but not against the simulated one.
``OTEL_VERL_DETAIL=full`` turns them on; the CPU demo does, so its report has every figure. Each level's measured
cost: benchmarks/RESULTS.md (rows 2-2f) and docs/performance.md."""


def _env_detail() -> str:
    raw = os.environ.get("OTEL_VERL_DETAIL")
    if raw is None or raw.strip() == "":
        return DEFAULT_DETAIL
    value = raw.strip().lower()
    if value not in DETAIL_LEVELS:
        logger.warning(
            "otel_verl: OTEL_VERL_DETAIL=%r is not one of %s; using %r", raw, "|".join(DETAIL_LEVELS), DEFAULT_DETAIL
        )
        return DEFAULT_DETAIL
    return value


def otlp_endpoint_configured() -> bool:
    """True when the standard OTLP trace endpoint variables point somewhere."""
    return bool(os.environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") or os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT"))


def sdk_disabled() -> bool:
    """``OTEL_SDK_DISABLED=true`` turns all tracing off (instrumentation is not even installed)."""
    return os.environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true"


@dataclass(frozen=True)
class OtelVerlConfig:
    """otel_verl's own settings. Each field names its environment variable."""

    spool: bool | None = field(default_factory=lambda: _env_bool("OTEL_VERL_SPOOL", None))
    """OTEL_VERL_SPOOL: write the JSONL spool. Default (auto): on when no OTLP endpoint is set."""

    spool_dir: str = field(default_factory=lambda: os.environ.get("OTEL_VERL_SPOOL_DIR", "otel-verl-spool"))
    """OTEL_VERL_SPOOL_DIR: root of the spool; files go to ``<dir>/<run>/step_<n>/<file>.jsonl``."""

    run_id: str | None = field(default_factory=lambda: os.environ.get("OTEL_VERL_RUN_ID") or None)
    """OTEL_VERL_RUN_ID: one name for all processes of a run. Default: derived from the Ray job id."""

    capture_content: bool = field(default_factory=lambda: bool(_env_bool("OTEL_VERL_CAPTURE_CONTENT", False)))
    """OTEL_VERL_CAPTURE_CONTENT: record prompt/response/tool-argument text (off by default)."""

    content_max_chars: int = field(default_factory=lambda: _env_int("OTEL_VERL_CONTENT_MAX_CHARS", 2048))
    """OTEL_VERL_CONTENT_MAX_CHARS: cap per recorded text attribute when capture is on."""

    redact: str | None = field(default_factory=lambda: os.environ.get("OTEL_VERL_REDACT") or None)
    """OTEL_VERL_REDACT: ``module:function``, a ``str -> str`` applied to every captured text before the
    cap. If it cannot be imported or raises, the text is dropped (never recorded unredacted), one warning."""

    engine_link: bool = field(default_factory=lambda: bool(_env_bool("OTEL_VERL_ENGINE_LINK", True)))
    """OTEL_VERL_ENGINE_LINK: hand the turn's W3C carrier to SGLang/vLLM so engine spans nest under it."""

    max_queue_size: int = field(default_factory=lambda: _env_int("OTEL_VERL_MAX_QUEUE_SIZE", 262144))
    """OTEL_VERL_MAX_QUEUE_SIZE: span queue per exporter (SDK default 2048 drops in rollout bursts)."""

    rollout_hold_s: float = field(default_factory=lambda: _env_float("OTEL_VERL_ROLLOUT_HOLD_S", 30.0, 0.0, 86400.0))
    """OTEL_VERL_ROLLOUT_HOLD_S: finished requests' spans wait in memory while a rollout chunk of the
    AgentLoopWorker is open, and are exported when it ends (idle time), or once the oldest has waited
    this long. 0 exports as they finish (see :mod:`otel_verl.export.hold`)."""

    model_name: str | None = field(default_factory=lambda: os.environ.get("OTEL_VERL_MODEL_NAME") or None)
    """OTEL_VERL_MODEL_NAME: model name used in ``text_completion <model>``; default from verl's config."""

    detail: str = field(default_factory=_env_detail)
    """OTEL_VERL_DETAIL: ``step`` (steps + phases) | ``worker`` (+ worker chunks and barriers, with every
    request's timing summarized on the worker span) | ``request`` (+ request spans; default) | ``full``
    (+ turns and events: engine calls, tool calls, tool parsing, tokenization)."""

    sample_ratio: float = field(default_factory=lambda: _env_float("OTEL_VERL_SAMPLE_RATIO", 1.0))
    """OTEL_VERL_SAMPLE_RATIO: fraction of ordinary requests whose spans are kept (decided at request end).
    Failed, aborted, truncated and the slowest requests are always kept; the rest are summarized on
    the worker span so percentiles stay exact."""

    sample_keep_slowest: float = field(default_factory=lambda: _env_float("OTEL_VERL_SAMPLE_KEEP_SLOWEST", 0.9))
    """OTEL_VERL_SAMPLE_KEEP_SLOWEST: requests at or above this quantile of their worker chunk's request
    durations are always kept (1.0: only the slowest one)."""

    trace_per_request: bool = field(default_factory=lambda: bool(_env_bool("OTEL_VERL_TRACE_PER_REQUEST", False)))
    """OTEL_VERL_TRACE_PER_REQUEST: every request is the root of its own trace, linked to its worker and step
    spans, whatever the step's size (default: only the requests that do not fit the step's trace leave it,
    a trace per sample group; see ``trace_max_spans``)."""

    trace_max_spans: int = field(default_factory=lambda: _env_count("OTEL_VERL_TRACE_MAX_SPANS", 5000))
    """OTEL_VERL_TRACE_MAX_SPANS: the most spans a trace may hold. A step's requests that do not fit go to a
    trace per sample group, linked to their worker and step spans (:mod:`otel_verl.recording.cutting`).
    Default 5,000: Jaeger's UI draws that quickly (it failed near 40k in jaeger#2183), well inside Tempo's
    default 5 MB ``max_bytes_per_trace``. 0: never cut (every step one trace, however large)."""

    trace_max_bytes: int = field(default_factory=lambda: _env_count("OTEL_VERL_TRACE_MAX_BYTES", 4 * 1024 * 1024))
    """OTEL_VERL_TRACE_MAX_BYTES: the most bytes (OTLP/protobuf, estimated at :data:`SPAN_BYTES` a span, more
    with captured text) a trace may hold; with ``trace_max_spans`` the smaller bound wins. Default 4 MiB,
    under Tempo's 5 MB."""

    live: bool = field(default_factory=lambda: bool(_env_bool("OTEL_VERL_LIVE", True)))
    """OTEL_VERL_LIVE: each step's account in verl's own logger (wandb, mlflow, tensorboard, console …) while
    training runs (:mod:`otel_verl.live`); ``false`` turns it off (no span is then sent to the live account)."""

    live_console: bool = field(default_factory=lambda: bool(_env_bool("OTEL_VERL_LIVE_CONSOLE", False)))
    """OTEL_VERL_LIVE_CONSOLE: also print each step's verdict line on stdout when verl's ``trainer.logger`` has no
    ``console`` backend. Off by default: a job's account goes where its loggers go. ``otel-verl demo`` turns it
    on: its terminal shows each step's account whatever ``--logger`` (docs/live.md)."""

    def trace_span_budget(self) -> int:
        """The most spans a trace may hold by both bounds; 0: no bound (traces are never cut)."""
        if self.trace_max_spans <= 0 or self.trace_max_bytes <= 0:
            return 0
        per_span = SPAN_BYTES + (max(0, self.content_max_chars) if self.capture_content else 0)
        return max(1, min(self.trace_max_spans, self.trace_max_bytes // per_span))

    def detail_at_least(self, level: str) -> bool:
        """True when the configured detail includes ``level``'s spans."""
        return _DETAIL_RANK[self.detail] >= _DETAIL_RANK[level]

    def spool_enabled(self) -> bool:
        return self.spool if self.spool is not None else not otlp_endpoint_configured()

    def with_overrides(self, **kwargs: object) -> OtelVerlConfig:
        return replace(self, **{k: v for k, v in kwargs.items() if v is not None})


def truncate_text(text: str, config: OtelVerlConfig) -> str:
    """Cap opt-in text at ``content_max_chars``."""
    cap = max(0, config.content_max_chars)
    return text if len(text) <= cap else text[:cap] + "…"
