"""Findings of the round-4 probe (ordinary programs compared with eager and torch.compile).

Each test runs a small program eagerly and compiled, compares the answers, and where torch
defines it checks the number of graphs against torch.compile (a counting backend).
"""
import torch

from ember_test_helpers import CompileCounter, assert_same, compile


def _run(fn, calls, **kw):
    cnt = CompileCounter()
    compiled = compile(fn, backend=cnt, **kw)
    for args in calls:
        args = args() if callable(args) else args
        assert_same(compiled(*args), fn(*args))
    return cnt


# --- an int in a closure cell of a function passed as an argument is local to the frame: -----
# --- after it changes once it is a symbol (torch.compile: 2 graphs for 4 values) ------------

def _scale_by(k):
    return lambda t: t * k


def _reshape_by(k):
    return lambda t: t.reshape(k, -1).sum(0)


def test_closure_int_of_an_argument_function_becomes_dynamic():
    def f(fn, x):
        return fn(x)
    cnt = _run(f, [(_scale_by(k), torch.ones(3)) for k in (1, 2, 3, 4)])
    assert cnt.frame_count == 2


def test_closure_int_of_an_argument_function_used_as_a_size():
    def f(fn, x):
        return fn(x) + 1
    cnt = _run(f, [(_reshape_by(k), torch.arange(12.)) for k in (2, 3, 4, 6, 2)])
    assert cnt.frame_count == 2


def test_closure_int_of_a_cell_of_a_cell_becomes_dynamic():
    # a counter kept on a decorator's wrapper (a cell of a cell of the frame): like an argument's
    # int, a symbol after one change (torch.compile: 2 graphs for 3 values)
    def counted(fn):
        def wrapper(x):
            return fn(x) * wrapper.k
        wrapper.k = 1
        return wrapper
    inc = counted(lambda x: x + 1)

    def f(x):
        return inc(x)
    cnt = CompileCounter()
    compiled = compile(f, backend=cnt)
    for k in (1, 2, 3):
        inc.k = k
        assert_same(compiled(torch.ones(2)), f(torch.ones(2)))
    assert cnt.frame_count == 2


# --- an np.ndarray argument whose length changes: dynamic after one change, as a tensor's ----

def test_ndarray_argument_sizes_become_dynamic():
    np = __import__("numpy")

    def f(a):
        return a * 2 + a[-1], a.shape[0]
    cnt = CompileCounter()
    compiled = compile(f, backend=cnt)
    for n in (2, 3, 5, 7, 3):
        (out, length), (ref, ref_length) = compiled(np.arange(float(n))), f(np.arange(float(n)))
        assert type(out) is np.ndarray and out.dtype == ref.dtype and out.tolist() == ref.tolist()
        assert length == ref_length
    assert cnt.frame_count == 2


def test_ndarray_argument_mutated_with_changing_sizes():
    np = __import__("numpy")

    def f(a):
        a += 1
        a[: a.shape[0] // 2] = 0
        return a.sum()
    compiled = compile(f, backend=CompileCounter())
    for n in (2, 3, 5, 8):
        a, b = np.arange(float(n)), np.arange(float(n))
        assert compiled(a) == f(b)
        assert a.tolist() == b.tolist()
