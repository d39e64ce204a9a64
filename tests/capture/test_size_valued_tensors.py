"""0-dim integer tensors made from sizes and ints (capture/scalar_inputs.py, ``note_known_int``):
``torch.div(h.size(1), w, rounding_mode="trunc")`` (longformer's and LED's chunking) is a tensor
whose value is a size expression; ``view``/``new_zeros``/``int()``/``.item()``/a slice bound that
read it as an int take the expression — no data-dependent break, with static and dynamic sizes —
and a tensor written since, a negative truncated quotient or a division by zero are left to the
op itself (eager's answer, eager's error)."""
import pytest
import torch

import ember
from tests.helpers import CompileCounter


def chunked(x, w):
    n = torch.div(x.size(1), w, rounding_mode="trunc")
    m = n - 1
    a = x.new_zeros((x.size(0), m + 1, w))
    k = int(m) + n.item()
    r = x.view(x.size(0), n, w)[:, :m]
    return a + 1, r * 2, k, torch.arange(k), x.reshape(-1)[: int(n)]


def literal(x):
    t = torch.tensor(x.size(0))
    u = torch.floor_divide(x.size(1), 2)
    return x.new_ones(t, u * 2) + x, t * 3, u


def written(x):
    t = torch.tensor(x.size(0))
    t.add_(1)
    return x.new_zeros(t, 2), int(t)


def negative_trunc(x):
    q = torch.div(x.size(0) - 10, 3, rounding_mode="trunc")  # -2 for size 2 (floor would be -3)
    return x * int(q), q


def by_zero(x, k):
    return x.new_zeros(torch.div(x.size(0), k, rounding_mode="floor"))


def _same(want, got):
    assert type(want) is type(got)
    if isinstance(want, tuple):
        assert len(want) == len(got)
        for a, b in zip(want, got):
            _same(a, b)
    elif isinstance(want, torch.Tensor):
        assert want.dtype == got.dtype and want.shape == got.shape
        torch.testing.assert_close(got, want)
    else:
        assert want == got


@pytest.mark.parametrize("dynamic", [None, True])
def test_sizes_from_size_valued_tensors(dynamic):
    ember.reset()
    counter = CompileCounter()
    compiled = ember.compile(chunked, backend=counter, dynamic=dynamic)
    for shape in [(2, 12), (3, 16), (4, 20), (2, 24)]:  # (m > 1: a size-1 slice would be guarded)
        x = torch.randn(*shape)
        _same(chunked(x, 4), compiled(x, 4))
    # static, then one dynamic recompile (automatic); one graph with dynamic=True: never a break
    assert counter.frame_count == (2 if dynamic is None else 1)


def test_tensor_literals_and_floor_divide_of_sizes():
    ember.reset()
    counter = CompileCounter()
    compiled = ember.compile(literal, backend=counter)
    for shape in [(2, 8), (3, 12), (5, 6)]:
        x = torch.randn(*shape)
        _same(literal(x), compiled(x))
    assert counter.frame_count == 2


@pytest.mark.parametrize("fn", [written, negative_trunc])
@pytest.mark.parametrize("dynamic", [None, True])
def test_values_the_expression_does_not_give(fn, dynamic):
    ember.reset()
    compiled = ember.compile(fn, backend="eager", dynamic=dynamic)
    for shape in [(2, 3), (3, 3), (4, 3)]:
        x = torch.randn(*shape)
        _same(fn(x), compiled(x))


def test_division_by_zero_raises_as_eager():
    ember.reset()
    compiled = ember.compile(by_zero, backend="eager")
    x = torch.randn(3)
    _same(by_zero(x, 2), compiled(x, 2))
    with pytest.raises(RuntimeError) as want:
        by_zero(x, 0)
    with pytest.raises(RuntimeError) as got:
        compiled(x, 0)
    assert str(got.value) == str(want.value)
