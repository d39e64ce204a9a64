"""An op without a derivative (``x.scatter(0, i, s, reduce="add")``) in a graph that needs grad:
eager's forward runs and its backward raises "derivative for aten::scatter is not implemented".
Compiled, the joint trace cannot differentiate it either, so the captured graph runs as it is
(eager ops, eager autograd): the same forward, the same backward error, no compile failure and no
warning (it used to be an internal error: the frame ran eagerly with a warning)."""
import warnings

import pytest
import torch

import ember


def scatter_add_with_reduce(x, i, s):
    y = x.scatter(0, i[:, None].expand(-1, 2), s, reduce="add")
    return y * 2, y.sum()


def _args():
    g = torch.Generator().manual_seed(0)
    return (torch.randn(5, 2, generator=g).requires_grad_(), torch.tensor([1, 1, 4]),
            torch.randn(3, 2, generator=g).requires_grad_())


@pytest.mark.filterwarnings("ignore:The reduce argument of torch.scatter")
def test_op_without_derivative_runs_and_raises_in_backward_like_eager():
    args_e, args_c = _args(), _args()
    out_e = scatter_add_with_reduce(*args_e)
    with pytest.raises(RuntimeError, match="derivative for") as eager:
        out_e[1].backward()
    ember.reset()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out_c = ember.compile(scatter_add_with_reduce, backend="aot_eager")(*args_c)
    torch.testing.assert_close(out_c, out_e)
    assert out_c[0].requires_grad
    with pytest.raises(RuntimeError, match="derivative for") as compiled:
        out_c[1].backward()
    assert str(compiled.value) == str(eager.value)
    assert not [w for w in caught if "ember" in str(w.message)]
    assert ember.stats()["fallbacks"] == 0 and ember.stats()["graphs"] == 1
