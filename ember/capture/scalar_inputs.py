"""A 0-dim integer tensor input read as an int by an operation: its value, guarded.

    def f(x, n):               # n = torch.tensor(3), a graph input
        return x.new_zeros(2, n) + x.narrow(-1, 0, n).sum()

``new_zeros(2, n)`` reads ``n``'s value (``n.__index__()``): a fake tensor has no value to give, so
the op could not be traced (a graph break at every such call; longformer passes the number of
global-attention tokens on like this). torch.compile gives such inputs a symbol backed by their
value. ember, tracing with static sizes, does what it does for a Python int argument: the
operation takes the input's value as a constant, and a guard checks that value on every call
(another value recompiles). Only inputs qualify (a tensor computed in the graph has no value at
trace time) and only while the trace has not written to them; the op's other arguments stay as
they are. As with an int argument, a value that changed since the frame last compiled is not
specialised again (that op breaks the graph instead of recompiling per value).

A 0-dim integer tensor the graph made from symbolic sizes needs no value at all: with dynamic
shapes ``torch.div(h.size(1), 2 * w, rounding_mode="trunc")`` (longformer, LED) is a tensor whose
value is the size expression ``s1 // (2 * w)``, and ``h.view(b, that, 2 * w, d)`` reads it as an
int. Such tensors carry that expression (``known_int``: made by ``torch.div`` / ``floor_divide``
of ints with rounding, ``torch.tensor(n)``, and ``+ - * //`` of them with ints), and an op that
reads one as an int takes the expression instead: no data dependency, no break, no guard.
"""
from __future__ import annotations

import torch

from ember.capture.variables.base import ConstantVariable
from ember.capture.variables.containers import ListVariable, TupleVariable
from ember.capture.variables.tensor import TensorVariable

_INT_DTYPES = (torch.int64, torch.int32, torch.int16, torch.int8, torch.uint8)


def scalar_input_value(graph, vt) -> int | None:
    """The value of ``vt`` when it is a 0-dim CPU integer tensor input that the trace has not
    written to (None otherwise)."""
    if not isinstance(vt, TensorVariable) or vt.real is None or vt.source is None:
        return None
    real, fake = vt.real, vt.fake
    if type(real) is not torch.Tensor or real.dim() != 0 or real.device.type != "cpu" \
            or real.dtype not in _INT_DTYPES or real.requires_grad or real.is_inference():
        return None
    if fake.is_inference() or graph.input_versions.get(id(fake)) != fake._version:
        return None  # written by the trace (an in-place op): the real value is not its value now
    value = int(real.item())
    sizes = graph.frame_sizes
    if sizes is not None and sizes.dynamic is not False:
        # as for an int argument: a value that changed since the frame last compiled is not
        # specialised again (the op breaks the graph), so a counter does not recompile per value
        key = f"{vt.source.name()}.item()"
        prev = sizes.ints.get(key, value)
        sizes.ints[key] = None if prev is None or prev != value else value
        if sizes.ints[key] is None:
            return None
    return value


def with_scalar_inputs_as_ints(graph, kind: str, args: list, kwargs: dict):
    """``(args, kwargs, [(source, value)])`` with each qualifying scalar input (see
    `scalar_input_value`) among the arguments, or inside a list/tuple argument, replaced by its
    value; None when there is none. The receiver of a method call stays a tensor."""
    found = []

    def swap(v, top):
        known = known_int(v)
        if known is not None:
            found.append((None, None))
            return known
        value = scalar_input_value(graph, v)
        if value is not None:
            found.append((v.source, value))
            return ConstantVariable(value)
        if top and isinstance(v, (ListVariable, TupleVariable)):
            items = [swap(x, False) for x in v.items]
            if any(a is not b for a, b in zip(items, v.items)):
                return ListVariable(items) if isinstance(v, ListVariable) else TupleVariable(items, tuple_type=v.tuple_type)
        if top and type(v) in (list, tuple):
            return type(v)(swap(x, False) for x in v)
        return v

    start = 1 if kind == "call_method" else 0
    new_args = [*args[:start], *(swap(a, True) for a in args[start:])]
    new_kwargs = {k: swap(v, True) for k, v in kwargs.items()}
    return (new_args, new_kwargs, found) if found else None


