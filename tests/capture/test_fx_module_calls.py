"""Calling a ``torch.fx.GraphModule`` inside a compiled frame (a symbolic_trace'd module, the graph
torch's compiled autograd hands to the compiler).

Calling a GraphModule runs ``_WrappedCall.__call__``, whose ``try``/``except`` only prints where in
the generated code an error arose and raises it again. Traced as it is, every op of the graph sat
under a handler that may catch (capture/caught_ops.py), so an in-place write to an input there
ended the graph: a break, and an error under ``fullgraph=True`` (torch.compile: one graph).
ember traces the call without that ``try`` (capture/polyfills/torch_utils.py).
"""
import contextlib

import pytest
import torch

from ember_test_helpers import CompileCounter, assert_same, compile


class _WritesInput(torch.nn.Module):
    def forward(self, p, g):
        p.mul_(g)
        return p * 2


_GM = torch.fx.symbolic_trace(_WritesInput())


def _calls_graph_module(p, g):
    with torch.no_grad():
        return _GM(p, g) + 1


@pytest.mark.parametrize("requires_grad", [False, True])
def test_graph_module_writing_an_input_is_one_graph(requires_grad):
    g = torch.randn(3)
    p_e = torch.randn(3, requires_grad=requires_grad)
    p_c = p_e.detach().clone().requires_grad_(requires_grad)
    cnt = CompileCounter()
    actual = compile(_calls_graph_module, backend=cnt, fullgraph=True)(p_c, g)
    expected = _calls_graph_module(p_e, g)
    assert_same(actual, expected)
    assert_same(p_c, p_e)
    assert cnt.frame_count == 1


def test_error_inside_a_graph_module_propagates_as_in_eager():
    class Bad(torch.nn.Module):
        def forward(self, x):
            return torch.mm(x, x)  # (a 1-d input: mm raises)

    gm = torch.fx.symbolic_trace(Bad())

    def fn(x):
        try:
            return gm(x)
        except RuntimeError as e:
            return x * 0 - 1, type(e).__name__

    x = torch.randn(3)
    assert_same(compile(fn, backend=CompileCounter())(x), fn(x))


def test_post_accumulate_grad_hook_writing_the_parameter_under_compiled_autograd():
    """torch's compiled autograd calls the hook from its graph (a GraphModule) and hands that graph
    to ember with fullgraph=True: the hook's in-place writes stay in one graph."""
    from torch._dynamo import compiled_autograd

    def hook(t):
        t.mul_(t.grad)
        t.grad.mul_(5)

    def run(ctx):
        x = torch.tensor([0.5, 0.5, 0.5], requires_grad=True)
        y = torch.tensor([1.0, 2.0, 3.0], requires_grad=True)
        x.register_post_accumulate_grad_hook(hook)
        with ctx:
            (x * y).backward(torch.tensor([2.0, 2.0, 2.0]))
        return x.detach(), x.grad, y.grad

    expected = run(contextlib.nullcontext())
    cnt = CompileCounter()
    actual = run(compiled_autograd._enable(lambda gm: compile(gm, backend=cnt, fullgraph=True)))
    assert_same(actual, expected)
    assert cnt.frame_count == 1
