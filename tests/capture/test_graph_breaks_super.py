"""Zero-argument ``super()`` and ``torch.autograd.Function.apply`` after a graph break.

A resume function must keep what CPython binds to a frame: ``super()`` reads the frame's first
local (``self``/``cls``) and its ``__class__`` cell, so the first argument of the original stays
the first argument of every resume function (issue 9 A.2: it used to be ``___stack0``).
"""
import pytest
import torch

from ember_test_helpers import REFERENCE, assert_same, compile, stats


def compare(fn, *args, backend=None, grads=False, eager_frames_ok=False):
    expected = fn(*[a.detach().clone().requires_grad_(a.requires_grad) for a in args])
    comp_args = [a.detach().clone().requires_grad_(a.requires_grad) for a in args]
    kwargs = {} if backend is None else {"backend": backend}
    actual = compile(fn, **kwargs)(*comp_args)
    assert_same(actual, expected)
    if grads:
        eager_args = [a.detach().clone().requires_grad_(a.requires_grad) for a in args]
        fn(*eager_args).sum().backward()
        actual.sum().backward()
        for a, b in zip(comp_args, eager_args):
            assert_same(a.grad, b.grad, "grad")
    if not REFERENCE and not eager_frames_ok:
        assert stats()["fallbacks"] == 0, stats()
    return actual


class Base(torch.nn.Module):
    def f(self, x):
        return x * 2

    @classmethod
    def make(cls, x):
        return x + len(cls.__name__)

    def forward(self, x):
        return x - 1


class Child(Base):
    def f(self, x):
        print("break")
        return super().f(x) + 1

    @classmethod
    def make(cls, x):
        print("break in a classmethod")
        return super().make(x) * 2

    def forward(self, x):
        y = x.sin()
        print("break")
        y = super().forward(y)
        print("another break")
        return super().forward(y) + self.f(y)


def test_super_after_break_in_method():
    c = Child()
    compare(c.f, torch.ones(2))


def test_super_after_break_in_classmethod():
    compare(Child.make, torch.ones(2))


def test_super_after_two_breaks_in_forward():
    compare(Child(), torch.randn(3))


def test_super_in_method_whose_self_is_a_cell():
    class Cells(Base):
        def f(self, x):
            get = lambda: self.scale  # noqa: E731  (self is a cell variable of f)
            self.scale = 3.0
            print("break")
            return super().f(x) * get()
    compare(Cells().f, torch.ones(2))


def test_super_after_break_in_loop_and_with_block():
    class Loop(Base):
        def f(self, x):
            for i in range(3):
                with torch.no_grad():
                    print("iteration", i)
                    x = super().f(x) + i
            return x
    compare(Loop().f, torch.ones(2), eager_frames_ok=True)  # (a break in a loop: the frame is skipped)


def test_super_in_nested_class_and_closure():
    def outer(k):
        class Inner(Base):
            def f(self, x):
                y = x * k
                print("break")
                return super().f(y) + k
        return Inner()
    compare(outer(5).f, torch.ones(2))


def test_super_after_break_with_self_rebound_is_like_eager():
    class Rebind(Base):
        def f(self, x):
            print("break")
            return super().f(x), type(self).__name__
    compare(Rebind().f, torch.ones(2))


def test_super_with_explicit_arguments_after_break():
    class Explicit(Base):
        def f(self, x):
            print("break")
            return super(Explicit, self).f(x) + 1
    compare(Explicit().f, torch.ones(2))


class Triple(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * 3

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return g * 3 + x * 0


class ScaleBy(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, k):
        ctx.k = k
        return x * k

    @staticmethod
    def backward(ctx, g):
        return g * ctx.k, None


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_autograd_function_apply(backend):
    def fn(x):
        return Triple.apply(x.sin()) + ScaleBy.apply(x, 2.0)
    compare(fn, torch.randn(3, requires_grad=True), backend=backend, grads=True)


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_autograd_function_apply_in_module_with_super(backend):
    class M(Base):
        def forward(self, x):
            y = Triple.apply(x) * 2
            return super().forward(y)
    m = M()
    compare(m, torch.randn(3, requires_grad=True), backend=backend, grads=True)


def test_zero_argument_super_errors_are_eagers():
    # super() in a staticmethod / a plain function: eager's RuntimeError, same message
    class A:
        @staticmethod
        def foo():
            return super().__init__()

    def plain():
        return super().__init__()  # noqa: PLE1142 (no __class__ cell)

    def fn(obj):
        return obj.foo()

    def gn(x):
        return plain() if x.sum() > -1e9 else x

    for f, arg in ((fn, A()), (gn, torch.ones(2))):
        msgs = []
        for g in (f, compile(f)):
            with pytest.raises(RuntimeError) as info:
                g(arg)
            msgs.append(str(info.value))
        assert msgs[0] == msgs[1], msgs
