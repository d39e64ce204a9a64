"""Views autograd refuses to describe once their base was written in place: a custom Function's
output (or an input it returned as-is) and one of several views (``unbind``, ``split``); reading
their ``is_leaf`` / ``grad_fn`` raises in any mode. Live across a graph break, such a view reached
the resume function, whose fake conversion of its arguments raised autograd's error (an internal
error in strict mode; else a warning and the frame eagerly: fuzz seed 3980100). The argument now
stays unread (no fake tensor, no guard); a read breaks the graph there, so the program's own use
runs eagerly, raising autograd's error where eager does."""
import pytest
import torch

from ember_test_helpers import CompileCounter, assert_same, check_raises_same, compile


class Same(torch.autograd.Function):
    @staticmethod
    def forward(ctx, a):
        return a

    @staticmethod
    def backward(ctx, g):
        return g * 3


class Half(torch.autograd.Function):
    @staticmethod
    def forward(ctx, a):
        return a[:2]

    @staticmethod
    def backward(ctx, g):
        out = g.new_zeros(4, *g.shape[1:])
        out[:2] = g
        return out


_VIEWS = {
    "same": lambda y: Same.apply(y),
    "custom_view": lambda y: Half.apply(y),
    "unbind": lambda y: y.unbind(0)[1],
    "split": lambda y: y.split(2)[0],
}


def _unused_after_break(y, view):
    v = _VIEWS[view](y)
    y.add_(1)
    print("", end="")           # break: v and y reach the resume function
    z = y * 2
    if z.sum() < -100:          # (not taken: v is never read)
        z = z + v
    return z


def _read_under_no_grad(y, view):
    v = _VIEWS[view](y)
    y.mul_(2)
    print("", end="")
    z = y * 2
    with torch.no_grad():
        s = v.sum()             # fine in eager: no_grad reads no autograd metadata
    return z + s


def _read_with_grad(y, view):
    v = _VIEWS[view](y)
    y.mul_(2)
    print("", end="")
    return y * 2 + v.sum()      # eager raises autograd's error


def _inputs():
    leaf = torch.rand(4, 3, dtype=torch.float64, requires_grad=True)
    return leaf


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
@pytest.mark.parametrize("view", sorted(_VIEWS))
@pytest.mark.parametrize("fn,graphs", [(_unused_after_break, 2), (_read_under_no_grad, None)])
def test_rebased_view_live_across_break(fn, graphs, view, backend):
    leaf = _inputs()
    counter = CompileCounter()
    compiled = compile(fn, backend=counter if backend == "eager" else backend)
    for _ in range(2):
        y_e, y_c = leaf * 1, leaf * 1
        expected, got = fn(y_e, view), compiled(y_c, view)
        assert_same(got, expected)
        assert_same(y_c, y_e)
        g_e, = torch.autograd.grad(expected.sum(), leaf)
        g_c, = torch.autograd.grad(got.sum(), leaf)
        assert_same(g_c, g_e)
    if graphs is not None and backend == "eager":
        # (as torch.compile: the graph before the break and the resume's `y * 2; z.sum()`)
        assert counter.frame_count == graphs


@pytest.mark.parametrize("view", sorted(_VIEWS))
def test_rebased_view_read_with_grad_raises_as_eager(view):
    check_raises_same(_read_with_grad, _inputs() * 1, view)


@pytest.mark.parametrize("view", ["unbind", "split", "same"])
def test_rebased_view_as_argument(view):
    """The view made before the call, its base written by the compiled function."""
    def fn(y, v):
        y.add_(1)
        print("", end="")
        z = y * 2
        if z.sum() < -100:
            z = z + v
        return z

    counter = CompileCounter()
    compiled = compile(fn, backend=counter)
    leaf = _inputs()
    y_e, y_c = leaf * 1, leaf * 1
    assert_same(compiled(y_c, _VIEWS[view](y_c)), fn(y_e, _VIEWS[view](y_e)))
    assert_same(y_c, y_e)
    assert counter.frame_count == 2
