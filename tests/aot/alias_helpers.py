"""Compare a function whose inputs alias each other (views of shared roots) with eager.

``make()`` returns ``(roots, args)``: ``roots`` are the leaf tensors the args are
built from (their gradients and values are compared), ``args`` the call's
inputs. After the call every arg and root must equal eager's in value, size,
stride and storage offset; outputs and requires_grad must agree; after a
backward through the outputs the roots' gradients must agree.
"""
from __future__ import annotations

import torch
import torch.utils._pytree as pytree

import ember


def compile_fn(fn, backend: str, via: str, example_args):
    if via == "torch.compile":
        torch._dynamo.reset()
        return torch.compile(fn, backend=ember.lookup_backend(backend), fullgraph=True)
    if via == "ember.compile":
        return ember.compile(fn, backend=backend, fullgraph=True)
    gm = torch.fx.symbolic_trace(fn)
    return ember.lookup_backend(backend)(gm, list(example_args))


def _same(a, b, what, rtol=1e-5, atol=1e-6):
    if isinstance(a, torch.Tensor):
        assert isinstance(b, torch.Tensor), what
        assert a.shape == b.shape and a.stride() == b.stride() and a.storage_offset() == b.storage_offset(), (
            what, a.shape, b.shape, a.stride(), b.stride(), a.storage_offset(), b.storage_offset())
        assert a.dtype == b.dtype, what
        torch.testing.assert_close(b.detach(), a.detach(), rtol=rtol, atol=atol, equal_nan=True,
                                   msg=lambda m: f"{what}: {m}")
    else:
        assert a == b, (what, a, b)


def run_and_compare(fn, make, *, backend="aot_eager", via="direct", backward=True, calls=1, rtol=1e-5, atol=1e-6,
                    compiled=None):
    """Returns the compiled callable (to call again with other inputs)."""
    for call in range(calls):
        torch.manual_seed(call)
        e_roots, e_args = make()
        torch.manual_seed(call)
        c_roots, c_args = make()
        if compiled is None:
            compiled = compile_fn(fn, backend, via, c_args)
        e_out = fn(*e_args)
        c_out = compiled(*c_args)
        eo, co = pytree.tree_leaves(e_out), pytree.tree_leaves(c_out)
        assert len(eo) == len(co)
        for i, (a, b) in enumerate(zip(eo, co)):
            if isinstance(a, torch.Tensor):
                torch.testing.assert_close(b.detach(), a.detach(), rtol=rtol, atol=atol, equal_nan=True)
                assert a.requires_grad == b.requires_grad, f"output {i} requires_grad"
            else:
                assert a == b
        for i, (a, b) in enumerate(zip(e_args, c_args)):
            _same(a, b, f"arg {i} after the call", rtol, atol)
        for i, (a, b) in enumerate(zip(e_roots, c_roots)):
            _same(a, b, f"root {i} after the call", rtol, atol)
        if backward:
            le = sum((o.float() * (k + 1.5)).sum() for k, o in enumerate(eo)
                     if isinstance(o, torch.Tensor) and o.requires_grad)
            lc = sum((o.float() * (k + 1.5)).sum() for k, o in enumerate(co)
                     if isinstance(o, torch.Tensor) and o.requires_grad)
            if isinstance(le, torch.Tensor):
                le.backward()
                lc.backward()
                for i, (a, b) in enumerate(zip(e_roots, c_roots)):
                    if a.requires_grad and (a.grad is not None or b.grad is not None):
                        # known difference: a mutated input whose new value reaches no loss gets a
                        # zero gradient (autograd materializes the unused tangent) where eager has None
                        ga = a.grad if a.grad is not None else torch.zeros_like(b.grad)
                        gb = b.grad if b.grad is not None else torch.zeros_like(a.grad)
                        torch.testing.assert_close(gb, ga, rtol=rtol, atol=atol, equal_nan=True)
                for i, (a, b) in enumerate(zip(e_roots, c_roots)):
                    _same(a, b, f"root {i} after backward", rtol, atol)
    return compiled
