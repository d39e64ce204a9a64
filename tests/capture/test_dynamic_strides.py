"""Automatic dynamic strides: an input whose sizes stay the same but whose stride changed between
calls (``x[:, :1]`` of inputs of different widths) gets a stride symbol on the recompile, so a third
stride does not compile again (torch.compile's automatic dynamic does the same). Compared with
eager on the eager and aot_eager backends, with gradients."""
from __future__ import annotations

import pytest
import torch

from ember_test_helpers import CompileCounter, assert_same, compile


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_changing_stride_recompiles_once(backend):
    counter = CompileCounter()

    def fn(x, y):
        return x * y

    compiled = compile(fn, backend=counter if backend == "eager" else backend)
    for i in range(1, 6):
        x = torch.randn(4, i)
        x1 = x if i == 1 else x[:, 0:1]
        y = torch.randn(4, 1)
        assert_same(compiled(x1, y), fn(x1, y))
    if backend == "eager":
        assert counter.frame_count == 2


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_strided_views_of_changing_width(backend):
    def fn(x):
        return x.contiguous().view(-1) * 2, x.t() @ x, x.sum(0), x.is_contiguous(), x.stride()

    compiled = compile(fn, backend=backend)
    for width in (3, 4, 5, 3, 6):
        x = torch.randn(5, width)[:, :3]
        assert_same(compiled(x), fn(x))


def test_strided_input_gradients_and_mutation():
    def fn(x, w):
        w.mul_(2)
        return (x * w).sum(0)

    compiled = compile(fn, backend="aot_eager")
    for width in (4, 5, 6, 7):
        base = torch.randn(3, width)
        x1 = base[:, 1:3].clone().requires_grad_()
        x2 = x1.detach().clone().requires_grad_()
        w_base1 = torch.randn(3, width)
        w_base2 = w_base1.clone()
        w1, w2 = w_base1[:, :2], w_base2[:, :2]
        out, expected = compiled(x1, w1), fn(x2, w2)
        assert_same(out, expected)
        assert_same(w_base1, w_base2)
        out.sum().backward()
        expected.sum().backward()
        assert_same(x1.grad, x2.grad)
