"""Ints read through the closure cells of functions the frame reaches from its own locals and
free variables (a helper closing over a counter, a decorator's wrapper, a closure of a closure)
follow automatic dynamic like the frame's arguments: a symbol after one change, so a counter
that moves every call compiles twice, as in torch.compile. Ints reached from globals, and the
int defaults of a function the frame calls, stay guarded constants (one graph per value; the
frame's own defaults are its arguments: automatic dynamic). Each case compares with eager and counts graphs
(EMBER_TEST_REFERENCE=torch runs the same checks under torch.compile)."""
from __future__ import annotations

import torch

from ember_test_helpers import CompileCounter, assert_same, compile


def _run(fn, set_value, values):
    cnt = CompileCounter()
    compiled = compile(fn, backend=cnt)
    for v in values:
        set_value(v)
        x = torch.randn(3)
        assert_same(compiled(x), fn(x))
    return cnt


def test_int_in_a_cell_of_a_helper_the_frame_closes_over():
    n = 0

    def read():
        return n

    def f(x):
        return x * read()

    def set_value(v):
        nonlocal n
        n = v
    assert _run(f, set_value, [1, 2, 3, 4]).frame_count == 2


def test_counter_advanced_by_the_compiled_frame_itself():
    def counter():
        n = 0

        def inc():
            nonlocal n
            n += 1
            return n
        return inc
    c = counter()

    def f(x):
        return x * c() + c()
    cnt = CompileCounter()
    compiled = compile(f, backend=cnt)
    expected = counter()

    def f_eager(x):
        return x * expected() + expected()
    for _ in range(4):
        x = torch.randn(3)
        assert_same(compiled(x), f_eager(x))
    assert cnt.frame_count == 2


def test_int_two_cells_deep():
    n = 1

    def a():
        return n

    def b():
        return a()

    def f(x):
        return x * b()

    def set_value(v):
        nonlocal n
        n = v
    assert _run(f, set_value, [1, 2, 3, 4]).frame_count == 2


def test_int_in_a_cell_used_as_a_size():
    k = 2

    def shape():
        return (k, -1)

    def f(x):
        return x.reshape(shape()).sum(0)
    cnt = CompileCounter()
    compiled = compile(f, backend=cnt)
    for v in (2, 3, 4, 6):
        k = v
        x = torch.arange(12.)
        assert_same(compiled(x), f(x))
    assert cnt.frame_count == 2


_global_counter = None


def _make_global_counter():
    n = 0

    def inc():
        nonlocal n
        n += 1
        return n
    return inc


def test_int_in_a_cell_of_a_global_function_stays_constant():
    global _global_counter
    _global_counter = _make_global_counter()
    expected = _make_global_counter()

    def f(x):
        return x * _global_counter()
    cnt = CompileCounter()
    compiled = compile(f, backend=cnt)
    for _ in range(3):
        x = torch.randn(3)
        assert_same(compiled(x), x * expected())
    assert cnt.frame_count == 3


def _defaults_run(make_f, set_value, values):
    cnt = CompileCounter()
    f = make_f()
    compiled = compile(f, backend=cnt)
    for v in values:
        set_value(f, v)
        x = torch.randn(3)
        assert_same(compiled(x), f(x))
    return cnt.frame_count


def test_int_default_of_a_called_function_stays_constant():
    def g(a, k=2):
        return a * k

    def set_value(f, v):
        g.__defaults__ = (v,)
    assert _defaults_run(lambda: (lambda x: g(x)), set_value, [2, 3, 4, 5]) == 4


def test_int_keyword_only_default_of_a_called_function_stays_constant():
    def g(a, *, k=2):
        return a * k

    def set_value(f, v):
        g.__kwdefaults__ = {"k": v}
    assert _defaults_run(lambda: (lambda x: g(x)), set_value, [2, 3, 4, 5]) == 4


def test_int_default_of_a_function_argument_stays_constant():
    def f(x, fn):
        return fn(x)
    cnt = CompileCounter()
    compiled = compile(f, backend=cnt)
    for k in (2, 3, 4, 5):
        x = torch.randn(3)
        fn = (lambda t, k=k: t * k)
        assert_same(compiled(x, fn), f(x, fn))
    assert cnt.frame_count == 4


def test_int_default_of_the_frame_itself_becomes_dynamic():
    def set_value(f, v):
        f.__defaults__ = (v,)

    def make():
        def f(x, k=2):
            return x * k
        return f
    assert _defaults_run(make, set_value, [2, 3, 4, 5]) == 2
