"""Does a program turn grad mode on inside itself?

A captured graph may contain ``torch._C._set_grad_enabled(True)`` (an
``enable_grad`` region, or a resume function leaving a ``no_grad`` block). Then
gradients can flow even when grad mode is off when the graph is called, so the
AOT layer must take the training path, not the inference one.
"""
from __future__ import annotations

import contextlib

import torch


def graph_enables_grad(fn) -> bool:
    """True if ``fn`` (a GraphModule, or a function closing over one) contains ``_set_grad_enabled(True)``."""
    return any(n.op == "call_function" and n.target is torch._C._set_grad_enabled and n.args and n.args[0]
               for gm in _graph_modules(fn) for n in gm.graph.nodes)


def _graph_modules(fn, depth: int = 4) -> list:
    """The GraphModules ``fn`` is, is bound to, or closes over -- through the closures of the
    functions it closes over too (the program wrapped for a synthetic-base layout closes over the
    flat program, which closes over the graph)."""
    found = []
    if isinstance(fn, torch.fx.GraphModule):
        found.append(fn)
    owner = getattr(fn, "__self__", None)
    if isinstance(owner, torch.fx.GraphModule):
        found.append(owner)
    for cell in getattr(fn, "__closure__", None) or ():
        try:
            value = cell.cell_contents
        except ValueError:
            continue
        if isinstance(value, torch.fx.GraphModule):
            found.append(value)
        elif depth > 0 and callable(value) and getattr(value, "__closure__", None):
            found.extend(m for m in _graph_modules(value, depth - 1) if m not in found)
    return found


@contextlib.contextmanager
def program_grad_mode():
    """Run a program (to collect metadata, or to trace it) and then put grad mode back: a graph may
    set it and leave it set (torch.compile's graphs do: Dynamo restores the mode after the graph),
    and the compiler's next step must start in the mode the graph is compiled for."""
    entry = torch.is_grad_enabled()
    try:
        yield entry
    finally:
        torch._C._set_grad_enabled(entry)
