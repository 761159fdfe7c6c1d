"""Opt-in: keep glibc's malloc from returning, and then re-faulting, the temporaries of large CPU batches.

torch allocates CPU tensors with ``malloc``. glibc serves blocks above its mmap threshold (128 KB at start) by a
fresh ``mmap``, and releases the top of its heap when more than twice that threshold lies free there. Each time
it sees an mmapped block freed, it raises the threshold to that block's size, up to 32 MB. A ranking call on a
1M-item batch frees tens of MB of temporaries at its end; with the thresholds a process usually has by then, glibc
hands most of them back to the kernel, and the next call pages them in again (``benchmarks/`` measures the cost).

:func:`warm_cpu_allocator` allocates one block just under 32 MB and frees it, untouched: glibc then raises its
thresholds exactly as in any program that has once freed a buffer of that size (mmap 32 MB, heap trim 64 MB). It
pages nothing in; the process may then keep up to 64 MB of freed heap for reuse. It changes how the whole process
allocates, so torchrank never calls it by itself: a program that evaluates large CPU batches in a loop may call it
once at start. Other allocators (jemalloc, tcmalloc, macOS, Windows) see one allocation and its release; glibc's own
``MALLOC_MMAP_THRESHOLD_`` / ``MALLOC_TRIM_THRESHOLD_``, when set, keep their values.

Example:
    >>> from torchrank.allocator import warm_cpu_allocator
    >>> warm_cpu_allocator() in (True, False)  # False off glibc
    True
"""

from __future__ import annotations

import functools
import os

import torch

# just under glibc's largest dynamic mmap threshold (32 MB on 64-bit), so that freeing the block raises it there
_BLOCK_BYTES = 2**25 - 2**16


@functools.cache
def warm_cpu_allocator() -> bool:
    """Raise glibc's malloc thresholds as freeing a 32 MB buffer does (see the module's docstring), once per process;
    whether it did (glibc only)."""
    if not _is_glibc():
        return False
    block = torch.empty(_BLOCK_BYTES, dtype=torch.uint8)  # never written: no page is touched
    del block
    return True


def _is_glibc() -> bool:
    try:
        return os.confstr("CS_GNU_LIBC_VERSION") is not None
    except (AttributeError, ValueError, OSError):  # not a POSIX system, or the name unknown there
        return False
