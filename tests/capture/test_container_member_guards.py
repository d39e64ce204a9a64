"""Objects reached as a set's items or a dict's keys (no source of their own): what the frame reads
from them is guarded through the objects themselves. `for o in S: x * o.scale` answered with the
first call's `scale` after it changed (wrong answer), and so did a dict keyed by objects. Two
modules as keys made two graph inputs that spell the same (`weight`): the forward had a duplicate
argument, a SyntaxError, and the frame ran eagerly."""
import pytest
import torch

from ember_test_helpers import REFERENCE, CompileCounter, compile, stats

pytestmark = pytest.mark.skipif(REFERENCE, reason="ember's own counters (ember.stats())")


class _Obj:
    def __init__(self, s):
        self.s = s


def test_attribute_of_set_item_is_guarded():
    o = _Obj(2)
    items = {o}

    def f(x):
        for e in items:
            x = x * e.s
        return x

    cf = compile(f)
    x = torch.ones(2)
    torch.testing.assert_close(cf(x), x * 2)
    o.s = 5
    torch.testing.assert_close(cf(x), x * 5)


def test_attribute_of_frozenset_item_is_guarded():
    o = _Obj(4)
    items = frozenset([o])

    def f(x):
        return x * sum(e.s for e in items)

    cf = compile(f)
    x = torch.ones(2)
    torch.testing.assert_close(cf(x), x * 4)
    o.s = 9
    torch.testing.assert_close(cf(x), x * 9)


def test_hasattr_of_set_item_is_guarded():
    o = _Obj(1)
    items = {o}

    def f(x):
        return x * (1 if hasattr(next(iter(items)), "flag") else 2)

    cf = compile(f)
    x = torch.ones(2)
    torch.testing.assert_close(cf(x), x * 2)
    o.flag = True
    torch.testing.assert_close(cf(x), x)


def test_attribute_of_dict_key_is_guarded():
    k = _Obj(3)
    table = {k: 1}

    def f(x):
        for key, v in table.items():
            x = x * key.s + v
        return x

    cf = compile(f)
    x = torch.ones(2)
    torch.testing.assert_close(cf(x), x * 3 + 1)
    k.s = 7
    torch.testing.assert_close(cf(x), x * 7 + 1)


def _two_linears():
    torch.manual_seed(0)
    return torch.nn.Linear(2, 2), torch.nn.Linear(2, 2)


def test_modules_as_dict_keys_compile_and_stay_guarded():
    l1, l2 = _two_linears()
    scales = {l1: 1.0, l2: 2.0}

    def f(x):
        for m, s in scales.items():
            x = m(x) * s
        return x

    cnt = CompileCounter()
    cf = compile(f, backend=cnt)
    x = torch.randn(3, 2)
    torch.testing.assert_close(cf(x), f(x))
    assert cnt.frame_count == 1 and stats()["fallbacks"] == 0
    with torch.no_grad():
        l1.weight.add_(1)
    torch.testing.assert_close(cf(x), f(x))
    l1.weight = torch.nn.Parameter(torch.zeros(2, 2))
    torch.testing.assert_close(cf(x), f(x))
    xr = x.clone().requires_grad_(True)
    cf(xr).sum().backward()
    assert l1.weight.grad is not None and l2.weight.grad is not None


def test_modules_as_set_items_compile():
    l1, l2 = _two_linears()
    mods = {l1, l2}

    def f(x):
        return x + sum(m.weight.sum() for m in mods)

    cnt = CompileCounter()
    cf = compile(f, backend=cnt)
    x = torch.randn(2)
    torch.testing.assert_close(cf(x), f(x))
    assert cnt.frame_count == 1 and stats()["fallbacks"] == 0
    with torch.no_grad():
        l2.weight.mul_(3)
    torch.testing.assert_close(cf(x), f(x))
