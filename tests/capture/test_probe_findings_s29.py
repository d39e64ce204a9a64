"""Findings of the round-5 probe (functions, unspecialized scalars, guards, autograd.Function).

Each test runs a small program eagerly and compiled and compares the answers (outputs and the
caller's containers afterwards); where torch defines it, the number of graphs is checked too.
"""
import copy
import operator

import numpy as np
import pytest
import torch

from ember_test_helpers import CompileCounter, assert_same, compile


def _run(fn, make_args, n_calls=1, **kw):
    """Compare compiled and eager calls on fresh copies of the arguments (mutations included)."""
    cnt = CompileCounter()
    compiled = compile(fn, backend=cnt, **kw)
    for i in range(n_calls):
        args_c, args_e = make_args(i), make_args(i)
        assert_same(compiled(*args_c), fn(*args_e))
        assert_same(args_c, args_e)
    return cnt


# --- operator.is_ on a constant list was folded on copies of it (False for `l is l`) ----------

def test_operator_is_on_the_same_constant_list():
    def f(x, l):
        return x + 1, operator.is_(l, l), operator.is_not(l, l), operator.is_(l, [1, 3])
    _run(f, lambda i: (torch.ones(1), [1, 3]))


def test_operator_is_on_lists_made_in_the_frame():
    def f(x):
        a = [1, 2]
        b = a
        return x * 2, operator.is_(a, b), operator.is_(a, [1, 2]), operator.is_not(a, list(a))
    _run(f, lambda i: (torch.ones(1),))


# --- reversed(lst) read the list when made, CPython reads it while iterating ------------------

def test_reversed_list_sees_a_later_write():
    def f(x, l):
        r = reversed(l)
        l[0] = 99
        return x + 1, list(r)
    _run(f, lambda i: (torch.ones(1), [1, 2]))


def test_reversed_list_of_tensors_sees_a_later_write_and_a_pop():
    def f(x, l):
        r = reversed(l)
        l[-1] = x * 10
        first = next(r)
        l.pop(0)  # the index now points past the end: exhausted
        return first, list(r), len(l)
    _run(f, lambda i: (torch.ones(1), [torch.ones(1), torch.zeros(1), torch.full((1,), 3.0)]))


def test_reversed_list_iterated_in_a_loop_and_mutated():
    def f(x, l):
        out = []
        for v in reversed(l):
            out.append(x * v)
            if v == 2:
                l[0] = 7  # not yet produced: seen
        return out
    _run(f, lambda i: (torch.ones(1), [1, 2, 3]))


def test_reversed_iterator_across_a_graph_break():
    def f(x, l):
        r = reversed(l)
        a = next(r)
        torch._dynamo.graph_break()
        l[0] = 50
        return x + a, list(r)
    _run(f, lambda i: (torch.ones(1), [1, 2, 3]))


def test_reversed_iterator_returned():
    def f(x, l):
        r = reversed(l)
        next(r)
        return x + 1, r
    cnt = CompileCounter()
    l1, l2 = [1, 2, 3], [1, 2, 3]
    out_c = compile(f, backend=cnt)(torch.ones(1), l1)
    out_e = f(torch.ones(1), l2)
    l1.append(4), l2.append(4)  # past the end of the list as it was: still its old index
    assert list(out_c[1]) == list(out_e[1])


# --- sum() of constants that Python cannot add: the TypeError of eager, not an internal error -

def test_sum_of_a_list_of_lists_raises_as_eager():
    def f(x):
        return sum(x.tolist())
    compiled = compile(f, backend=CompileCounter())
    with pytest.raises(TypeError, match="unsupported operand"):
        f(torch.ones(2, 2))
    with pytest.raises(TypeError, match="unsupported operand"):
        compiled(torch.ones(2, 2))


# --- a NumPy scalar argument is a graph input from the first compile (torch.compile: 1 graph) --

def test_numpy_scalar_scale_compiles_once():
    def f(x, s):
        return x * s, type(s * 2).__name__, float(s * 2)
    cnt = CompileCounter()
    compiled = compile(f, backend=cnt)
    for i in range(4):
        s = np.float64(1.5 + i)
        assert_same(compiled(torch.ones(2), s), f(torch.ones(2), s))
    assert cnt.frame_count == 1


def test_numpy_scalar_type_change_recompiles():
    def f(x, s):
        return x * s, type(s * 2).__name__
    cnt = CompileCounter()
    compiled = compile(f, backend=cnt)
    for s in (np.float64(1.5), np.float64(2.5), np.float32(0.5), np.float32(0.25)):
        assert_same(compiled(torch.ones(2), s), f(torch.ones(2), s))
    assert cnt.frame_count == 2
