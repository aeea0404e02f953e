"""The V1 trainer's dataloaders, stood in for: the demo's prompts in the form verl's ``collate_fn`` gives.

verl's ``_init_dataloader`` builds an ``RLHFDataset`` from parquet files; the trainer only iterates the
loader (``_fetch_one_gen_batch``: batches of ``gen_batch_size`` prompts as numpy object arrays, to which
verl adds the ``uid``). :class:`DemoPrompts` yields the demo's prompts that way, cycling through them; the
question's numbers and a planted slow tool (``slow_tool``, in verl's ``tools_kwargs``) follow the step the
trainer is in when it fetches.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from otel_verl.demo.options import DemoOptions


def prompt_rows(opts: DemoOptions, step: int, plan: dict[str, Any] | None) -> dict[str, Any]:
    """One row per prompt (rollout.n is expanded by verl's worker), as verl's collate_fn makes them."""
    from otel_verl.demo.trainer import _batch

    return dict(_batch(DemoOptions(prompts=opts.prompts, n=1), step, plan).non_tensor_batch)


class DemoPrompts:
    """The train dataloader: endless batches of ``batch_size`` prompts, prompt indices cycling."""

    def __init__(self, opts: DemoOptions, batch_size: int, step: Callable[[], int], plan: Callable[[int], Any]):
        self.opts = opts
        self.batch_size = batch_size
        self.step = step
        self.plan = plan
        self._next = 0

    def __iter__(self) -> Iterator[dict[str, Any]]:
        while True:
            step = self.step()
            rows = prompt_rows(self.opts, step, self.plan(step))
            picks = [(self._next + i) % self.opts.prompts for i in range(self.batch_size)]
            self._next += self.batch_size
            yield {key: values[picks] for key, values in rows.items() if key != "uid"}

    def __len__(self) -> int:
        return self.opts.prompts * self.opts.steps // self.batch_size


def validation_batches(opts: DemoOptions) -> list[dict[str, Any]]:
    """The val dataloader: one batch of all prompts (``val_kwargs.n`` = 1)."""
    rows = prompt_rows(opts, 0, None)
    rows.pop("uid", None)
    return [rows]
