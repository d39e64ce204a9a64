"""Python builtins, math and operator inside captured programs."""
import itertools
import math
import operator

import pytest
import torch
import torch.nn as nn

from ember_test_helpers import REFERENCE, assert_same, check_raises_same, check_same, compile


def t(*shape, grad=False, seed=0):
    g = torch.Generator().manual_seed(seed + sum(shape))
    return torch.randn(*shape, generator=g).requires_grad_(grad)


GLOBAL_SCALE = 1.5
GLOBAL_TABLE = {"alpha": 0.25, "beta": 2}


def len_of_things(x, xs):
    return x * len(xs) + len(x) + len("abc") + len({1: 2})


def isinstance_checks(x, n):
    return (x * isinstance(x, torch.Tensor) + isinstance(n, int) + isinstance(n, (float, str))
            + isinstance(x, nn.Parameter))


def range_enumerate_zip(x, ys):
    out = x
    for i, (a, b) in enumerate(zip(ys, range(10, 20))):
        out = out + a * i + b
    return out


def min_max_on_ints_and_tensors(x, y):
    n = min(x.shape[0], 3, 7)
    m = max([2, 5, 1])
    return x[:n] * m, max(x.shape), torch.max(x, y), x.min()


def abs_round_pow_builtins(x):
    return x * abs(-3) + round(2.567, 2) + pow(2, 3), abs(x), round(7 / 2)


class Box:
    pass


def getattr_hasattr_setattr(x):
    b = Box()
    setattr(b, "val", x * 2)
    has = hasattr(b, "val"), hasattr(b, "missing")
    return getattr(b, "val") + getattr(b, "other", 1.0), has


def getattr_on_tensor(x):
    return getattr(x, "shape"), getattr(x, "T"), getattr(torch, "relu")(x)


def sum_any_all_on_constants(x):
    vals = [1, 2, 3]
    return x * sum(vals) + any([False, True]) + all([True, False]) + sum(v * v for v in vals)


def sum_over_tensor_list(xs):
    return sum(xs), sum(xs, torch.zeros(2))


def math_module(x):
    return x * math.exp(1.0) + math.log(10) + math.floor(2.7) + math.ceil(2.1) + math.sqrt(16) + math.inf * 0


def math_isclose_and_constants(x):
    eps = math.sqrt(x.shape[-1])
    return x / eps, math.isclose(eps, 2.0), math.gcd(12, 18)


def operator_getitem_attrgetter(x, xs):
    g = operator.itemgetter(1)
    return g(xs) + operator.getitem(x, 0), operator.attrgetter("shape")(x), operator.truth(len(xs))


def int_float_bool_str_conversions(x):
    n = int(3.7) + int("4") + float(2) + bool(0)
    return x * n, str(5) + "x", int(x.shape[0] / 2)


def global_reads(x):
    return x * GLOBAL_SCALE + GLOBAL_TABLE["alpha"] * GLOBAL_TABLE["beta"]


def reversed_sorted_list_tuple(x):
    parts = list(x.unbind(0))
    return list(reversed(parts)), tuple(sorted([3, 1, 2])), list(range(3))


def type_and_id_checks(x, n):
    return x * (type(n) is int) + (type(x) is torch.Tensor), type(n).__name__


def iter_next(x):
    it = iter([x, x + 1, x + 2])
    a = next(it)
    b = next(it)
    return a * b, next(it, None)


def callable_and_hash(x):
    return x * callable(torch.relu) + (hash(3) == hash(3)), callable(5)


def chr_ord_format(x):
    name = "layer_{}".format(ord("a") - 96)
    return x + ord("b"), name, f"{x.shape[0]:03d}"


def divmod_and_slicing_builtin(x):
    q, r = divmod(x.shape[0], 2)
    s = slice(1, None)
    return x[s] * q + r


def zip_strict_lengths_and_unpack(x):
    a, b = zip(*[(1, x), (2, x * 2)])
    return a, b


def min_max_with_key(x):
    parts = [x[:1], x[:3], x[:2]]
    return max(parts, key=len), min(parts, key=lambda p: p.numel())


