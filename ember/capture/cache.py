"""The per-function code cache: guarded entries, recompiles, the recompile limit, fallbacks.

`FrameCache.__call__` is the hot path: try each entry (each is one generated
function that checks its guards and runs its graph); on a miss, trace again
(up to ``config.recompile_limit`` entries), or run eagerly.
"""
from __future__ import annotations

import logging
import types
import warnings
import weakref
from typing import Callable

from ember import metrics
from ember.capture import codegen
from ember.capture.convert_frame import CacheEntry, capture
from ember.capture.graph_break import ResumeCache
from ember.config import config
from ember.exc import Unsupported

log_recompiles = logging.getLogger("ember.recompiles")
log_breaks = logging.getLogger("ember.graph_breaks")
log_guards = logging.getLogger("ember.guards")

_ALL_CACHES: "weakref.WeakSet[FrameCache]" = weakref.WeakSet()


class FrameCache:
    """Compiled entries for one Python function (a module's forward included)."""

    def __init__(self, fn: types.FunctionType, backend: Callable, fullgraph: bool = False, label: str = "",
                 resumes: "ResumeCache | None" = None, offset_map: dict | None = None):
        self.fn = fn
        self.backend = backend
        self.fullgraph = fullgraph
        self.label = label or fn.__qualname__
        self.binder = codegen.make_binder(fn)
        # Resume functions share the root function's ResumeCache (offsets mapped to the root's).
        self.root_resumes = resumes
        self.offset_map = offset_map
        self.resumes = resumes or ResumeCache(fn, self._compile_nested)
        self.break_reasons: list[Unsupported] = []
        self.entries: list[CacheEntry] = []
        self.run_eagerly_reason: str | None = None
        self.recompile_reasons: list[str] = []
        self.fallback_reasons: list[Unsupported] = []
        _ALL_CACHES.add(self)

    def _compile_nested(self, fn, offset_map=None):
        """Resume functions (sharing this ResumeCache, offsets mapped to the root's) and callees at
        a break (a cache of their own): compiled like the function itself."""
        return FrameCache(fn, self.backend, False, label=f"{self.label}:{fn.__code__.co_name}",
                          resumes=self.resumes if offset_map is not None else None, offset_map=offset_map)

    def reset(self) -> None:
        self.entries = []
        self.run_eagerly_reason = None
        self.recompile_reasons = []
        self.fallback_reasons = []
        self.break_reasons = []
        self.resumes = self.root_resumes or ResumeCache(self.fn, self._compile_nested)

    def __call__(self, *args, **kwargs):
        for entry in self.entries:
            result = entry.run(*args, **kwargs)
            if result is not codegen.MISS:
                return result
        return self._miss(args, kwargs)

    def _miss(self, args, kwargs):
        if self.run_eagerly_reason is not None or config.disable:
            return self.fn(*args, **kwargs)
        bound = self.binder(*args, **kwargs)  # raises eager's TypeError for bad arguments
        if self.entries:
            if len(self.entries) >= config.recompile_limit:
                self.run_eagerly_reason = f"recompile limit ({config.recompile_limit}) reached"
                warnings.warn(f"ember: {self.label} hit config.recompile_limit "
                              f"({config.recompile_limit}); running it eagerly from now on. Last reason: "
                              f"{self.recompile_reasons[-1] if self.recompile_reasons else '?'}",
                              stacklevel=3)
                return self.fn(*args, **kwargs)
            failed = self.entries[-1].failing_guards(bound)
            reason = failed[0] if failed else "guards failed"
            self.recompile_reasons.append(reason)
            metrics.bump("recompiles")
            log_recompiles.info("recompiling %s (entry %d): guard failed: %s", self.label, len(self.entries) + 1, reason)
        metrics.bump("frames")
        try:
            entry = capture(self.fn, bound, self.backend, self.label, self.resumes, self.fullgraph,
                            self.offset_map)
        except Unsupported as e:
            if self.fullgraph:
                raise
            metrics.bump("fallbacks")
            self.fallback_reasons.append(e)
            self.run_eagerly_reason = f"unsupported: {e.reason}"
            log_breaks.info("%s runs eagerly: %s", self.label, e)
            return self.fn(*args, **kwargs)
        except Exception as e:
            if config.strict:
                raise
            metrics.bump("fallbacks")
            self.run_eagerly_reason = f"internal error: {type(e).__name__}: {e}"
            warnings.warn(f"ember: compiling {self.label} failed with {type(e).__name__}: {e}; "
                          f"running it eagerly (set EMBER_STRICT=1 to raise)", stacklevel=3)
            return self.fn(*args, **kwargs)
        self.entries.append(entry)
        if entry.break_reason is not None:
            self.break_reasons.append(entry.break_reason)
            log_breaks.info("graph break in %s: %s", self.label, entry.break_reason)
        if log_guards.isEnabledFor(logging.DEBUG):
            log_guards.debug("guards for %s:\n  %s", self.label, "\n  ".join(entry.guards.readable()))
        result = entry.run(*args, **kwargs)
        if result is codegen.MISS:
            failed = entry.failing_guards(bound)
            raise AssertionError(f"ember internal error: fresh entry for {self.label} fails its own guards: "
                                 f"{failed}")
        return result


def reset_all() -> None:
    for cache in list(_ALL_CACHES):
        cache.reset()


def live_caches() -> list[FrameCache]:
    """Every live FrameCache (for reports)."""
    return list(_ALL_CACHES)
