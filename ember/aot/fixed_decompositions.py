"""ember's own decompositions for ops whose torch decomposition gives another answer than eager.

torch registers some decompositions as Python kernels of the op at the Autograd key: the Python
dispatcher runs them while ``make_fx`` traces. Where such a decomposition is wrong, ember swaps in
its own for the AOT trace (``fixed_kernels(DispatchKey.Autograd)``, entered by
ember/aot/trace_patches.py; ``fixed_table`` there replaces the entry of a decomposition table such
as Inductor's) and puts torch's back afterwards.

``aten.multilabel_margin_loss_forward``: torch's decomposition never masks the target slots after
the first -1 (each added a hinge term against ``input[b, 0]``: another loss than eager), and for
a 1-d input with ``reduction='none'`` its result has shape ``(1,)`` where eager's is ``()``.
Fake tensors also run torch's decomposition, so a captured graph records that ``(1,)``: ember's
decomposition (eager's ``()``) then disagrees and the AOT trace fails, and the frame runs eagerly
(a Python read of that shape while capturing still sees ``(1,)``, as under torch.compile).
"""
from __future__ import annotations

import contextlib

import torch


def _multilabel_margin_loss_forward(input, target, reduction):
    """``z[b, j, i]``: the hinge of valid target slot ``j`` of row ``b`` against non-target ``i``."""
    in_shape, tgt_shape = input.shape, target.shape
    torch._check(len(in_shape) <= 2 and (len(in_shape) == 0 or in_shape[-1] != 0),
                 lambda: f"Expected non-empty vector or matrix with optional 0-dim batch size, but got: {in_shape}")
    torch._check(len(tgt_shape) <= 2 and tgt_shape == in_shape,
                 lambda: f"inconsistent target size: {tgt_shape} for input of size: {in_shape}")
    x, t = torch.atleast_2d(input), torch.atleast_2d(target)
    dim = x.shape[1]
    idx = torch.arange(dim, device=t.device)
    end = torch.amin(torch.where(t == -1, idx, dim), dim=-1, keepdim=True)
    valid = idx < end                                                   # (B, j)
    u = torch.gather(x, -1, torch.where(valid, t, 0))                   # (B, j)
    is_target = torch.any(torch.where(valid, t, -1).unsqueeze(-1) == idx, dim=1)   # (B, i)
    z = (1.0 - u.unsqueeze(-1) + x.unsqueeze(1)).clamp_min(0) / dim     # (B, j, i)
    z = torch.where(valid.unsqueeze(-1) & ~is_target.unsqueeze(1), z, 0)
    per_sample = z.sum(dim=(1, 2))
    if reduction == 1:  # mean
        loss = per_sample.mean()
    elif reduction == 2:  # sum
        loss = per_sample.sum()
    else:
        loss = per_sample.reshape(in_shape[:-1])
    return loss, is_target.to(input.dtype).reshape(tgt_shape)


def fixed_decompositions() -> dict:
    aten = torch.ops.aten
    return {aten.multilabel_margin_loss_forward.default: _multilabel_margin_loss_forward}


@contextlib.contextmanager
def fixed_kernels(key):
    """Within: ember's kernel is the op's Python kernel at dispatch ``key`` (where torch has one)."""
    saved = []
    for op, fn in fixed_decompositions().items():
        kernel = op.py_kernels.get(key)
        if kernel is not None:
            saved.append((op, kernel))
            op.py_kernels[key] = fn
            op._dispatch_cache.clear()
    try:
        yield
    finally:
        for op, kernel in saved:
            op.py_kernels[key] = kernel
            op._dispatch_cache.clear()
