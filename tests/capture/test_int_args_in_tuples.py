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
