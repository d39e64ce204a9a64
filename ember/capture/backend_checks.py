"""What a frame's capture asks about the backend it hands a graph to: whether it is the program's
own (its failure reaches the caller under fullgraph), and whether it compiled the graph by tracing
it again (so symbolic inputs became its example values)."""
from __future__ import annotations

import functools

import torch

from ember.fake.symbolic import has_symbols


def _bakes_in_symbols(backend, gm, compiled) -> bool:
    """Whether ``compiled`` may have fixed the symbolic inputs of ``gm`` to their example values:
    the graph has symbolic placeholders, the backend is not one of ember's, and what it returned is
    neither the graph itself (``gm``, ``gm.forward``) nor something an ember backend compiled, so it
    compiled the graph by tracing it again."""
    if compiled is None or compiled is gm or getattr(compiled, "__self__", None) is gm:
        return False
    if (getattr(backend, "__module__", None) or "").startswith("ember.") or \
            type(compiled).__module__.startswith("ember."):
        return False  # ember's own backends (or a wrapper returning what one compiled) keep the symbols
    for node in gm.graph.find_nodes(op="placeholder"):
        value = node.meta.get("example_value")
        if isinstance(value, (torch.SymInt, torch.SymFloat, torch.SymBool)) and has_symbols(value):
            return True
        if isinstance(value, torch.Tensor) and (has_symbols(tuple(value.shape)) or has_symbols(value.stride())):
            return True
    return False


def _program_backend(backend) -> bool:
    """Whether ``backend`` is the program's own: neither one of ember's (registered by name, or
    made by ember.backends) nor one of torch's (its backends, wrappers and test counters)."""
    fn = backend.func if isinstance(backend, functools.partial) else backend
    modules = (getattr(fn, "__module__", None) or "", type(fn).__module__ or "")
    return not any(m.startswith(("ember.", "torch.")) or m in ("ember", "torch") for m in modules)
