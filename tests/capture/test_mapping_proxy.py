"""``types.MappingProxyType`` in traced code, compared with eager (variables/mapping_proxy.py):
a proxy is not a dict (isinstance, type), shows its dict as it is when read (writes through any
name), refuses writes with eager's TypeError, and is guarded on the dict it wraps."""
import types

import pytest
import torch

from ember_test_helpers import CompileCounter, assert_same, check_raises_same, check_same, compile


def test_input_proxy_is_not_a_dict_and_recompiles_on_change():
    d = {"a": 2, "b": 3, "c": 5}

    def fn(x, mp):
        y = torch.sin(x * mp["a"])
        for v in mp.values():
            y = y + torch.cos(x * v)
        if isinstance(mp, types.MappingProxyType):
            y = y * 2
        if isinstance(mp, dict):
            y = y * 100
        return y, type(mp) is types.MappingProxyType, len(mp), "b" in mp, mp.get("z", 7)

    counter = CompileCounter()
    opt = compile(fn, backend=counter, fullgraph=True)
    mp = types.MappingProxyType(d)
    x = torch.randn(4)
    assert_same(opt(x, mp), fn(x, mp))
    d["a"] = 3  # the proxy shows the change: a new value is a new graph, not the old answer
    assert_same(opt(x, mp), fn(x, mp))
    d.pop("b")
    assert_same(opt(x, mp), fn(x, mp))
    assert counter.frame_count == 3


def make_and_return(x):
    d = {"a": x + 1, "b": 2}
    mp = types.MappingProxyType(d)
    d["c"] = x * 3  # written after the proxy was made: seen through it
    return mp, dict(mp), list(mp.items()), mp.copy(), isinstance(mp, types.MappingProxyType)


def test_proxy_made_in_frame_is_live_and_returned():
    x = torch.randn(3)
    expected = make_and_return(x)
    actual = compile(make_and_return, backend="eager", fullgraph=True)(x)
    assert type(actual[0]) is types.MappingProxyType
    assert_same(dict(actual[0]), dict(expected[0]))
    assert_same(actual[1:], expected[1:])


GLOBAL_D = {"a": 2, "b": 3}
GLOBAL_MP = types.MappingProxyType(GLOBAL_D)


def write_global_then_read_proxy(x):
    GLOBAL_D["d"] = 4
    return torch.sin(x * GLOBAL_MP["d"]), sorted(GLOBAL_MP)


def test_write_to_dict_seen_through_existing_proxy():
    x = torch.randn(4)
    expected = write_global_then_read_proxy(x)
    del GLOBAL_D["d"]
    actual = compile(write_global_then_read_proxy, backend="eager")(x)
    assert_same(actual, expected)
    assert GLOBAL_D == {"a": 2, "b": 3, "d": 4}
    del GLOBAL_D["d"]


def test_proxy_and_its_dict_both_arguments():
    def fn(x, d, mp):
        d["new"] = 5
        return x * mp["new"], len(mp), mp == d

    x = torch.randn(2)
    d1 = {"a": 1}
    expected = fn(x, d1, types.MappingProxyType(d1))
    d2 = {"a": 1}
    actual = compile(fn, backend="eager", fullgraph=True)(x, d2, types.MappingProxyType(d2))
    assert_same(actual, expected)
    assert d2 == d1


def setitem_on_proxy(x):
    mp = types.MappingProxyType({"a": 1})
    mp["a"] = 2
    return x


def delitem_on_proxy(x):
    mp = types.MappingProxyType({"a": 1})
    del mp["a"]
    return x


def ior_on_proxy(x):
    mp = types.MappingProxyType({"a": 1})
    mp |= {"b": 2}
    return x


def pop_on_proxy(x):
    return types.MappingProxyType({"a": 1}).pop("a")


def proxy_of_list(x):
    return types.MappingProxyType([1, 2])


@pytest.mark.parametrize("fn", [setitem_on_proxy, delitem_on_proxy, ior_on_proxy, pop_on_proxy, proxy_of_list])
def test_proxy_errors_as_eager(fn):
    check_raises_same(fn, torch.randn(2))


def proxy_operators(x):
    d = {"a": 1, "b": 2}
    mp = types.MappingProxyType(d)
    other = {"b": 3, "c": x + 1}
    merged = mp | other
    rmerged = other | mp
    acc = dict(other)
    acc |= mp
    upd = {}
    upd.update(mp)
    return (merged, rmerged, acc, upd, mp == {"a": 1, "b": 2}, mp != d, {"a": 1, "b": 2} == mp,
            type(merged) is dict, list(mp.keys()), list(reversed(mp)))


def test_proxy_operators_and_dict_methods():
    check_same(proxy_operators, torch.randn(2))


def view_mapping(x):
    d = {}
    m = d.keys().mapping
    d["foo"] = x + 1
    return isinstance(m, types.MappingProxyType), dict(m), m["foo"] * 2


def test_dict_view_mapping_is_a_live_proxy():
    check_same(view_mapping, torch.randn(2))
