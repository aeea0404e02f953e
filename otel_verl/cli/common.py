"""What every command shares: the nine options that pick a trace source (declared once), one-line errors.

Why a decorator for the source options: ``analyze``, ``export-legacy`` and ``export-perfetto`` read the
same sources the same way; :func:`source_options` adds those parameters to a command's signature (typer
reads ``__signature__``) and hands the command one :class:`SourceOptions` instead.
"""

from __future__ import annotations

import functools
import inspect
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any
from urllib.parse import urlparse

import typer

from otel_verl.analysis.errors import AnalysisInputError
from otel_verl.cli.consoles import console as make_console

if TYPE_CHECKING:  # pandas stays out of --help: the reader is imported when a command runs
    from otel_verl.analysis.read.load_options import LoadOptions

console = make_console(stderr=True)
"""Progress and summaries of long commands go to stderr, so stdout stays a result a script can read."""

EXIT_CODES = (
    "**Exit codes**: 0 = done (whatever was found); 2 = bad input or option (unreadable source, malformed "
    "line, unwritable output), one line on stderr naming the file or path; 1 = a bug in otel-verl "
    "(please report the traceback)."
)


def one_line_errors(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Bad input → ``error: <file:line: why>`` on stderr and exit 2, never a traceback."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except AnalysisInputError as exc:
            print(f"error: {exc}", file=sys.stderr)
            raise typer.Exit(code=2) from None
        except OSError as exc:  # a path the checks did not foresee: still one line, naming it
            print(f"error: {exc.filename or ''}: {exc.strerror or exc}", file=sys.stderr)
            raise typer.Exit(code=2) from None

    return wrapper


# ------------------------------------------------------------------ the trace source, declared once
SOURCE_HELP = (
    "a spool dir, a collector file-exporter file (or its dir), a Jaeger v2 query URL (`http://host:16686`) "
    "or a Tempo URL (`http://host:3200`)"
)
SOURCE_PARAMETERS = (
    ("source", Annotated[str, typer.Argument(help=SOURCE_HELP, metavar="SOURCE", show_default=False)], ...),
    (
        "run",
        Annotated[
            str | None,
            typer.Option(
                "--run",
                help="which run of a spool folder holding several (`<spool>/<run>/`); default: the newest, and a "
                "line names the others",
                show_default=False,
            ),
        ],
        None,
    ),
    (
        "source_type",
        Annotated[
            str,
            typer.Option(
                "--source-type",
                help="`auto` (default): a URL is asked which API it serves (Jaeger's `/api/v3/services`, Tempo's "
                "`/api/echo`), a directory is a spool, a file a collector export; or force `spool`, `file`, "
                "`jaeger`, `tempo`",
            ),
        ],
        "auto",
    ),
    (
        "service",
        Annotated[
            str | None,
            typer.Option("--service", help="only spans of this `service.name` (Jaeger: which service to query)"),
        ],
        None,
    ),
    (
        "since",
        Annotated[
            str | None,
            typer.Option(
                "--since", help="window start, ISO-8601 or epoch seconds; whole steps overlapping it are kept"
            ),
        ],
        None,
    ),
    ("until", Annotated[str | None, typer.Option("--until", help="window end, ISO-8601 or epoch seconds")], None),
    (
        "lookback",
        Annotated[
            str | None,
            typer.Option("--lookback", help="window = the last `30m`, `2h`, `1d` (until `--until` or now)"),
        ],
        None,
    ),
    (
        "max_traces",
        Annotated[
            int,
            typer.Option("--max-traces", min=1, help="Jaeger/Tempo: traces fetched at most (reaching it is a warning)"),
        ],
        10000,
    ),
    (
        "skip_bad_lines",
        Annotated[
            bool,
            typer.Option(
                "--skip-bad-lines",
                help="count and skip malformed or truncated lines instead of stopping at the first one (`file:line`)",
            ),
        ],
        False,
    ),
)
"""(parameter name, typer annotation, default) of the options that pick and filter a trace source."""

SkipBadLines = SOURCE_PARAMETERS[-1][1]
"""``--skip-bad-lines`` alone, for commands whose input is not a trace source (``import-legacy``)."""


@dataclass(frozen=True)
class SourceOptions:
    """The values of :data:`SOURCE_PARAMETERS` one command was given."""

    source: str
    source_type: str = "auto"
    service: str | None = None
    since: str | None = None
    until: str | None = None
    lookback: str | None = None
    max_traces: int = 10000
    skip_bad_lines: bool = False
    run: str | None = None
    """``--run``; after :meth:`with_run`, the run read (None: the source is not a spool)."""

    def with_run(self) -> SourceOptions:
        """The source narrowed to one run (:func:`otel_verl.analysis.read.spool.runs.choose_run`); prints which run
        was chosen when the spool folder held several."""
        from otel_verl.analysis.read.spool.runs import choose_run

        kind = self.source_type
        if kind == "auto":
            remote = self.source.startswith(("http://", "https://"))
            kind = "remote" if remote else "spool" if Path(self.source).is_dir() else "file"
        choice = choose_run(self.source, self.run, kind)
        note = choice.note()
        if note:
            print(note, flush=True)
        return replace(self, source=choice.source, run=choice.run)

    def default_out(self) -> Path:
        """``./otel-verl-report/<run>``: the run's name, else the file's or the backend host's."""
        if self.source.startswith(("http://", "https://")):
            name = urlparse(self.source).hostname or "remote"
        else:
            name = self.run or Path(self.source).stem or "run"
        return Path("otel-verl-report") / name

    def window_ns(self) -> tuple[int | None, int | None]:
        """``--since``/``--until``/``--lookback`` as absolute ns bounds (None = open)."""
        since_ns, until_ns = parse_time(self.since, "since"), parse_time(self.until, "until")
        if self.lookback:
            until_ns = until_ns or time.time_ns()
            since_ns = until_ns - parse_duration(self.lookback)
        return since_ns, until_ns

    def load_options(self, **overrides: Any) -> LoadOptions:
        """The :class:`~otel_verl.analysis.read.LoadOptions` these command-line options ask for, ``overrides`` on
        top."""
        from otel_verl.analysis.read.load_options import LoadOptions

        since_ns, until_ns = self.window_ns()
        return LoadOptions(
            source_type=self.source_type,
            service=self.service,
            since_ns=since_ns,
            until_ns=until_ns,
            skip_bad_lines=self.skip_bad_lines,
            max_traces=self.max_traces,
            **overrides,
        )


def source_options(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Command ``fn(out, src: SourceOptions, ...)`` gets SOURCE as its first parameter and the source options
    where ``src`` stands (the order ``--help`` lists them in; ``src`` after the required parameters)."""
    kind = inspect.Parameter.POSITIONAL_OR_KEYWORD
    shared = [
        inspect.Parameter(name, kind, annotation=ann, default=default) for name, ann, default in SOURCE_PARAMETERS
    ]
    params = [shared[0].replace(default=inspect.Parameter.empty)]  # SOURCE is required
    for p in inspect.signature(fn, eval_str=True).parameters.values():
        params += shared[1:] if p.name == "src" else [p]

    @functools.wraps(fn)
    def wrapper(**kwargs: Any) -> Any:
        src = SourceOptions(**{name: kwargs.pop(name) for name, _, _ in SOURCE_PARAMETERS})
        return fn(src=one_line_errors(src.with_run)(), **kwargs)

    signature = inspect.Signature(params)
    wrapper.__signature__ = signature  # type: ignore[attr-defined]
    wrapper.__annotations__ = {p.name: p.annotation for p in params}
    return wrapper


def parse_time(value: str | None, name: str) -> int | None:
    """ISO-8601 or epoch seconds → ns."""
    if value is None:
        return None
    try:
        return int(float(value) * 1e9)
    except ValueError:
        pass
    try:
        return int(datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp() * 1e9)
    except ValueError:
        raise AnalysisInputError(f"--{name} {value!r}: not ISO-8601 or epoch seconds") from None


def parse_step_range(text: str, option: str = "--steps") -> range:
    """``--steps``: ``A:B`` (steps A to B, both included), ``A:`` (A onwards), ``:B`` (up to B) or ``N``."""
    lo_text, sep, hi_text = text.partition(":")
    try:
        lo = int(lo_text) if lo_text.strip() or not sep else -(2**63)
        hi = (int(hi_text) if hi_text.strip() else 2**63 - 1) if sep else lo
    except ValueError:
        raise AnalysisInputError(f"{option} {text!r}: use A:B (both included), A:, :B or N") from None
    if hi < lo:
        raise AnalysisInputError(f"{option} {text!r}: the last step is before the first")
    return range(lo, hi + 1)


def parse_duration(value: str) -> int:
    """``90s``, ``15m``, ``2h``, ``1d`` → ns."""
    units = {"s": 1, "m": 60, "h": 3600, "d": 86400}
    try:
        if value[-1] in units:
            return int(float(value[:-1]) * units[value[-1]] * 1e9)
        return int(float(value) * 1e9)
    except (ValueError, IndexError):
        raise AnalysisInputError(f"--lookback {value!r}: use e.g. 30m, 2h, 1d") from None


_FAST_EXIT = False


def exit_fast_after() -> None:
    """Ask the console script to leave with ``os._exit`` once this command has succeeded: its outputs are
    written and closed, and nothing it started needs an exit handler (no Ray, no exporter).

    Why: tearing down the interpreter with a 1 GB span table and pandas, matplotlib and plotly loaded is a
    measurable share of ``analyze`` (docs/performance.md, "Figures quoted from code"). Only
    :func:`otel_verl.cli.main` reads this, so a command run in-process (typer's test runner, the demo's own analysis)
    exits normally."""
    global _FAST_EXIT
    _FAST_EXIT = True


def fast_exit_requested() -> bool:
    return _FAST_EXIT


def load_source(src: SourceOptions, stats: Any = None, seed_lines: bool = True, steps: range | None = None) -> Any:
    """The span table of ``src`` (a progress bar when interactive); warnings of the load go to stderr.
    ``seed_lines=False``: a seed log's original lines are left off (see ``load_spans``). ``steps``: only
    those steps, read a step at a time (``iter_steps``), so memory holds the range, not the run."""
    from otel_verl.analysis.read import LoadStats, load_spans
    from otel_verl.analysis.read.allocator import use_system_allocator
    from otel_verl.analysis.read.progress import interactive

    use_system_allocator()  # before the first table is allocated
    stats = stats if stats is not None else LoadStats()
    options = src.load_options(progress=interactive(), seed_lines=seed_lines)
    if steps is not None:
        from otel_verl.analysis.read.step_split import concat_steps
        from otel_verl.analysis.read.step_stream import iter_steps

        spans = concat_steps(iter_steps(src.source, options, stats=stats, steps=steps))
    else:
        spans = load_spans(src.source, options, stats=stats)
    for w in stats.warnings:
        print(f"warning: {w}", file=sys.stderr)
    return spans
