"""Peak memory that a call allocates, counted op by op by the torch profiler: deterministic, unlike a process's
resident size, so a test can hold a memory bound on a loaded machine."""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch.profiler import ProfilerActivity, profile


def peak_cpu_allocation(call: Callable[[], object]) -> int:
    """The most bytes that ``call``'s CPU allocations hold at once, beyond what existed before it.

    One thread: the same allocations on any number of threads, and quicker on a loaded CI machine.
    """
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
            call()
    finally:
        torch.set_num_threads(threads)
    running = peak = 0
    for event in sorted(prof.events(), key=lambda e: e.time_range.start):
        running += event.self_cpu_memory_usage
        peak = max(peak, running)
    return peak
