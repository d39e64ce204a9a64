"""In-place writes into self-overlapping tensors (``x.expand(2, 4).zero_()``).

Eager PyTorch allows some of these, but a functional graph cannot express
them: functionalization turns the write into ``as_strided_scatter``, which
rejects a destination where several elements share memory. Refuse such graphs
up front with a clear error (ember's own capture runs these ops eagerly, so
this only reaches graphs from other frontends).
"""
from __future__ import annotations

import operator

import torch

from ember.aot.errors import UnsupportedAliasedMutation

_INPLACE_OPERATORS = {operator.iadd, operator.isub, operator.imul, operator.itruediv, operator.ifloordiv,
                      operator.imod, operator.ipow, operator.iand, operator.ior, operator.ixor,
                      operator.ilshift, operator.irshift, operator.imatmul, operator.setitem}


def check_self_overlapping_writes(gm: torch.fx.GraphModule) -> None:
    for node in gm.graph.nodes:
        if node.op not in ("call_method", "call_function") or not node.args:
            continue
        target = node.target
        name = target if isinstance(target, str) else getattr(target, "__name__", "")
        if getattr(target, "__module__", None) == "_operator":
            in_place = target in _INPLACE_OPERATORS  # operator.or_ / and_ end in "_" but write nothing
        else:
            in_place = name.endswith("_") and not name.endswith("__")
        if isinstance(target, torch._ops.OpOverload):
            in_place = bool(target._schema.is_mutable)
        if not in_place:
            continue
        dest = node.args[0]
        fake = dest.meta.get("example_value", dest.meta.get("val")) if isinstance(dest, torch.fx.Node) else None
        if isinstance(fake, torch.Tensor) and torch._debug_has_internal_overlap(fake) == 1:
            where = node.meta.get("stack_trace", "").strip().splitlines()
            raise UnsupportedAliasedMutation(
                f"in-place {name} writes into a self-overlapping (expanded) tensor ({node.name}); "
                f"a functional graph cannot express that write" + (f"\n  at {where[-1]}" if where else ""))
