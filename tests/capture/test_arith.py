"""Arithmetic, broadcasting, dtype promotion and Python-scalar mixing: eager vs compiled."""
import math
import operator

import pytest
import torch

from ember_test_helpers import check_same


def t(*shape, dtype=torch.float32, grad=False, seed=0):
    g = torch.Generator().manual_seed(seed + sum(shape))
    x = torch.randn(*shape, generator=g, dtype=torch.float32).to(dtype)
    return x.requires_grad_(grad)


def add(x, y):
    return x + y


def sub_mul_div(x, y):
    return (x - y) * y / (y.abs() + 1)


def python_scalars(x):
    return 2 * x + 3.5 - x / 4


def reverse_ops(x):
    return 1 - x, 2 / (x.abs() + 1), 3 ** x.tanh(), 7 % (x.detach().abs() + 1)


def pow_and_neg(x):
    return -(x ** 2) + x.abs() ** 0.5


def floordiv_mod(x, y):
    return x // y, x % y


def broadcast_row_col(x, y):
    return x[:, None] * y[None, :]


def broadcast_3d(x, y):
    return x + y, x * y


def matmul_op(x, y):
    return x @ y


def matmul_chain(x, y, z):
    return (x @ y).relu() @ z + 1


def comparison_ops(x, y):
    return x < y, x <= y, x == y, x != y, x > 0.5, x >= y


def logical_ops(x, y):
    a, b = x > 0, y > 0
    return a & b, a | b, a ^ b, ~a


def int_bitwise(x, y):
    return x & y, x | y, x ^ y, x << 1, x >> 1


def dtype_promotion(x, y):
    return x + y, x * 2.5, y + 1


def int_tensor_true_div(x):
    return x / 2, x // 2, x * 1.5


def bool_arith(x):
    return (x > 0).sum(), (x > 0).float().mean()


def python_math_on_constants(x):
    return x * math.sqrt(2.0) + math.pi * math.cos(0.5)


def operator_module(x, y):
    return operator.add(x, y), operator.mul(x, 2), operator.neg(y), operator.truediv(x, 3)


def chained_unary(x):
    return x.sin().cos().exp().log1p().sqrt().tanh().sigmoid()


def clamp_where(x):
    return torch.where(x > 0, x, x * 0.1).clamp(-0.5, 0.5)


def inplace_accumulate_locals(x, y):
    z = x * 1
    z += y
    z *= 2
    z -= 1
    z /= 3
    return z


def augmented_on_python_number(x):
    s = 1.0
    s += 2
    s *= 3
    return x * s


def complex_arith(x):
    z = torch.complex(x, x * 2)
    return (z * z.conj()).real, z.abs(), torch.view_as_real(z * 1j)


def mixed_grad(x, y):
    return (x * y + x.exp()).sum(dim=0)


def reductions(x):
    return x.sum(), x.mean(1), x.amax(0), x.std(), x.var(dim=1, keepdim=True), x.prod(1), x.logsumexp(-1)


def cumulative(x):
    return x.cumsum(0), x.cumprod(1), torch.cummax(x, 1).values


def scalar_tensor_mix(x):
    s = x.sum()
    return x / s, s * 2 + 1


def float16_bfloat16(x):
    return x.half() * 2, x.bfloat16() + 1, (x.half() + x.bfloat16()).dtype


def divmod_numbers(x):
    q, r = divmod(17, 5)
    return x * q + r


PROGRAMS = [
    (add, lambda: (t(3, 4), t(3, 4, seed=1))),
    (add, lambda: (t(3, 4, grad=True), t(4, grad=True))),
    (sub_mul_div, lambda: (t(5, grad=True), t(5, seed=2, grad=True))),
    (python_scalars, lambda: (t(2, 3, grad=True),)),
    (reverse_ops, lambda: (t(6, grad=True),)),
    (pow_and_neg, lambda: (t(4, 4, grad=True),)),
    (floordiv_mod, lambda: (t(8) * 10, t(8, seed=3).abs() + 0.5)),
    (broadcast_row_col, lambda: (t(3, grad=True), t(5, grad=True))),
    (broadcast_3d, lambda: (t(2, 1, 4), t(3, 1))),
    (matmul_op, lambda: (t(3, 4, grad=True), t(4, 5, grad=True))),
    (matmul_op, lambda: (t(2, 3, 4), t(4,))),
    (matmul_chain, lambda: (t(2, 3, grad=True), t(3, 4), t(4, 2, grad=True))),
    (comparison_ops, lambda: (t(10), t(10, seed=5))),
    (logical_ops, lambda: (t(10), t(10, seed=5))),
    (int_bitwise, lambda: (torch.arange(10), torch.arange(10).flip(0))),
    (dtype_promotion, lambda: (torch.arange(6, dtype=torch.int32), t(6, dtype=torch.float64))),
    (int_tensor_true_div, lambda: (torch.arange(-5, 5),)),
    (bool_arith, lambda: (t(20),)),
    (python_math_on_constants, lambda: (t(3, grad=True),)),
    (operator_module, lambda: (t(4), t(4, seed=9))),
    (chained_unary, lambda: (t(7, grad=True),)),
    (clamp_where, lambda: (t(4, 5, grad=True),)),
    (inplace_accumulate_locals, lambda: (t(3, grad=True), t(3, seed=1))),
    (augmented_on_python_number, lambda: (t(3),)),
    (complex_arith, lambda: (t(4),)),
    (mixed_grad, lambda: (t(3, 2, grad=True), t(3, 2, seed=4, grad=True))),
    (reductions, lambda: (t(4, 6, grad=True),)),
    (cumulative, lambda: (t(3, 4, grad=True),)),
    (scalar_tensor_mix, lambda: (t(5, grad=True),)),
    (float16_bfloat16, lambda: (t(4),)),
    (divmod_numbers, lambda: (t(2),)),
]


@pytest.mark.parametrize("fn,make_args", PROGRAMS,
                         ids=[f"{i}-{f.__name__}" for i, (f, _) in enumerate(PROGRAMS)])
def test_arith(fn, make_args):
    check_same(fn, *make_args())


@pytest.mark.parametrize("op", [operator.add, operator.sub, operator.mul, operator.truediv,
                                operator.pow, torch.maximum, torch.minimum, torch.atan2])
def test_binary_op_broadcast_grad(op):
    def f(x, y):
        return op(x, y.abs() + 0.5)
    check_same(f, t(2, 3, grad=True), t(3, seed=7, grad=True))


@pytest.mark.parametrize("scalar", [2, -1.5, True, 0.0])
def test_python_scalar_argument(scalar):
    def f(x, s):
        return x * s + s
    check_same(f, t(3), scalar)
