"""Timing for every benchmark workload: ``torch.utils.benchmark``, interleaved contenders, median and IQR.

A workload hands :func:`measure_contenders` a list of :class:`Contender` (a name, how to build a zero-argument
call on the first ``q`` queries, and a guard that checks the call's output against torchrank's). Each contender
is called once untimed (warm-up, and an estimate of its cost) and its output checked; then:

- **fast** (estimated under ``slow_threshold_s`` per call): ``Timer.blocked_autorange(min_run_time)``, in
  ``rounds`` rounds over all fast contenders of the workload, the order rotated each round, samples pooled;
- **slow**: single calls with the same synchronising clock as ``Timer`` (``torch.utils.benchmark``'s
  ``timer``, which calls ``torch.cuda.synchronize()`` when CUDA is available), ``slow_repeats`` of them
  interleaved with the other slow contenders. A contender whose cost is linear in the queries (a per-query
  Python loop) and whose repeats would exceed ``slow_budget_s`` is timed on the first ``subset_queries``
  queries and scaled linearly to the full count; the record says so (``scaled``).

The last timed call's output is checked again, so what was timed is what was checked.
"""

from __future__ import annotations

import gc
import math
import timeit
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch
from torch.utils.benchmark import Timer
from torch.utils.benchmark.utils.timer import timer as synchronising_clock

Log = Callable[[str], None]


@dataclass(frozen=True)
class TimingConfig:
    """How long and how often to time; the ``timing`` section of a workload in ``configs/bench/*.yaml``."""

    min_run_time: float = 0.5  # seconds of one blocked_autorange call (fast contenders)
    rounds: int = 2  # interleaved blocked_autorange rounds over the fast contenders
    slow_threshold_s: float = 1.0  # above this per call a contender is timed with single calls
    slow_repeats: int = 3  # single calls per slow contender
    slow_budget_s: float = 30.0  # a per-query loop whose repeats would take longer is timed on a subset
    pilot_queries: int = 200  # a per-query loop's first call runs on this many queries (cost estimate)
    subset_queries: int = 1000  # a per-query loop too slow for the budget is timed on this many and scaled

    @staticmethod
    def from_dict(values: dict[str, Any] | None) -> TimingConfig:
        """Build from a config section; unknown keys are an error (a typo would silently change the timing)."""
        values = dict(values or {})
        known = set(TimingConfig.__dataclass_fields__)
        unknown = set(values) - known
        if unknown:
            raise ValueError(f"timing: unknown keys {sorted(unknown)}; expected some of {sorted(known)}")
        return TimingConfig(**values)


@dataclass
class Contender:
    """One timed call of one library on one workload.

    ``build(q)`` does the untimed setup (input layouts, dicts, evaluator objects) for the first ``q`` queries and
    returns the call to time. ``check(output, q)`` is the correctness guard: it raises if the output disagrees with
    torchrank's values on those queries and returns what it compared (stored in the record). ``check=None`` only
    for calls whose output is not a measure value (conversions).
    """

    name: str
    library: str
    role: str  # "primary" (torchrank's headline call) | "variant" (another torchrank call) | "incumbent" | "conversion"
    description: str
    build: Callable[[int], Callable[[], Any]]
    check: Callable[[Any, int], dict[str, Any]] | None = None
    scalable: bool = False  # cost linear in the queries: may be timed on a subset and scaled
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass
class _Plan:
    contender: Contender
    fn: Callable[[], Any]
    method: str  # "blocked_autorange" | "single calls"
    queries: int
    repeats: int
    estimate_s: float
    guard: dict[str, Any] | None = None
    times: list[float] = field(default_factory=list)
    last_output: Any = None


# ----------------------------------------------------------------------------------------------- statistics
def quantile(xs: list[float], q: float) -> float:
    """Linear-interpolation quantile (numpy's default)."""
    s = sorted(xs)
    pos = (len(s) - 1) * q
    lo, hi = math.floor(pos), math.ceil(pos)
    return s[lo] + (s[hi] - s[lo]) * (pos - lo)


def summarize(times: list[float], scale: float = 1.0) -> dict[str, Any]:
    """Median, IQR and quartiles of ``times`` (seconds per call) times ``scale``; no spread from one sample."""
    scaled = [t * scale for t in times]
    enough = len(scaled) >= 2
    q1, q3 = (quantile(scaled, 0.25), quantile(scaled, 0.75)) if enough else (None, None)
    return {
        "median_s": quantile(scaled, 0.5),
        "iqr_s": q3 - q1 if enough else None,
        "q1_s": q1,
        "q3_s": q3,
        "repeats": len(scaled),
    }


# ----------------------------------------------------------------------------------------------- clocks
def single_call(fn: Callable[[], Any]) -> tuple[float, Any]:
    """One call timed with ``torch.utils.benchmark``'s synchronising clock, garbage collector off (as timeit)."""
    box: list[Any] = [None]

    def stmt() -> None:
        box[0] = fn()

    # no gc.collect() first: with the incumbents' dicts alive a full collection costs ~0.3 s, more than most calls;
    # timeit keeps the collector off during the call, which is what matters
    seconds = timeit.Timer(stmt, timer=synchronising_clock).timeit(number=1)
    return seconds, box[0]


