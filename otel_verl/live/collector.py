"""Where the job's spans meet for the live account: a step's lines on disk until the step is done, then its account
(:class:`LiveCollector`), on a thread of its own.

Lines come from every process's :class:`~otel_verl.live.span_feed.LiveSpanExporter` (one OTLP/JSON line per
batch, already sorted by ``verl.step`` as the spool sorts them) and are appended to ``<root>/step_<n>/spans.jsonl``
at once: memory holds no span between steps. Spans of no step (an engine's own ``llm_request``) go to the
segment of the step the trainer is in when they arrive (``<root>/no_step/<n>.jsonl``); the account of step n
reads every segment from step n−1 on (n−2 on for the asynchronous trainers) with its own file, and keeps those
whose trace holds a span of step n, as ``otel-verl analyze`` does. Why every later segment: a process's batch
processor sends every :data:`LIVE_DELAY_S` (it was ``OTEL_BSP_SCHEDULE_DELAY``, 2 s), so where steps are shorter than
that, a step's engine spans arrive steps later (seen on the legacy demo: step 2's engine spans filed under step 3 or
later were missed).

When a step is done: the trainer says so (:meth:`LiveCollector.step_done`, from verl's ``Tracking.log`` of that step),
with how many steps later its spans may still arrive (``lag``: 0 for the synchronous trainers; 1 for the asynchronous
ones, whose sample groups dispatched in step n generate into step n+1). The step is computed once that many later
steps are done too and no line of it arrived for :data:`SETTLE_S`; steps are computed in order, each after the one
before it. Lines of a step already computed are counted (``late``) and dropped; so are lines past
:data:`MAX_STEP_BYTES` of one step (``dropped``).

Bounds: disk, the files of the steps not yet computed (at most :data:`MAX_STEP_BYTES` each, removed once
computed); memory, the account's window (:mod:`.account`) and the last :data:`MAX_RESULTS` results.
"""

from __future__ import annotations

import logging
import shutil
import tempfile
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from pathlib import Path

from otel_verl.config import _env_int  # the batch processor's delay, read as export.provider reads it
from otel_verl.export.provider import HOLD_SETTLE_S
from otel_verl.live import names as n
from otel_verl.live.metrics import LiveStep

logger = logging.getLogger(__name__)


WORKER_HOLD_S = HOLD_SETTLE_S
"""How long a worker holds its request spans after its last chunk (the export side's figure; export no longer imports
the live exporter, so it is read from there, not copied)."""
LIVE_DELAY_S = (min(_delay, 500) if (_delay := _env_int("OTEL_BSP_SCHEDULE_DELAY", 2000)) > 0 else 500) / 1000
"""The live feed's own batch processor's delay (``OTEL_BSP_SCHEDULE_DELAY``, at most 0.5 s; the spool's and the OTLP
exporter's keep theirs): spans no flush sends (an engine's) reach the collector this soon, so the settle below and the
wait at ``Tracking.finish`` are 1.5 s shorter than with the 2 s default. A send is one Ray call of what ended since
the last one: a few calls a second per process while spans flow, none when idle."""
TRIP_S = 0.5
"""The trip from a process's export thread into the collector (a loaded 2-core machine: 10-200 ms seen)."""
SETTLE_S = WORKER_HOLD_S + LIVE_DELAY_S + TRIP_S
"""A done step is computed once none of its lines arrived for this long (2 s by default): a worker's spans are held
until a second after its chunk's end (:data:`WORKER_HOLD_S`; their release flushes them at once); an engine's own
spans (no step, so they cannot keep their step waiting) wait up to :data:`LIVE_DELAY_S`; then the trip. With the
settle at the delay + 1 s and a 0.2 s delay (less than the hold + the trip), an async demo's step 1 lost 117 spans as
late. Why it matters: the last steps' accounts wait this long at ``Tracking.finish``, every run's fixed cost (4 s
settle + 0.5 s polling = 4.7 s of a 3-step demo's 42 s before)."""
MAX_STEP_BYTES = 2 << 30
"""A step's lines kept at most (far above a 4,096-trajectory × 8-turn step at full detail: docs/performance.md)."""
MAX_RESULTS = 64
"""Results kept for the trainer to take (it takes them every step)."""
FORCE_AFTER_STEPS = 4
"""A step with lines but never said done (its log call skipped) is computed once this many later steps are done."""

Batch = Sequence[tuple[int | None, int, bytes]]
"""``(step or None, spans in the line, one OTLP/JSON line)``, as :class:`~.span_feed.LiveSpanExporter` sends."""


class _Step:
    __slots__ = ("bytes", "done_at", "lag", "last_line", "rollout_end")

    def __init__(self) -> None:
        self.bytes = 0
        self.last_line = 0.0
        self.done_at: float | None = None
        self.lag = 0
        self.rollout_end: float | None = None


