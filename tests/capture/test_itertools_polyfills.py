"""itertools constructors traced through pure-Python equivalents (ember/capture/polyfills):
dropwhile, takewhile, filterfalse, starmap, zip_longest, cycle, groupby; compared with eager,
including laziness (a predicate that reads tensor data breaks at the right place) and errors."""
import itertools

import pytest
import torch

from ember_test_helpers import REFERENCE, check_raises_same, check_same, stats

pytestmark = pytest.mark.skipif(REFERENCE, reason="ember's own counters (ember.stats())")


def basics(x):
    xs = [x * i for i in range(5)]
    r = [len(list(itertools.dropwhile(lambda t: t is not xs[2], xs))),
         list(itertools.takewhile(lambda v: v < 3, [1, 2, 3, 1])),
         list(itertools.filterfalse(lambda v: v % 2, range(7))),
         list(itertools.filterfalse(None, [0, 1, 0, 2])),
         list(itertools.starmap(pow, [(2, 3), (3, 2)])),
         list(itertools.zip_longest([1, 2, 3], "ab", fillvalue="-")),
         list(itertools.zip_longest()),
         list(itertools.islice(itertools.cycle("abc"), 7))]
    s = x
    for a, b in itertools.zip_longest(xs, xs[:2], fillvalue=x):
        s = s + a * b
    return s, r


def grouping(x):
    data = [1, 1, 2, 3, 3, 3, 1]
    groups = [g for _, g in itertools.groupby("aabb")]
    return (x + 1, [(k, list(g)) for k, g in itertools.groupby(data)],
            [k for k, _ in itertools.groupby("aabbbc")], [list(g) for g in groups],
            [(k, len(list(g))) for k, g in itertools.groupby(range(7), key=lambda v: v // 3)],
            list(itertools.groupby([])))


@pytest.mark.parametrize("fn", [basics, grouping])
def test_itertools_in_graph(fn):
    check_same(fn, torch.ones(2))
    assert stats()["graph_breaks"] == 0


def lazy_data_dependent(x):
    xs = [x * i for i in range(5)]
    return sum(itertools.dropwhile(lambda t: t.sum() < 3, xs))


def test_data_dependent_predicate_breaks():
    check_same(lazy_data_dependent, torch.ones(2), graphs=None, fullgraph=False)


def not_iterable(x):
    return itertools.dropwhile(None, 5)


def test_argument_checked_at_construction():
    check_raises_same(not_iterable, torch.ones(2))


# -- heapq / bisect: their reference Python versions, inlined ------------------------------------------------
def heaps_and_bisect(x):
    import bisect
    import heapq
    h = []
    for v in [5, 1, 4, 2, 3]:
        heapq.heappush(h, (v, x * v))
    popped = [heapq.heappop(h)[0] for _ in range(2)]
    data = [9, 3, 7, 1]
    heapq.heapify(data)
    replaced = heapq.heapreplace(data, 0)
    s = [1, 3, 5]
    bisect.insort(s, 4)
    return (x + h[0][1], [v for v, _ in h], popped, data, replaced, s, bisect.bisect_left(s, 3),
            heapq.nlargest(2, [4, 1, 7, 3]), bisect.bisect([1, 2, 2, 3], 2))


def test_heapq_and_bisect():
    check_same(heaps_and_bisect, torch.ones(2))
    assert stats()["graph_breaks"] == 0


def counter_and_sentinel(x):
    import collections
    c = collections.Counter("abracadabra")
    c.update(["a", "z"])
    c2 = collections.Counter(a=1, b=2)
    data = [1, 2, 3, 0, 5]
    it = iter(data)
    upto = list(iter(lambda: next(it), 0))
    try:
        iter(5, 0)
    except TypeError as e:
        upto.append(str(e))
    return (x + c["a"], c.most_common(2), sorted(c.items()), c2["q"], dict(c2), (c + c2)["b"], upto, list(it))


def test_counter_and_iter_sentinel():
    check_same(counter_and_sentinel, torch.ones(2))
    assert stats()["graph_breaks"] == 0


class _Defaulting(dict):
    def __missing__(self, key):
        return len(key)


def dict_subclass_missing(x):
    d = _Defaulting(a=1)
    return x + d["a"] + d["xyz"], "xyz" in d, d.get("q", 7)


def test_dict_subclass_missing_made_in_frame():
    check_same(dict_subclass_missing, torch.ones(2))
    assert stats()["graph_breaks"] == 0


class _OnlyGetItem:
    def __init__(self, n):
        self.n = n

    def __getitem__(self, i):
        if i >= self.n:
            raise IndexError(i)
        return i * 10


class _OnlyIter:
    def __iter__(self):
        return iter([1, 2, 3])


_OUTSIDE = _OnlyGetItem(2)


def sequence_protocol(x):
    o = _OnlyGetItem(3)
    return (x + 1, list(o), 20 in o, 5 in o, [v for v in _OUTSIDE], 10 in _OUTSIDE, 2 in _OnlyIter(),
            9 in _OnlyIter())


def test_old_sequence_protocol_and_contains_by_iteration():
    check_same(sequence_protocol, torch.ones(2))
    assert stats()["graph_breaks"] == 0 and stats()["fallbacks"] == 0
