"""``torch.autograd.graph.disable_saved_tensors_hooks(message)`` inside a compiled frame.

The context manager (a ``contextlib.contextmanager`` generator, inlined like any other) reads the
current message with ``_saved_tensors_hooks_get_disabled_error_message()`` and calls
``_saved_tensors_hooks_disable(message)`` / ``_saved_tensors_hooks_enable()``. Those two become
graph nodes, as in torch.compile (the graph runs them where the program does); the trace keeps
the state they set, so a later read in the frame answers from it, unguarded (the read at entry is
guarded by its value).

Graphs stay balanced: a frame that leaves the state changed (a bare ``_saved_tensors_hooks_disable``
call) ends its graph with the entry state again, and the entry code sets the state the frame left
after the graph, in program order with the other side effects. (A backend that traces the graph
again drops nodes without tensors; the setting only matters to ``saved_tensors_hooks`` pushed
inside the block, which run eagerly at a break.)
"""
from __future__ import annotations

import torch

from ember.capture.variables.base import ConstantVariable, VariableTracker, unsupported

_AUTOGRAD = torch._C._autograd
SETTERS = (_AUTOGRAD._saved_tensors_hooks_disable, _AUTOGRAD._saved_tensors_hooks_enable)
READERS = (_AUTOGRAD._saved_tensors_hooks_get_disabled_error_message, _AUTOGRAD._saved_tensors_hooks_is_enabled)
_UNSET = object()


class _Target(VariableTracker):
    """``torch._C._autograd`` as the target of a call replayed after the graph."""

    def __init__(self):
        from ember.capture.sources import ConstSource
        self.source = ConstSource(_AUTOGRAD, "torch._C._autograd")

    def describe(self):
        return "torch._C._autograd"


def call(tx, fn, args: list, kwargs: dict) -> VariableTracker:
    output = tx.output
    state = output.__dict__.get("saved_hooks_message", _UNSET)
    if fn in READERS:
        if args or kwargs:
            raise unsupported("EB0025", f"{fn.__name__} with arguments")
        if state is _UNSET:  # not set by the frame: the state at entry, guarded
            return output.call_function(fn, [], {})
        return ConstantVariable(state if fn is READERS[0] else state is None)
    if tx.trace.checkpoints:
        raise unsupported("EB0025", f"torch._C._autograd.{fn.__name__} inside a region traced speculatively")
    if fn is SETTERS[0]:
        if len(args) != 1 or kwargs or not args[0].is_constant() or not isinstance(args[0].as_constant(), str):
            raise unsupported("EB0025", "_saved_tensors_hooks_disable with an argument that is not a constant string")
        message = args[0].as_constant()
    else:
        if args or kwargs:
            raise unsupported("EB0025", "_saved_tensors_hooks_enable with arguments")
        message = None
    if state is _UNSET:
        entry = _AUTOGRAD._saved_tensors_hooks_get_disabled_error_message()
        tx.guards.global_state("saved_tensors_hooks_message", READERS[0], entry,
                               "torch._C._autograd._saved_tensors_hooks_get_disabled_error_message()")
        output.saved_hooks_entry = entry
    output.graph.call_function(fn, (message,) if message is not None else ())
    output.saved_hooks_message = message
    return ConstantVariable(None)


def finish(output, side_effects) -> None:
    """At the end of a trace: a graph that leaves the state changed puts the entry state back at
    its end, and the entry code sets the frame's final state after the graph."""
    final = output.__dict__.get("saved_hooks_message", _UNSET)
    if final is _UNSET or final == output.saved_hooks_entry:
        return
    entry = output.saved_hooks_entry
    if entry is None:
        output.graph.call_function(SETTERS[1], ())
        side_effects.defer_call(_Target(), SETTERS[0].__name__, [ConstantVariable(final)], {})
    else:
        output.graph.call_function(SETTERS[0], (entry,))
        if final is None:
            side_effects.defer_call(_Target(), SETTERS[1].__name__, [], {})
        else:
            side_effects.defer_call(_Target(), SETTERS[0].__name__, [ConstantVariable(final)], {})
