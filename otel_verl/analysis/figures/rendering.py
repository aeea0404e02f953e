"""Render the report's figures in a forked process while the parent runs the diagnosis.

Why: at 2M spans the figures (PNG + interactive HTML) and the diagnosis each take seconds, and neither needs
the other; side by side on two cores ``analyze`` saves about a third of its time after the read. The worker
builds each figure's frame (``frame_of(name)``: a streamed analysis combines the parts it stored) and draws it;
fork shares what the parent holds copy-on-write (nothing is pickled on the way in); only the figure frames and
HTML fragments come back. A worker that dies is not an error: its figures are rendered in the parent instead,
so the report is the same either way.
"""

from __future__ import annotations

import html
import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from otel_verl.analysis.figures import _style
from otel_verl.analysis.output_paths import writing
from otel_verl.analysis.report.plotly_embed import figure_html
from otel_verl.analysis.tables import Tables

FigureSpec = tuple[str, Callable[..., pd.DataFrame], Callable[..., Path], Callable[..., Any]]
"""(name, compute(spans, tables=, **options), plot(frame, png path), plotly(frame))."""

Rendered = tuple[pd.DataFrame, Path, str | None]
"""A figure's frame, its PNG and its HTML fragment (None without HTML or without data; a ``<p class='note'>``
when it has nothing to draw)."""

PARALLEL_MIN_SPANS = 200_000
"""Below this the whole analysis takes a few seconds and a fork is not worth it."""


def render(spec: FigureSpec, spans: pd.DataFrame, t: Tables, out: Path, html_report: bool, **options: Any) -> Rendered:
    """One figure of a run's tables: compute its frame, then :func:`draw` it."""
    df = spec[1](spans, tables=t, **options)  # the shared tables: each figure used to rebuild them
    return draw(spec, df, out, html_report)


def draw(spec: FigureSpec, df: pd.DataFrame, out: Path, html_report: bool) -> Rendered:
    """One figure's frame: write its PNG, build its interactive HTML fragment."""
    name, _, plot, plotly_fn = spec
    with writing(out / f"{name}.png"):
        png = plot(df, out / f"{name}.png")
    fragment = None
    if html_report and not df.empty:
        fig = plotly_fn(df)
        note = _style.note_of(fig)
        if note:  # nothing to draw: one line, not an empty plot
            fragment = f"<p class='note'>{html.escape(note)}</p>"
        else:
            fragment = figure_html(fig.update_layout(template="plotly_white"), f"figure-{name}")
    return df, png, fragment


def parallel_figures(n_spans: int) -> bool:
    """Render in a forked worker? ``OTEL_VERL_ANALYZE_JOBS=1`` says no, ``2`` says yes (any size);
    by default yes on ≥ 2 CPUs for ≥ 200k spans."""
    if not hasattr(os, "fork"):
        return False
    env = os.environ.get("OTEL_VERL_ANALYZE_JOBS", "").strip()
    if env.isdigit():
        return int(env) > 1
    return (os.cpu_count() or 1) > 1 and n_spans >= PARALLEL_MIN_SPANS


class BackgroundFigures:
    """Figures rendered in a forked process from :meth:`start` until :meth:`results` (or in-line when not
    ``parallel``): each spec's frame is ``frame_of(name)``, drawn by :func:`draw`."""

    def __init__(
        self,
        specs: Sequence[FigureSpec],
        frame_of: Callable[[str], pd.DataFrame],
        out: Path,
        html_report: bool,
        parallel: bool,
    ):
        self._specs = list(specs)
        self._frame_of, self._out, self._html, self._parallel = frame_of, out, html_report, parallel
        self._proc: Any = None
        self._conn: Any = None

    def __enter__(self) -> BackgroundFigures:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        """A failure in the parent leaves no worker behind."""
        if self._proc is not None:
            self._proc.terminate()
            self._proc.join()
            self._conn.close()
            self._proc = None

    def start(self) -> BackgroundFigures:
        if not self._specs or not self._parallel:
            return self
        import multiprocessing as mp

        ctx = mp.get_context("fork")
        receive, send = ctx.Pipe(duplex=False)
        proc = ctx.Process(target=self._work, args=(send,), name="otel-verl-figures", daemon=True)
        try:
            proc.start()
        except OSError:  # no memory or process slots for a fork: render in-line later
            receive.close()
            send.close()
            return self
        send.close()
        self._proc, self._conn = proc, receive
        return self

    def _work(self, send: Any) -> None:
        """Worker body: render everything, send back ("ok", results) or ("error", exception)."""
        try:
            message: tuple[str, Any] = ("ok", self._render_all())
        except BaseException as exc:  # re-raised in the parent
            message = ("error", exc)
        try:
            send.send(message)
        except Exception:  # something that does not pickle: the parent renders (and raises) it itself
            send.send(("inline", None))
        finally:
            send.close()

    def _render_all(self) -> dict[str, Rendered]:
        return {spec[0]: draw(spec, self._frame_of(spec[0]), self._out, self._html) for spec in self._specs}

    def results(self) -> dict[str, Rendered]:
        """Every figure by name; re-raises what the worker raised, renders here what the worker could not
        send back (it died, or its result did not pickle)."""
        if self._proc is None:
            return self._render_all()
        try:
            status, payload = self._conn.recv()
        except Exception:  # the worker died (killed, out of memory) before sending, or sent garbage
            status, payload = "inline", None
        finally:
            self._conn.close()
            self._proc.join()
            self._proc = None
        if status == "ok":
            return payload
        if status == "error":
            raise payload
        return self._render_all()
