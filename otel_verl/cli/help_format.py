"""How ``--help`` looks: a type column that says only what an option takes, and lines a user copies whole.

Why a command class: typer 0.29 writes a type for every option, ``<bool>`` for a flag too, so ``--no-html``
read as if it took a value (``--no-html true`` → "unexpected extra argument"), and ``<float range>`` before
``[0.0<=x<=0.9]`` narrowed the help column of ``demo --help`` to 24 characters at 80 columns. The classes
below tidy each option as the help is drawn (:func:`tidy`); parsing is typer's, unchanged.

Why :data:`HOOK` is printed apart: rich wraps help text at the terminal's width, so the 85-character hook override
broke in two at 80 columns (``…otel_verl.activate.`` / ``setup``) and a copied line failed. It is printed
after the top-level help as one line, whatever the width (a terminal may fold it on screen; a copy is whole).
"""

from __future__ import annotations

from typing import Any

from typer.core import TyperCommand, TyperGroup, TyperOption

HOOK = "+ray_kwargs.ray_init.runtime_env.worker_process_setup_hook=otel_verl.activate.setup"
"""The hydra override that traces a verl run (:mod:`otel_verl.activate`)."""


def tidy(params: list[Any], ctx: Any) -> list[Any]:
    """A flag shows no type (it takes no value); a number with a range shows the range alone (``[x>=1]``, which
    typer appends) instead of ``<int range> [x>=1]``. An option that names its own metavar keeps it."""
    for p in params:
        if isinstance(p, TyperOption) and p.metavar is None and (p.is_flag or p._get_number_range_help_str()):
            p.metavar = ""
    return params


class Command(TyperCommand):
    """A command whose ``--help`` shows :func:`tidy`'s type column."""

    def get_params(self, ctx: Any) -> list[Any]:
        return tidy(super().get_params(ctx), ctx)


class Group(TyperGroup):
    """The ``otel-verl`` group: :func:`tidy`'s type column, then :data:`HOOK` on a line of its own."""

    def get_params(self, ctx: Any) -> list[Any]:
        return tidy(super().get_params(ctx), ctx)

    def format_help(self, ctx: Any, formatter: Any) -> None:
        super().format_help(ctx, formatter)
        print(f" Trace a real verl run: add this to its command line (one line):\n\n {HOOK}\n")
