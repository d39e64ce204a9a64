"""What ember has compiled so far, for tools (the demo, benchmarks, notebooks).

    from ember.report import compiled_functions
    for f in compiled_functions():
        print(f.label, f.guard_counts, f.graph_node_counts, f.break_reasons, f.runs_eagerly_because)

One `CompiledFunctionReport` per function ember keeps a cache for (compiled
functions, their resume functions, callees compiled at graph breaks), since
the last ``ember.reset()``.
"""
from __future__ import annotations

import dataclasses


@dataclasses.dataclass
class CompiledFunctionReport:
    label: str
    guard_counts: list[int]            # per cache entry
    graph_node_counts: list[int]       # per compiled graph (entries without a graph skipped)
    break_reasons: list[str]           # "EB0016: reason at file:line"
    runs_eagerly_because: str | None   # set when the function is no longer compiled
    recompile_reasons: list[str]


def _describe(e) -> str:
    where = getattr(e, "where", None)
    kind = getattr(e, "id", None)
    return (f"{kind}: " if kind else "") + f"{getattr(e, 'reason', e)}" + (f" at {where}" if where else "")


def compiled_functions() -> list[CompiledFunctionReport]:
    from ember.capture.cache import live_caches
    out = []
    for cache in live_caches():
        if not cache.entries and cache.run_eagerly_reason is None:
            continue
        out.append(CompiledFunctionReport(
            label=cache.label,
            guard_counts=[len(e.guards) for e in cache.entries],
            graph_node_counts=[len(e.graph.graph.nodes) for e in cache.entries if e.graph is not None],
            break_reasons=[_describe(e) for e in cache.break_reasons],
            runs_eagerly_because=cache.run_eagerly_reason,
            recompile_reasons=list(cache.recompile_reasons)))
    return out
