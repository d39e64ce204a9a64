"""``isinstance(v, typing.Sequence)`` (an unsubscripted typing alias) checks the alias's
collections.abc class, as eager: one graph, fullgraph=True holds (it broke, EB0036: the alias
was not a constant). A subscripted one (``typing.List[int]``) raises TypeError as in eager."""
from __future__ import annotations

import typing

import torch

from ember_test_helpers import check_raises_same, check_same


def _f(x, v):
    out = x
    if isinstance(v, typing.Sequence):
        out = out + 1
    if isinstance(v, (typing.Mapping, type(None))):
        out = out + 2
    if isinstance(v, typing.Iterable) and not isinstance(v, typing.Callable):
        out = out + 4
    return out


def test_sequence_mapping_iterable_aliases():
    for v in ([1], (1, 2), {"a": 1}, None, "s"):
        check_same(_f, torch.randn(3), v, graphs=1)


def test_subscripted_alias_raises_as_eager():
    def f(x, v):
        return x + isinstance(v, typing.List[int])
    check_raises_same(f, torch.randn(3), [1])
