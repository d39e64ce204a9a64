"""Behaviours found by running PyTorch's own test/dynamo files against ember (session 24), each
compared with eager and, where torch.compile makes one graph, compiled with ``fullgraph=True``."""
from __future__ import annotations

import os

import torch

from ember_test_helpers import assert_same, compile, reset, stats

MY_DICT = {"a": 1, "b": 2}
MY_LIST = [1.0, 2.0]


def _memo_of_ids(x):
    memo = {}
    memo[id(MY_DICT)] = True
    memo[id(MY_LIST)] = 1
    if id(MY_DICT) in memo and id(MY_LIST) in memo:
        return x + 1.0
    return x + 2.0


def test_id_of_a_global_container_as_a_dict_key():
    global MY_DICT
    compiled = compile(_memo_of_ids, fullgraph=True)
    x = torch.randn(4)
    assert_same(compiled(x), _memo_of_ids(x))
    saved, MY_DICT = MY_DICT, {"c": 3}  # another object: its id() differs, the guard sees it
    try:
        assert_same(compiled(x), _memo_of_ids(x))
        assert stats()["recompiles"] == 1
    finally:
        MY_DICT = saved


def test_os_fspath_of_a_constant():
    def fn(x):
        return x + len(os.fspath("some/path"))

    x = torch.ones(2)
    assert_same(compile(fn, fullgraph=True)(x), fn(x))


def test_catch_warnings_record_true():
    import warnings

    def fn(x):
        with warnings.catch_warnings(record=True) as w:
            y = x.sin()
        return y, len(w)

    x = torch.randn(3)
    assert_same(compile(fn, fullgraph=True)(x), fn(x))


def test_catch_warnings_record_true_with_a_warning_runs_eagerly_and_records_it():
    import warnings

    def fn(x):
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            warnings.warn("recorded")
            y = x.sin()
        return y, [str(r.message) for r in w]

    x = torch.randn(3)
    assert_same(compile(fn)(x), fn(x))


def test_index_and_count_of_sequences_including_deque():
    import collections

    for list_type in (list, tuple, torch.Size, collections.deque):
        for start in ([], [2], [0, 3]):
            def f(t):
                xs = list_type([1, 2, 3, 4])
                return t + xs.index(3, *start) + xs.count(2)

            # (12 closures of one code object: past the recompile limit, fullgraph=True raises)
            reset()
            assert_same(compile(f, fullgraph=True)(torch.zeros(1)), f(torch.zeros(1)))


def test_enum_member_looked_up_by_value():
    from enum import Enum, IntEnum

    class ExplicitEnum(str, Enum):
        @classmethod
        def _missing_(cls, value):
            raise ValueError(f"{value} is not a valid {cls.__name__}")

    class PaddingStrategy(ExplicitEnum):
        LONGEST = "longest"
        MAX_LENGTH = "max_length"

    class Num(IntEnum):
        A = 1
        B = 2

    def fn(x):
        a = PaddingStrategy("longest")
        b = Num(2)
        if a == PaddingStrategy.LONGEST and b is Num.B and Num(Num.A) is Num.A:
            return torch.sin(x) * b
        return torch.cos(x)

    x = torch.randn(3)
    assert_same(compile(fn, fullgraph=True)(x), fn(x))

    def missing(x):
        return x + len(PaddingStrategy("nope"))

    from ember_test_helpers import check_raises_same
    check_raises_same(missing, x)


def test_typed_dict_construction_makes_a_dict():
    from typing import Literal, TypedDict

    class Inputs(TypedDict):
        type: Literal["pixel_values"]
        data: torch.Tensor

    class Partial(TypedDict, total=False):
        data: torch.Tensor

    def fn(x):
        d = Inputs(type="pixel_values", data=x + 1)
        e = Partial(data=x)
        return d["data"] * 2 + e["data"], type(d) is dict, sorted(d)

    x = torch.randn(3)
    assert_same(compile(fn, fullgraph=True)(x), fn(x))