def guard_scalar_value(guards, source, value: int) -> None:
    """``source.item() == value`` (checked after the tensor guards: a 0-dim integer tensor)."""
    guards.scalar_tensor_value(source, value)


def retry_with_scalar_values(graph, kind: str, target, args: list, kwargs: dict):
    """The tracker of the operation traced again with its scalar inputs as ints (and their values
    guarded), or None when it has none or still cannot be traced (the caller breaks the graph)."""
    from ember.exc import Unsupported
    swapped = with_scalar_inputs_as_ints(graph, kind, args, kwargs)
    if swapped is None:
        return None
    new_args, new_kwargs, found = swapped
    try:
        result = graph._call(kind, target, new_args, new_kwargs)
    except Unsupported:
        return None
    for source, value in found:
        if source is not None:
            guard_scalar_value(graph.guards, source, value)
    return result


_KNOWN = "ember_known_int"  # attribute of a TensorVariable: (number tracker, the fake's version then)


def known_int(vt):
    """The symbolic (or constant) int a 0-dim integer tensor the graph made equals, if known and
    the tensor was not written since."""
    known = getattr(vt, _KNOWN, None) if isinstance(vt, TensorVariable) else None
    if known is None or vt.fake._version != known[1]:
        return None
    return known[0]


def _number(v):
    from ember.capture.variables.symbolic import SymNodeVariable, SymSliceVariable
    if isinstance(v, SymNodeVariable):
        return v if isinstance(v.sym, torch.SymInt) else None
    if isinstance(v, ConstantVariable) and not isinstance(v, SymSliceVariable) and type(v.value) is int:
        return v  # (an int argument's value: the op reads it, as the op's own constant)
    return known_int(v)


def note_known_int(output, target, args: list, kwargs: dict, result) -> None:
    """Record on ``result`` (a call_function's tracker) the int it equals, when it is a 0-dim
    integer tensor made from ints at least one of which is symbolic (see the module docstring)."""
    import operator
    from ember.capture.variables.symbolic import SymNodeVariable
    if not isinstance(result, TensorVariable) or result.fake.dim() != 0 or result.fake.dtype not in _INT_DTYPES:
        return
    nums = [_number(a) for a in args]
    if not nums or any(n is None for n in nums):
        return
    symbolic = any(isinstance(n, SymNodeVariable) for n in nums)

    def apply(fn):
        if symbolic:
            return output.call_function(fn, nums, {})
        return ConstantVariable(fn(*(n.value for n in nums)))

    value = None
    if target in (torch.tensor, torch.as_tensor, torch.scalar_tensor) and len(nums) == 1:
        value = nums[0]
    elif len(nums) == 2 and target in (operator.add, operator.sub, operator.mul, operator.floordiv,
                                       torch.floor_divide) and not kwargs:
        if target in (operator.floordiv, torch.floor_divide) and not _positive(nums[1]):
            return  # (a division by zero raises: eager's error, from the op itself)
        value = apply(operator.floordiv if target is torch.floor_divide else target)
    elif len(nums) == 2 and target is torch.div and set(kwargs) == {"rounding_mode"} \
            and kwargs["rounding_mode"].is_constant() and _positive(nums[1]):
        mode = kwargs["rounding_mode"].as_constant()
        if mode == "floor" or (mode == "trunc" and _not_negative(nums[0])):
            value = apply(operator.floordiv)  # (trunc is floor for a quotient that is not negative)
    if isinstance(value, (SymNodeVariable, ConstantVariable)):
        setattr(result, _KNOWN, (value, result.fake._version))


def _positive(n) -> bool:
    """Whether ``n`` (a number tracker) is > 0: a constant's value, a symbol's (guarded)."""
    return bool(n.sym > 0) if hasattr(n, "sym") else n.value > 0


def _not_negative(n) -> bool:
    return bool(n.sym >= 0) if hasattr(n, "sym") else n.value >= 0
