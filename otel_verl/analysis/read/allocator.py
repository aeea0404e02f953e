"""The analysis process's memory: which allocator Arrow uses, and handing freed memory back after a load."""

from __future__ import annotations

import os

import pyarrow as pa

POOL_ENV = "ARROW_DEFAULT_MEMORY_POOL"


def use_system_allocator() -> None:
    """Arrow allocates with the C library's malloc in this process (and the workers it forks), unless
    ``ARROW_DEFAULT_MEMORY_POOL`` says otherwise. Called by the command line, not by the library.

    Why: pyarrow's default pool (mimalloc in today's wheels) gave freed pages back to the kernel at once
    here, and touching fresh pages again cost kernel time (docs/performance.md). jemalloc does as well as
    malloc, but not every pyarrow build has it.
    """
    if os.environ.get(POOL_ENV):
        return
    pa.set_memory_pool(pa.system_memory_pool())


def release_memory() -> None:
    """Hand the load's freed temporaries back to the OS (Arrow's pool and glibc keep them for reuse otherwise),
    so the analysis that follows starts from the table's real size."""
    pa.default_memory_pool().release_unused()
    try:
        import ctypes

        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):  # not glibc
        pass
