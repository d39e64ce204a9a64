"""A tensor argument a custom ``autograd.Function`` keeps as a ctx attribute (``ctx.w = w``).

Eager's backward reads such a tensor when it runs, with no version check: changed in place
between forward and backward, the backward sees the new value. An AOT backend traces the
user's backward into the backward graph; the input must reach it live and unversioned, not
through ``save_for_backward`` (whose version check would raise "modified by an inplace
operation"). Where eager *does* check (the same tensor saved by another op of the frame), the
error stays. Each case compares values, gradients and errors with eager.
"""
from __future__ import annotations

import pytest
import torch

import ember


class Stash(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, w):
        ctx.w = w
        ctx.y = x * 1  # an intermediate kept as an attribute: no one can change it
        return x * w

    @staticmethod
    def backward(ctx, g):
        return g * ctx.w + ctx.y, None


class StashAndSave(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, w, s):
        ctx.w = w
        ctx.save_for_backward(s)
        return x * w * s

    @staticmethod
    def backward(ctx, g):
        (s,) = ctx.saved_tensors
        return g * ctx.w * s, None, None


def stash(x, w, s):
    return Stash.apply(x, w).sum()


def stash_twice(x, w, s):
    return (Stash.apply(x, w) * Stash.apply(x * 2, w)).sum()


def stash_and_save(x, w, s):
    return StashAndSave.apply(x, w, s).sum()


def stash_and_graph_saves(x, w, s):
    # w is also saved by the frame's own mul: eager's backward checks its version there
    return (Stash.apply(x, w) + x * w).sum()


CASES = [stash, stash_twice, stash_and_save, stash_and_graph_saves]
CHANGES = {
    "none": lambda w, s: None,
    "w_add_": lambda w, s: w.add_(10),
    "s_mul_": lambda w, s: s.mul_(3),
}


def _run(fn, change):
    x = torch.linspace(0.5, 2.0, 3, requires_grad=True)
    w = torch.full((3,), 2.0)
    s = torch.tensor([1.0, 2.0, 3.0])
    try:
        out = fn(x, w, s)
        change(w, s)
        out.backward()
    except RuntimeError as e:
        return ("raised", "modified by an inplace operation" in str(e))
    return out.detach(), x.grad


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
@pytest.mark.parametrize("change", sorted(CHANGES))
@pytest.mark.parametrize("fn", CASES, ids=lambda f: f.__name__)
def test_ctx_attribute_read_live_as_eager(fn, change, backend):
    if backend == "inductor" and change != "w_add_":
        pytest.skip("inductor: the case that reads the changed tensor is enough (compile time)")
    expected = _run(fn, CHANGES[change])
    ember.reset()
    got = _run(ember.compile(fn, backend=backend), CHANGES[change])
    if isinstance(expected[0], str):
        assert got == expected
    else:
        assert not isinstance(got[0], str), got
        for a, b in zip(got, expected):
            torch.testing.assert_close(a, b)


def test_ctx_attribute_read_after_second_change_with_retain_graph():
    def run(fn):
        x = torch.ones(3, requires_grad=True)
        w = torch.full((3,), 2.0)
        out = fn(x, w, None)
        w.add_(1)
        out.backward(retain_graph=True)
        first = x.grad.clone()
        w.mul_(5)
        out.backward()
        return first, x.grad

    expected = run(stash)
    ember.reset()
    got = run(ember.compile(stash, backend="aot_eager"))
    for a, b in zip(got, expected):
        torch.testing.assert_close(a, b)


# A tensor forward *made* and kept as a ctx attribute is read live too, and the program can reach
# it: forward returns it (or a view of it is the attribute), and the program writes the output in
# place before the backward. Eager's backward reads the written values, with no version check.
class StashOutput(torch.autograd.Function):
    @staticmethod
    def forward(ctx, z):
        y = z * 2
        ctx.y = y
        return y

    @staticmethod
    def backward(ctx, g):
        return g * ctx.y


class StashOutputView(torch.autograd.Function):
    @staticmethod
    def forward(ctx, z):
        y = z * 2
        ctx.tail = y[1:]
        return y

    @staticmethod
    def backward(ctx, g):
        gz = g.clone()
        gz[1:] = gz[1:] * ctx.tail
        return gz


class StashOutputAndSave(torch.autograd.Function):
    # saved as well: eager's backward checks the version of the saved one and raises
    @staticmethod
    def forward(ctx, z):
        y = z * 2
        ctx.y = y
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx, g):
        (s,) = ctx.saved_tensors
        return g * ctx.y + s


