"""``t.item()`` / ``t.tolist()`` at a graph break read ``t``'s values only: the graph hands the call a
detached ``t``, so a ``t`` the rest of the frame drops is no output that requires grad. Otherwise the
compiled graph, one autograd node, connects ``t``'s inputs to the backward of its other outputs:
autograd then runs their producers with undefined gradients where eager never runs them, and those
unpack the tensors they saved (fuzz seeds 930027, 940043: "modified by an inplace operation" where
eager's backward succeeds)."""
import io

import pytest
import torch

import ember

SINK = io.StringIO()


def stat_of_branch_written_after_save(x, y):
    t1 = y * 2
    print(1, file=SINK)            # a break: t1 enters the next graph as an input
    t8 = y * t1 + 2                # saves t1
    t1[3] = 4.0                    # ... which is then written
    x.clamp_(min=-0.5)
    if (t8 > 0).any():             # a break
        print(0, file=SINK)
    out = x * 1
    stat = t8.abs().sum().tolist()  # t8's branch is not differentiated
    return out, stat


def _stat(t):
    return t.abs().sum().tolist()  # (a break inside an inlined function: a nested break)


def stat_in_a_helper(x, y):
    t1 = y * 2
    print(1, file=SINK)
    t8 = y * t1 + 2
    t1[3] = 4.0
    x.clamp_(min=-0.5)
    if (t8 > 0).any():
        print(0, file=SINK)
    out = x * 1
    return out, _stat(t8)


def item_of_branch_written_after_save(x, y):
    t2 = y * 3
    t2 -= t2 * (y + y)             # the subtraction's product saved t2, then t2 is written
    out = x * 1
    stat = t2.abs().sum().item()
    return out + stat, stat


def kept_after_item(x, y):
    s = (x * y).sum()
    v = s.item()
    return s * 2, v               # s stays live: it still requires grad and passes gradients


def _run(fn):
    x_leaf = torch.tensor([1.0, -2.0, 3.0, 0.5], requires_grad=True)
    y_leaf = torch.tensor([0.5, 1.5, -1.0, 2.0], requires_grad=True)
    x, y = x_leaf * 1, y_leaf * 1
    out, stat = fn(x, y)
    try:
        (out.sum() + x.sum() + y.sum()).backward()
        err = None
    except RuntimeError as e:
        err = str(e).split("\n")[0]
    return out.detach(), out.requires_grad, stat, err, x_leaf.grad, y_leaf.grad


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
@pytest.mark.parametrize("fn", [stat_of_branch_written_after_save, stat_in_a_helper,
                                item_of_branch_written_after_save, kept_after_item], ids=lambda f: f.__name__)
def test_item_or_tolist_at_a_break_matches_eager_backward(fn, backend):
    ember.reset()
    compiled = ember.compile(fn, backend=backend)
    expected = _run(fn)
    assert expected[3] is None
    for _ in range(2):
        got = _run(compiled)
        torch.testing.assert_close(got[0], expected[0])
        assert got[1:4] == expected[1:4]
        torch.testing.assert_close(got[4], expected[4])
        torch.testing.assert_close(got[5], expected[5])
