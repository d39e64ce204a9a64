"""Compare a function under an ember AOT backend with eager PyTorch.

``compare(fn, make_inputs, backend, via)`` runs ``fn`` eagerly on one set of
inputs and compiled on an identical set, then checks: outputs (values, dtype,
shape, requires_grad, is_leaf, whether each is a view), which outputs share
storage with which inputs and with each other, the inputs after the call
(mutations), and the gradients of inputs (and module parameters) after a
backward through every output that requires grad.
"""
from __future__ import annotations

import copy

import torch
import torch.fx
import torch.utils._pytree as pytree

import ember
from inductor_tolerance import assert_close_inductor, to_float64

VIAS = ["torch.compile", "direct"]


def compile_with(fn, backend_name: str, via: str, example_inputs: list):
    backend = ember.lookup_backend(backend_name)
    if via == "torch.compile":
        torch._dynamo.reset()
        return torch.compile(fn, backend=backend, fullgraph=True)
    if isinstance(fn, torch.fx.GraphModule):
        gm = fn
    else:
        try:
            gm = torch.fx.symbolic_trace(fn)
        except (TypeError, torch.fx.proxy.TraceError):
            # e.g. ``x[1:3] = y``: symbolic_trace cannot record setitem; take an aten graph
            from torch.fx.experimental.proxy_tensor import make_fx
            with torch.no_grad():
                detached = [a.detach().clone() if isinstance(a, torch.Tensor) else a for a in example_inputs]
            gm = make_fx(fn)(*detached)
    return backend(gm, list(example_inputs))


def _tensors(xs):
    return [x for x in pytree.tree_leaves(xs) if isinstance(x, torch.Tensor)]


def _loss(outs):
    total = 0.0
    for i, o in enumerate(_tensors(outs)):
        if o.requires_grad and o.is_floating_point():
            total = total + (o * (i + 1.5)).sum() + (o * o).sum()
    return total


def _alias_pattern(inputs, outs):
    ins, os_ = _tensors(inputs), _tensors(outs)
    ptr = lambda t: t.untyped_storage().data_ptr()  # noqa: E731
    return ([[ptr(o) == ptr(i) for i in ins] for o in os_],
            [[ptr(o) == ptr(p) for p in os_] for o in os_])


def assert_same(a, b, *, rtol=1e-5, atol=1e-6, what=""):
    assert type(a) is type(b) or not isinstance(a, torch.Tensor), (what, type(a), type(b))
    if isinstance(a, torch.Tensor):
        assert a.shape == b.shape and a.dtype == b.dtype, (what, a.shape, b.shape, a.dtype, b.dtype)
        torch.testing.assert_close(b.detach(), a.detach(), rtol=rtol, atol=atol, msg=lambda m: f"{what}: {m}")
    else:
        assert a == b, (what, a, b)


def compare(fn, make_inputs, backend: str = "aot_eager", via: str = "direct", *, check_base=True,
            backward=True, module: torch.nn.Module | None = None, rtol=1e-5, atol=1e-6, grad_enabled=True,
            after=None):
    """Run eager and compiled; assert they agree. Returns (eager_out, compiled_out).

    ``after(outs, inputs)`` runs on both results before the comparison (e.g. the
    caller mutates a returned view).

    With ``backend="inductor"`` values are compared as Inductor promises (per-dtype
    tolerance, then against a float64 run; see tests/inductor_tolerance.py), and
    ``rtol``/``atol`` are ignored.
    """
    torch.manual_seed(0)
    eager_in = make_inputs()
    torch.manual_seed(0)
    compiled_in = make_inputs()
    target = fn
    compiled_module = None
    if module is not None:
        compiled_module = copy.deepcopy(module)
        target = compiled_module
    inductor = backend == "inductor"
    if inductor:  # a float64 run of the same program arbitrates rounding differences
        fp64_in = to_float64(eager_in)
        fp64_module = copy.deepcopy(module).double() if module is not None else None
        with torch.set_grad_enabled(grad_enabled):
            fp64_out = (fp64_module if module is not None else fn)(*fp64_in)
            if after is not None:
                after(fp64_out, fp64_in)
    else:
        fp64_in = fp64_module = fp64_out = None

    def same(a, b, what, ref64=None):
        if inductor and isinstance(a, torch.Tensor):
            assert_close_inductor(b, a, ref64.to(a.dtype) if ref64 is not None else None, what=what)
        else:
            assert_same(a, b, rtol=rtol, atol=atol, what=what)

    def leaves64(value, n):
        return pytree.tree_leaves(value) if value is not None else [None] * n

    with torch.set_grad_enabled(grad_enabled):
        compiled = compile_with(target, backend, via, compiled_in)
        eager_out = (module if module is not None else fn)(*eager_in)
        compiled_out = compiled(*compiled_in)
        if after is not None:
            after(eager_out, eager_in)
            after(compiled_out, compiled_in)

    eo, co = pytree.tree_leaves(eager_out), pytree.tree_leaves(compiled_out)
    assert len(eo) == len(co)
    for i, (a, b, r) in enumerate(zip(eo, co, leaves64(fp64_out, len(eo)))):
        same(a, b, f"output {i}", r)
        if isinstance(a, torch.Tensor):
            assert a.requires_grad == b.requires_grad, f"output {i} requires_grad {a.requires_grad} vs {b.requires_grad}"
            assert a.is_leaf == b.is_leaf, f"output {i} is_leaf {a.is_leaf} vs {b.is_leaf}"
            if check_base:
                assert (a._base is not None) == (b._base is not None), f"output {i} is a view: {a._base is not None}"
    assert _alias_pattern(eager_in, eager_out) == _alias_pattern(compiled_in, compiled_out), "aliasing differs"
    ei, ci = pytree.tree_leaves(eager_in), pytree.tree_leaves(compiled_in)
    for i, (a, b, r) in enumerate(zip(ei, ci, leaves64(fp64_in, len(ei)))):
        if isinstance(a, torch.Tensor):
            assert a.stride() == b.stride() and a.storage_offset() == b.storage_offset(), f"input {i} metadata"
        same(a, b, f"input {i} after the call", r)
    if module is not None:
        buffers64 = list(fp64_module.buffers()) if fp64_module is not None else [None] * len(list(module.buffers()))
        for (n, a), (_, b), r in zip(list(module.named_buffers()), list(compiled_module.named_buffers()), buffers64):
            same(a, b, f"buffer {n}", r)

    if backward and grad_enabled:
        le, lc = _loss(eager_out), _loss(compiled_out)
        if isinstance(le, torch.Tensor):
            le.backward()
            lc.backward()
            if inductor:
                _loss(fp64_out).backward()
            te, tc = _tensors(eager_in), _tensors(compiled_in)
            t64 = _tensors(fp64_in) if inductor else [None] * len(te)
            for i, (a, b, r) in enumerate(zip(te, tc, t64)):
                if a.is_leaf and (a.grad is not None or b.grad is not None):
                    assert a.grad is not None and b.grad is not None, f"grad of input {i}"
                    same(a.grad, b.grad, f"grad of input {i}", r.grad if r is not None else None)
            if module is not None:
                params64 = (list(fp64_module.parameters()) if inductor
                            else [None] * len(list(module.parameters())))
                for (n, a), (_, b), r in zip(module.named_parameters(), compiled_module.named_parameters(), params64):
                    assert (a.grad is None) == (b.grad is None), f"grad of {n}"
                    if a.grad is not None:
                        same(a.grad, b.grad, f"grad of {n}", r.grad if r is not None else None)
    return eager_out, compiled_out