def _torch_aot_backend():
    from functorch.compile import nop
    from torch._dynamo.backends.common import aot_autograd
    return aot_autograd(fw_compiler=nop, bw_compiler=nop)


def _run_output_write(fn, write, calls=2):
    grads = []
    try:
        for n in range(3, 3 + calls):
            z = torch.linspace(-1.0, 1.0, n, requires_grad=True)
            out = fn(z)
            if write:
                with torch.no_grad():
                    out.add_(10)
            out.sum().backward()
            grads.append(z.grad)
    except RuntimeError as e:
        return ("raised", "modified by an inplace operation" in str(e))
    return grads


@pytest.mark.parametrize("backend", ["aot_eager", "inductor", "torch_aot_autograd"])
@pytest.mark.parametrize("dynamic", [False, True])
@pytest.mark.parametrize("write", [False, True])
@pytest.mark.parametrize("fn_cls", [StashOutput, StashOutputView, StashOutputAndSave], ids=lambda c: c.__name__)
def test_made_tensor_kept_on_ctx_is_read_live(fn_cls, write, dynamic, backend):
    if backend == "inductor" and not (write and dynamic):
        pytest.skip("inductor: the written, dynamic case is enough (compile time)")

    def fn(z):
        return fn_cls.apply(z)

    expected = _run_output_write(fn, write)
    ember.reset()
    be = _torch_aot_backend() if backend == "torch_aot_autograd" else backend
    before = ember.stats()
    got = _run_output_write(ember.compile(fn, backend=be, dynamic=dynamic), write)
    after = ember.stats()
    assert after["graphs"] - before["graphs"] >= 1 and after["fallbacks"] == before["fallbacks"]
    assert after["graph_breaks"] == before["graph_breaks"]
    if isinstance(expected, tuple):
        assert got == expected
    else:
        assert not isinstance(got, tuple), got
        for a, b in zip(got, expected):
            torch.testing.assert_close(a, b)


def test_input_kept_on_ctx_with_torch_aot_autograd_backend():
    # a backend built from torch's aot_autograd traces ember's graph itself: the stashed argument is
    # saved without a version check there too (two forwards, then the first backward writes it)
    class F(torch.autograd.Function):
        @staticmethod
        def forward(ctx, a, b, z):
            ctx.b = b
            ctx.save_for_backward(a)
            return z + 1

        @staticmethod
        def backward(ctx, g):
            (a,) = ctx.saved_tensors
            ctx.b.mul_(2)
            return None, None, g + 2 + a + ctx.b

    def fn(a, b, z):
        return F.apply(a, b, z)

    def run(f):
        a, b = torch.zeros(4), torch.ones(4)
        z1, z2 = torch.randn(4, requires_grad=True), torch.randn(4, requires_grad=True)
        o1, o2 = f(a, b, z1), f(a, b, z2)
        o1.sum().backward()
        o2.sum().backward()
        return z1.grad, z2.grad, b

    expected = run(fn)
    ember.reset()
    got = run(ember.compile(fn, backend=_torch_aot_backend()))
    for x, y in zip(got, expected):
        torch.testing.assert_close(x, y)


def _stash_in(kind):
    class F(torch.autograd.Function):
        @staticmethod
        def forward(ctx, z, w):
            y = z * 2
            ctx.ts = {"tuple": (y, w), "list": [y, w], "dict": {"y": y, "w": w}}[kind]
            return y

        @staticmethod
        def backward(ctx, g):
            y, w = ctx.ts.values() if kind == "dict" else ctx.ts
            return g * y * w, None
    return F


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
@pytest.mark.parametrize("kind", ["tuple", "list", "dict"])
def test_tensors_in_a_container_kept_on_ctx_are_read_live(kind, backend):
    # the output and the argument, both written in place before the backward: eager reads both live
    F = _stash_in(kind)

    def fn(z, w):
        return F.apply(z, w)

    def run(f):
        z = torch.linspace(-1.0, 1.0, 3, requires_grad=True)
        w = torch.full((3,), 3.0)
        try:
            out = f(z, w)
            with torch.no_grad():
                out.add_(10)
                w.mul_(2)
            out.sum().backward()
        except RuntimeError as e:
            return ("raised", str(e)[:60])
        return z.grad

    expected = run(fn)
    ember.reset()
    before = ember.stats()
    got = run(ember.compile(fn, backend=backend))
    assert ember.stats()["fallbacks"] == before["fallbacks"]
    assert not isinstance(got, tuple), got
    torch.testing.assert_close(got, expected)
