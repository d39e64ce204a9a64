"""An input modified in place after an op saved it: eager's backward raises ("modified by an
inplace operation"); the compiled program must not return gradients eager never computes."""
import pytest
import torch

import ember


def saves_then_mutates(x):
    t = x * x  # saves x
    x.sub_(1)
    return t


@pytest.mark.parametrize("backend", ["aot_eager"])
def test_backward_raises_like_eager(backend):
    x = torch.randn(3, requires_grad=True) * 1
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        saves_then_mutates(x).sum().backward()
    ember.reset()
    x = torch.randn(3, requires_grad=True) * 1
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        with ember.config.patch(strict=False):
            ember.compile(saves_then_mutates, backend=backend)(x).sum().backward()


def test_mutation_after_a_use_that_saves_nothing_still_compiles():
    def f(x):
        t = x + 1  # add saves nothing
        x.mul_(2)
        return t * 3
    x1 = torch.randn(3, requires_grad=True)
    x2 = x1.detach().clone().requires_grad_()
    a, b = x1 * 1, x2 * 1
    f(a).sum().backward()
    ember.reset()
    ember.compile(f, backend="aot_eager")(b).sum().backward()
    torch.testing.assert_close(x2.grad, x1.grad)
    torch.testing.assert_close(b, a)
    assert ember.stats()["fallbacks"] == 0 and ember.stats()["graphs"] == 1
