"""A custom ``autograd.Function`` whose backward writes in place into a self-overlapping gradient
(``sum``'s gradient is an expanded scalar): eager's kernel raises ("more than one element of the
written-to tensor refers to a single memory location") or writes into the one shared element;
ember's AOT backends answer the same (functionalization used to turn the write into a plain value:
a gradient of 25 where eager raises)."""
import pytest
import torch

import ember


class MulGradInPlace(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x * 2

    @staticmethod
    def backward(ctx, grad):
        grad.mul_(3)
        return grad


class FillGradInPlace(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x * 2

    @staticmethod
    def backward(ctx, grad):
        grad.fill_(5)  # (eager allows fill_ on an expanded tensor: one element written)
        return grad * 1


class ExpandThenWrite(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.shape = x.shape
        return x.sum()

    @staticmethod
    def backward(ctx, grad):
        g = grad.expand(ctx.shape)
        g.add_(1)
        return g


def mul_of_sum(x):
    return MulGradInPlace.apply(x).sum()


def fill_of_sum(x):
    return FillGradInPlace.apply(x).sum() * 2


def expand_then_write(x):
    return ExpandThenWrite.apply(x * 1) * 3


def mul_of_mean_plus_other(x):
    return MulGradInPlace.apply(x).mean() + (x * x).sum()


def _run(fn, shape):
    x = torch.arange(float(shape[0] * shape[1])).reshape(shape).requires_grad_(True)
    try:
        out = fn(x)
        out.backward()
        return "ok", out.detach(), x.grad
    except RuntimeError as e:
        return "raised", str(e).split("\n")[0], None


@pytest.mark.parametrize("dynamic", [False, True])
@pytest.mark.parametrize("backend", ["aot_eager", "aot_eager_decomp_partition"])
@pytest.mark.parametrize("fn", [mul_of_sum, fill_of_sum, expand_then_write, mul_of_mean_plus_other],
                         ids=lambda f: f.__name__)
def test_backward_writes_into_expanded_grad_as_eager(fn, backend, dynamic):
    ember.reset()
    compiled = ember.compile(fn, backend=backend, dynamic=dynamic)
    for shape in ((3, 4), (5, 4)):
        expected = _run(fn, shape)
        got = _run(compiled, shape)
        assert got[0] == expected[0]
        if expected[0] == "raised":
            assert got[1] == expected[1]
        else:
            torch.testing.assert_close(got[1], expected[1])
            torch.testing.assert_close(got[2], expected[2])
