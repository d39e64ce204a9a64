"""An ``autograd.Function`` (setup_context form) called inside the function of a ``torch.func``
transform (grad, grad_and_value, vjp, jacrev, vmap over grad with ``generate_vmap_rule``) is traced
into one graph: the transform's body calls the user's own ``apply``, as eager does
(capture/variables/function_in_transform.py). It used to run the whole frame eagerly. What eager
refuses (the old ``forward(ctx, ...)`` form, forward mode without a jvp) or what would run
untraced (a hand-written vmap rule) stays a break with eager's result; under forward mode (jvp,
jacfwd, hessian) the user's jvp is traced once for its guards and runs inside the transform. Each case compares with eager, under
the eager and aot_eager backends."""
from __future__ import annotations

import pytest
import torch

from ember_test_helpers import CompileCounter, assert_same, check_raises_same, check_same, compile


class MulSin(torch.autograd.Function):
    generate_vmap_rule = True

    @staticmethod
    def forward(x, w):
        return x * w, x.sin()

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.save_for_backward(*inputs)
        ctx.scale = 1.0

    @staticmethod
    def backward(ctx, g, g_sin):
        x, w = ctx.saved_tensors
        return g * w * ctx.scale + g_sin * x.cos(), g * x


class Scale(torch.autograd.Function):
    @staticmethod
    def forward(x, k):
        return x * k

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.k = inputs[1]

    @staticmethod
    def backward(ctx, g):
        return g * ctx.k, None

    @staticmethod
    def jvp(ctx, t, _):
        return t * ctx.k


def _grad(x, w):
    return torch.func.grad(lambda a: MulSin.apply(a, w)[0].sum() + MulSin.apply(a, w)[1].sum())(x)


def _grad_and_value(x, w):
    return torch.func.grad_and_value(lambda a: (MulSin.apply(a, w)[1] * 2).sum())(x)


def _vjp(x, w):
    out, pullback = torch.func.vjp(lambda a: MulSin.apply(a, w)[0], x)
    return out, pullback(torch.ones_like(out))


def _jacrev(x, w):
    return torch.func.jacrev(lambda a: MulSin.apply(a, w)[1])(x)


def _vmap_of_grad(x, w):
    return torch.func.vmap(torch.func.grad(lambda a, b: MulSin.apply(a, b)[0].sum()))(x, w)


def _grad_of_a_function_with_jvp(x, w):
    return torch.func.grad(lambda a: Scale.apply(a, 3.0).sum() * w.sum())(x)


CASES = [_grad, _grad_and_value, _vjp, _jacrev, _vmap_of_grad, _grad_of_a_function_with_jvp]


@pytest.mark.parametrize("fn", CASES, ids=lambda f: f.__name__)
def test_one_graph_as_eager(fn):
    torch.manual_seed(0)
    check_same(fn, torch.randn(3, 4), torch.randn(3, 4), graphs=1)


@pytest.mark.parametrize("fn", CASES, ids=lambda f: f.__name__)
def test_aot_eager_as_eager(fn):
    torch.manual_seed(0)
    x, w = torch.randn(3, 4), torch.randn(3, 4)
    compiled = compile(fn, backend="aot_eager", fullgraph=True)
    assert_same(compiled(x, w), fn(x, w))


def test_gradient_flows_to_an_outside_input():
    def f(x, w):
        return torch.func.grad(lambda a: MulSin.apply(a, w)[0].sum())(x) * 2
    check_same(f, torch.randn(3), torch.randn(3, requires_grad=True), graphs=1)


def test_the_old_forward_ctx_form_raises_as_eager():
    class Old(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        def backward(ctx, g):
            return g * 2

    def f(x):
        return torch.func.grad(lambda a: Old.apply(a).sum())(x)
    check_raises_same(f, torch.randn(3))


class SinMul(torch.autograd.Function):
    generate_vmap_rule = True

    @staticmethod
    def forward(x, w):
        return x.sin() * w

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.save_for_backward(*inputs)
        ctx.save_for_forward(*inputs)

    @staticmethod
    def backward(ctx, g):
        x, w = ctx.saved_tensors
        return g * w * x.cos(), g * x.sin()

    @staticmethod
    def jvp(ctx, tx, tw):
        x, w = ctx.saved_tensors
        return tx * w * x.cos() + tw * x.sin()


def _jvp(x, w):
    return torch.func.jvp(lambda a: SinMul.apply(a, w), (x,), (torch.ones_like(x),))


def _jacfwd(x, w):
    return torch.func.jacfwd(lambda a: SinMul.apply(a, w))(x)


def _hessian(x, w):
    return torch.func.hessian(lambda a: SinMul.apply(a, w).sum())(x)


def _jvp_of_scale(x, w):
    return torch.func.jvp(lambda a: Scale.apply(a, 2.0) * w, (x,), (torch.ones_like(x),))


@pytest.mark.parametrize("fn", [_jvp, _jacfwd, _hessian, _jvp_of_scale], ids=lambda f: f.__name__)
def test_forward_mode_runs_the_users_jvp(fn):
    torch.manual_seed(0)
    x, w = torch.randn(4), torch.randn(4)
    check_same(fn, x, w, graphs=1)
    assert_same(compile(fn, backend="aot_eager", fullgraph=True)(x, w), fn(x, w))


def test_forward_mode_without_a_jvp_stays_a_break_with_eagers_error():
    def f(x, w):
        return torch.func.jvp(lambda a: MulSin.apply(a, w)[0], (x,), (torch.ones_like(x),))
    check_raises_same(f, torch.randn(3), torch.randn(3))
