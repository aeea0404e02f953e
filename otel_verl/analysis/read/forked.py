"""Work spread over forked reader processes, the calling process taking over when one dies: :func:`map_forked`."""

from __future__ import annotations

import logging
import multiprocessing as mp
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from typing import Any

logger = logging.getLogger(__name__)


def map_forked(fn: Callable[..., Any], jobs: int, *iterables: Iterable[Any], redo: bool = True) -> Iterator[Any]:
    """``map(fn, *iterables)`` in ``jobs`` forked processes, results in order as they come.

    fork, not spawn: spawn re-imports the caller's ``__main__`` (breaks unguarded user scripts) and pays the pandas
    import per worker. A reader can die: the OOM killer, or native code in a child of a process that had other
    threads (a lock held at the fork is never released; CI's test process saw glibc's "double free or corruption"
    once). The pool then breaks; with ``redo`` (``fn`` has no side effects) the calling process does what was not
    yet handed back, else :class:`BrokenProcessPool` is raised."""
    columns = [list(it) for it in iterables]
    done = 0
    try:
        with ProcessPoolExecutor(max_workers=jobs, mp_context=mp.get_context("fork")) as pool:
            for result in pool.map(fn, *columns):
                yield result
                done += 1
            return
    except BrokenProcessPool:
        if not redo:
            raise
        logger.warning("otel_verl: a forked reader died; reading the rest in this process")
    for args in list(zip(*columns, strict=True))[done:]:
        yield fn(*args)
