"""torch.nn.utils.clip_grad_* traced as Python (one graph, as torch.compile), not as an opaque
call: its `isinstance` checks on `module.parameters()` and torch's C helper that groups tensors
by device and dtype (a dict, traced through ember's pure-Python version) stay in the trace."""
from __future__ import annotations

import copy

import pytest
import torch

from ember_test_helpers import assert_same, compile, stats


def _models(mixed_dtypes: bool):
    torch.manual_seed(0)
    m = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.Linear(3, 2))
    if mixed_dtypes:
        m[1].double()
    return m, copy.deepcopy(m)


def _backward(m, x):
    out = m[1](m[0](x).to(m[1].weight.dtype))
    out.sum().backward()


@pytest.mark.parametrize("foreach", [None, False, True])
@pytest.mark.parametrize("norm_type", [2.0, float("inf"), 1.0])
@pytest.mark.parametrize("mixed_dtypes", [False, True])
def test_clip_grad_norm_matches_eager_in_one_graph(foreach, norm_type, mixed_dtypes):
    def clip(mod, max_norm):
        total = torch.nn.utils.clip_grad_norm_(mod.parameters(), max_norm, norm_type=norm_type, foreach=foreach)
        torch.nn.utils.clip_grad_value_(mod.parameters(), 0.3, foreach=foreach)
        return total

    m, m_eager = _models(mixed_dtypes)
    compiled = compile(clip, backend="aot_eager")
    for _ in range(3):
        x = torch.randn(5, 4)
        _backward(m, x)
        _backward(m_eager, x)
        assert_same(compiled(m, 0.5), clip(m_eager, 0.5))
        for p, q in zip(m.parameters(), m_eager.parameters()):
            assert_same(p.grad, q.grad)
            p.grad = q.grad = None
    assert stats()["graph_breaks"] == 0
    assert stats()["graphs"] == 1


def test_isinstance_of_a_parameters_iterator():
    m = torch.nn.Linear(2, 2)

    def f(mod, x):
        params = mod.parameters()
        return x * (1 + isinstance(params, torch.Tensor)) + 2 * isinstance(params, type(i for i in ()))

    x = torch.randn(2)
    assert_same(compile(f, backend="eager")(m, x), f(m, x))
    assert stats()["graph_breaks"] == 0


def test_group_tensors_polyfill_matches_torch():
    from ember.capture.polyfills.torch_utils import group_tensors_by_device_and_dtype
    a = [torch.randn(2), torch.randn(3, dtype=torch.float64), torch.randn(1)]
    b = [torch.randn(2), torch.randn(3, dtype=torch.float64), torch.randn(1)]
    for with_indices in (False, True):
        ours = group_tensors_by_device_and_dtype([a, b], with_indices)
        theirs = torch._C._group_tensors_by_device_and_dtype([a, b], with_indices)
        assert set(ours) == set(theirs)
        for key, (lists, indices) in theirs.items():
            assert [[id(t) for t in lst] for lst in ours[key][0]] == [[id(t) for t in lst] for lst in lists]
            assert list(ours[key][1]) == list(indices)
