"""One mutable object reached from two sources is one tracker; a **kwargs dict read again
through a callee (its tracker has no source: the frame owns it) must not break the guards."""
import torch

from ember_test_helpers import assert_same, compile


def test_kwargs_dict_passed_on_and_list_args():
    def inner(x, **kw):
        return x * len(kw)

    def f(x, lst, **kwargs):
        lst.append(1)
        return inner(x, **kwargs), super_len(lst, kwargs)

    def super_len(a, b):
        return len(a) + len(b)

    x = torch.randn(3)
    l1, l2 = [], []
    expected = f(x, l1, a=1, b=2)
    got = compile(f)(x, l2, a=1, b=2)
    assert_same(got, expected)
    assert l1 == l2


TABLE = {"scale": 3}


def test_kwargs_then_another_dict_from_outside():
    def f(x, **kwargs):
        return x * TABLE["scale"] + len(kwargs)

    x = torch.randn(3)
    assert_same(compile(f)(x, a=1), f(x, a=1))


def test_same_list_twice_then_distinct():
    def f(x, a, b):
        a.append(x.sum())
        return x + len(b)

    cf = compile(f)
    x = torch.randn(3)
    shared = []
    assert_same(cf(x, shared, shared), f(x, [], []) + 1)
    a, b = [], []
    assert_same(cf(x, a, b), f(x, [], []))
    assert len(a) == 1 and b == []
