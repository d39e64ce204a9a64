"""``n in (3, 5)`` for a dynamic int (or a size) and a constant tuple/list of numbers is a symbolic
bool, as ``n == 3`` is: the graph computes it, and a guard is added only where the program needs
its value (a branch). ember guarded every comparison it made (``n != 3``, ``n == 5``), so each
later value on the other side of one recompiled: 4 graphs for n = 2..6 where torch.compile makes 2."""
import pytest
import torch

from ember_test_helpers import CompileCounter, assert_same, compile

PROGRAMS = {
    "in_tuple": (lambda x, n: x * (n in (3, 5)), [2, 3, 4, 5, 6], 2),
    "in_list": (lambda x, n: x * (n in [2, 4]), [2, 3, 4, 5, 6], 2),
    "with_zero_and_one": (lambda x, n: x * (n in (0, 1, 4)), [0, 1, 2, 4, 5, 1, 0], 2),
    "float": (lambda x, a: x * (a in (0.5, 2.5)), [0.5, 1.5, 2.5, 3.5], 2),
    "empty": (lambda x, n: x * (n in ()), [2, 3, 4], 2),
}


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_membership_of_a_dynamic_number_is_a_value(name):
    fn, values, graphs = PROGRAMS[name]
    cnt = CompileCounter()
    compiled = compile(fn, backend=cnt)
    for v in values:
        x = torch.randn(3, requires_grad=True)
        assert_same(compiled(x, v), fn(x, v))
    assert cnt.frame_count == graphs


def test_not_in_and_a_branch_stay_right():
    def fn(x, n):
        y = x * (n not in (3, 5))
        if n in (4, 6):
            return y + 1
        return y - 1
    compiled = compile(fn, backend=CompileCounter())
    for v in [2, 3, 4, 5, 6, 7, 3, 4]:
        x = torch.randn(3)
        assert_same(compiled(x, v), fn(x, v))


def test_a_size_in_a_tuple():
    def fn(x):
        return x * (x.shape[0] in (3, 5))
    cnt = CompileCounter()
    compiled = compile(fn, backend=cnt)
    for n in [2, 3, 4, 5, 6]:
        x = torch.randn(n)
        assert_same(compiled(x), fn(x))
    assert cnt.frame_count == 2


def test_under_fullgraph_and_dynamic():
    fn = PROGRAMS["in_tuple"][0]
    cnt = CompileCounter()
    compiled = compile(fn, backend=cnt, fullgraph=True, dynamic=True)
    for v in [2, 3, 4, 5]:
        x = torch.randn(3)
        assert_same(compiled(x, v), fn(x, v))
    assert cnt.frame_count == 1
