"""``ember.explain(fn)(*args, **kwargs)``: what ember did with a call, in readable form.

Mirrors Dynamo's ``explain``: compile ``fn`` with a recording backend,
run it once on the given arguments, and report the graphs (as GraphModules
and code), graph count, break reasons (reason, ``file:line``, source line,
user stack), the guards of each cache entry, and op counts.
"""
from __future__ import annotations

import dataclasses
from typing import Any, Callable

import torch

from ember import metrics
from ember.capture.graph_break import readable_code


@dataclasses.dataclass
class BreakReason:
    reason: str
    where: str | None
    source_line: str | None
    user_stack: list[str]
    id: str = "EB0000"       # its class in the graph-break registry (docs/graph_breaks.md)
    explanation: str = ""    # the registry's one-line explanation of that class
    hint: str = ""           # what the user can change

    def __str__(self) -> str:
        s = f"{self.id}: {self.reason}"
        if self.where:
            s += f"\n      at {self.where}"
            if self.source_line:
                s += f"\n        {self.source_line.strip()}"
        if self.hint:
            s += f"\n      hint: {self.hint}"
        return s

    @classmethod
    def of(cls, e) -> "BreakReason":
        """The record of an ``Unsupported`` (a graph break or an eager fallback)."""
        kind_id = getattr(e, "id", None) or "EB0000"
        from ember.capture.break_registry import lookup
        kind = lookup(kind_id)
        return cls(e.reason, e.where, e.source_line, e.user_stack, kind_id, kind.explanation, kind.hint)


@dataclasses.dataclass
class ExplainOutput:
    graphs: list[torch.fx.GraphModule]
    graph_count: int
    graph_break_count: int
    break_reasons: list[BreakReason]
    op_count: int
    ops_per_graph: list[list[str]]
    guards: list[list[str]]          # per cache entry, readable
    generated_code: list[str]        # per cache entry: the entry function ember generated
    recompile_reasons: list[str]
    compile_times: dict[str, float]
    result: Any = None
    #: each resume function ember made at a graph break: (name, disassembly, plus Python source
    #: when the optional depyf package decompiles it)
    resume_code: list[tuple[str, str]] = dataclasses.field(default_factory=list)
    #: per cache entry, its Guard objects in the order of ``guards``: ``.kind``, ``.text`` and
    #: ``.provenance`` (the user's line and operation that made the trace depend on it, or None)
    guard_details: list[list] = dataclasses.field(default_factory=list)

    def __str__(self) -> str:
        lines = [f"Graph count: {self.graph_count}", f"Graph break count: {self.graph_break_count}",
                 f"Op count: {self.op_count}"]
        if self.break_reasons:
            lines.append("Break reasons:")
            for i, r in enumerate(self.break_reasons, 1):
                lines.append(f"  {i}. {r}")
        for i, ops in enumerate(self.ops_per_graph, 1):
            lines.append(f"Ops in graph {i} ({len(ops)}): " + ", ".join(ops[:20]) + (" ..." if len(ops) > 20 else ""))
        for i, gs in enumerate(self.guards, 1):
            lines.append(f"Guards of entry {i} ({len(gs)}):")
            details = self.guard_details[i - 1] if i <= len(self.guard_details) else []
            for j, g in enumerate(gs):
                lines.append(f"  - {g}")
                prov = details[j].provenance if j < len(details) else None
                if prov is not None:
                    lines.append(f"      ← {prov}")
        if self.recompile_reasons:
            lines.append("Recompile reasons:")
            lines.extend(f"  - {r}" for r in self.recompile_reasons)
        for name, _code in self.resume_code:
            lines.append(f"Resume function: {name} (code in .resume_code)")
        lines.append("Compile time: " + ", ".join(f"{k} {v * 1000:.1f} ms" for k, v in self.compile_times.items()))
        return "\n".join(lines)


def _op_name(node) -> str:
    t = node.target
    if node.op == "call_method":
        return f"Tensor.{t}"
    return getattr(t, "__qualname__", None) or getattr(t, "__name__", None) or str(t)


def _all_caches(root) -> list:
    """The compiled function's cache, then those of its resume functions and compiled callees."""
    seen, order, todo = set(), [], [root]
    while todo:
        cache = todo.pop(0)
        if id(cache) in seen:
            continue
        seen.add(id(cache))
        order.append(cache)
        # ResumeCache keeps (compiled resume function, its resume code) per resume point
        # (an eager one, which runs the rest of a frame uncompiled, is a plain function: no cache)
        found = [v[0] if isinstance(v, tuple) else v for v in cache.resumes._resume.values()]
        todo.extend(c for c in [*found, *cache.resumes._callees.values()] if hasattr(c, "resumes"))
    return order


def explain(fn: Callable, *args, **kwargs):
    """``explain(fn)(*args)``; the older ``explain(fn, *args)`` form also works."""
    from ember.api import compile as ember_compile

    def run(*call_args, **call_kwargs) -> ExplainOutput:
        graphs: list[torch.fx.GraphModule] = []

        def recording_backend(gm, example_inputs):
            graphs.append(gm)
            return gm.forward

        before = dict(metrics.phase_seconds)
        compiled = ember_compile(fn, backend=recording_backend)
        result = compiled(*call_args, **call_kwargs)
        root = compiled._ember_cache if isinstance(compiled, torch.nn.Module) else compiled._cache
        caches = _all_caches(root) if root is not None else []  # nothing compiled (a builtin)
        reasons = [BreakReason.of(e) for cache in caches for e in cache.break_reasons + cache.fallback_reasons]
        ops = [[_op_name(n) for n in g.graph.nodes if n.op in ("call_function", "call_method")] for g in graphs]
        times = {k: v - before.get(k, 0.0) for k, v in metrics.phase_seconds.items()}
        return ExplainOutput(
            graphs=graphs, graph_count=len(graphs), graph_break_count=len(reasons), break_reasons=reasons,
            op_count=sum(len(o) for o in ops), ops_per_graph=ops,
            guards=[e.guards.readable() for cache in caches for e in cache.entries],
            guard_details=[e.guards.ordered() for cache in caches for e in cache.entries],
            generated_code=[e.source for cache in caches for e in cache.entries],
            recompile_reasons=[r for cache in caches for r in cache.recompile_reasons],
            compile_times=times, result=result,
            resume_code=[(c.fn.__code__.co_qualname, readable_code(c.fn.__code__)) for c in caches[1:]
                         if c.fn.__code__.co_name.startswith("resume_at_")])

    if args or kwargs:
        return run(*args, **kwargs)
    return run
