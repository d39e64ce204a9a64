"""A custom autograd.Function that defines ``jvp`` (forward-mode AD) is traced where eager never
calls that jvp and records no node: no input requires grad (or grad mode is off), no dual level is
active (guarded), not inside a torch.func transform. It used to break the graph on every call
(EB0048), where torch.compile makes one graph. Elsewhere the call still breaks and runs eagerly."""
import pytest
import torch
import torch.autograd.forward_ad as fwAD

import ember
from ember_test_helpers import CompileCounter, check_same, compile


class ScaledSin(torch.autograd.Function):
    @staticmethod
    def forward(x, k):
        return x.sin() * k

    @staticmethod
    def setup_context(ctx, inputs, output):
        x, k = inputs
        ctx.k = k
        ctx.save_for_backward(x)
        ctx.save_for_forward(x)

    @staticmethod
    def backward(ctx, g):
        x, = ctx.saved_tensors
        return g * x.cos() * ctx.k, None

    @staticmethod
    def jvp(ctx, t, _):
        x, = ctx.saved_tensors
        return t * x.cos() * ctx.k


def apply_then_add(x):
    return ScaledSin.apply(x, 3.0) + 1


def apply_under_no_grad(x):
    with torch.no_grad():
        return ScaledSin.apply(x, 2.0) * x


def test_no_input_requires_grad_one_graph():
    check_same(apply_then_add, torch.randn(4), graphs=1, fullgraph=True)


def test_under_no_grad_one_graph():
    check_same(apply_under_no_grad, torch.randn(4, requires_grad=True), graphs=1, fullgraph=True)


def test_input_requiring_grad_still_breaks():
    x = torch.randn(4, requires_grad=True)
    with pytest.raises(ember.Unsupported, match="forward-mode AD"):
        compile(apply_then_add, fullgraph=True)(x)
    cnt = CompileCounter()
    check_same(apply_then_add, x, graphs=None, fullgraph=False, counter=cnt)


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_called_later_with_a_dual_tensor_uses_the_jvp(backend):
    compiled = compile(apply_then_add, backend=backend)
    x, t = torch.randn(4), torch.randn(4)
    torch.testing.assert_close(compiled(x), apply_then_add(x))
    with fwAD.dual_level():
        got = fwAD.unpack_dual(compiled(fwAD.make_dual(x, t))).tangent
        want = fwAD.unpack_dual(apply_then_add(fwAD.make_dual(x, t))).tangent
    torch.testing.assert_close(got, want)
    torch.testing.assert_close(compiled(x), apply_then_add(x))


@pytest.mark.parametrize("transform", ["jvp", "grad"])
def test_inside_a_transform_in_the_frame(transform):
    def f(x, t):
        if transform == "jvp":
            return torch.func.jvp(lambda a: ScaledSin.apply(a, 3.0), (x,), (t,))[1]
        return torch.func.grad(lambda a: ScaledSin.apply(a, 3.0).sum())(x)
    x, t = torch.randn(4), torch.randn(4)
    torch.testing.assert_close(compile(f)(x, t), f(x, t))
