"""Under ``no_grad``, or with no input that requires grad, eager records no node for a custom
``autograd.Function``: its ``backward`` never runs, so what it would do (return a gradient of the wrong
shape, as HF Reformer's reversible function does for its split input) is no reason to break the graph
(EB0048)."""
import pytest
import torch

from ember_test_helpers import CompileCounter, assert_same, compile


class HalfGradient(torch.autograd.Function):
    """A backward eager would reject (gradient of half the input's width), never reached without grad."""

    @staticmethod
    def forward(ctx, h):
        a, b = torch.chunk(h, 2, dim=-1)
        return torch.cat([b * 2, a], dim=-1)

    @staticmethod
    def backward(ctx, g):
        a, _ = torch.chunk(g, 2, dim=-1)
        return a


def through_half_gradient(x):
    return HalfGradient.apply(torch.cat([x, x], dim=-1)).sin()


@pytest.mark.parametrize("grad_mode", ["no_grad", "input_without_grad"])
def test_backward_not_checked_when_no_node_is_recorded(grad_mode):
    x = torch.randn(2, 3)
    cnt = CompileCounter()
    compiled = compile(through_half_gradient, backend=cnt, fullgraph=True)
    if grad_mode == "no_grad":
        x.requires_grad_()
        with torch.no_grad():
            out, ref = compiled(x), through_half_gradient(x)
    else:
        out, ref = compiled(x), through_half_gradient(x)
    assert_same(out, ref)
    assert not out.requires_grad
    assert cnt.frame_count == 1


def test_backward_still_checked_when_a_node_is_recorded():
    """With grad, eager raises in backward: the call breaks the graph and runs eagerly, raising the same."""
    x = torch.randn(2, 3, requires_grad=True)
    out = compile(through_half_gradient, backend=CompileCounter())(x)
    ref = through_half_gradient(x)
    assert_same(out, ref)
    with pytest.raises(RuntimeError) as eager_err:
        ref.sum().backward()
    with pytest.raises(RuntimeError) as compiled_err:
        out.sum().backward()
    assert str(compiled_err.value) == str(eager_err.value)