class LiveCollector:
    """The live account's collecting end; ``account(source_dir, step)`` computes a step (:class:`.LiveAccount`)."""

    def __init__(
        self,
        account: Callable[[Path, int], LiveStep | None] | None = None,
        root: str | Path | None = None,
        settle_s: float | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """``clock``: what "settled" is measured by (tests move it by hand); waits are in real time."""
        if account is None:
            from otel_verl.live.account import LiveAccount

            account = LiveAccount().add
        self._account = account
        self.root = Path(tempfile.mkdtemp(prefix="otel-verl-live-", dir=root))
        self._settle = SETTLE_S if settle_s is None else settle_s
        self._clock = clock
        self._lock = threading.Condition()
        self._steps: dict[int, _Step] = {}
        self._computed: set[int] = set()
        self._done: set[int] = set()
        self._last_done: int | None = None
        self._max_lag = 0
        self._finishing = False
        self._closed = False
        self._busy = False
        self._results: deque[tuple[int, LiveStep]] = deque(maxlen=MAX_RESULTS)
        self._seq = 0
        self.late = 0
        self.dropped = 0
        self._thread = threading.Thread(target=self._run, name="otel-verl-live", daemon=True)
        self._thread.start()

    # -- lines in
    def add(self, batch: Batch) -> None:
        now = self._clock()
        with self._lock:
            if self._closed:
                return
            for step, spans, line in batch:
                if step is None:
                    self._append(self._no_step_path(), line)
                    continue
                if step in self._computed or (self._computed and step < min(self._computed)):
                    self.late += spans
                    continue
                entry = self._steps.setdefault(step, _Step())
                if entry.bytes + len(line) > MAX_STEP_BYTES:
                    self.dropped += spans
                    continue
                self._append(self.root / f"step_{step}" / "spans.jsonl", line)
                entry.bytes += len(line)
                entry.last_line = now
            self._lock.notify_all()

    def _no_step_path(self) -> Path:
        current = self._last_done + 1 if self._last_done is not None else 0
        return self.root / "no_step" / f"{current}.jsonl"

    @staticmethod
    def _append(path: Path, line: bytes) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("ab") as fh:
            fh.write(line if line.endswith(b"\n") else line + b"\n")

    # -- the trainer's side
    def step_done(self, step: int, lag: int = 0, rollout_age_s: float | None = None) -> None:
        """Step ``step`` ended in the trainer; its spans may arrive up to ``lag`` steps later. ``rollout_age_s``: how
        long ago its rollout ended (the synchronous trainers: the ``gen`` phase's end), which the workers' hold counts
        from (:meth:`_settle_of`)."""
        with self._lock:
            self._done.add(step)
            self._last_done = step if self._last_done is None else max(self._last_done, step)
            if step in self._computed:
                return
            entry = self._steps.setdefault(step, _Step())
            entry.done_at = entry.done_at or self._clock()
            entry.lag = max(0, lag)
            if rollout_age_s is not None and rollout_age_s >= 0:
                entry.rollout_end = self._clock() - rollout_age_s
            self._max_lag = max(self._max_lag, entry.lag)
            self._lock.notify_all()

    def finish(self) -> None:
        """Training ended: every step with lines is computed once it settles, done or not."""
        with self._lock:
            self._finishing = True
            self._lock.notify_all()

    def results(self, after: int = 0, timeout_s: float | None = None) -> list[tuple[int, LiveStep]]:
        """``(sequence number, step)`` of every result after ``after``, waiting up to ``timeout_s`` (None: until
        there is one) for a first one."""
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        with self._lock:
            while not self._closed:
                ready = [r for r in self._results if r[0] > after]
                if ready:
                    return ready
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    return []
                self._lock.wait(timeout=1.0 if left is None else min(left, 1.0))
        return []

    def drain(self, timeout_s: float) -> bool:
        """Wait until every step with lines is computed (after :meth:`finish`), at most ``timeout_s``; True if so."""
        deadline = time.monotonic() + timeout_s
        with self._lock:
            while self._busy or any(s not in self._computed for s in self._steps):
                left = deadline - time.monotonic()
                if left <= 0 or self._closed:
                    return False
                self._lock.wait(timeout=min(left, 0.5))
        return True

    def pending(self) -> list[int]:
        """Steps with lines or a done mark, not computed yet."""
        with self._lock:
            return sorted(s for s in self._steps if s not in self._computed)

    def close(self) -> None:
        with self._lock:
            self._closed = True
            self._lock.notify_all()
        self._thread.join(timeout=30)
        shutil.rmtree(self.root, ignore_errors=True)

    # -- the computing thread
    def _ready(self, now: float) -> int | None:
        """The lowest step not computed, if it is ready. Steps are computed in order, never a later one first: each
        account is judged among the window's earlier ones (:class:`.LiveAccount`), so a step computed before the
        one before it would be judged without it (seen on a loaded machine: an async step 2 settled before step 1
        and both rows differed from ``analyze``'s). A step ``FORCE_AFTER_STEPS`` later steps are done past is
        computed whether or not it settled."""
        pending = [s for s in self._steps if s not in self._computed]
        if not pending:
            return None
        step = min(pending)
        e = self._steps[step]
        later_done = sum(1 for d in self._done if d > step)
        if later_done >= FORCE_AFTER_STEPS + e.lag:
            return step
        if now - max(e.last_line, e.done_at or 0.0) < self._settle_of(e):
            return None
        if self._finishing or (e.done_at is not None and later_done >= e.lag):
            return step
        return None

    def _settle_of(self, e: _Step) -> float:
        """The settle, less what of the workers' hold already passed before the step was done: their spans are
        released :data:`WORKER_HOLD_S` after their chunk's end, which in the synchronous trainers is the rollout's
        end (the ``gen`` phase's), before the phases after it. Never below the live delay and the trip (the engine's
        spans, sent by no flush). The demo's last step: 2.0 s → 1.2 s at ``finish`` (0.8 s of phases after gen)."""
        if e.rollout_end is None or e.done_at is None:
            return self._settle
        passed = min(WORKER_HOLD_S, max(0.0, e.done_at - e.rollout_end))
        return max(self._settle - passed, min(self._settle, LIVE_DELAY_S + TRIP_S))

    def _until_ready(self, now: float) -> float:
        """How long to sleep before the lowest pending step may be ready: till its settle ends, not a fixed poll
        (a 0.5 s poll added 0.25 s on average to the wait at ``finish``); at most 0.5 s (a test's clock moves by
        hand), at least 10 ms."""
        pending = [s for s in self._steps if s not in self._computed]
        if not pending:
            return 0.5
        e = self._steps[min(pending)]
        left = max(e.last_line, e.done_at or 0.0) + self._settle_of(e) - now
        return min(0.5, max(0.01, left))

    def _run(self) -> None:
        while True:
            with self._lock:
                if self._closed:
                    return
                now = self._clock()
                step = self._ready(now)
                if step is None:
                    self._lock.wait(timeout=self._until_ready(now))
                    continue
                self._computed.add(step)
                self._busy = True
                source = self._gather(step)
                del self._steps[step]
            result = self._compute(step, source)
            shutil.rmtree(source, ignore_errors=True)
            with self._lock:
                self._busy = False
                self._forget_before(step)
                if result is not None:
                    self._seq += 1
                    self._results.append((self._seq, result))
                self._lock.notify_all()

    def _lag(self, step: int) -> int:
        entry = self._steps.get(step)
        return entry.lag if entry is not None else 0

    def _gather(self, step: int) -> Path:
        """The step's files, with the segments of no step that may hold its spans, in a directory of their own: from
        the step before it on, and one more per step of ``lag`` (an async step's groups start generating in the step
        before it, their engine spans filed there)."""
        src = self.root / f"step_{step}"
        work = self.root / f"computing_{step}"
        work.mkdir(parents=True, exist_ok=True)
        if (src / "spans.jsonl").exists():
            (src / "spans.jsonl").rename(work / "spans.jsonl")
        shutil.rmtree(src, ignore_errors=True)
        first = step - 1 - self._lag(step)
        for path in (self.root / "no_step").glob("*.jsonl"):
            seg = int(path.stem) if path.stem.isdigit() else -1  # only ours are there, each named by its step
            if seg >= first:
                try:
                    (work / f"no_step_{seg}.jsonl").hardlink_to(path)
                except OSError:
                    shutil.copyfile(path, work / f"no_step_{seg}.jsonl")
        return work

    def _compute(self, step: int, source: Path) -> LiveStep | None:
        if not any(source.iterdir()):
            return None
        t0 = time.perf_counter()
        try:
            result = self._account(source, step)
        except Exception:
            logger.warning("otel_verl: the live account of step %d failed", step, exc_info=True)
            return None
        if result is not None:
            result.metrics[n.COMPUTE_S] = time.perf_counter() - t0
            result.metrics[n.LATE_SPANS] = float(self.late)
            result.metrics[n.DROPPED_SPANS] = float(self.dropped)
        return result

    def _forget_before(self, step: int) -> None:
        """Segments of no step the next step will not read (older than ``step − 1``, one more per step of lag) and
        marks of steps long computed go."""
        for path in (self.root / "no_step").glob("*.jsonl"):
            try:
                if int(path.stem) < step - 1 - self._max_lag:
                    path.unlink()
            except (ValueError, OSError):
                continue
        self._computed = {s for s in self._computed if s >= step - FORCE_AFTER_STEPS}
        self._done = {s for s in self._done if s >= step - FORCE_AFTER_STEPS}
