"""In-place writes into self-overlapping tensors (``x.expand(2, 4).zero_()``), in the captured
graph (refused up front) and in a backward the joint trace runs (`OverlapWriteCheck`).

Eager PyTorch allows some of these, but a functional graph cannot express
them: functionalization turns the write into ``as_strided_scatter``, which
rejects a destination where several elements share memory. Refuse such graphs
up front with a clear error (ember's own capture runs these ops eagerly, so
this only reaches graphs from other frontends).
"""
from __future__ import annotations

import operator

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from ember.aot.errors import EagerBackwardFails, UnsupportedAliasedMutation

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


class OverlapWriteCheck(TorchDispatchMode):
    """While the joint trace runs the backward: an op that writes into a self-overlapping tensor
    (a custom ``autograd.Function``'s backward doing ``grad.mul_(2)`` where ``grad`` is ``sum``'s
    expanded gradient) is refused. Eager's kernel raises there ("more than one element of the
    written-to tensor refers to a single memory location"), or writes several times into one
    element; functionalization would instead compute a plain value, a gradient eager never gives.
    The refusal (EagerBackwardFails) makes the captured graph run as it is, under eager autograd,
    which does what eager does. (Flagging a write eager would allow only costs speed.)

    Higher-order operators (``cond``, ``while_loop``, checkpoint) pass through it unchecked: they
    write into no argument (torch refuses mutations inside their branches)."""

    supports_higher_order_operators = True

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if isinstance(func, torch._ops.HigherOrderOperator):
            return func(*args, **kwargs)
        schema = func._schema
        if schema.is_mutable:
            for i, a in enumerate(schema.arguments):
                if a.alias_info is None or not a.alias_info.is_write:
                    continue
                t = args[i] if i < len(args) else kwargs.get(a.name)
                if isinstance(t, torch.Tensor) and _overlaps(t):
                    raise EagerBackwardFails(
                        f"the backward writes in place ({func}) into a self-overlapping (expanded) "
                        "tensor: eager's kernel refuses or repeats that write; the graph runs as it is")
        return func(*args, **kwargs)


def _overlaps(t: torch.Tensor) -> bool:
    sizes, strides = t.shape, t.stride()
    if any(isinstance(v, torch.SymInt) for v in (*sizes, *strides)):
        # (symbolic: asking the full question would add guards; an expanded dim has a literal 0 stride)
        return any(type(st) is int and st == 0 and not (type(sz) is int and sz <= 1)
                   for sz, st in zip(sizes, strides))
    return torch._debug_has_internal_overlap(t) == 1
