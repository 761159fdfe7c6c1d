"""Keeping glibc's malloc from returning, and then re-faulting, the temporaries of large CPU batches.

torch allocates CPU tensors with ``malloc``. glibc serves blocks above its mmap threshold (128 KB at start) by a
fresh ``mmap``, and releases the top of its heap when more than twice that threshold lies free there. Each time
it sees an mmapped block freed, it raises the threshold to that block's size, up to 32 MB. A ranking call on a
1M-item batch frees some 30 MB of temporaries at its end; with the thresholds a process usually has by then, glibc
hands most of them back to the kernel, and the next call pages them in again. For 8 measures on 1,000 x 1,000:
~3,900 page faults and ~10 ms of system time per call (a quarter of the call); none once the thresholds are up.

:func:`warm_cpu_allocator` allocates one block just under 32 MB and frees it, untouched: glibc then raises its
thresholds exactly as in any program that has once freed a buffer of that size (mmap 32 MB, heap trim 64 MB). It
changes no setting and pages nothing in; a process may then keep up to 64 MB of freed heap for reuse. Other
allocators (jemalloc, tcmalloc, macOS, Windows) see one allocation and its release. torchrank does it once, on the
first CPU batch of :data:`WARM_FROM_ITEMS` items or more; ``TORCHRANK_ALLOCATOR_WARMUP=0`` in the environment
turns it off. A user who sets glibc's own ``MALLOC_MMAP_THRESHOLD_`` / ``MALLOC_TRIM_THRESHOLD_`` keeps them: glibc
stops adapting its thresholds once they are set.
"""

from __future__ import annotations

import functools
import os

import torch

# batches from this many items up: their temporaries (256 KB each and up) are what glibc maps and unmaps afresh
WARM_FROM_ITEMS = 2**16
# just under glibc's largest dynamic mmap threshold (32 MB on 64-bit), so that freeing the block raises it there
_BLOCK_BYTES = 2**25 - 2**16


def warm_cpu_allocator_for(x: torch.Tensor) -> None:
    """:func:`warm_cpu_allocator` once ``x`` is a large enough CPU batch.

    Example:
        >>> import torch
        >>> warm_cpu_allocator_for(torch.zeros(3))  # a small batch: nothing to do
    """
    if x.device.type == "cpu" and x.numel() >= WARM_FROM_ITEMS:
        warm_cpu_allocator()


@functools.cache
def warm_cpu_allocator() -> bool:
    """Raise glibc's malloc thresholds as freeing a 32 MB buffer does (see the module's docstring), once per process;
    whether it did (glibc, not turned off)."""
    if os.environ.get("TORCHRANK_ALLOCATOR_WARMUP", "1") == "0" or not _is_glibc():
        return False
    block = torch.empty(_BLOCK_BYTES, dtype=torch.uint8)  # never written: no page is touched
    del block
    return True


def _is_glibc() -> bool:
    try:
        return os.confstr("CS_GNU_LIBC_VERSION") is not None
    except (AttributeError, ValueError, OSError):  # not a POSIX system, or the name unknown there
        return False
