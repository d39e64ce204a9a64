"""A graph that turns grad mode on inside itself (an ``enable_grad`` region, or a resume function
leaving a ``no_grad`` block), called with grad mode off, whose inputs alias each other and one is
written in place: it trains (the synthetic base is the inputs' autograd base, whatever the grad mode
at the call), and the views regenerated from that base are made in the grad mode their originals
were made in (a view made with grad on, regenerated with it off, made the write into its base an
error: "A view was created in no_grad mode..."; fuzz seed 950013). Compared with eager."""
import pytest
import torch

import ember


@torch.compiler.disable
def _opaque():
    pass


def break_in_no_grad_then_write_base(x):
    t2 = x * 2
    v3 = t2[::2]
    with torch.no_grad():
        _opaque()          # the resume function starts with grad mode off, leaves the block
    t2.mul_(3)
    return t2, v3.sum()


def break_in_no_grad_then_write_view(x):
    t2 = x * 2
    v3 = t2[1:]
    with torch.no_grad():
        _opaque()
    v3.add_(x[1:] * 5)
    return t2.sum(), v3


def enable_grad_region(t2, v3):
    with torch.enable_grad():
        t2.mul_(3)
        s = v3.sum()
    return t2, s


def _run(fn, outer_grad, two_args):
    x_leaf = torch.arange(12.0).reshape(4, 3).requires_grad_(True)
    if two_args:
        t2 = x_leaf * 2
        args = (t2, t2[::2])
    else:
        args = (x_leaf * 1,)
    with torch.set_grad_enabled(outer_grad):
        outs = fn(*args)
    flags = [o.requires_grad for o in outs]
    diff = [o for o in outs if o.requires_grad]
    if diff:
        sum(o.sum() for o in diff).backward()
    return [o.detach() for o in outs], flags, x_leaf.grad


@pytest.mark.parametrize("outer_grad", [True, False])
@pytest.mark.parametrize("fn", [break_in_no_grad_then_write_base, break_in_no_grad_then_write_view,
                                enable_grad_region], ids=lambda f: f.__name__)
def test_aliased_inputs_of_a_graph_enabling_grad_match_eager(fn, outer_grad):
    ember.reset()
    compiled = ember.compile(fn, backend="aot_eager")
    two_args = fn is enable_grad_region
    expected = _run(fn, outer_grad, two_args)
    for _ in range(2):
        got = _run(compiled, outer_grad, two_args)
        torch.testing.assert_close(got[0], expected[0])
        assert got[1] == expected[1]
        if expected[2] is None:
            assert got[2] is None
        else:
            torch.testing.assert_close(got[2], expected[2])
