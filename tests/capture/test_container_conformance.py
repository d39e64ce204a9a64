"""Container behaviours from PyTorch's test_dicts.py / test_list.py / test_sets.py, compared with
eager: guards on dicts keyed by objects, and the fixes made for those suites."""
import collections

import pytest
import torch

from ember_test_helpers import CompileCounter, assert_same, check_same, compile


def test_dict_keyed_by_modules_guards_key_order():
    # torch.compile guards the key order of a dict whose keys are objects: the same keys in
    # another order are a new graph (and the answer stays right either way)
    def fn(d, m):
        return d[m](torch.ones(2, 2))

    x, y, z = (torch.nn.Linear(2, 2) for _ in range(3))
    counter = CompileCounter()
    opt = compile(fn, backend=counter)
    d1 = {x: y, 3: z}
    assert_same(opt(d1, x), fn(d1, x))
    assert_same(opt(d1, x), fn(d1, x))
    assert counter.frame_count == 1
    d2 = {3: z, x: y}
    assert_same(opt(d2, x), fn(d2, x))
    assert counter.frame_count == 2


def _break():
    print("", end="")  # a graph break


def dict_iterator_across_break_then_grow(x, d):
    it = iter(d)
    first = next(it)
    _break()
    d["zz"] = 1  # after the break: the next step raises, as in eager
    try:
        next(it)
    except RuntimeError as e:
        return x + 1, first, str(e)
    return x + 1, first


def ordered_items_across_breaks(x):
    od = collections.OrderedDict(a=1, b=2, c=3)
    od.move_to_end("a")
    out = []
    for k, v in od.items():
        _break()
        out.append((k, v))
        x = x + v
    return x, out


def grow_while_iterating_across_breaks(x, d):
    out = []
    try:
        for k in d:
            out.append(k)
            _break()
            d[k + k] = 1
    except RuntimeError as e:
        return x + 1, out, str(e)
    return x + 1, out


@pytest.mark.parametrize("fn, args", [
    (dict_iterator_across_break_then_grow, lambda: (torch.randn(2), {"a": 1, "b": 2})),
    (ordered_items_across_breaks, lambda: (torch.randn(2),)),
    (grow_while_iterating_across_breaks, lambda: (torch.randn(2), {"a": 1, "b": 2})),
])
def test_dict_iterator_live_across_graph_break(fn, args):
    check_same(fn, *args(), graphs=None, fullgraph=False)


ADD, MUL = list.__add__, list.__mul__


def builtin_descriptors_as_keys(x):
    d = {ADD: x * 2, MUL: x * 3, list.append: x * 4}
    return d[list.__add__] + d[MUL] + d[ADD] + d[list.append], ADD in d, dict.get in d


def test_builtin_method_descriptors_as_dict_keys():
    check_same(builtin_descriptors_as_keys, torch.randn(3))


def tensor_keyed_lookup(d, k):
    st = d.setdefault(k, {})
    return d[k]["w"] * 2 if "w" in st else k + 1, k in d, len(d), [key is k for key in d]


def test_dict_with_tensor_keys_from_outside():
    # keys hashed by identity, as eager: another tensor with equal values is another key
    k1, k2 = torch.tensor([1.0]), torch.tensor([1.0])
    counter = CompileCounter()
    opt = compile(tensor_keyed_lookup, backend=counter)
    for d, k in [({k1: {"w": torch.ones(1)}, 3: {}}, k1), ({k1: {"w": torch.ones(1)}, 3: {}}, k1),
                 ({k1: {"w": torch.ones(1)}, 3: {}}, k2), ({k2: {"w": torch.ones(1)}}, k2)]:
        d_eager = {key: dict(v) for key, v in d.items()}
        assert_same(opt(d, k), tensor_keyed_lookup(d_eager, k))
        assert [list(v) for v in d.values()] == [list(v) for v in d_eager.values()]
    assert counter.frame_count == 3  # (the second call reuses the first graph)


def test_dict_keyed_by_tensors_order_guarded():
    def fn(d, x):
        return d[x] + 3

    x, y, z = torch.randn(4), torch.randn(4), torch.randn(4)
    counter = CompileCounter()
    opt = compile(fn, backend=counter, fullgraph=True)
    d1 = {x: y, 3: z}
    assert_same(opt(d1, x), fn(d1, x))
    assert_same(opt(d1, x), fn(d1, x))
    assert counter.frame_count == 1
    d2 = {3: z, x: y}
    assert_same(opt(d2, x), fn(d2, x))
    assert counter.frame_count == 2


class PlainTuple(tuple):
    def total(self):
        return sum(self)


class GrandchildTuple(PlainTuple):
    pass


class PlainList(list):
    def first(self):
        return self[0]


class MyDict(dict):
    pass


def plain_tuple_subclasses(x):
    t = GrandchildTuple([1, 2, 3])
    u = GrandchildTuple.__new__(GrandchildTuple, (x, x + 1))
    return t, u, type(t) is GrandchildTuple, t.total(), tuple(t) == (1, 2, 3), t + (4,), t[1:], len(u)


def container_new_calls(x):
    lst = list.__new__(list, [1, 2], extra="ignored")  # list.__new__ ignores what __init__ would take
    lst.append(x)
    sub = PlainList.__new__(PlainList, [9])
    sub.append(x + 1)
    d = dict.__new__(MyDict)
    d["x"] = x * 2
    plain = dict.__new__(dict)
    plain["y"] = 1
    return lst, sub, type(sub) is PlainList, sub.first(), d, type(d) is MyDict, plain


def test_tuple_and_list_subclasses_made_in_frame():
    check_same(plain_tuple_subclasses, torch.randn(2))
    check_same(container_new_calls, torch.randn(2))


def tuple_new_errors(x):
    out = []
    for call in (lambda: tuple.__new__(tuple, [1, 2], extra=1), lambda: tuple.__new__(PlainTuple, [1], [2]),
                 lambda: list.__new__(dict)):
        try:
            call()
        except TypeError as e:
            out.append(str(e))
    return x + 1, out


def test_container_new_errors_as_eager():
    check_same(tuple_new_errors, torch.randn(2))


def _dict_subclass_with_new(base):
    class CustomDict(base):
        def __new__(cls, *args, **kwargs):
            return super().__new__(cls, *args, **kwargs)

        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)

    return CustomDict


@pytest.mark.parametrize("base", [dict, collections.OrderedDict])
def test_dict_subclass_with_python_new_made_in_frame(base):
    cls = _dict_subclass_with_new(base)

    def fn(x):
        c = cls([("a", 1)], b=2)
        c["key"] = x
        return c["key"] + c["a"] + c["b"], "key" in c, list(c), type(c) is cls, c

    check_same(fn, torch.randn(3))
