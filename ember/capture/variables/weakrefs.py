"""Weak references read from outside the frame.

``ref()`` answers the referent now and guards it through the source
``call_weakref(ref)``: the referent is wrapped like any other value read from
there (a tensor becomes a graph input — the same one, with an identity guard,
as when the frame reaches it by another path; a dead reference is the constant
``None``, guarded so). This is what ``nn.RNNBase._weights_have_changed`` does on
every forward (``ref() is not weight``).
"""
from __future__ import annotations

import weakref

from ember.capture.variables.base import unsupported
from ember.capture.variables.objects import UserObjectVariable


def call_weakref(ref):
    """``ref()``: the referent or None (a guard source re-reads the referent this way)."""
    return ref()


def is_plain_weakref(value) -> bool:
    """A ``weakref.ref`` (or a subclass such as ``KeyedRef``) whose call is ref's own."""
    return isinstance(value, weakref.ref) and type(value).__call__ is weakref.ref.__call__


class WeakRefVariable(UserObjectVariable):
    """A ``weakref.ref`` from outside the frame: calling it reads the referent through its source."""

    def describe(self):
        return f"{type(self.obj).__name__} object"

    def call(self, tx, args, kwargs):
        from ember.capture.builder import wrap
        from ember.capture.sources import CallSource
        if args or kwargs:
            raise unsupported("EB0033", "calling a weakref with arguments")
        if self.source is None:
            raise unsupported("EB0033", "calling a weakref that was not read from outside the frame")
        return wrap(tx, self.obj(), CallSource(call_weakref, self.source, ()))
