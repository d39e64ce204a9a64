"""Would eager's backward reject this program? (an input is modified in place after an op saved it)

Eager autograd checks, at backward, that each tensor an op saved still has the version it had
when saved; ``x.mul_(2)`` after ``y = x.sin()`` makes backward raise "one of the variables needed
for gradient computation has been modified by an inplace operation". A functional graph reads the
old value instead, so the compiled program would quietly return gradients eager never computes.
Only a graph that changes the data of an input requiring grad can get there: it is run once on
fake tensors, forward and backward, with eager's autograd; if that backward fails the check, the
frame runs eagerly (and raises there, at backward, as the program does)."""
from __future__ import annotations

import torch
from torch.utils import _pytree as pytree

_MESSAGE = "modified by an inplace operation"


def eager_backward_fails(prog, meta) -> str | None:
    """The error eager's backward would raise, or None."""
    if not meta.is_train or not any(i.mutates_data and i.requires_grad for i in meta.input_info):
        return None
    with prog.fake_mode, torch.enable_grad():
        leaves, args = [], []
        for a in prog.fake_args:
            if isinstance(a, torch.Tensor) and a.requires_grad:
                leaf = a.detach().clone().requires_grad_(True)
                leaves.append(leaf)
                args.append(leaf.clone())  # a non-leaf, as an input mutated in place must be
            elif isinstance(a, torch.Tensor):
                args.append(a.clone())
            else:
                args.append(a)
        try:
            outs = [o for o in pytree.tree_leaves(prog.fn(*args))
                    if isinstance(o, torch.Tensor) and o.requires_grad and o.grad_fn is not None]
            if outs:
                torch.autograd.grad(outs, leaves, [torch.ones_like(o) for o in outs], allow_unused=True)
        except RuntimeError as e:
            return str(e).splitlines()[0] if _MESSAGE in str(e) else None
        except Exception:  # noqa: BLE001 - only the version check is this function's business
            return None
    return None
