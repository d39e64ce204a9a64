"""``descriptor.__get__(t)`` for a tensor attribute's descriptor (``torch.Tensor.shape``,
``torch.Tensor.dtype``): the attribute lookup it stands for, traced as ``t.shape`` (it broke the
graph, and failed under fullgraph=True), with the descriptor guarded by identity."""
import torch

import ember
from tests.helpers import CompileCounter


def _via_descriptor(g, x):
    y = x.sin()
    return y, g.__get__(x)


def _via_bound_get(get, x):
    return x.cos(), get(x)


def test_descriptor_get_is_the_attribute():
    cnt = CompileCounter()
    compiled = ember.compile(_via_descriptor, backend=cnt, fullgraph=True)
    for g, x in ((torch.Tensor.shape, torch.ones(2, 3)), (torch.Tensor.dtype, torch.ones(2, 3)),
                 (torch.Tensor.shape, torch.ones(2, 3)), (torch.Tensor.requires_grad, torch.ones(2))):
        expected, got = _via_descriptor(g, x), compiled(g, x)
        assert torch.equal(expected[0], got[0]) and expected[1] == got[1]
    assert cnt.frame_count == 3  # (each descriptor once: the third call reuses the first graph)


def test_bound_get_passed_in_is_the_attribute():
    cnt = CompileCounter()
    compiled = ember.compile(_via_bound_get, backend=cnt, fullgraph=True)
    get = torch.Tensor.shape.__get__
    for x in (torch.ones(2, 2), torch.ones(2, 2) * 3):
        expected, got = _via_bound_get(get, x), compiled(get, x)
        assert torch.equal(expected[0], got[0]) and expected[1] == got[1]
    assert cnt.frame_count == 1
