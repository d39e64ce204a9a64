"""``obj is None`` (and other singletons) does not guard ``obj`` by identity: its type, guarded
already, decides the answer. An identity guard there recompiled for every new object (a new
HuggingFace ``DynamicCache`` per ``generate()`` call: the recompile limit, then eager) and kept
every such object alive."""
import gc
import weakref

import torch

import ember
from ember_test_helpers import assert_same, stats


class Cache:
    def __init__(self):
        self.kv = torch.zeros(2)
        self.extra = None


def f(x, cache):
    if cache is Ellipsis:
        return x * 3
    if cache is None or cache.extra is not None:
        return x
    return x + cache.kv


def test_is_none_does_not_pin_the_object():
    compiled = ember.compile(f, backend="aot_eager")
    refs = []
    for _ in range(5):
        cache = Cache()
        refs.append(weakref.ref(cache))
        x = torch.randn(2)
        assert_same(compiled(x, cache), f(x, cache))
        del cache
    assert stats()["recompiles"] == 0
    gc.collect()
    assert all(r() is None for r in refs)  # no guard holds the old caches


def test_is_none_answer_still_follows_the_type():
    compiled = ember.compile(f, backend="aot_eager")
    x = torch.randn(2)
    assert_same(compiled(x, Cache()), f(x, Cache()))
    assert_same(compiled(x, None), x)
    assert_same(compiled(x, ...), x * 3)
    obj = Cache()
    obj.extra = 1
    assert_same(compiled(x, obj), x)
