"""``otel-verl check-seams``: which of otel_verl's seams fit a verl, the installed one or a source tree."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from otel_verl.cli.common import console
from otel_verl.cli.consoles import console as make_console
from otel_verl.cli.prose import Prose

CHECK_SEAMS_HELP = (
    "Check every seam (a verl function or method that otel_verl wraps to record its spans) against a verl: "
    "the installed one, or a source tree (`--verl-source`, "
    "e.g. a clone of verl's main; imported with this environment's other packages). Prints one line per seam "
    "that does not fit, with what is then not recorded, and a summary; exit 1 when any seam does not fit. "
    "Seams of engines that are not installed (SGLang, vLLM) are skipped."
)


def _from_source(source: Path) -> dict[str, Any]:
    """The check in a child process that imports verl from ``source`` (the installed verl is not loaded there)."""
    path = os.pathsep.join([str(source), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    env = {**os.environ, "PYTHONPATH": path}
    cmd = [sys.executable, "-m", "otel_verl.instrumentation.seam_check"]
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=900, cwd=source)
    if done.returncode != 0:
        tail = (done.stderr or done.stdout).strip().splitlines()[-1:] or ["no output"]
        console.print(f"error: the check could not run against {source}: {tail[0]}")
        raise typer.Exit(code=2)
    return json.loads(done.stdout.strip().splitlines()[-1])


def _from_installed() -> dict[str, Any]:
    """The check against the installed verl, quiet: importing verl's modules logs, prints and warns (``warnings``:
    torchtitan, veomni, megatron... engines not installed) about what it lacks here, which is not the answer."""
    import contextlib
    import io
    import logging
    import warnings

    from otel_verl.instrumentation.seam_check import check_all, verl_identity

    logging.disable(logging.WARNING)
    try:
        with contextlib.redirect_stdout(io.StringIO()), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return {"verl": verl_identity(), "seams": [fit.as_dict() for fit in check_all()]}
    finally:
        logging.disable(logging.NOTSET)


def check_seams(
    verl_source: Annotated[
        Path | None,
        typer.Option(help="A verl source tree (the directory holding `verl/`) instead of the installed verl."),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the whole result as JSON.")] = False,
) -> None:
    if verl_source is not None:
        if not (verl_source / "verl" / "__init__.py").is_file():
            console.print(f"error: --verl-source {verl_source}: no verl/__init__.py there")
            raise typer.Exit(code=2)
        result = _from_source(verl_source.resolve())
    else:
        result = _from_installed()
    if as_json:
        print(json.dumps(result, indent=2))
    seams = result["seams"]
    misfits = [s for s in seams if s["status"] == "misfit"]
    absent = [s for s in seams if s["status"] == "absent"]
    if not as_json:
        answer = make_console()  # the answer, on stdout (a script may grep it); errors alone on stderr
        for s in misfits:
            answer.print(f"[bold red]misfit[/] {s['module']}.{s['method']}: {s['why']} → not recorded: {s['records']}")
        verl = result["verl"]
        answer.print(
            Prose(
                f"verl {verl['version']} ({verl['path']}): {len(seams) - len(misfits) - len(absent)} of "
                f"{len(seams)} seams fit, {len(misfits)} do not, {len(absent)} skipped (an engine not installed, "
                "or another name of the seam wrapped instead)"
            )
        )
        answer.print(Prose(_live_line(seams)))
    if misfits:
        raise typer.Exit(code=1)


def _live_line(seams: list[dict[str, Any]]) -> str:
    """Whether the seams the live account needs fit (``targets.LIVE_KINDS``), and which do not."""
    from otel_verl.instrumentation.targets import LIVE_KINDS, TARGETS

    need = {(t.module, t.method) for t in TARGETS if t.kind in LIVE_KINDS}
    mine = [s for s in seams if (s["module"], s["method"]) in need]
    bad = [f"{s['method']}" for s in mine if s["status"] == "misfit"]
    fit = sum(1 for s in mine if s["status"] == "fits")
    line = f"live account (otel_verl/* in verl's logger): {fit} of {len(mine)} seams it needs fit"
    return line + (f"; these do not: {', '.join(bad)}" if bad else "")
