"""Instances of dict subclasses from outside the frame: iterating them (their keys, read and guarded),
values/items/len/[]/get, and a recompile when the program changes them between calls."""
import collections

import pytest
import torch

from ember_test_helpers import REFERENCE, compile, stats

pytestmark = pytest.mark.skipif(REFERENCE, reason="ember's own counters (ember.stats())")


class SimpleDict(dict):
    pass


class Ordered(collections.OrderedDict):
    pass


def walk(x, sd):
    for value in sd.values():
        x = x * value
    for key in sd:
        x = x * key
    for k, v in sd.items():
        x = x + k * v
    return x * len(sd) * sd[2] + sd.get(4, 0), list(sd)


@pytest.mark.parametrize("cls", [SimpleDict, Ordered])
def test_dict_subclass_input_iterated(cls):
    sd = cls()
    sd[2] = 5
    sd[4] = 10
    fn = compile(walk)
    for change in (None, lambda: sd.__setitem__(6, 1), lambda: sd.__setitem__(2, 7), lambda: sd.pop(4),
                   lambda: sd.move_to_end(2) if cls is Ordered else None):
        if change is not None:
            change()
        expected = walk(torch.ones(1), sd)
        got = fn(torch.ones(1), sd)
        torch.testing.assert_close(got[0], expected[0])
        assert got[1] == expected[1]
    assert stats()["graph_breaks"] == 0 and stats()["fallbacks"] == 0
