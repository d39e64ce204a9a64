"""The truth of a plain tensor whose element count is known not to be one raises RuntimeError in
eager whatever its data (``if x:`` of a 4-element tensor, ``x in [y]`` comparing with ``==``): the
trace raises that error (a ``try`` in the frame catches it; uncaught, a break where eager raises),
where a one-element tensor's truth is a data-dependent break."""
from __future__ import annotations

import torch

from ember.capture.variables.base import ConstantVariable
from ember.exc import PythonException
from ember.fake.symbolic import has_symbols


def raise_ambiguous_truth(fake, shape=None) -> None:
    """``bool()`` of a plain tensor (of ``shape``, by default ``fake``'s) whose element count is
    known not to be one raises in eager whatever its data: raise that very error in the trace (a
    ``try`` in the frame may catch it; under fullgraph=True it propagates), not a data-dependent
    break (uncaught, the graph runs what came before and the instruction, run eagerly, raises it).
    A count that is a symbol, or one, decides nothing here."""
    if fake is None:
        return
    shape = tuple(fake.shape) if shape is None else tuple(shape)
    if has_symbols(shape):
        return
    n = 1
    for d in shape:
        n *= int(d)
    if n == 1:
        return
    what = "no values" if n == 0 else "more than one value"
    failure = PythonException(RuntimeError(f"Boolean value of Tensor with {what} is ambiguous"))
    failure.replayable = True  # (uncaught in the frame: a break there, where eager raises it again)
    raise failure


def raise_ambiguous_equal(a, b) -> None:
    """``a == b`` with a plain tensor against a plain tensor on the same device or a number: its
    truth raises in eager when the broadcast result is known not to hold one element (``x in [y]``
    of two 4-element tensors), whatever the data: raise that error in the trace."""
    from ember.capture.variables.tensor import TensorVariable
    plain = (torch.Tensor, torch.nn.Parameter)
    tensors = [v for v in (a, b) if isinstance(v, TensorVariable)]
    if any(t.python_type() not in plain for t in tensors):
        return
    others = [v for v in (a, b) if not isinstance(v, TensorVariable)]
    if others and not (type(others[0]) is ConstantVariable and type(others[0].value) in (int, float, bool)):
        return
    fakes = [t.fake for t in tensors]
    if len({f.device for f in fakes}) != 1:
        return
    try:
        shape = torch.broadcast_shapes(*(f.shape for f in fakes))
    except Exception:  # (eager raises the size mismatch of ==: left to a break)
        return
    raise_ambiguous_truth(fakes[0], shape)
