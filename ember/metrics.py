"""Counters and phase timers since the last ``ember.reset()``.

A leaf module (standard library only) so that every layer may record into it.
"""
from __future__ import annotations

import collections
import contextlib
import time

COUNTER_NAMES = ("frames", "graphs", "recompiles", "graph_breaks", "fallbacks")

counters: collections.Counter = collections.Counter()
phase_seconds: dict[str, float] = collections.defaultdict(float)


def bump(name: str, n: int = 1) -> None:
    counters[name] += n


@contextlib.contextmanager
def timed(phase: str):
    """Add the wall time of the block to ``phase`` (nested phases both count)."""
    start = time.perf_counter()
    try:
        yield
    finally:
        phase_seconds[phase] += time.perf_counter() - start


def stats() -> dict[str, int]:
    return {name: counters.get(name, 0) for name in COUNTER_NAMES}


def compile_times() -> dict[str, float]:
    return dict(phase_seconds)


def clear() -> None:
    counters.clear()
    phase_seconds.clear()
