"""What the demo's user reads: its own lines, not other libraries talking to themselves.

What ``scripts/demo.sh`` printed before this module (counts: docs/performance.md) that was not the user's
business: TransferQueue's "target_num_threads 8 should not exceed total physical CPU cores" (twice per
client, ~45 times), verl's engine registry ("torchtitan/veomni/automodel/mindspeed/megatron engine is not available",
with their source lines), verl's platform probe ("No supported accelerator detected", expected on a CPU demo), its
critic notice, Ray's token-authentication notice (the demo's cluster is private and local), torch's ``is_fx_tracing``
notice, and verl's own ``print``s (server addresses, validation metrics as a Python dict); with ``--logger mlflow``,
mlflow's notice that it creates the run's experiment.

What is silenced, and only that: those loggers below ERROR, those warnings by their message, and verl's prints on
stdout while the run lasts (but the live account's line per step). Errors still show: every logger keeps ERROR and
above, exceptions propagate, stderr is untouched, and ``--verbose`` (``OTEL_VERL_DEMO_VERBOSE=1``) turns all of it
back on.
"""

from __future__ import annotations

import contextlib
import io
import logging
import os
import sys
import warnings
from collections.abc import Iterator
from typing import TextIO

QUIET_ENV = {"TQ_LOGGING_LEVEL": "ERROR", "VERL_LOGGING_LEVEL": "ERROR"}
"""Read by TransferQueue and verl when their modules are imported, in this process and in every Ray actor (the
demo hands the variables to the actors' runtime env)."""

QUIET_LOGGERS = (
    "ray._private.authentication",  # "Token authentication is enabled for this Ray cluster ..."
    "transfer_queue",
    "verl",
    "torch.fx._symbolic_trace",  # "is_fx_tracing will return true for both ..."
    "mlflow.tracking.fluent",  # --logger mlflow: "Experiment with name 'verl_examples' does not exist. Creating ..."
)
QUIET_WARNINGS = (
    r".* engine is not available",  # verl/workers/engine/__init__.py: optional training engines not installed
    r"Disabled critic as algorithm\.adv_estimator != gae",  # the demo's GRPO config, by design
)


KEEP_LINES = ("otel_verl | ",)
"""stdout lines that still show: the live account's verdict per step (``otel_verl.live.backends.CONSOLE_PREFIX``)."""


def verbose() -> bool:
    return os.environ.get("OTEL_VERL_DEMO_VERBOSE", "").lower() in ("1", "true", "yes")


def _quiet_names() -> list[str]:
    """:data:`QUIET_LOGGERS` and every logger already made below them: a module that set its own level at import
    (TransferQueue's and verl's do) would not inherit the parent's."""
    made = [n for n in logging.root.manager.loggerDict if any(n.startswith(q + ".") for q in QUIET_LOGGERS)]
    return [*QUIET_LOGGERS, *made]


class _KeepLines(io.TextIOBase):
    """stdout that drops verl's prints but passes on whole lines starting with one of ``keep`` (the live account's
    console line, :data:`otel_verl.live.backends.CONSOLE_PREFIX`, is the user's business)."""

    def __init__(self, target: TextIO, keep: tuple[str, ...]) -> None:
        self.target, self.keep, self.pending = target, keep, ""

    def writable(self) -> bool:
        return True

    def write(self, text: str) -> int:
        *lines, self.pending = (self.pending + text).split("\n")
        for line in lines:
            if line.startswith(self.keep):
                self.target.write(line + "\n")
        return len(text)


@contextlib.contextmanager
def third_party_quiet(enabled: bool = True) -> Iterator[None]:
    """Silence the libraries' noise for the duration (nothing when ``enabled`` is false)."""
    if not enabled:
        yield
        return
    for key, value in QUIET_ENV.items():
        os.environ.setdefault(key, value)
    levels = {name: logging.getLogger(name).level for name in _quiet_names()}
    for name in levels:
        logging.getLogger(name).setLevel(logging.ERROR)
    with warnings.catch_warnings(), contextlib.redirect_stdout(_KeepLines(sys.stdout, KEEP_LINES)):
        for message in QUIET_WARNINGS:
            warnings.filterwarnings("ignore", message=message, category=UserWarning)
        try:
            yield
        finally:
            for name, level in levels.items():
                logging.getLogger(name).setLevel(level)
