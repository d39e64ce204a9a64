"""Guards, recompiles and unspecialised scalars: findings of a probe against torch.compile.

Each test runs a small program eagerly and compiled on several inputs, compares the answers,
and checks the number of graphs against what torch.compile (a counting backend) compiles.
"""
import types

import pytest
import torch
import torch.nn as nn

from ember_test_helpers import CompileCounter, assert_same, compile, stats, REFERENCE


def _run(fn, calls, **kw):
    """Call ``fn`` eagerly and compiled with each argument tuple; return the backend."""
    cnt = CompileCounter()
    compiled = compile(fn, backend=cnt, **kw)
    for args in calls:
        args = args() if callable(args) else args
        assert_same(compiled(*args), fn(*args))
    return cnt


# --- a non-leaf input: its leafness is the real tensor's, and guarded -----------------------

_TORCH_LEAF = pytest.mark.skipif(REFERENCE, reason="torch 2.13 answers from its fake input, a leaf")


@_TORCH_LEAF
def test_is_leaf_of_a_non_leaf_input():
    def f(x):
        return x * 2 if x.is_leaf else x * 3
    leaf = lambda: (torch.randn(3).requires_grad_(),)
    non_leaf = lambda: (torch.randn(3).requires_grad_() * 1,)
    cnt = _run(f, [leaf, non_leaf, leaf, non_leaf])
    assert cnt.frame_count == 2


@_TORCH_LEAF
def test_grad_fn_of_a_non_leaf_input():
    def f(x):
        return x * 2 if x.grad_fn is None else x * 3
    leaf = lambda: (torch.randn(3).requires_grad_(),)
    non_leaf = lambda: (torch.randn(3).requires_grad_() * 1,)
    _run(f, [leaf, non_leaf, leaf, non_leaf])


def test_is_leaf_of_a_leaf_modified_in_place_by_the_trace():
    def f(x, w):
        x.mul_(w)
        return x.is_leaf
    for _ in range(2):
        cnt = CompileCounter()
        compiled = compile(f, backend=cnt)
        w = torch.randn(3, requires_grad=True)
        assert compiled(torch.randn(3), w) is f(torch.randn(3), w) is False


# --- ints: torch's unspecialised ints ---------------------------------------------------------

def test_int_argument_zero_and_one_are_not_specialised():
    # 0: static; 1: a symbol (0 and 1 included), reused for every later value
    def f(x, n):
        return x + n
    x = torch.randn(3)
    cnt = _run(f, [(x, n) for n in range(10)])
    assert cnt.frame_count == 2


def test_int_flag_branch_guards_the_symbol():
    def f(x, n):
        return x.sum() * n if n else x * 2
    x = torch.randn(3)
    _run(f, [(x, n) for n in [2, 0, 3, 0, 5, 1]])


def test_int_attribute_of_an_argument_object_becomes_a_symbol():
    class Cfg:
        def __init__(self, a):
            self.a = a

    def f(x, cfg):
        return x * cfg.a
    x = torch.randn(3)
    cnt = _run(f, [(x, Cfg(v)) for v in [1, 2, 3, 4]])
    assert cnt.frame_count == 2


def test_int_attribute_of_a_module_stays_specialised():
    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.k = 2

        def forward(self, x):
            return x * self.k

    m = M()
    cnt = CompileCounter()
    compiled = compile(m, backend=cnt)
    x = torch.randn(3)
    for k in [2, 3, 4]:
        m.k = k
        assert_same(compiled(x), m(x))
    assert cnt.frame_count == 3


def test_int_attribute_of_a_plain_object_held_by_a_module_stays_specialised():
    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.cfg = types.SimpleNamespace(k=2)

        def forward(self, x):
            return x * self.cfg.k

    m = M()
    cnt = CompileCounter()
    compiled = compile(m, backend=cnt)
    x = torch.randn(3)
    for k in [2, 3, 4]:
        m.cfg.k = k
        assert_same(compiled(x), m(x))
    assert cnt.frame_count == 3


_NS = types.SimpleNamespace(k=1)


def _times_global_k(x):
    return x * _NS.k


def test_int_of_a_global_object_stays_specialised():
    cnt = CompileCounter()
    compiled = compile(_times_global_k, backend=cnt)
    x = torch.randn(3)
    for k in [1, 2, 3]:
        _NS.k = k
        assert_same(compiled(x), _times_global_k(x))
    assert cnt.frame_count == 3


def test_int_of_an_object_in_a_closure_cell_becomes_a_symbol():
    ns = types.SimpleNamespace(k=1)

    def f(x):
        return x * ns.k
    cnt = CompileCounter()
    compiled = compile(f, backend=cnt)
    x = torch.randn(3)
    for k in [1, 2, 3, 4]:
        ns.k = k
        assert_same(compiled(x), f(x))
    assert cnt.frame_count == 2


def test_int_items_of_argument_containers():
    def f(x, d, t):
        return x * d["n"] + t[0]
    x = torch.randn(3)
    cnt = _run(f, [(x, {"n": v}, (v + 1,)) for v in [2, 3, 4, 5, 6]])
    assert cnt.frame_count == 2


# --- one tensor passed twice: torch's NO_TENSOR_ALIASING guard ---------------------------------

def test_same_tensor_twice_recompiles_once_like_torch():
    def f(a, b, c):
        a.add_(b)
        return c + 1
    x, y, z = torch.randn(3), torch.randn(3), torch.randn(3)
    cnt = CompileCounter()
    compiled = compile(f, backend=cnt)
    counts = []
    for args in [(x, y, z), (x, x, z), (x, y, y), (y, y, y), (x, y, z), (x, x, x)]:
        eager_args = [t.clone() for t in args]
        if args[0] is args[1]:
            eager_args[1] = eager_args[0]
        if args[1] is args[2]:
            eager_args[2] = eager_args[1]
        if args[0] is args[2]:
            eager_args[2] = eager_args[0]
        comp_args = [t.clone() for t in eager_args]
        comp_args = [comp_args[[id(e) for e in eager_args].index(id(e))] for e in eager_args]
        assert_same(compiled(*comp_args), f(*eager_args))
        assert_same(comp_args, eager_args)
        counts.append(cnt.frame_count)
    assert counts == [1, 2, 3, 4, 4, 4]


def test_same_parameter_twice_is_not_guarded_distinct():
    lin = nn.Linear(3, 3)

    def f(w, b, x):
        return x @ w.t() + b
    x = torch.randn(2, 3)
    cnt = _run(f, [(lin.weight, lin.bias, x), (lin.weight, lin.bias, x)])
    assert cnt.frame_count == 1
