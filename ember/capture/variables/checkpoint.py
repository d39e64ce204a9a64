"""``torch.utils.checkpoint.checkpoint(fn, *args, use_reentrant=..., **kwargs)`` inlined into the graph.

The function is traced in place and every node it adds is tagged ``meta["recompute"]`` (torch's
``CheckpointPolicy.PREFER_RECOMPUTE``). The tag travels into the AOT joint graph, where both
partitioners recompute tagged nodes in the backward instead of saving them (random and mutating
ops are still saved), so the backward keeps the checkpoint's inputs rather than its intermediates.

The values are the function's own, as eager's are (a recomputation with the RNG state restored
gives the same values). The reentrant variant runs the function under no_grad and gives outputs
that require grad only when a tensor argument does: when none does, ember traces it under no_grad
too. Options ember does not model (``context_fn``, ``debug``, an unspecified ``use_reentrant``,
for which eager warns) break the graph at the call, which then runs eagerly.
"""
from __future__ import annotations

import torch

from ember.capture.subgraph import Region, side_effect_state
from ember.capture.variables.base import ConstantVariable, VariableTracker, unsupported
from ember.capture.variables.tensor import TensorVariable


def _constant(kwargs: dict, name: str, default):
    vt = kwargs.pop(name, None)
    if vt is None:
        return default
    if not vt.is_constant():
        raise unsupported("EB0049", f"checkpoint with a non-constant {name}")
    return vt.as_constant()


def trace_checkpoint(tx, args: list, kwargs: dict) -> VariableTracker:
    """Traced from a checkpoint: an unsupported region is rolled back before the break."""
    from ember.capture.speculation import Checkpoint
    from ember.exc import Unsupported
    with Checkpoint(tx) as cp:
        try:
            return _trace_checkpoint(tx, args, kwargs)
        except Unsupported:
            cp.restore()
            raise


def _trace_checkpoint(tx, args: list, kwargs: dict) -> VariableTracker:
    from torch.utils.checkpoint import CheckpointPolicy, noop_context_fn
    if not args:
        raise unsupported("EB0049", "checkpoint without a function")
    function, fargs = args[0], list(args[1:])
    rest = dict(kwargs)
    use_reentrant = _constant(rest, "use_reentrant", None)
    if use_reentrant is None:
        raise unsupported("EB0049", "checkpoint without use_reentrant (eager warns; runs eagerly)")
    context_fn = rest.pop("context_fn", None)
    if context_fn is not None and not (context_fn.is_constant() and context_fn.as_constant() is noop_context_fn) \
            and getattr(context_fn, "fn", None) is not noop_context_fn:
        raise unsupported("EB0049", "checkpoint with a context_fn")
    if _constant(rest, "debug", False):
        raise unsupported("EB0049", "checkpoint with debug=True")
    for name in ("determinism_check", "early_stop", "preserve_rng_state"):
        _constant(rest, name, None)
    if use_reentrant and rest:
        raise unsupported("EB0049", "reentrant checkpoint with keyword arguments (eager raises)")
    output = tx.output
    region = Region(tx, [])
    no_input_grad = not any(isinstance(a, TensorVariable) and a.fake.requires_grad for a in fargs)
    if use_reentrant and no_input_grad and torch.is_grad_enabled():
        # the reentrant forward runs under no_grad; its outputs require grad only through its inputs
        output.set_grad_enabled(False)
        try:
            out = function.call(tx, fargs, {})
        finally:
            output.set_grad_enabled(True)
    else:
        out = function.call(tx, fargs, rest)
    if torch.is_grad_enabled() and (side_effect_state(tx) != region._effects or any(
            born < region._birth for born in tx.side_effects.container_writes[region._writes:])):
        # eager runs the function again in the backward (its appends, prints, counters twice):
        # the call runs eagerly, as torch.compile does
        raise unsupported("EB0049", "a checkpointed function with Python side effects (eager repeats them in the backward)")
    for n in region.nodes():
        n.meta["recompute"] = CheckpointPolicy.PREFER_RECOMPUTE
    return out if isinstance(out, VariableTracker) else ConstantVariable(out)
