"""Run a program eagerly and through ``ember.compile(..., backend=...)``; compare everything observable.

``run_both(fn, make_inputs, backend)`` compares: outputs (values, shape, stride, is_leaf,
requires_grad, whether a grad_fn is present), every input after the call (values, shape,
stride, storage offset, requires_grad, is_leaf), and after a backward through the
outputs that require grad, the ``.grad`` of every leaf input.
"""
from __future__ import annotations

import torch
import torch.utils._pytree as pytree

import ember


def describe(t: torch.Tensor) -> dict:
    return dict(shape=tuple(t.shape), stride=t.stride(), offset=t.storage_offset(), dtype=t.dtype,
                is_leaf=t.is_leaf, requires_grad=t.requires_grad, has_grad_fn=t.grad_fn is not None)


def _compare_tensor(got, expected, what):
    assert isinstance(got, torch.Tensor), f"{what}: {type(got).__name__}"
    assert describe(got) == describe(expected), f"{what}: {describe(got)} != {describe(expected)}"
    torch.testing.assert_close(got.detach(), expected.detach(), equal_nan=True, msg=lambda m: f"{what}: {m}")


def _loss(outs):
    ts = [o for o in pytree.tree_leaves(outs) if isinstance(o, torch.Tensor) and o.requires_grad
          and o.is_floating_point()]
    return sum((o * (k + 1.5)).sum() for k, o in enumerate(ts)) if ts else None


def run_both(fn, make_inputs, backend: str, *, backward: bool = True):
    """Eager vs ember.compile(fn, backend=backend) on identical inputs. Returns (eager, compiled) outputs."""
    torch.manual_seed(0)
    eager_in = make_inputs()
    torch.manual_seed(0)
    comp_in = make_inputs()
    torch.manual_seed(1)
    expected = fn(*eager_in)
    torch.manual_seed(1)
    got = ember.compile(fn, backend=backend)(*comp_in)
    eo, co = pytree.tree_leaves(expected), pytree.tree_leaves(got)
    assert len(eo) == len(co), (len(eo), len(co))
    for k, (e, c) in enumerate(zip(eo, co)):
        if isinstance(e, torch.Tensor):
            _compare_tensor(c, e, f"output {k}")
        else:
            assert type(c) is type(e) and c == e, (k, c, e)
    for k, (e, c) in enumerate(zip(eager_in, comp_in)):
        if isinstance(e, torch.Tensor):
            _compare_tensor(c, e, f"input {k} after the call")
    if backward:
        le, lc = _loss(expected), _loss(got)
        assert (le is None) == (lc is None)
        if le is not None:
            le.backward()
            lc.backward()
        for k, (e, c) in enumerate(zip(eager_in, comp_in)):
            if isinstance(e, torch.Tensor) and e.is_leaf:
                assert (e.grad is None) == (c.grad is None), f"grad of input {k}: {e.grad} vs {c.grad}"
                if e.grad is not None:
                    torch.testing.assert_close(c.grad, e.grad, msg=lambda m: f"grad of input {k}: {m}")
    return expected, got