def test_tolist_of_a_small_input_reads_values_with_the_guards():
    def fn(x, y):
        out = []
        for i in x.tolist():
            out.append(i * 4)
        return out, y * sum(x.tolist())

    compiled = compile(fn, fullgraph=True)
    for values in ([3], [5], [7], [5, 6], [[1, 2], [3, 4]], [1.5, 2.5]):
        x, y = torch.tensor(values), torch.randn(2)
        if x.dim() == 2:
            def fn2(x, y):
                return x.tolist(), y * x.sum()
            assert_same(compile(fn2, fullgraph=True)(x, y), fn2(x, y))
            continue
        assert_same(compiled(x, y), fn(x, y))


def test_tolist_after_an_in_place_write_sees_the_write():
    def fn(x):
        x.add_(1)
        return x.tolist()

    a, b = torch.tensor([1, 2]), torch.tensor([1, 2])
    assert_same(compile(fn)(a), fn(b))
    assert_same(a, b)


class _Obj:
    def __init__(self, a, b):
        self.a = a
        self.b = b


def test_delattr_on_objects_from_outside_and_made_inside():
    def fn(x, obj):
        del obj.a
        obj.c = x + 1
        del obj.c
        tmp = _Obj(x + 2, x + 3)
        del tmp.b
        if hasattr(obj, "a"):
            return x + 1
        return tmp.a * 2 + obj.b

    compiled = compile(fn, fullgraph=True)
    x = torch.zeros([])
    for _ in range(2):
        o1, o2 = _Obj(x, x + 5), _Obj(x, x + 5)
        assert_same(compiled(x, o1), fn(x, o2))
        assert vars(o1).keys() == vars(o2).keys() == {"b"}


def test_delattr_then_set_and_a_missing_attribute():
    from ember_test_helpers import check_raises_same

    def fn(x, obj):
        del obj.a
        obj.a = x * 3
        return obj.a + 1

    o1, o2 = _Obj(1, 2), _Obj(1, 2)
    x = torch.ones(2)
    assert_same(compile(fn)(x, o1), fn(x, o2))
    assert_same(o1.a, o2.a)

    def missing(x, obj):
        del obj.zzz
        return x

    check_raises_same(missing, x, _Obj(1, 2))
    # whether the object has the attribute is guarded: one without, then one with it
    compiled = compile(_del_k)
    without, with_k = _Obj(1, 2), _Obj(1, 2)
    with_k.k = 1
    assert_same(compiled(x, without), x)
    assert_same(compiled(x, with_k), x + 1)
    assert not hasattr(with_k, "k")


def _del_k(x, obj):
    if hasattr(obj, "k"):
        del obj.k
        return x + 1
    return x


def test_nested_frozen_dataclass_as_a_dict_key():
    import dataclasses

    @dataclasses.dataclass(frozen=True)
    class Inner:
        x: float
        y: float

    @dataclasses.dataclass(frozen=True)
    class Outer:
        b: Inner
        z: int

    def fn(x, y):
        dc = Outer(b=Inner(2.4, 4.4), z=5)
        d = {dc: 2}
        same = Outer(b=Inner(2.4, 4.4), z=5)
        other = Outer(b=Inner(2.4, 4.5), z=5)
        return dc.b.x + dc.b.y + d[dc] + x + y, same in d, other in d

    inputs = (torch.ones(2, 2), torch.ones(2, 2))
    assert_same(compile(fn, fullgraph=True)(*inputs), fn(*inputs))


def test_a_backend_that_traces_the_graph_again_gets_no_symbols():
    """torch's own aot_eager/inductor backends (given as callables) trace ember's graph again in a
    fake mode of their own, fixing symbolic ints and sizes to their example values with no guard:
    ember traces such frames with those values constant (a recompile per value, right answers)."""
    from torch._dynamo.backends.registry import lookup_backend

    backend = lookup_backend("aot_eager")
    scaled = compile(lambda x, k: x * k, backend=backend)
    x = torch.ones(3)
    for k in (2, 3, 4, 5):
        assert_same(scaled(x, k), x * k)
    dyn = compile(lambda x: x.sum(0) * x.shape[0], backend=backend, dynamic=True)
    for n in (2, 3, 4):
        a = torch.ones(n, 2)
        assert_same(dyn(a), a.sum(0) * n)
    floats = compile(lambda x, a: x * a + 1, backend=backend)
    for a in (0.5, 1.5, 2.5):
        assert_same(floats(x, a), x * a + 1)
