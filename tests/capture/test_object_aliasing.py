"""One mutable object reached through two names (two arguments, or a stack item and a local at a
graph break) is one object in the trace: a write through one name is seen through the other."""
import collections

import pytest
import torch

import ember


class Obj:
    def __init__(self):
        self.v = 0


def write_list_read_other(x, a, b):
    a.append(1)
    return x + len(b)


def write_dict_read_other(x, a, b):
    a["k"] = 1
    return x + len(b), dict(b)


def write_attr_read_other(x, a, b):
    a.v = 5
    return x + b.v


MAKERS = {"list": (write_list_read_other, list), "dict": (write_dict_read_other, dict),
          "counter": (write_dict_read_other, collections.Counter),
          "ordered": (write_dict_read_other, collections.OrderedDict),
          "defaultdict": (write_dict_read_other, lambda: collections.defaultdict(int)),
          "object": (write_attr_read_other, Obj)}


@pytest.mark.parametrize("kind", list(MAKERS))
def test_two_arguments_same_object_then_distinct(kind):
    fn, make = MAKERS[kind]
    ember.reset()
    compiled = ember.compile(fn)
    for same in (False, True, True, False):
        outs = []
        for f in (fn, compiled):
            a = make()
            b = a if same else make()
            state = vars(a) if kind == "object" else (list(a) if kind == "list" else dict(a))
            outs.append((f(torch.zeros(1), a, b), state))
        torch.testing.assert_close(outs[1], outs[0])
    assert ember.stats()["recompiles"] <= 1


@pytest.mark.parametrize("make", [collections.Counter, collections.OrderedDict, Obj], ids=lambda m: m.__name__)
def test_object_live_across_a_graph_break_keeps_identity(make):
    def f(x):
        d = make()
        z = [d, int(x.sum() > 0), d]  # int(tensor): a break while d is on the stack and in z
        if isinstance(d, Obj):
            z[0].v = 1
            return d.v, d is z[0], z[0] is z[2]
        z[0]["pos"] = 1
        return dict(d), d is z[0], z[0] is z[2]
    ember.reset()
    assert ember.compile(f)(torch.ones(2)) == f(torch.ones(2))
    assert ember.stats()["graph_breaks"] == 1


def test_counter_augmented_assignment_across_a_break():
    def f(x):
        stats = collections.Counter()
        stats["pos"] += int(x.sum() > 0)
        return dict(stats)
    ember.reset()
    assert ember.compile(f)(torch.ones(2)) == f(torch.ones(2)) == {"pos": 1}


def test_deque_live_across_a_graph_break_keeps_identity():
    def f(x):
        q = collections.deque()
        pair = (q, int(x.sum() > 0))
        pair[0].append(1)
        return list(q), len(pair[0]), q is pair[0]
    ember.reset()
    assert ember.compile(f)(torch.ones(2)) == f(torch.ones(2)) == ([1], 1, True)


def test_dict_of_a_chainmap():
    def f(x, d1, d2):
        cm = collections.ChainMap(d1, d2)
        cm["c"] = 9
        return x * cm["a"], dict(cm)
    ember.reset()
    got = ember.compile(f)(torch.ones(1), {"a": 1}, {"b": 2})
    expected = f(torch.ones(1), {"a": 1}, {"b": 2})
    torch.testing.assert_close(got[0], expected[0])
    assert got[1] == expected[1] and list(got[1]) == list(expected[1])
    assert ember.stats()["fallbacks"] == 0


def test_property_making_a_new_list_per_read():
    """Two reads of one source that give two new objects (a config property, read through a custom
    __getattribute__ as transformers' configs do) are not guarded as distinct from each other."""
    class Cfg:
        n = 2

        def __getattribute__(self, key):
            return super().__getattribute__(key)

        @property
        def kinds(self):
            return ["a" if i == 0 else "b" for i in range(self.n)]

    def f(x, cfg):
        k1 = cfg.kinds
        k2 = cfg.kinds
        k1.append("c")
        return x * len(k1) + len(k2), k1 is k2

    cfg = Cfg()
    x = torch.randn(3)
    ember.reset()
    out, same = ember.compile(f)(x, cfg)
    ref, ref_same = f(x, cfg)
    torch.testing.assert_close(out, ref)
    assert same is ref_same is False
    assert ember.stats()["fallbacks"] == 0


# -- a class attribute read through an instance made in the frame is the class's own object --------
# (it was wrapped as a fresh value: `self.items.append(v)` went nowhere and `Cls.items` did not see it)

class Registry:
    items = []
    counts = {}

    def add(self, v):
        self.items.append(v)
        self.counts[len(self.items)] = v


def append_through_new_instance(x):
    r = Registry()
    r.add(x)
    r.items.append(x * 2)
    return x * len(Registry.items), Registry.items[-1], sorted(Registry.counts)


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_class_attribute_mutated_through_new_instance(backend):
    from ember_test_helpers import assert_same
    Registry.items, Registry.counts = [], {}
    expected = [append_through_new_instance(torch.ones(2)) for _ in range(2)]
    eager_items, eager_counts = list(Registry.items), dict(Registry.counts)
    Registry.items, Registry.counts = [], {}
    compiled = ember.compile(append_through_new_instance, backend=backend)
    got = [compiled(torch.ones(2)) for _ in range(2)]
    assert_same(got, expected)
    assert_same(Registry.items, eager_items)
    assert_same(Registry.counts, eager_counts)
    assert ember.stats()["fallbacks"] == 0
