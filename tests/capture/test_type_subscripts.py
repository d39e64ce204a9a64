"""Type subscripts in traced code — the annotations of a nested ``def`` (no ``from __future__ import
annotations``: torch.utils._pytree's helpers inside vmap), ``isinstance`` against ``list[int]``'s
origin: ``Callable[[T], bool]``, ``list[int]``, ``Optional[...]`` are made at trace time from
constants, as eager makes them (ember broke at ``__getitem__ of class Callable``, EB0038)."""
import collections.abc
import typing

import pytest
import torch

from ember_test_helpers import REFERENCE, check_raises_same, check_same


def nested_def_with_annotations(x):
    def scale(t: torch.Tensor, pred: collections.abc.Callable[[typing.Any], bool] | None = None,
              k: dict[str, list[int]] = None) -> typing.Optional[torch.Tensor]:
        return t * 2
    return scale(x) + 1, scale.__annotations__["k"] == dict[str, list[int]]


def typing_forms(x):
    a = typing.Optional[int]
    b = typing.Union[int, str]
    c = tuple[int, ...]
    return x + 1, a == typing.Optional[int], b == typing.Union[str, int], c.__origin__ is tuple


@pytest.mark.parametrize("fn", [nested_def_with_annotations, typing_forms])
def test_type_subscripts_one_graph(fn):
    check_same(fn, torch.randn(3), graphs=1)  # torch.compile: 1 graph each


def bad_subscript(x):
    y = x + 1
    return y, typing.Optional[int, str]  # TypeError: Optional[t] requires a single type


@pytest.mark.skipif(REFERENCE, reason="torch.compile 2.13 raises InternalTorchDynamoError, not eager's TypeError")
def test_bad_subscript_raises_like_eager():
    check_raises_same(bad_subscript, torch.randn(2))


class Box:
    def __class_getitem__(cls, item):
        Box.seen.append(item)
        return cls
    seen = []


def user_class_getitem(x):
    return x + 1, Box[int] is Box


def test_python_class_getitem_still_runs_the_programs_code():
    Box.seen.clear()
    check_same(user_class_getitem, torch.randn(2), graphs=None, fullgraph=False, check_cache=False)
    assert Box.seen == [int, int]  # once eagerly, once compiled
