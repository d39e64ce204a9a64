"""A dynamic int argument used as ``enumerate``'s start or inside ``x.new_tensor([...])`` stays a
symbol: after the one automatic-dynamic recompile, a new value reuses the graph (torch.compile: 2
graphs over six calls with six values; ember compiled once per value before).

Each test compares with eager on every call (outputs, the iterator handed over a graph break, the
printed side effects) and counts graphs against torch.compile's.
"""
from __future__ import annotations

import io

import pytest
import torch

import ember
from ember_test_helpers import assert_same, stats

SINK = io.StringIO()


def enum_sum(x, lst, n):
    s = x
    for i, v in enumerate(lst, start=n):
        s = s + i * v
    return s


def enum_list(x, lst, n):
    pairs = list(enumerate(lst, n))
    return x * pairs[-1][0] + len(pairs), pairs


def enum_zip(x, lst, n):
    s = x * 0
    for (i, v), w in zip(enumerate(lst, start=n * 2), lst[::-1]):
        s = s + (i - w) * v
    return s


def enum_break_inside(x, lst, n):
    s = x
    for i, v in enumerate(lst, start=n + 1):
        print("step", v, file=SINK)   # a graph break inside the loop: the iterator crosses it
        s = s * i + v
    return s


def enum_iterator_across_break(x, lst, n):
    it = enumerate(lst, start=n)
    first = next(it)
    print("after first", file=SINK)   # graph break with the iterator live
    rest = list(it)
    return x * first[0] + sum(i for i, _ in rest), rest


def enum_returned(x, lst, n):
    it = enumerate(lst, n)
    next(it)
    return x + 1, it


def new_tensor_list(x, n):
    return x + x.new_tensor([n, 1])


def new_tensor_scalar(x, n):
    return x * x.new_tensor(n - 1)


def new_tensor_nested(x, n):
    return x.new_tensor([[n, n * 2], [3, n + 1]], dtype=torch.float64).sum(0) + x


def new_tensor_int_self(x, n):
    return x.long().new_tensor([n, -n]) * 3


# (fn, takes a list, torch.compile's graph count is the reference: where torch skips the frame
# (an enumerate iterator live across a break), the count must only stop growing after call 3)
CASES = [(enum_sum, True, True), (enum_list, True, True), (enum_zip, True, True), (enum_break_inside, True, True),
         (enum_iterator_across_break, True, False), (enum_returned, True, False), (new_tensor_list, False, True),
         (new_tensor_scalar, False, True), (new_tensor_nested, False, True), (new_tensor_int_self, False, True)]


def _torch_graphs(fn, calls):
    import torch._dynamo
    n = [0]

    def counting(gm, example_inputs):
        n[0] += 1
        return gm.forward

    torch._dynamo.reset()
    with torch._dynamo.config.patch(nested_graph_breaks=True):
        compiled = torch.compile(fn, backend=counting)
        for args in calls:
            compiled(*args)
    torch._dynamo.reset()
    return n[0]


def _args(uses_list, n):
    x = torch.arange(2.0) + n
    return (x, [1, 2, 3], n) if uses_list else (x, n)


def _plain(value):
    if hasattr(value, "__next__"):   # (ember rebuilds a returned iterator over what it has left)
        return ("iterator", list(value))
    if isinstance(value, (list, tuple)):
        return type(value)(_plain(v) for v in value)
    return value


@pytest.mark.parametrize("fn,uses_list,vs_torch", CASES, ids=[c[0].__name__ for c in CASES])
def test_new_value_reuses_the_dynamic_graph(fn, uses_list, vs_torch):
    compiled = ember.compile(fn, backend="eager")
    for n in range(6):
        if n == 3:
            settled = stats()["graphs"]   # (static, then dynamic; a resume function a call later)
        SINK.seek(0)
        SINK.truncate()
        expected = _plain(fn(*_args(uses_list, n)))
        printed = SINK.getvalue()
        SINK.seek(0)
        SINK.truncate()
        actual = _plain(compiled(*_args(uses_list, n)))
        assert_same(actual, expected)
        assert SINK.getvalue() == printed
    graphs = stats()["graphs"]
    assert graphs == settled
    if vs_torch:
        SINK.seek(0)
        SINK.truncate()
        expected_graphs = _torch_graphs(fn, [_args(uses_list, n) for n in range(6)])
        assert graphs == expected_graphs, (graphs, expected_graphs)
