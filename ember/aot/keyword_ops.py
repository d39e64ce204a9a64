"""aten ops whose name fx cannot write: the AOT trace records them as other, nameable ops.

fx's generated code names an op overload by its attribute path (``torch.ops.aten.add.Tensor``).
``aten.random.from`` (what functionalization makes of ``Tensor.random_(from, to)``) is named by a
Python keyword: ``torch.ops.aten.random.from(...)`` is a SyntaxError, so ``make_fx`` failed while
building its GraphModule and the whole frame ran eagerly (torch's Dynamo graph-breaks on every
``Tensor.random_`` for the same reason).

ember traces it as eager computes it instead. The CPU kernel draws one number per element, in the
tensor's iteration order, and writes ``static_cast<T>(int64(rand % range + from))``, where
``range = to - from``; ``aten.random.to(t, range)`` draws the same numbers for the same ``range``
(it is the same kernel with ``from = 0``) whatever ``t``'s dtype, except that for
``range >= 2**32`` the 64-bit draw is taken only for int64, float64, float32 and bfloat16. So the
draw goes into an int64 tensor laid out like ``self`` and ``from`` is added there, before the one
cast to ``self``'s dtype (as in the kernel). Where that does not hold (64-bit ranges of other
dtypes, bounds a floating dtype cannot hold exactly, which eager first moves, and
``from = int64 min`` with no ``to``, a kernel of its own) the decomposition declines and the
frame runs eagerly as before.
"""
from __future__ import annotations

import math

import torch

_INT64_MIN, _INT64_MAX = -2 ** 63, 2 ** 63 - 1
_WIDE_DRAW = (torch.int64, torch.float64, torch.float32, torch.bfloat16)  # 64-bit draw for range >= 2**32


def _digits(dtype: torch.dtype) -> int:
    """Mantissa bits of a floating dtype, the implicit one included (float32: 24)."""
    return 1 - round(math.log2(torch.finfo(dtype).eps))


def _bounds(dtype: torch.dtype) -> tuple[int, int]:
    """The values eager draws into ``dtype`` without complaint: a floating dtype's exact integers
    (outside them eager warns and moves the bounds), an integral dtype's range (outside: an error)."""
    if dtype.is_floating_point:
        return -2 ** _digits(dtype), 2 ** _digits(dtype)
    if dtype == torch.bool:
        return 0, 1
    return torch.iinfo(dtype).min, torch.iinfo(dtype).max


def _random_from(self, from_, to=None, *, generator=None):
    dtype = self.dtype
    if dtype.is_complex or (to is None and from_ == _INT64_MIN):
        return NotImplemented
    lo, hi = _bounds(dtype)
    last = hi if to is None else to - 1          # the largest value drawn
    span = last + 1 - from_
    if not lo <= from_ <= last <= hi or span > _INT64_MAX or (span >= 2 ** 32 and dtype not in _WIDE_DRAW):
        return NotImplemented                    # eager's errors, warnings and moved bounds: eager runs it
    draws = torch.ops.aten.random.to(torch.empty_like(self, dtype=torch.int64), span, generator=generator)
    return (draws + from_).to(dtype)


def keyword_op_decompositions() -> dict:
    """Decompositions for the ops fx cannot name (the AOT trace's table holds them unless the
    backend's own table decomposes the op)."""
    return {getattr(torch.ops.aten.random, "from"): _random_from}
