"""``d.keys()`` / ``d.items()`` as sets: set operators and comparisons against sets, user set
subclasses, other views and any iterable, compared with eager (variables/dict_views.py)."""
import operator

import pytest
import torch

from ember_test_helpers import REFERENCE, check_raises_same, check_same, stats

pytestmark = pytest.mark.skipif(REFERENCE, reason="ember's own counters (ember.stats())")


class MySet(set):
    pass


OPS = [operator.and_, operator.or_, operator.xor, operator.sub, operator.iand, operator.ior, operator.ixor,
       operator.isub, operator.eq, operator.ne, operator.lt, operator.le, operator.gt, operator.ge]


def _other(kind):
    return {"set": {"b", "z", ("a", 1)}, "myset": MySet({"a", ("b", 2)}), "keys": {"b": 0, "q": 1}.keys(),
            "items": {"a": 1, "c": 3}.items(), "list": ["a", ("a", 1), 5]}[kind]


@pytest.mark.parametrize("op", OPS, ids=lambda o: o.__name__)
@pytest.mark.parametrize("view", ["keys", "items"])
@pytest.mark.parametrize("other", ["set", "myset", "keys", "items", "list"])
def test_view_operator(op, view, other):
    def fn(x, d):
        v = getattr(d, view)()
        o = _other(other)
        out = [op(v, o)]
        if not isinstance(o, list):
            out.append(op(o, v))
        return x + 1, out

    d = {"a": 1, "b": 2}
    if other == "list" and op not in (operator.eq, operator.ne) and op in OPS[8:]:
        check_raises_same(fn, torch.randn(2), d)  # `view < list` is a TypeError
        return
    check_same(fn, torch.randn(2), d)
    assert stats()["graph_breaks"] == 0


def set_inplace_with_view(x, d):
    s = {"z"}
    alias = s
    s |= d.keys()      # set.__ior__ refuses a view: s is rebound to a new set, alias unchanged
    s -= d.keys()
    return x + 1, s, alias, s is alias


def view_contains(x, d):
    return x + 1, 2 in d.values(), 7 in d.values(), ("a", 1) in d.items()


def values_tensor_contains(x, d):
    return x + 1, x in {"k": x}.values()


@pytest.mark.parametrize("fn", [set_inplace_with_view, view_contains, values_tensor_contains])
def test_view_misc(fn):
    check_same(fn, torch.randn(2), {"a": 1, "b": 2})
    assert stats()["graph_breaks"] == 0


def view_with_non_iterable(x, d):
    return d.keys() | 1


def test_view_with_non_iterable_raises():
    check_raises_same(view_with_non_iterable, torch.randn(2), {"a": 1})


def items_with_tensor_values(x):
    d = {"a": x}
    u = d.items() | {("b", 1)}
    return x * 2, len(u), ("b", 1) in u


def test_items_with_tensor_values_break():
    check_same(items_with_tensor_values, torch.randn(2), graphs=None, fullgraph=False)
