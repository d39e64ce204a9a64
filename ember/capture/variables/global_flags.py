"""Process-wide torch flags the frame sets: ``torch.use_deterministic_algorithms(mode, warn_only=...)``.

Every entry guards these flags (``torch_flags`` in convert_frame.py), so a graph always starts
under the flags it was traced with. A frame that changes one:

* applies the change while tracing, so later reads in the frame
  (``torch.are_deterministic_algorithms_enabled()``) answer what eager would; those reads are then
  determined by the trace and are not guarded (their guard would compare the entry's value);
* replays the call after the graph, in program order with the other side effects (a graph break
  later in the frame replays it before the breaking instruction runs);
* puts the real flags back when the trace ends (`restore_flags`): the backend compiles the graph
  under the flags it runs under.

Inside a region traced speculatively (``torch.cond``, a checkpointed region) the change is a graph
break: a rollback would not undo it.
"""
from __future__ import annotations

import torch

from ember.capture.variables.base import ConstantVariable, VariableTracker, unsupported


def _deterministic_flags() -> tuple:
    return torch.are_deterministic_algorithms_enabled(), torch.is_deterministic_algorithms_warn_only_enabled()


class _TorchModule(VariableTracker):
    """The ``torch`` module as the target of a replayed call."""

    def __init__(self):
        from ember.capture.sources import ConstSource
        self.source = ConstSource(torch, "torch")

    def describe(self):
        return "torch"


def use_deterministic_algorithms(tx, args: list, kwargs: dict) -> VariableTracker:
    values = [*args, *kwargs.values()]
    if len(args) != 1 or set(kwargs) - {"warn_only"} or not all(v.is_constant() for v in values):
        raise unsupported("EB0025", "torch.use_deterministic_algorithms with arguments that are not constants")
    if tx.trace.checkpoints:
        raise unsupported("EB0025", "torch.use_deterministic_algorithms inside a region traced speculatively")
    mode = args[0].as_constant()
    warn_only = kwargs["warn_only"].as_constant() if "warn_only" in kwargs else False
    output = tx.output
    if "deterministic_before_trace" not in output.__dict__:
        output.deterministic_before_trace = _deterministic_flags()
    torch.use_deterministic_algorithms(mode, warn_only=warn_only)  # (raises as eager for a bad argument)
    output.__dict__.setdefault("changed_flags", {}).update(
        deterministic=torch.are_deterministic_algorithms_enabled(),
        deterministic_warn_only=torch.is_deterministic_algorithms_warn_only_enabled())
    tx.side_effects.defer_call(_TorchModule(), "use_deterministic_algorithms", [ConstantVariable(mode)],
                               {"warn_only": ConstantVariable(warn_only)})
    return ConstantVariable(None)


def changed_flag(output, key: str):
    """``(True, value)`` for a flag the frame set earlier in the trace, else ``(False, None)``."""
    changed = output.__dict__.get("changed_flags")
    if changed and key in changed:
        return True, changed[key]
    return False, None


def restore_flags(output) -> None:
    """After a trace: the flags as the trace found them."""
    before = output.__dict__.get("deterministic_before_trace")
    if before is not None:
        torch.use_deterministic_algorithms(before[0], warn_only=before[1])
