"""``collections.deque`` made in the frame (variables/deques.py), compared with eager; and ``in``
over containers holding tensors, which compares with ``==`` after identity (data-dependent)."""
import collections

import pytest
import torch

from ember_test_helpers import REFERENCE, check_raises_same, check_same, stats

pytestmark = pytest.mark.skipif(REFERENCE, reason="ember's own counters (ember.stats())")


def bfs(a):
    q = collections.deque([a])
    out = []
    while q:
        t = q.popleft()
        out.append(t)
        if len(out) < 4:
            q.append(t * 2)
            q.appendleft(t + 1)
    return out, len(q)


def window(a):
    w = collections.deque(maxlen=3)
    for i in range(5):
        w.append(a * i)
    w.rotate(1)
    w.extendleft([a, a + 1])
    w.rotate(-2)
    w[1] = w[1] * 10
    del w[0]
    return list(w), w.maxlen, w[0], w[-1], len(w), bool(w)


def escapes(a):
    d = collections.deque([1, 2], maxlen=4)
    d.append(a * 2)
    d.reverse()
    c = d.copy()
    return list(d), d.maxlen, list(c), type(c).__name__


def extendleft_gen(a):
    y = collections.deque([1])
    y.extendleft(y[0] + z for z in range(3))  # each item added before the next is produced
    y += (y[-1] * z for z in range(2))
    return a + 1, list(y)


def remove_insert(a):
    d = collections.deque("abcab")
    d.remove("a")  # the first equal item
    try:
        d.remove("q")
    except ValueError as e:
        msg2 = str(e)
    d.insert(1, a)
    d.insert(-1, "y")
    d.insert(100, a * 2)  # past the end: appended, as list.insert
    full = collections.deque([1], maxlen=1)
    try:
        full.insert(0, 3)
    except IndexError as e:
        msg = str(e)
    return list(d), d.count("b"), d.index("c"), msg, msg2


@pytest.mark.parametrize("fn", [bfs, window, escapes, extendleft_gen, remove_insert])
def test_deque_in_graph(fn):
    check_same(fn, torch.randn(3))
    assert stats()["graph_breaks"] == 0


def across_break(a):
    d = collections.deque([a, a * 2])
    print("", end="")
    d.append(a * 3)
    return sum(d), list(d)


def test_deque_across_a_break():
    check_same(across_break, torch.randn(3), graphs=None, fullgraph=False)
    assert stats()["fallbacks"] == 0


def mutate_while_iterating(a):
    d = collections.deque([1, 2, 3])
    for v in d:
        d.append(v)
    return a


def empty_pop(a):
    return collections.deque().pop()


def bad_index(a):
    return collections.deque([a])[3]


@pytest.mark.parametrize("fn", [mutate_while_iterating, empty_pop, bad_index])
def test_deque_errors_as_eager(fn):
    check_raises_same(fn, torch.randn(3))


def tensor_in_list(a):
    return a in [a * 0, a * 1]


def tensor_in_list_by_identity(a):
    return a in [a, a * 0], a * 2


def test_in_compares_tensors_like_eager():
    check_raises_same(tensor_in_list, torch.randn(3))  # eager: bool() of a 3-element tensor
    one = torch.ones(1)
    check_same(tensor_in_list, one, graphs=None, fullgraph=False)  # data decides: runs eagerly
    check_same(tensor_in_list_by_identity, torch.randn(3))  # identity first: never compared


# ---- a deque passed in: its changes are written back in place, its identity kept ----

def pops_two(q):
    x = q.pop()
    y = q.pop()
    return x * y


def mutates_and_returns(q, a, b):
    q.appendleft(a)
    q.append(b)
    q.rotate(1)
    q.extendleft([1])
    q[0] = 5
    return len(q), q


def across_break_input(q, x):
    q.append(x.sin())
    print("", end="")
    q.popleft()
    return q[0] + 1


def _deques_equal(d1, d2):
    assert len(d1) == len(d2) and d1.maxlen == d2.maxlen
    for p, q in zip(d1, d2):
        assert type(p) is type(q)
        if isinstance(p, torch.Tensor):
            torch.testing.assert_close(p, q)
        else:
            assert p == q


def test_input_deque_mutations_written_back():
    import ember
    a, b = torch.randn(2, 3), torch.randn(2, 3)
    d1, d2 = collections.deque(["foo", a, b]), collections.deque(["foo", a, b])
    torch.testing.assert_close(ember.compile(pops_two, fullgraph=True)(d2), pops_two(d1))
    _deques_equal(d1, d2)
    assert stats()["graphs"] == 1

    d1, d2 = collections.deque(["foo", 10, 10], maxlen=5), collections.deque(["foo", 10, 10], maxlen=5)
    n1, r1 = mutates_and_returns(d1, 1, 2)
    n2, r2 = ember.compile(mutates_and_returns, fullgraph=True)(d2, 1, 2)
    assert n1 == n2 and r2 is d2
    _deques_equal(d1, d2)


def remove_from_input(d, a):
    d.remove(2)
    d.insert(0, a)
    return len(d)


def test_input_deque_remove_insert_written_back():
    import ember
    a = torch.randn(2)
    d1, d2 = collections.deque([1, 2, 3, 2]), collections.deque([1, 2, 3, 2])
    assert ember.compile(remove_from_input, fullgraph=True)(d2, a) == remove_from_input(d1, a)
    _deques_equal(d1, d2)


def test_input_deque_across_a_break():
    import ember
    d1 = collections.deque([torch.ones(2), torch.zeros(2)])
    d2 = collections.deque([torch.ones(2), torch.zeros(2)])
    x = torch.randn(2)
    torch.testing.assert_close(ember.compile(across_break_input)(d2, x), across_break_input(d1, x))
    _deques_equal(d1, d2)
    assert stats()["fallbacks"] == 0


def test_input_deque_guards_length_and_maxlen():
    import ember
    cf = ember.compile(lambda q: len(q) + (q.maxlen or 0))
    assert cf(collections.deque([1])) == 1
    assert cf(collections.deque([1, 2])) == 2
    assert cf(collections.deque([1, 2], maxlen=7)) == 9
