"""``with torch.nn.attention.sdpa_kernel(backends):`` inside a compiled frame.

The context manager enables the given scaled-dot-product-attention backends and disables the
others (``torch.nn.attention._sdpa_kernel``); leaving it puts back the ones it found. As in
torch.compile, entering and leaving are graph nodes (`set_sdpa_backends`), so the graph runs the
block's attention under the block's backends; the trace keeps the state they set (the state at
entry is read once, guarded).

Graphs stay balanced, as for ``disable_saved_tensors_hooks`` (saved_hooks.py): a graph that ends
inside the block (a graph break there) ends with the entry state again, and the entry code sets the
block's state after the graph, so the breaking instruction runs inside the block; the resume
function gets an `SdpaExit` as the block's ``__exit__``, which puts back the state the block found.
``set_priority=True`` (a priority order as well) is not modelled: a graph break.
"""
from __future__ import annotations

import torch

from ember.capture.variables.base import ConstantVariable, VariableTracker, unsupported

_UNSET = object()


def sdpa_backends() -> tuple:
    """The enabled backends now, by name (sorted)."""
    return tuple(sorted(b.name for b in torch.nn.attention._cur_sdpa_kernel_backends()))


def set_sdpa_backends(names: tuple) -> None:
    """Enable exactly the backends ``names`` (a graph node, and the entry code's after a graph)."""
    torch.nn.attention._sdpa_kernel([getattr(torch.nn.attention.SDPBackend, n) for n in names])


class _Target(VariableTracker):
    """This module, as the target of a call replayed after the graph."""

    def __init__(self):
        import sys
        from ember.capture.sources import ConstSource
        self.source = ConstSource(sys.modules[__name__], "sdpa_kernels")

    def describe(self):
        return "ember.capture.variables.sdpa_kernels"


def _current(tx) -> tuple:
    output = tx.output
    state = output.__dict__.get("sdpa_state", _UNSET)
    if state is not _UNSET:
        return state
    entry = sdpa_backends()
    tx.guards.global_state("sdpa_backends", sdpa_backends, entry, "torch.nn.attention._cur_sdpa_kernel_backends()")
    output.sdpa_entry = entry
    return entry


def _set(tx, names: tuple) -> None:
    if tx.trace.checkpoints:
        raise unsupported("EB0025", "changing the sdpa backends inside a region traced speculatively")
    _current(tx)
    tx.output.graph.call_function(set_sdpa_backends, (names,))
    tx.output.sdpa_state = names


def finish(output, side_effects) -> None:
    """At the end of a trace: a graph that leaves the state changed puts the entry state back at
    its end, and the entry code sets the frame's final state after the graph."""
    final = output.__dict__.get("sdpa_state", _UNSET)
    if final is _UNSET or final == output.sdpa_entry:
        return
    output.graph.call_function(set_sdpa_backends, (output.sdpa_entry,))
    side_effects.defer_call(_Target(), "set_sdpa_backends", [ConstantVariable(final)], {})


class SdpaKernelVariable(VariableTracker):
    """``torch.nn.attention.sdpa_kernel(backends)`` (a context manager)."""

    def __init__(self, names: tuple):
        self.names = names
        self.priors: list = []

    @classmethod
    def create(cls, tx, args, kwargs):
        backends = args[0] if args else kwargs.get("backends")
        priority = args[1] if len(args) > 1 else kwargs.get("set_priority")
        if backends is None or len(args) + len(kwargs) > 2 or set(kwargs) - {"backends", "set_priority"} \
                or (priority is not None and (not priority.is_constant() or priority.as_constant())):
            raise unsupported("EB0025", "sdpa_kernel with set_priority or arguments that are not constants")
        items = getattr(backends, "items", None)
        values = [_backend(v) for v in (items if isinstance(items, list) else [backends])]
        if not values or not all(isinstance(v, torch.nn.attention.SDPBackend) for v in values):
            raise unsupported("EB0025", "sdpa_kernel with backends that are not SDPBackend members")
        return cls(tuple(sorted({v.name for v in values})))

    def describe(self):
        return f"sdpa_kernel({list(self.names)})"

    def python_type(self):
        import contextlib
        return contextlib._GeneratorContextManager

    def enter(self, tx):
        self.priors.append(_current(tx))
        _set(tx, self.names)
        return ConstantVariable(None)

    def exit(self, tx):
        _set(tx, self.priors.pop())
        return ConstantVariable(None)

    def exit_at_break(self) -> "SdpaExit":
        return SdpaExit(self.priors[-1])


def _backend(vt):
    """The SDPBackend member a tracker stands for (a constant, or the enum object), else None."""
    if vt.is_constant():
        return vt.as_constant()
    obj = getattr(vt, "obj", getattr(vt, "value", None))
    return obj if isinstance(obj, torch.nn.attention.SDPBackend) else None


class SdpaExit:
    """The ``__exit__`` of an ``sdpa_kernel`` block cut in two by a graph break."""

    def __init__(self, prior: tuple):
        self.prior = prior

    def __call__(self, *exc_info):
        set_sdpa_backends(self.prior)
        return None  # never suppresses an exception

    def __repr__(self):
        return f"SdpaExit(restore={list(self.prior)})"


class SdpaExitVariable(VariableTracker):
    """An `SdpaExit` handed to a resume function: calling it leaves the block in the graph."""

    def __init__(self, value: SdpaExit, source=None):
        self.value = value
        self.source = source

    def call(self, tx, args, kwargs):
        _set(tx, self.value.prior)
        return ConstantVariable(None)
