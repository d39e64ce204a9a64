"""Two things eager allows around a custom ``autograd.Function`` that broke ember's graph:

* under ``no_grad``, or with no input that requires grad, eager records no node: ``backward`` never
  runs, so what it would do (return a gradient of the wrong shape, as HF Reformer's reversible
  function does for its split input) is no reason to break the graph (EB0048);
* ``ctx.layers = self.layers``, the program's own list of modules: eager's ctx holds that very list and
  backward reads it when it runs (EB0046 "ctx.layers holds a list[module ...]").
"""
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


class Reversible(torch.autograd.Function):
    @staticmethod
    def forward(ctx, h, layers):
        for layer in layers:
            h = layer(h)
        ctx.layers = layers
        return h

    @staticmethod
    def backward(ctx, g):
        return g * len(ctx.layers), None


class Stack(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = [torch.nn.Linear(4, 4)]  # a plain list: not registered submodules

    def forward(self, x):
        return Reversible.apply(x, self.layers) + 1


def _run(mod, x):
    out = mod(x)
    out.sum().backward()
    grad, x.grad = x.grad, None
    return out, grad


def test_ctx_holds_the_programs_list_of_modules():
    torch.manual_seed(0)
    mod, x = Stack(), torch.randn(2, 4, requires_grad=True)
    cnt = CompileCounter()
    compiled = compile(mod, backend=cnt, fullgraph=True)
    for _ in range(2):
        out, grad = _run(compiled, x)
        ref, ref_grad = _run(mod, x)
        assert_same(out, ref)
        assert_same(grad, ref_grad)
    assert cnt.frame_count == 1


def test_backward_sees_the_list_as_it_is_then():
    """The list grows between forward and backward: eager's backward reads its new length."""
    torch.manual_seed(0)
    results = []
    for make in (lambda m: m, lambda m: compile(m, backend=CompileCounter(), fullgraph=True)):
        mod, x = Stack(), torch.randn(2, 4, requires_grad=True)
        out = make(mod)(x)
        mod.layers.append(torch.nn.Identity())
        out.sum().backward()
        results.append(x.grad)
    assert_same(results[1], results[0])
    assert_same(results[0], torch.full((2, 4), 2.0))
