"""A view made under ``no_grad`` whose base is then written in place (still under ``no_grad``):
autograd refuses to read the view's metadata afterwards in any mode, though the program, using it
under ``no_grad`` only, runs fine. The AOT layer's metadata read of such a graph output, and the
fake conversion of such a tensor passed to a resume function, failed with autograd's error (an
internal error: fuzz seed 1100345). The graph now runs as it is, and such an input breaks."""
import pytest
import torch

from ember_test_helpers import CompileCounter, assert_same, compile


@torch.compiler.disable
def _opaque(t):
    return t * 2 + 1


def _written_after_view(y):
    with torch.no_grad():
        v = y.narrow(0, 0, 3)
        y.add_(y)
        t = _opaque(v)  # (a break inside the block: v is a graph output, then a resume input)
        w = y[1:]
        y.mul_(2)
        ws = w.sum() + v.sum()  # (v: an input of the resume function)
    return t, y * 2, ws


def _view_read_in_no_grad(y):
    with torch.no_grad():
        v = y.narrow(0, 0, 3)
        y.add_(1)
        s = v.sum() * 3
    return s, y * y


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
@pytest.mark.parametrize("fn", [_written_after_view, _view_read_in_no_grad])
def test_view_made_under_no_grad_then_base_written(fn, backend):
    leaf = torch.rand(4, dtype=torch.float64, requires_grad=True)
    compiled = compile(fn, backend=backend)
    for _ in range(2):
        y_e, y_c = leaf * 1, leaf * 1
        expected, got = fn(y_e), compiled(y_c)
        assert_same(got, expected)
        assert_same(y_c, y_e)
        g_e = torch.autograd.grad(expected[1].sum(), leaf)
        g_c = torch.autograd.grad(got[1].sum(), leaf)
        assert_same(g_c, g_e)
