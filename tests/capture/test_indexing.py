"""Indexing, slicing and index assignment (into intermediates and inputs)."""
import pytest
import torch

from ember_test_helpers import check_same


def t(*shape, grad=False, seed=0):
    g = torch.Generator().manual_seed(seed + 31 * len(shape) + sum(shape))
    return torch.randn(*shape, generator=g).requires_grad_(grad)


def basic_int_index(x):
    return x[0], x[-1], x[1, 2]


def slices(x):
    return x[1:], x[:-1], x[::2], x[1:3, 1:], x[..., 0]


def ellipsis_none(x):
    return x[None], x[..., None], x[:, None, :], x[None, ..., None]


def negative_step_free_slices(x):
    return x[-3:-1], x[:, -2:], x[2:100]


def tensor_index(x, idx):
    return x[idx], x[:, idx]


def bool_mask_select_sum(x):
    return torch.where(x > 0, x, torch.zeros_like(x)).sum()


def index_with_list(x):
    return x[[0, 2]], x[[0, 1], [1, 2]]


def setitem_scalar_on_clone(x):
    y = x.clone()
    y[0] = 1
    return y


def setitem_slice_on_clone(x, v):
    y = x.clone()
    y[1:3] = v
    return y


def setitem_mask_on_clone(x):
    y = x.clone()
    y[y < 0] = 0
    return y


def setitem_tensor_index(x, idx):
    y = x * 2
    y[idx] = -1.0
    return y


def setitem_column(x):
    y = torch.zeros_like(x)
    y[:, 1] = x[:, 0]
    return y


def setitem_into_input(x):
    x[0] = 7.0
    return x.sum()


def setitem_ellipsis(x, v):
    y = x.clone()
    y[..., -1] = v
    return y


def index_then_arith(x):
    return x[0] * x[1] + x[2:].sum(0)


def gather_scatter(x, idx):
    g = torch.gather(x, 1, idx)
    s = torch.zeros_like(x).scatter(1, idx, g)
    return g, s


def index_select_take(x, idx):
    return x.index_select(0, idx), torch.take(x, idx), x.narrow(1, 1, 2)


def index_add_put(x, idx, src):
    y = x.clone()
    y.index_add_(0, idx, src)
    z = x.index_put((idx,), src[:, 0].unsqueeze(1).expand(-1, x.shape[1]).contiguous(), accumulate=True)
    return y, z


def masked_fill(x):
    return x.masked_fill(x > 0, 0.5), x.masked_fill(x < -1, -1)


def multi_dim_assign_grad(x, w):
    y = torch.zeros(3, 4)
    y[0] = x * w
    y[1:, 2] = w.sum()
    return y


def int_from_shape_index(x):
    n = x.shape[0]
    return x[n - 1], x[: n // 2]


def unbind_and_index(x):
    a, b, c = x.unbind(0)
    return a + b * c


def chunk_split(x):
    a, b = x.chunk(2, dim=1)
    c, d, e = x.split([1, 2, 1], dim=1)
    return a * b, c + e, d


IDX = lambda: torch.tensor([2, 0])  # noqa: E731

PROGRAMS = [
    (basic_int_index, lambda: (t(3, 4, grad=True),)),
    (slices, lambda: (t(4, 5, grad=True),)),
    (ellipsis_none, lambda: (t(2, 3),)),
    (negative_step_free_slices, lambda: (t(4, 4),)),
    (tensor_index, lambda: (t(3, 3, grad=True), IDX())),
    (bool_mask_select_sum, lambda: (t(10, grad=True),)),
    (index_with_list, lambda: (t(3, 3, grad=True),)),
    (setitem_scalar_on_clone, lambda: (t(3, 2, grad=True),)),
    (setitem_slice_on_clone, lambda: (t(4, 2, grad=True), t(2, grad=True, seed=3))),
    (setitem_mask_on_clone, lambda: (t(5, 5),)),
    (setitem_tensor_index, lambda: (t(4, 3, grad=True), IDX())),
    (setitem_column, lambda: (t(3, 3, grad=True),)),
    (setitem_into_input, lambda: (t(3, 2),)),
    (setitem_ellipsis, lambda: (t(2, 3, 4), 3.0)),
    (index_then_arith, lambda: (t(5, 3, grad=True),)),
    (gather_scatter, lambda: (t(3, 4, grad=True), torch.tensor([[0, 1], [2, 3], [1, 1]]))),
    (index_select_take, lambda: (t(4, 4, grad=True), IDX())),
    (index_add_put, lambda: (t(4, 3), IDX(), t(2, 3, seed=8))),
    (masked_fill, lambda: (t(3, 3, grad=True),)),
    (multi_dim_assign_grad, lambda: (t(4), t(4, seed=2, grad=True))),
    (int_from_shape_index, lambda: (t(6, 2),)),
    (unbind_and_index, lambda: (t(3, 2, grad=True),)),
    (chunk_split, lambda: (t(2, 4, grad=True),)),
]


@pytest.mark.parametrize("fn,make_args", PROGRAMS,
                         ids=[f"{i}-{f.__name__}" for i, (f, _) in enumerate(PROGRAMS)])
def test_indexing(fn, make_args):
    check_same(fn, *make_args())


def test_bool_mask_index_data_dependent_shape():
    """x[mask] has a data-dependent output shape."""
    def f(x):
        return x[x > 0] * 2
    check_same(f, t(10), graphs=None, fullgraph=False)


def test_setitem_into_input_is_visible_to_caller():
    def f(x):
        x[1:] = 0.0
        return x * 1
    x = t(4)
    from ember_test_helpers import compile, CompileCounter
    cnt = CompileCounter()
    out = compile(f, backend=cnt, fullgraph=True)(x)
    assert (x[1:] == 0).all() and (out == x).all()
    assert cnt.frame_count == 1
