"""A backward that needs only a tensor's sizes (``sum``'s gradient expanded to a symbolic shape)
saves those sizes, not the tensor, as eager's nodes do. A saved tensor is version-checked: writing
into the input after the compiled call (or in a later graph) made the backward raise "modified by an
inplace operation" where eager's succeeds (fuzz seed 970169 with EMBER_FUZZ_VARY=1)."""
import pytest
import torch

import ember


def sum_then_caller_writes(x, y):
    return x.sum() * y


def sum_then_write_after_break(x, y):
    t2 = y * 3
    t2[3] = x.sum()
    f16 = x.sum().item()   # a break: the clamp_ below is in the next graph
    t17 = t2 * f16
    x.clamp_(min=0.0)
    return t17


def mean_of_view(x, y):
    return x[1:].mean() + y.sum()


def _run(fn, rows, write_after):
    g = torch.Generator().manual_seed(rows)
    x_leaf = (torch.rand(rows, 4, generator=g, dtype=torch.float64) * 4 - 2).requires_grad_()
    y_leaf = (torch.rand(4, generator=g, dtype=torch.float64) * 4 - 2).requires_grad_()
    x, y = x_leaf * 1, y_leaf * 1
    out = fn(x, y)
    if write_after:
        with torch.no_grad():
            x.add_(1)
    try:
        (out.sum() + x.sum() + y.sum()).backward()
    except RuntimeError as e:
        return "raised", str(e).split("\n")[0]
    return out.detach(), x_leaf.grad, y_leaf.grad


@pytest.mark.parametrize("backend", ["aot_eager", "aot_eager_decomp_partition"])
@pytest.mark.parametrize("fn,write_after", [(sum_then_caller_writes, True), (sum_then_write_after_break, False),
                                            (mean_of_view, True)], ids=["sum", "clamp_after_break", "mean_view"])
def test_sizes_saved_instead_of_tensors_match_eager(fn, write_after, backend):
    ember.reset()
    compiled = ember.compile(fn, backend=backend, dynamic=True)
    for rows in (3, 5, 6):
        expected = _run(fn, rows, write_after)
        got = _run(compiled, rows, write_after)
        assert len(got) == len(expected)
        for g, e in zip(got, expected):
            if isinstance(e, torch.Tensor):
                torch.testing.assert_close(g, e)
            else:
                assert g == e
