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


@pytest.mark.parametrize("fn", [bfs, window, escapes, extendleft_gen])
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