def blocked(fn: Callable[[], Any], threads: int, min_run_time: float, label: str) -> tuple[list[float], Any]:
    """``Timer.blocked_autorange``: per-call times of each block, and the output of the last call."""
    box: list[Any] = [None]
    timer = Timer(stmt="box[0] = fn()", globals={"fn": fn, "box": box}, num_threads=threads, description=label)
    measurement = timer.blocked_autorange(min_run_time=min_run_time)
    return list(measurement.times), box[0]


def peak_memory_mb(fn: Callable[[], Any], device: torch.device) -> float | None:
    """Peak device memory one call allocates beyond what was allocated before it (CUDA only; None on CPU,
    where torch has no allocator statistics)."""
    if device.type != "cuda":
        return None
    torch.cuda.synchronize(device)
    gc.collect()
    torch.cuda.reset_peak_memory_stats(device)
    before = torch.cuda.memory_allocated(device)
    out = fn()
    torch.cuda.synchronize(device)
    peak = torch.cuda.max_memory_allocated(device) - before
    del out
    return peak / 2**20


# ----------------------------------------------------------------------------------------------- planning
def _plan(c: Contender, queries: int, cfg: TimingConfig, log: Log) -> _Plan:
    """Warm ``c`` up, check its output, and decide how to time it (see the module docstring)."""
    pilot_q = min(queries, cfg.pilot_queries) if c.scalable else queries
    fn = c.build(pilot_q)
    pilot_s, out = single_call(fn)
    guard = c.check(out, pilot_q) if c.check else None  # fail fast, before any timing
    estimate = pilot_s * queries / pilot_q
    if pilot_q == queries and estimate < cfg.slow_threshold_s:
        estimate, out = single_call(fn)  # a second call: the first may have paid one-off costs (caches, JIT)
    if estimate < cfg.slow_threshold_s:
        if pilot_q != queries:
            fn = c.build(queries)
            _, out = single_call(fn)  # warm-up at full size, checked at full size
            guard = c.check(out, queries) if c.check else None
        log(f"    {c.name}: ~{estimate:.3g} s/call -> blocked_autorange")
        return _Plan(c, fn, "blocked_autorange", queries, 0, estimate, guard)
    repeats, timed_q = cfg.slow_repeats, queries
    if c.scalable and estimate * repeats > cfg.slow_budget_s and cfg.subset_queries < queries:
        # only per-query loops are cut down (to a subset, scaled): every other call gets all its repeats, so that
        # torchrank's calls on the largest cells still have a median and an IQR
        timed_q = cfg.subset_queries
    if timed_q != pilot_q:
        fn = c.build(timed_q)
    subset = f" on the first {timed_q} of {queries} queries" if timed_q != queries else ""
    log(f"    {c.name}: ~{estimate:.3g} s/call -> {repeats} single calls{subset}")
    return _Plan(c, fn, "single calls", timed_q, repeats, estimate, guard)


def _rotated(items: list[_Plan], r: int) -> list[_Plan]:
    """Round ``r``'s order: rotate so that no contender always runs first (warm caches, thermal state)."""
    if not items:
        return items
    r %= len(items)
    return items[r:] + items[:r]


def measure_contenders(
    contenders: list[Contender], queries: int, cfg: TimingConfig, threads: int, device: torch.device, log: Log
) -> list[dict[str, Any]]:
    """Plan, guard, time (interleaved) and re-guard every contender; one timing dict per contender, in order."""
    plans = [_plan(c, queries, cfg, log) for c in contenders]
    fast = [p for p in plans if p.method == "blocked_autorange"]
    slow = [p for p in plans if p.method == "single calls"]
    for r in range(cfg.rounds if fast else 0):
        for p in _rotated(fast, r):
            times, p.last_output = blocked(p.fn, threads, cfg.min_run_time, p.contender.name)
            p.times.extend(times)
    for r in range(max((p.repeats for p in slow), default=0)):
        for p in _rotated(slow, r):
            if r < p.repeats:
                seconds, p.last_output = single_call(p.fn)
                p.times.append(seconds)
                log(f"    {p.contender.name}: {seconds:.3g} s")
    return [_finish(p, queries, device) for p in plans]


def _finish(p: _Plan, queries: int, device: torch.device) -> dict[str, Any]:
    c = p.contender
    guard = p.guard
    if c.check is not None:
        guard = {**c.check(p.last_output, p.queries), "checked": ["warm-up call", "last timed call"]}
    p.last_output = None
    scale = queries / p.queries  # a per-query loop timed on a subset: scaled linearly to the full count
    timing = summarize(p.times, scale)
    timing.update(
        method=p.method,
        estimate_s=p.estimate_s,
        scaled=None if scale == 1.0 else {"measured_queries": p.queries, "factor": scale,
                                          "measured_median_s": quantile(p.times, 0.5)},
        peak_mem_mb=peak_memory_mb(p.fn, device) if p.method == "blocked_autorange" else None,
        guard=guard,
    )
    return timing
