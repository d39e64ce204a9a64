"""Shape arithmetic: shapes and sizes as Python ints, views built from them."""
import pytest
import torch

from ember_test_helpers import check_same


def t(*shape, grad=False, seed=0):
    g = torch.Generator().manual_seed(seed + sum(shape))
    return torch.randn(*shape, generator=g).requires_grad_(grad)


def view_batch_flat(x):
    return x.view(x.shape[0], -1)


def size_times_two(x):
    return torch.zeros(x.size(1) * 2) + x.sum()


def reshape_from_sizes(x):
    b, c, h, w = x.shape
    return x.reshape(b, c, h * w).transpose(1, 2)


def shape_tuple_output(x):
    return x.shape, x.size(), x.size(-1), x.shape[1:]


def numel_and_dim(x):
    return x.numel(), x.dim(), x.ndim, len(x)


def new_tensor_from_shape(x):
    return torch.ones(x.shape) * x, torch.arange(x.shape[-1]) * 1.0, x.new_zeros(x.shape[0], 2)


def split_heads(x):
    b, s, d = x.shape
    h = 2
    return x.view(b, s, h, d // h).permute(0, 2, 1, 3).reshape(b * h, s, d // h)


def shape_comparison(x, y):
    return x.shape == y.shape, x.shape[0] == y.shape[0], x.size() != y.size()


def expand_as_and_broadcast_shapes(x, y):
    return x.expand_as(y) + y, torch.broadcast_shapes(x.shape, y.shape)


def shape_math_floats(x):
    scale = x.shape[-1] ** -0.5
    return x * scale


def zeros_like_shape_arith(x):
    n = x.shape[0] // 2 + 1
    return x[:n], torch.empty(0).new_ones(n, x.size(1) - 1)


def flatten_unflatten(x):
    y = x.flatten(1)
    return y.unflatten(1, (x.shape[1], -1))


def size_tuple_ops(x):
    s = tuple(x.shape)
    return list(s), s[::-1], sum(s), max(s), s + (1,)


def torch_size_arith(x):
    return x.view(*x.shape[:-1], 2, x.shape[-1] // 2)


def cat_stack_shapes(x, y):
    z = torch.cat([x, y], dim=0)
    return z, torch.stack([x, y]).shape, z.shape[0] - x.shape[0]


PROGRAMS = [
    (view_batch_flat, lambda: (t(2, 3, 4, grad=True),)),
    (size_times_two, lambda: (t(3, 5),)),
    (reshape_from_sizes, lambda: (t(2, 3, 4, 5, grad=True),)),
    (shape_tuple_output, lambda: (t(2, 3, 4),), 0),
    (numel_and_dim, lambda: (t(3, 4),), 0),
    (new_tensor_from_shape, lambda: (t(2, 3, grad=True),)),
    (split_heads, lambda: (t(2, 5, 8, grad=True),)),
    (shape_comparison, lambda: (t(2, 3), t(2, 4)), 0),
    (expand_as_and_broadcast_shapes, lambda: (t(1, 3), t(4, 3))),
    (shape_math_floats, lambda: (t(2, 16, grad=True),)),
    (zeros_like_shape_arith, lambda: (t(6, 3),)),
    (flatten_unflatten, lambda: (t(2, 3, 4, grad=True),)),
    (size_tuple_ops, lambda: (t(2, 3, 4),), 0),
    (torch_size_arith, lambda: (t(3, 2, 8, grad=True),)),
    (cat_stack_shapes, lambda: (t(2, 3, grad=True), t(2, 3, seed=1))),
]


# A third element is the expected graph count: programs whose outputs are all
# Python constants (computed from static shapes) produce an empty graph, which
# is never handed to the backend (as in Dynamo).
PROGRAMS = [p if len(p) == 3 else (*p, 1) for p in PROGRAMS]


@pytest.mark.parametrize("fn,make_args,graphs", PROGRAMS,
                         ids=[f"{i}-{p[0].__name__}" for i, p in enumerate(PROGRAMS)])
def test_shapes(fn, make_args, graphs):
    check_same(fn, *make_args(), graphs=graphs)


@pytest.mark.parametrize("shape", [(2, 3), (4, 1), (1, 6)])
def test_branch_on_shape(shape):
    def f(x):
        if x.shape[0] > x.shape[1]:
            return x.t() * 2
        elif x.shape[0] == 1:
            return x + 1
        return x - 1
    check_same(f, t(*shape))
