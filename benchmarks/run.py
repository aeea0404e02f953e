"""Run the benchmark suite: every ``benchmarks/bench_*.py`` module's ``run(quick) -> list[Result]``.

    uv run --frozen python -m benchmarks.run [--quick] [--only NAME ...] [--out benchmarks/RESULTS.md]

Prints one rich table and writes it as Markdown (the README quotes that file). A benchmark that
raises becomes a failed row with the error, so one broken target never hides the others.
"""

from __future__ import annotations

import importlib
import os
import platform
import re
import sys
import time
import traceback
from pathlib import Path

import typer
from rich.console import Console
from rich.table import Table

from benchmarks._table import Result

HERE = Path(__file__).resolve().parent
os.environ.setdefault("RAY_ENABLE_UV_RUN_RUNTIME_ENV", "0")
os.environ.setdefault("VERL_LOGGING_LEVEL", "ERROR")

app = typer.Typer(add_completion=False)


def modules() -> list[str]:
    """``bench_*`` module names, in file order (bench_analyzer_scale, bench_burst, ...)."""
    return sorted(p.stem for p in HERE.glob("bench_*.py"))


def run_one(name: str, quick: bool) -> tuple[list[Result], float]:
    t0 = time.perf_counter()
    try:
        module = importlib.import_module(f"benchmarks.{name}")
        rows = list(module.run(quick))
    except Exception as exc:  # a broken benchmark is a failed row, not a crashed suite
        traceback.print_exc()
        rows = [Result(name, "runs", f"error: {type(exc).__name__}", False, str(exc)[:200])]
    return rows, time.perf_counter() - t0


def markdown(rows: list[Result], quick: bool, seconds: float) -> str:
    lines = [
        "<!-- written by `python -m benchmarks.run`; do not edit by hand -->",
        f"Measured {time.strftime('%Y-%m-%d')} on {platform.machine()}, {os.cpu_count()} CPUs, "
        f"CPython {platform.python_version()}{' (--quick)' if quick else ''}; suite took {seconds / 60:.1f} min.",
        "",
        "| target | goal | measured | ok | detail |",
        "| --- | --- | --- | --- | --- |",
    ]
    for r in rows:
        cells = [r.label, r.goal, r.measured, "✅" if r.ok else "❌", r.detail]
        lines.append("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")
    return "\n".join(lines) + "\n"


def kept_sections(path: Path) -> str:
    """Sections a benchmark maintains in the file itself (``<!-- BEGIN … -->`` … ``<!-- END … -->``, e.g.
    bench_diagnosis's tables): kept, after the table, when the suite rewrites the file."""
    if not path.exists():
        return ""
    blocks = re.findall(r"<!-- BEGIN .*?-->.*?<!-- END .*?-->\n?", path.read_text(), re.S)
    return "".join("\n" + block for block in blocks)


def quote_in_readme(text: str, readme: Path = HERE.parent / "README.md") -> None:
    """Replace the README's results block (between the BEGIN/END RESULTS markers) with ``text``."""
    begin, end = "<!-- BEGIN RESULTS (benchmarks/RESULTS.md) -->", "<!-- END RESULTS -->"
    body = readme.read_text()
    if begin in body and end in body:
        head, rest = body.split(begin, 1)
        readme.write_text(head + begin + "\n" + text + rest[rest.index(end) :])


@app.command()
def main(
    quick: bool = typer.Option(False, "--quick", help="Smaller sizes and fewer repetitions (~3 min)."),
    only: list[str] = typer.Option(  # noqa: B008 - typer's declaration style
        [], "--only", help="Run only benchmarks whose module name contains this (repeatable): burst, memory..."
    ),
    out: Path = typer.Option(HERE / "RESULTS.md", "--out", help="Markdown file for the table."),  # noqa: B008
) -> None:
    """Run the benchmarks, print one table, write it as Markdown."""
    names = [n for n in modules() if not only or any(o in n for o in only)]
    if not names:
        typer.echo(f"no benchmark matches {only}; available: {', '.join(modules())}", err=True)
        raise typer.Exit(2)
    console = Console()
    rows: list[Result] = []
    t0 = time.perf_counter()
    for name in names:
        console.print(f"[bold]{name}[/] …")
        got, seconds = run_one(name, quick)
        console.print(f"  done in {seconds:.0f} s")
        rows.extend(got)
    total = time.perf_counter() - t0
    rows.sort(key=lambda r: r.target)
    table = Table(title=f"otel_verl benchmarks{' (quick)' if quick else ''}")
    for col in ("target", "goal", "measured", "ok", "detail"):
        table.add_column(col, overflow="fold")
    for r in rows:
        table.add_row(r.label, r.goal, r.measured, "[green]yes[/]" if r.ok else "[red]NO[/]", r.detail)
    console.print(table)
    text = markdown(rows, quick, total)
    out.write_text(text + kept_sections(out))
    console.print(f"written to {out}")
    if not only and out.resolve() == (HERE / "RESULTS.md").resolve():
        quote_in_readme(text)
    raise typer.Exit(0 if all(r.ok for r in rows if r.gating) else 1)


if __name__ == "__main__":
    sys.exit(app())
