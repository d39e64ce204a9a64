"""A lazy iterator the frame made and returns keeps its builtin type.

Found by the s36/s37 probes: ``return enumerate(lst)`` / ``zip(a, b)`` came back as a
``tuple_iterator`` over the items left (the form a graph break's resumed frame can trace), so
``isinstance(out, enumerate)`` was False, and a zip over an iterator that was also returned no
longer shared it; an endless ``itertools.repeat`` made the whole frame run eagerly. The items
still to come, and what is shared, must be what eager gives, with the same types.
"""
from __future__ import annotations

import itertools

import torch

from ember_test_helpers import CompileCounter, assert_same, compile


def make_iterators(x, lst):
    it = iter(lst)
    pairs = zip(it, it)                      # shares `it`
    numbered = enumerate([x, x * 2, x * 3], 5)
    next(numbered)
    chained = itertools.chain(lst, [x])
    next(chained)
    sliced = itertools.islice([x, 1, 2, 3, 4], 1, None, 2)
    twice = itertools.repeat(x + 1, 2)
    forever = itertools.repeat(7)
    return x + 1, pairs, it, numbered, chained, sliced, twice, forever


def drain(out):
    _, pairs, it, numbered, chained, sliced, twice, forever = out
    seen = [type(v) for v in out[1:]]
    seen += [next(pairs), next(it), list(pairs), list(it), list(numbered), list(chained), list(sliced),
             list(twice), [next(forever) for _ in range(3)]]
    return out[0], seen


def test_returned_lazy_iterators_keep_type_items_and_sharing():
    cnt = CompileCounter()
    compiled = compile(make_iterators, backend=cnt)
    x = torch.randn(2)
    expected = drain(make_iterators(x, [1, 2, 3, 4, 5]))
    actual = drain(compiled(x, [1, 2, 3, 4, 5]))
    assert actual[1][:7] == [zip, type(iter([])), enumerate, itertools.chain, itertools.islice,
                             itertools.repeat, itertools.repeat]
    assert_same(actual, expected)
    assert cnt.frame_count == 1


def test_zip_and_enumerate_returned_unconsumed():
    def f(x, names):
        return zip(names, x.unbind()), enumerate(names, start=1)

    cnt = CompileCounter()
    compiled = compile(f, backend=cnt)
    x = torch.randn(3, 2)
    expected, actual = f(x, ["a", "b", "c"]), compiled(x, ["a", "b", "c"])
    assert [type(v) for v in actual] == [zip, enumerate]
    assert_same([list(v) for v in actual], [list(v) for v in expected])
    assert cnt.frame_count == 1


def range_iterators(x, n):
    ahead = iter(range(5))
    next(ahead)
    backwards = reversed(range(1, 8, 3))
    sized = iter(range(n))
    done = iter(range(10, 0, -2))
    for _ in range(5):
        next(done)
    return x + sum(iter(range(4))), ahead, backwards, sized, done


def range_iterator_across_break(x, n):
    it = reversed(range(n))
    first = next(it)
    print("a graph break")
    return x * first + next(it), it


def _types_and_items(out):
    return out[0], [type(v) for v in out[1:]], [list(v) for v in out[1:]]


def test_returned_range_iterators_keep_their_type():
    # (s37 probe: iter(range(3)) and reversed(range(3)) came back as tuple iterators)
    for fn, graphs in ((range_iterators, 1), (range_iterator_across_break, 1)):
        cnt = CompileCounter()
        compiled = compile(fn, backend=cnt)
        for n in (4, 6):
            expected = _types_and_items(fn(torch.ones(2), n))
            actual = _types_and_items(compiled(torch.ones(2), n))
            assert all(t is type(iter(range(0))) for t in actual[1])
            assert_same(actual, expected)
        assert cnt.frame_count >= graphs
