"""``super().name`` where ``name`` is a descriptor ember does not model (capture/variables/super_.py).

``super().w`` for a ``__slots__`` slot of a base is the slot's value, not its member_descriptor; a
user descriptor's ``__get__`` runs; ``super().__class__`` is ``super`` itself. The trace read each
off the base class raw: ``x * super().w`` raised a TypeError eager does not raise, and
``super(C, self).__class__`` made a graph that failed its own guards."""
import functools

import torch

import ember
from ember_test_helpers import REFERENCE, check_same


class _Scaled:
    def __get__(self, obj, typ=None):
        return 3.0 if obj is None else obj.k * 2.0


class _Base:
    __slots__ = ("w",)
    scaled = _Scaled()

    @functools.cached_property
    def cached(self):
        return 7.0


class _Child(_Base):
    __slots__ = ("k", "__dict__")

    def __init__(self):
        self.w = 1.5
        self.k = 4.0


def test_super_slot_value():
    obj = _Child()

    def f(x):
        return x * super(_Child, obj).w

    check_same(f, torch.randn(3), graphs=None, fullgraph=False)


def test_super_user_descriptor_and_cached_property():
    obj = _Child()

    def f(x):
        sup = super(_Child, obj)
        return x + sup.scaled + sup.cached

    check_same(f, torch.randn(3), graphs=None, fullgraph=False)


class _Norm(torch.nn.Module):
    def forward(self, x):
        return x / (x.norm() + 1)


class _Block(_Norm):
    def forward(self, x):
        return super().forward(x) + len(super(_Norm, self).__class__.__name__) + len(type(super()).__name__)


def test_super_class_attribute_is_super():
    m = _Block()
    # (Dynamo 2.13 breaks at `super(...).__class__.__name__`: no python_type for it)
    check_same(lambda x: m(x), torch.randn(3), graphs=None if REFERENCE else 1, fullgraph=not REFERENCE)


def test_super_descriptor_is_a_break_with_reason():
    if REFERENCE:
        return  # ember's break reason
    obj = _Child()

    def f(x):
        return x * super(_Child, obj).w

    explanation = ember.explain(f)(torch.randn(3))
    assert any("member_descriptor" in str(r) for r in explanation.break_reasons)
