"""Per-request tail sampling for one worker chunk, decided when a request ends.

Why per chunk: a rollout chunk starts its requests together, so they end roughly in order of
duration. A running quantile would call every late request "the slowest so far" and keep them all;
the chunk's exact quantile is only known when the chunk ends. So a request is decided at once
when it can be — failed, aborted and truncated requests are always kept, and a ratio coin toss
keeps a share of the rest — and only the requests that lost the toss are held (as plain recorder
nodes, no SDK objects) until the chunk ends. Then the ones at or above ``keep_slowest`` of all the
chunk's request durations are emitted too, and the others are summarized on the worker span
(start/end/status/turns/tokens arrays, :mod:`otel_verl.semconv`), which the analyzer adds back to its
per-request tables so percentiles and CDFs stay exact.

"Slowest of the step" is therefore judged per worker chunk (the worker's share of the step), with
no cross-process coordination. A kept trace is complete: a request's spans are all emitted or none.
Remote spans that already left for another process (the RewardLoopWorker's ``verl.reward.compute``,
engine spans) cannot be recalled; for a sampled-out request they remain as orphans, which the
analyzer does not attribute to any request.
"""

from __future__ import annotations

import random
from typing import Any, Protocol

from otel_verl import semconv
from otel_verl.recording.spans import RecordedSpan

_COMPLETED = semconv.RequestStatus.COMPLETED.value
_rand = random.Random()


class FinishedRequest(Protocol):
    """What the sampler reads of a finished request (a :class:`~otel_verl.recording.recorder.RequestRecorder`)."""

    root: RecordedSpan
    turns: int
    status: str | None


class ChunkSampler:
    """Keep/summarize decisions for the requests of one worker chunk."""

    __slots__ = ("durations", "held", "keep_slowest", "ratio", "spans_on", "summary")

    def __init__(self, ratio: float, keep_slowest: float, spans_on: bool) -> None:
        self.ratio = ratio
        self.keep_slowest = keep_slowest
        self.spans_on = spans_on
        """False below ``request`` detail: every request is summarized, none emitted."""
        self.durations: list[int] = []
        self.held: list[FinishedRequest] = []
        self.summary: list[tuple[int, int, str, int, int]] = []

    def admit(self, recorder: FinishedRequest, status: str) -> bool:
        """Called at request end: True = emit the request's spans now."""
        root = recorder.root
        end = root.end_ns if root.end_ns is not None else root.start_ns
        self.durations.append(end - root.start_ns)
        if not self.spans_on:
            self._summarize(recorder, status)
            return False
        if status != _COMPLETED or self.ratio >= 1.0 or _rand.random() < self.ratio:
            return True
        self.held.append(recorder)
        return False

    def threshold_ns(self) -> int:
        """Duration at the ``keep_slowest`` quantile of the chunk's requests (lower nearest rank)."""
        ordered = sorted(self.durations)
        if not ordered:
            return 0
        return ordered[min(len(ordered) - 1, int(self.keep_slowest * (len(ordered) - 1)))]

    def close(self) -> tuple[list[FinishedRequest], dict[str, Any]]:
        """At chunk end: the held recorders to emit after all, and the worker span's summary attributes."""
        keep: list[FinishedRequest] = []
        if self.held:
            threshold = self.threshold_ns()
            for recorder in self.held:
                root = recorder.root
                if (root.end_ns or root.start_ns) - root.start_ns >= threshold:
                    keep.append(recorder)
                else:
                    self._summarize(recorder, recorder.status or _COMPLETED)
            self.held = []
        return keep, self.summary_attributes()

    def _summarize(self, recorder: FinishedRequest, status: str) -> None:
        root = recorder.root
        tokens = root.attributes.get(semconv.VERL_REQUEST_RESPONSE_TOKENS)
        self.summary.append(
            (
                root.start_ns,
                root.end_ns if root.end_ns is not None else root.start_ns,
                status,
                recorder.turns,
                tokens if isinstance(tokens, int) else -1,
            )
        )

    def summary_attributes(self) -> dict[str, Any]:
        if not self.summary:
            return {semconv.VERL_WORKER_NUM_SAMPLED_OUT: 0}
        starts, ends, statuses, turns, tokens = (list(col) for col in zip(*self.summary, strict=True))
        return {
            semconv.VERL_WORKER_NUM_SAMPLED_OUT: len(starts),
            semconv.VERL_SAMPLED_OUT_START_NS: starts,
            semconv.VERL_SAMPLED_OUT_END_NS: ends,
            semconv.VERL_SAMPLED_OUT_STATUS: statuses,
            semconv.VERL_SAMPLED_OUT_NUM_TURNS: turns,
            semconv.VERL_SAMPLED_OUT_RESPONSE_TOKENS: tokens,
        }
