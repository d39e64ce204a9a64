"""Parameters named like the helpers the shape guards call (``torch``, ``math``): the guards still
hold for dynamic sizes and floats, so changing values compile once more (dynamic), not every time.

``Optimizer._use_grad`` does ``import torch._dynamo``, so ``torch`` is a local of it, a parameter of
its resume functions; the shape guards call ``torch.sym_float`` / ``math.floor`` by those names.
Before: such a frame was traced static (``StaticRetry``) every time, a recompile per new lr or size.
"""
import pytest
import torch

from ember_test_helpers import CompileCounter, assert_same, compile, reset, stats


def local_torch_after_break(x, lr):
    import torch._dynamo  # (makes `torch` a local: a parameter of the resume function)
    y = x * 2
    torch._dynamo.graph_break()
    return torch.mul(y.add(x, alpha=lr), lr)


def params_named_like_helpers(torch, math):
    return (torch * 2).sum(0) + math.size(0) / 3


def test_float_after_break_with_local_torch():
    reset()
    counter = CompileCounter()
    fn = compile(local_torch_after_break, backend=counter)
    for lr in (0.1, 0.2, 0.3, 0.4, 0.5):
        x = torch.randn(4)
        assert_same(fn(x, lr), local_torch_after_break(x, lr))
    # first graph + resume static, then the resume once more with lr a symbol
    assert counter.frame_count == 3, counter
    assert stats()["recompiles"] == 1


def test_dynamic_sizes_with_parameters_named_torch_and_math():
    reset()
    counter = CompileCounter()
    fn = compile(params_named_like_helpers, backend=counter)
    for k in (3, 4, 5, 6, 7):
        a, b = torch.randn(k, 2), torch.randn(k + 1)
        assert_same(fn(a, b), params_named_like_helpers(a, b))
    assert counter.frame_count == 2, counter  # static, then dynamic
    # a size outside what the dynamic graph assumed still recompiles (its guards are live)
    a, b = torch.randn(1, 2), torch.randn(2)
    assert_same(fn(a, b), params_named_like_helpers(a, b))
