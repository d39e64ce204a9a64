"""Checks on in-place ops while tracing (``x.add_(y)``, ``x += y``, ``t[i] = v``, ``out=``).

Writes a functional graph cannot express as eager runs them (into a self-overlapping tensor, over
memory another argument reads, through a view after an in-place layout change) run eagerly; the
result of an in-place op is its argument's own tracker (`_tensor_arguments`).

Casts: an in-place op must be able to write its result into ``self``'s dtype, as eager checks.

``int_tensor.mul_(1.5)`` raises in eager (``result type Float can't be cast to the desired output
type Long``), but the fake kernel of some in-place ops does not check it, and the AOT layer's
functional graph computes ``mul`` and copies the float result back into the integer input: the
input was silently truncated instead of an error. The trace therefore computes the out-of-place
op's dtype and refuses the cast eager refuses (the call then runs eagerly and raises as eager).

``out=``: functionalization computes the op and replaces ``out``'s value with the result, so the
AOT graph wrote with the op's own strides, not those of a non-contiguous ``out``
(``torch.exp(a, out=o.t())``), and a resize of ``out`` reached the value but not the traced
wrapper: after ``torch.cat([a, a], out=o)`` the graph read ``o``'s old sizes. Both break the
graph (torch.compile breaks on any resize; a resize to a static shape works here: the sizes the
program reads afterwards are constants of the trace).
"""
from __future__ import annotations

import operator
import warnings

import torch

from ember.capture.variables.containers import ListVariable, TupleVariable
from ember.capture.variables.tensor import TensorVariable

_OPERATORS = {operator.iadd: operator.add, operator.isub: operator.sub, operator.imul: operator.mul,
              operator.itruediv: operator.truediv, operator.ifloordiv: operator.floordiv,
              operator.imod: operator.mod, operator.ipow: operator.pow, operator.iand: operator.and_,
              operator.ior: operator.or_, operator.ixor: operator.xor, operator.ilshift: operator.lshift,
              operator.irshift: operator.rshift}


def _out_of_place(kind, target):
    """The out-of-place counterpart of an in-place op, or None."""
    if kind == "call_function":
        if target in _OPERATORS:
            return _OPERATORS[target]
        name = getattr(target, "__name__", "")
        if getattr(target, "__self__", None) is not None or not name.endswith("_") or name.startswith("_"):
            return None
        return getattr(torch, name[:-1], None) if getattr(torch, name, None) is target else None
    if not isinstance(target, str):
        return None
    if target.startswith("__i") and target.endswith("__"):
        return operator.methodcaller  # (marker: the method __xxx__ of the same tensor)
    if target.endswith("_") and not target.startswith("_"):
        return operator.methodcaller
    return None


def check_inplace_cast(kind, target, fake_args: list, fake_kwargs: dict, result) -> None:
    """Raise as eager when ``result`` (an in-place op's, which is ``self``) cannot hold the dtype the
    op computes in."""
    if not fake_args or not isinstance(fake_args[0], torch.Tensor) or result is not fake_args[0]:
        return
    counterpart = _out_of_place(kind, target)
    if counterpart is None:
        return
    self = fake_args[0]
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # (a deprecated out-of-place form: Tensor.resize)
            computed = _compute(counterpart, target, self, fake_args, fake_kwargs)
    except Exception:  # noqa: BLE001 — no counterpart for these arguments: nothing to compare
        return
    if isinstance(computed, torch.Tensor) and not torch.can_cast(computed.dtype, self.dtype):
        raise RuntimeError(f"result type {computed.dtype} can't be cast to the desired output type {self.dtype}")


def _compute(counterpart, target, self, fake_args, fake_kwargs):
    """The out-of-place op's result on the same (fake) arguments, or None."""
    if counterpart is not operator.methodcaller:
        return counterpart(*fake_args, **fake_kwargs)
    name = "__" + target[3:] if target.startswith("__i") else target[:-1]
    method = getattr(self, name, None)
    if not callable(method) or not hasattr(torch.Tensor, name):
        return None
    return method(*fake_args[1:], **fake_kwargs)


def _writes_to_self_overlapping(kind, target, args) -> bool:
    if not args or not isinstance(args[0], TensorVariable):
        return False
    return _is_in_place(target) and torch._debug_has_internal_overlap(args[0].fake) == 1


_LAYOUT_IN_PLACE = frozenset({"t_", "transpose_", "swapdims_", "swapaxes_", "squeeze_", "unsqueeze_",
                              "as_strided_", "resize_", "resize_as_"})


def _write_after_layout_change(graph, target, args) -> bool:
    """An in-place write, with grad, into a storage one of whose tensors (another one than the
    destination) had its layout changed in place earlier in the trace. Records layout changes."""
    if not args or not isinstance(args[0], TensorVariable):
        return False
    name = target if isinstance(target, str) else getattr(target, "__name__", "")
    fake = args[0].fake
    try:
        key = fake.untyped_storage()._cdata
    except Exception:  # noqa: BLE001 — a tensor without a storage (a subclass): no record
        return False
    changed = graph.__dict__.setdefault("layout_changed", {})  # storage -> ids of the tensors changed
    if name in _LAYOUT_IN_PLACE:
        changed.setdefault(key, set()).add(id(fake))
        return False
    if key not in changed or not _is_in_place(target) or changed[key] == {id(fake)}:
        return False
    base = getattr(fake, "_base", None)
    return any(isinstance(a, TensorVariable) and a.fake.requires_grad for a in args) or \
        (base is not None and base.requires_grad)


