"""Control flow on Python values, shapes, dtypes and flags; unrolled loops."""
import pytest
import torch
import torch.nn as nn

from ember_test_helpers import IDENTITY_GRAPHS, check_same, check_module_same


def t(*shape, grad=False, seed=0):
    g = torch.Generator().manual_seed(seed + sum(shape))
    return torch.randn(*shape, generator=g).requires_grad_(grad)


def branch_on_python_bool(x, flag):
    if flag:
        return x + 1
    return x - 1


def branch_on_none(x, bias=None):
    if bias is not None:
        x = x + bias
    return x * 2


def branch_on_int_compare(x, n):
    if n > 3:
        return x * n
    elif n == 3:
        return x.sin()
    else:
        return x.cos()


def branch_on_dtype(x):
    if x.dtype == torch.float32:
        return x.double() + 1
    return x


def branch_on_is_floating(x):
    if x.is_floating_point():
        return x / 2
    return x // 2


def branch_on_requires_grad(x):
    if x.requires_grad:
        return x * 3
    return x * 4


def branch_on_ndim(x):
    if x.ndim == 3:
        x = x.flatten(1)
    return x.relu()


def loop_over_range(x):
    for i in range(4):
        x = x * 0.5 + i
    return x


def loop_over_range_with_step(x):
    acc = torch.zeros_like(x)
    for i in range(10, 0, -3):
        acc = acc + x * i
    return acc


def loop_over_shape(x):
    out = []
    for i in range(x.shape[0]):
        out.append(x[i] * (i + 1))
    return torch.stack(out)


def while_loop_python_counter(x):
    i = 0
    while i < 3:
        x = x.tanh()
        i += 1
    return x, i


def loop_break_continue(x):
    for i in range(10):
        if i % 2 == 0:
            continue
        if i > 6:
            break
        x = x + i
    return x


def for_else(x):
    for i in range(3):
        if i == 5:
            break
    else:
        x = x * 100
    return x


def loop_over_tensor_list(xs):
    total = 0
    for x in xs:
        total = total + x.sum()
    return total


def iterate_over_tensor_rows(x):
    return [row.sum() for row in x]


def nested_loops(x):
    for i in range(2):
        for j in range(3):
            x = x + i * j
    return x


def ternary_and_boolean_ops(x, a, b):
    y = x * 2 if a and not b else x * 3
    z = x.sum() if (a or b) else x.mean()
    w = (a or b) and 7
    return y, z, w


def early_return_in_loop(x):
    for i in range(5):
        if i == 2:
            return x * i
    return x


def try_except_no_exception(x):
    try:
        y = x + 1
    except RuntimeError:
        y = x - 1
    finally:
        y = y * 2
    return y


def with_no_grad_block(x):
    with torch.no_grad():
        y = x * 2
    return y + x


def with_enable_grad_inside_no_grad(x):
    with torch.no_grad():
        a = x * 2
        with torch.enable_grad():
            b = x * 3
    return a, b


def assert_on_shape(x):
    assert x.shape[0] == 2, "batch must be 2"
    return x + 1


def isinstance_branch(x, y):
    if isinstance(y, torch.Tensor):
        return x + y
    if isinstance(y, (int, float)):
        return x * y
    return x


PROGRAMS = [
    (branch_on_python_bool, lambda: (t(3), True)),
    (branch_on_python_bool, lambda: (t(3), False)),
    (branch_on_none, lambda: (t(3, grad=True),)),
    (branch_on_none, lambda: (t(3, grad=True), t(3, seed=1))),
    (branch_on_int_compare, lambda: (t(2), 5)),
    (branch_on_int_compare, lambda: (t(2), 3)),
    (branch_on_int_compare, lambda: (t(2), 0)),
    (branch_on_dtype, lambda: (t(3),)),
    (branch_on_dtype, lambda: (t(3).half(),), IDENTITY_GRAPHS),
    (branch_on_is_floating, lambda: (torch.arange(5),)),
    (branch_on_requires_grad, lambda: (t(2, grad=True),)),
    (branch_on_requires_grad, lambda: (t(2),)),
    (branch_on_ndim, lambda: (t(2, 3, 4, grad=True),)),
    (loop_over_range, lambda: (t(3, grad=True),)),
    (loop_over_range_with_step, lambda: (t(3, grad=True),)),
    (loop_over_shape, lambda: (t(4, 2, grad=True),)),
    (while_loop_python_counter, lambda: (t(3, grad=True),)),
    (loop_break_continue, lambda: (t(2),)),
    (for_else, lambda: (t(2),)),
    (loop_over_tensor_list, lambda: ([t(2), t(3), t(4, grad=True)],)),
    (iterate_over_tensor_rows, lambda: (t(3, 2, grad=True),)),
    (nested_loops, lambda: (t(2),)),
    (ternary_and_boolean_ops, lambda: (t(2), True, False)),
    (ternary_and_boolean_ops, lambda: (t(2), False, False)),
    (early_return_in_loop, lambda: (t(3, grad=True),)),
    (try_except_no_exception, lambda: (t(3),)),
    (with_no_grad_block, lambda: (t(3, grad=True),)),
    (with_enable_grad_inside_no_grad, lambda: (t(3, grad=True),)),
    (assert_on_shape, lambda: (t(2, 3),)),
    (isinstance_branch, lambda: (t(2), t(2, seed=4))),
    (isinstance_branch, lambda: (t(2), 2.5)),
    (isinstance_branch, lambda: (t(2), "other"), IDENTITY_GRAPHS),
]


@pytest.mark.parametrize("fn,make_args,graphs", [(p + (1,))[:3] for p in PROGRAMS],
                         ids=[f"{i}-{p[0].__name__}" for i, p in enumerate(PROGRAMS)])
def test_control_flow(fn, make_args, graphs):
    check_same(fn, *make_args(), graphs=graphs)


class Blocks(nn.Module):
    def __init__(self, n=3):
        super().__init__()
        self.layers = nn.ModuleList(nn.Linear(4, 4) for _ in range(n))
        self.use_residual = True

    def forward(self, x):
        for i, layer in enumerate(self.layers):
            y = layer(x)
            x = x + y if self.use_residual and i > 0 else y
        return x


def test_loop_over_module_list():
    check_module_same(Blocks, t(2, 4, grad=True))


def test_loop_over_module_list_flag_off():
    def make():
        m = Blocks()
        m.use_residual = False
        return m
    check_module_same(make, t(2, 4))
