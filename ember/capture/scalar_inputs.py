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
        guard_scalar_value(graph.guards, source, value)
    return result