PROGRAMS = [
    (len_of_things, lambda: (t(3), [1, 2])),
    (isinstance_checks, lambda: (t(2), 3)),
    (range_enumerate_zip, lambda: (t(2, grad=True), [t(2, seed=1), t(2, seed=2)])),
    (min_max_on_ints_and_tensors, lambda: (t(4, grad=True), t(4, seed=1))),
    (abs_round_pow_builtins, lambda: (t(3, grad=True),)),
    (getattr_hasattr_setattr, lambda: (t(2),)),
    (getattr_on_tensor, lambda: (t(2, 3),)),
    (sum_any_all_on_constants, lambda: (t(2),)),
    (sum_over_tensor_list, lambda: ([t(2, grad=True), t(2, seed=1)],)),
    (math_module, lambda: (t(2),)),
    (math_isclose_and_constants, lambda: (t(3, 4),)),
    (operator_getitem_attrgetter, lambda: (t(3, 2), [t(2), t(2, seed=1)])),
    (int_float_bool_str_conversions, lambda: (t(4),)),
    (global_reads, lambda: (t(3, grad=True),)),
    (reversed_sorted_list_tuple, lambda: (t(3, 2),)),
    (type_and_id_checks, lambda: (t(2), 4)),
    (iter_next, lambda: (t(2),)),
    (callable_and_hash, lambda: (t(2),)),
    (chr_ord_format, lambda: (t(2),)),
    (divmod_and_slicing_builtin, lambda: (t(5),)),
    (zip_strict_lengths_and_unpack, lambda: (t(2),)),
]


@pytest.mark.parametrize("fn,make_args", PROGRAMS,
                         ids=[f"{i}-{f.__name__}" for i, (f, _) in enumerate(PROGRAMS)])
def test_builtins(fn, make_args):
    check_same(fn, *make_args())


@pytest.mark.parametrize("fn", [abs, operator.neg, operator.pos, operator.invert],
                         ids=lambda f: getattr(f, "__name__", str(f)))
def test_unary_builtin_on_tensor(fn):
    x = torch.arange(-3, 3) if fn is operator.invert else t(5, grad=True)
    check_same(lambda v: fn(v) * 2, x)


@pytest.mark.xfail(REFERENCE, strict=True, raises=Exception,
                   reason="Dynamo 2.13 cannot trace max()/min() with key=; ember should")
def test_min_max_with_key():
    check_same(min_max_with_key, t(4))


def test_unbound_methods_of_scalar_types_fold():
    # `str.isalnum(c)`, `str.upper(c)`, `int.bit_length(n)`: the method descriptor called with the value
    def fn(x, c, n):
        return x.sin(), str.isalnum(c), str.upper(c), int.bit_length(n), str.join(",", ["a", c]), \
            float.is_integer(2.0), bytes.hex(b"ab")
    check_same(fn, torch.randn(2), "foo1", 5)


def test_unbound_scalar_method_on_wrong_type_raises_as_eager():
    def fn(x, c):
        return x + len(str.upper(c))
    check_raises_same(fn, torch.randn(2), 3)


# -- list.extend from a generator that reads the list; builtins' names (test_generator.py) ------------

def extend_reading_itself(x):
    y = [1]
    y.extend(y[-1] + z for z in range(3))  # each item appended before the next is produced
    y += (y[-1] * z for z in range(2))
    y.extend(y)  # a list is copied first: doubles
    return x + 1, y


def builtin_names(x):
    return x + len(next.__name__), len.__qualname__, abs.__module__


@pytest.mark.parametrize("fn", [extend_reading_itself, builtin_names])
def test_extend_and_builtin_names_agree(fn):
    check_same(fn, torch.ones(2))


def counting(a):
    c = itertools.count()
    d = itertools.count(5, 2)
    firsts = list(itertools.islice(itertools.count(), 3))
    out = [a * next(c) for _ in range(3)]
    return out, next(c), next(d), next(d), firsts, list(zip(range(2), itertools.count(1.5, 0.5)))


def counting_across_a_break(a):
    c = itertools.count(3)
    x = a * next(c)
    print("", end="")  # a break with the count live: the resumed frame gets a real count at 4
    return x, next(c), next(c)


def test_itertools_count_in_frame():
    check_same(counting, torch.ones(2))
    check_same(counting_across_a_break, torch.ones(2), graphs=None, fullgraph=False)


def test_min_max_of_mixed_int_and_float_keep_the_chosen_type():
    # max(4, 1.5) is the int 4 (torch.sym_max would give 4.0); changing values make both symbolic
    def fn(x, a, b):
        return x * max(a, b), min(a, b, 0.5), type(max(a, b)), type(min(a, b)), type(max(a, True))
    compiled = compile(fn, backend="eager")
    for a, b in ((2, 3.0), (4, 1.5), (0, 5.5), (1, 1.0), (5, 6.5)):
        assert_same(compiled(torch.ones(1), a, b), fn(torch.ones(1), a, b))


def test_isinstance_of_a_bound_method_and_super():
    # a bound method of an object made in the frame is a MethodType (its `self` is not what
    # isinstance looks at); used in tensor arithmetic, so the answer reaches the graph
    import inspect
    import types

    class K:
        def m(self):
            return 1

    class S(K):
        def m(self):
            return isinstance(super(), super), isinstance(super().m, types.MethodType)

    def fn(x):
        k = K()
        return x + 4 * isinstance(k.m, types.MethodType) + 2 * inspect.ismethod(K().m) \
            + isinstance(k.m, K), isinstance(K.m, types.FunctionType), S().m()
    check_same(fn, torch.zeros(2))