def _is_in_place(target) -> bool:
    if getattr(target, "__module__", None) == "_operator":
        # operator.or_ / and_ / not_ / is_ end in "_" but write nothing: `a[:, None] | a[None]`
        return target in _INPLACE_OPERATORS or target is operator.setitem
    name = target if isinstance(target, str) else getattr(target, "__name__", "")
    return (name.endswith("_") and not name.endswith("__")) or name in ("setitem", "__setitem__")


def _reads_what_it_overwrites(graph, kind, target, args) -> bool:
    """An in-place op (or ``t[i] = v``) whose other tensor arguments may partially overlap the
    memory it writes (overlapping, but not exactly the same elements)."""
    if not args or not isinstance(args[0], TensorVariable) or not _is_in_place(target):
        return False
    dest = args[0].fake
    others = [a.fake for a in args[1:] if isinstance(a, TensorVariable)]
    name = target if isinstance(target, str) else getattr(target, "__name__", "")
    if name in ("setitem", "__setitem__") and len(args) == 3:
        others = [args[2].fake] if isinstance(args[2], TensorVariable) else []
        if not any(o.untyped_storage()._cdata == dest.untyped_storage()._cdata for o in others):
            return False  # (no shared memory; and `out[:n // 2] = g` keeps its symbolic bound unguarded)
        if args[1].is_constant():
            try:
                with graph.fake.enabled():
                    view = dest[args[1].as_constant()]
                if view._is_view() and view.untyped_storage()._cdata == dest.untyped_storage()._cdata:
                    dest = view  # basic indexing: the region written
            except Exception:  # noqa: BLE001 — keep the whole tensor as the written region
                pass
    return any(_may_partially_overlap(dest, o) for o in others)


def _may_partially_overlap(a: torch.Tensor, b: torch.Tensor) -> bool:
    if a.untyped_storage()._cdata != b.untyped_storage()._cdata or not a.numel() or not b.numel():
        return False
    if (a.storage_offset(), tuple(a.shape), a.stride(), a.dtype) == \
            (b.storage_offset(), tuple(b.shape), b.stride(), b.dtype):
        return False  # the very same elements: each is read before it is written
    lo_a, hi_a = _byte_extent(a)
    lo_b, hi_b = _byte_extent(b)
    return lo_a < hi_b and lo_b < hi_a


def _byte_extent(t: torch.Tensor) -> tuple[int, int]:
    size = t.element_size()
    lo = t.storage_offset() * size
    hi = lo + (sum((n - 1) * st for n, st in zip(t.shape, t.stride()) if st > 0) + 1) * size
    lo += sum((n - 1) * st for n, st in zip(t.shape, t.stride()) if st < 0) * size
    return lo, hi


_INPLACE_OPERATORS = {operator.iadd, operator.isub, operator.imul, operator.itruediv, operator.ifloordiv,
                      operator.imod, operator.ipow, operator.iand, operator.ior, operator.ixor,
                      operator.ilshift, operator.irshift, operator.imatmul}


def _tensor_arguments(args, kwargs) -> dict:
    """id of the fake -> tracker, for the tensor arguments of a call (in lists and tuples too: an
    ``out=(values, indices)``)."""
    found = {}
    for a in [*args, *kwargs.values()]:
        for v in (a.items if isinstance(a, (ListVariable, TupleVariable)) else (a,)):
            if isinstance(v, TensorVariable):
                found.setdefault(id(v.fake), v)
    return found


def out_arguments(fake_kwargs: dict, what: str) -> list:
    """The fake tensors of an ``out=`` argument with their shapes before the call; a non-contiguous
    one breaks the graph."""
    from ember.capture.variables.base import unsupported
    from torch._prims_common import is_contiguous_or_false
    out = fake_kwargs.get("out")
    outs = [out] if isinstance(out, torch.Tensor) else \
        [t for t in out if isinstance(t, torch.Tensor)] if isinstance(out, (tuple, list)) else []
    if any(not is_contiguous_or_false(t) for t in outs):
        raise unsupported("EB0021", f"{what} writes into a non-contiguous out= tensor")
    return [(t, t.shape) for t in outs]


def check_out_resizes(outs: list, what: str) -> None:
    """After the fake call: an ``out=`` tensor resized to a shape with symbols breaks the graph."""
    from ember.capture.variables.base import unsupported
    from ember.fake.symbolic import has_symbols
    if any(t.shape != shape and has_symbols(tuple(t.shape)) for t, shape in outs):
        raise unsupported("EB0021", f"{what} resizes its out= tensor to a dynamic shape")
