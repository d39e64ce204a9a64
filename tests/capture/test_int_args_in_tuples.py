"""An int argument that became symbolic (automatic dynamic, on its second value) stays a symbol
when the program puts it in a tuple and repeats the tuple: ``(n,) * 2`` folded the tuple as a
constant, which fixed ``n`` with a guard on its value, so every new value compiled again
(torch.compile: two graphs, static then dynamic)."""
import pytest
import torch

from ember_test_helpers import CompileCounter, assert_same, compile


def repeated(x, n):
    t = (n,) * 2
    u = 3 * (n, 1)
    return x * sum(t) + len(u) + u[2] + max(t)


def nested(x, n):
    t = ((n, 2),) * 2
    return x.new_zeros(t[1]).sum() + x * t[0][0]


@pytest.mark.parametrize("fn", [repeated, nested])
def test_repeated_tuple_keeps_the_int_symbolic(fn):
    cnt = CompileCounter()
    compiled = compile(fn, backend=cnt)
    for n in (2, 3, 4, 5, 7):
        assert_same(compiled(torch.ones(3), n), fn(torch.ones(3), n))
    assert cnt.frame_count == 2


def size_plus_tuple(x):
    t = x.shape + (2,)
    u = (3,) + x.size()
    return x.sum() * t.numel() + u.numel() + isinstance(u, torch.Size)


def test_symbolic_size_concatenation_keeps_numel():
    # `x.shape + (2,)` of symbolic sizes is a torch.Size: its numel() was an unknown attribute
    # (a graph break, and an Unsupported error under fullgraph=True)
    cnt = CompileCounter()
    compiled = compile(size_plus_tuple, backend=cnt, dynamic=True, fullgraph=True)
    for n in (2, 3, 4):
        x = torch.randn(n, 5)
        assert_same(compiled(x), size_plus_tuple(x))
    assert cnt.frame_count == 1


def sorted_with_a_symbol(x, n):
    s = sorted((n, 4, 1))
    r = sorted([n, 3], reverse=True)
    return x * s[1] + r[0]


def test_sorted_compares_symbolically():
    # sorted() folded its items as constants: a guard on n's value, a graph per value
    cnt = CompileCounter()
    compiled = compile(sorted_with_a_symbol, backend=cnt)
    for n in (2, 3, 6, 7, 9, 0):
        assert_same(compiled(torch.ones(3), n), sorted_with_a_symbol(torch.ones(3), n))
    assert cnt.frame_count <= 5  # static, then one per order of n among 1, 3, 4 (ember: 4, torch.compile: 5)
