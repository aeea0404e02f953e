"""How the user's shell runs ``otel-verl``: the spelling of every command the CLI prints for the user to run.

Why: ``bash scripts/demo.sh`` runs the demo with ``uv run``, which puts ``.venv/bin`` first on the PATH of its
child alone. Hints spelled ``otel-verl …`` then failed in the user's shell with "command not found" (issue 51).
The rule:

1. ``otel-verl`` when the user's shell finds this installation's script on its PATH (an activated venv, a pip
   install into the PATH's Python);
2. else that script's path, relative to the working directory when it lies below it (``.venv/bin/otel-verl``
   in a checkout): it runs as printed, without activating the venv and without uv.

The user's PATH is this process's PATH less the entry ``uv run`` put first: uv prepends its environment's
``bin`` (even when it is on the PATH already) and sets ``UV_RUN_RECURSION_DEPTH`` for the process it starts.
"""

from __future__ import annotations

import os
import shlex
import shutil
import sysconfig
from collections.abc import Mapping
from pathlib import Path

SCRIPT = "otel-verl"


def user_path(environ: Mapping[str, str] | None = None) -> str:
    """The PATH of the shell that started this process: ours, less the ``bin`` that ``uv run`` put first."""
    env = os.environ if environ is None else environ
    dirs = env.get("PATH", "").split(os.pathsep)
    venv = env.get("VIRTUAL_ENV")
    if env.get("UV_RUN_RECURSION_DEPTH") and venv and dirs and _same(dirs[0], os.path.join(venv, "bin")):
        dirs = dirs[1:]
    return os.pathsep.join(dirs)


def otel_verl_command(environ: Mapping[str, str] | None = None, cwd: Path | None = None) -> str:
    """``otel-verl``, or the path that runs this installation's ``otel-verl`` from ``cwd`` (default: the working
    directory), shell-quoted; a hint is this, a space and the subcommand with its arguments."""
    return script_command(SCRIPT, environ, cwd)


def script_command(name: str, environ: Mapping[str, str] | None = None, cwd: Path | None = None) -> str:
    """Any script of this environment (``otel-verl``, ``python``, ``tensorboard``) spelled by the same rule: its
    name where the user's shell finds this one, else its path (``.venv/bin/python``)."""
    script = Path(sysconfig.get_path("scripts")) / name
    found = shutil.which(name, path=user_path(environ))
    # the folder, not the file: the venv's python is a symlink to the base interpreter, which lacks the venv's packages
    if found and (not script.exists() or _same(os.path.dirname(found), str(script.parent))):
        return name
    if not script.exists():
        return name  # not installed with its entry points (PYTHONPATH): the name is the best hint there is
    here = (cwd or Path.cwd()).resolve()
    try:
        shown = str(script.absolute().relative_to(here))
    except ValueError:
        shown = str(script.absolute())
    return shlex.quote(shown)


def _same(a: str, b: str) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:
        return os.path.abspath(a) == os.path.abspath(b)
