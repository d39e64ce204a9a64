"""A custom op whose fake implementation raises NotImplementedError is a graph break.

It ran the whole frame eagerly for those inputs (a per-call fallback meant for ops eager rejects
too), so ``fullgraph=True`` passed without a graph and without an error; torch.compile raises.
Without fullgraph the op now runs eagerly at a break, with graphs around it.
"""
import pytest
import torch

import ember
from ember_test_helpers import CompileCounter, assert_same, compile


@torch.library.custom_op("ember_test::fake_nyi", mutates_args=())
def _op(x: torch.Tensor) -> torch.Tensor:
    return x.sin()


@_op.register_fake
def _(x):
    raise NotImplementedError


def test_fullgraph_raises():
    def fn(x):
        return torch.ops.ember_test.fake_nyi(x)

    with pytest.raises(ember.exc.Unsupported):
        compile(fn, backend="eager", fullgraph=True)(torch.randn(3))


def test_break_keeps_graphs_around_the_op():
    def fn(x):
        y = x * 2
        z = torch.ops.ember_test.fake_nyi(y)
        return z + 1

    cnt = CompileCounter()
    x = torch.randn(3)
    assert_same(compile(fn, backend=cnt)(x), fn(x))
    assert cnt.frame_count == 2
