"""Autograd's refusals of in-place writes to views (a custom Function's multiple view outputs):
eager raises them where the program writes; compiled, the captured graph runs as it is and
raises the same error, without a compile failure or a warning."""
import warnings

import pytest
import torch

import ember


class TwoViews(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x[0], x[1:]

    @staticmethod
    def backward(ctx, a, b):
        return torch.cat([a.unsqueeze(0), b])


def writes_a_view_output(x):
    a, b = TwoViews.apply(x.clone())
    with torch.no_grad():
        b.add_(1)
    return a * 2, b * 3


def test_write_to_a_multi_view_output_raises_like_eager_without_a_warning():
    x = torch.randn(4, 2, requires_grad=True)
    with pytest.raises(RuntimeError, match="returns multiple views") as eager:
        writes_a_view_output(x)
    ember.reset()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with pytest.raises(RuntimeError, match="returns multiple views") as compiled:
            ember.compile(writes_a_view_output, backend="aot_eager")(x)  # (tests run strict)
    assert str(compiled.value) == str(eager.value)
    assert not [w for w in caught if "ember" in str(w.message)]
    assert ember.stats()["fallbacks"] == 0


def test_reading_the_views_still_compiles():
    def f(x):
        a, b = TwoViews.apply(x.clone())
        return a * 2, b * 3
    x1 = torch.randn(4, 2, requires_grad=True)
    x2 = x1.detach().clone().requires_grad_()
    ea, eb = f(x1)
    ember.reset()
    ca, cb = ember.compile(f, backend="aot_eager")(x2)
    torch.testing.assert_close(ca, ea)
    torch.testing.assert_close(cb, eb)
    (ea.sum() + eb.sum()).backward()
    (ca.sum() + cb.sum()).backward()
    torch.testing.assert_close(x2.grad, x1.grad)
