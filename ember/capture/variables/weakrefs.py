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

from ember.capture.variables.base import VariableTracker, unsupported
from ember.capture.variables.objects import UserObjectVariable


def call_weakref(ref):
    """``ref()``: the referent or None (a guard source re-reads the referent this way)."""
    return ref()


def is_plain_weakref(value) -> bool:
    """A ``weakref.ref`` (or a subclass such as ``KeyedRef``) whose call is ref's own."""
    return isinstance(value, weakref.ref) and type(value).__call__ is weakref.ref.__call__


def weakref_hash_key(referent) -> tuple:
    """The key of a weak reference to ``referent`` (a module or an object hashed by identity) in a
    dict or set: ``ref(obj)`` hashes and compares as ``obj`` does, so two references to one object
    are one key."""
    return ("__weakref__", id(referent))


class WeakRefVariable(UserObjectVariable):
    """A ``weakref.ref`` from outside the frame: calling it reads the referent through its source."""

    def hash_key(self):
        from ember.capture.builder import _weak_identity_key
        if self.source is None and _weak_identity_key(self.obj):
            # a key of a dict read from outside (a WeakKeyDictionary's data): that dict's key guard
            # pins it (see builder's dict wrapping); one read from elsewhere is refused as before
            return weakref_hash_key(self.obj())
        return super().hash_key()

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


class NewWeakRefVariable(VariableTracker):
    """``weakref.ref(obj)`` made in the frame, of an object from outside it (an argument, a global:
    the caller keeps it alive while the frame runs), so calling it gives ``obj`` back. If it escapes
    the frame, a new reference to the same object is made after the graph."""

    def __init__(self, referent):
        self.referent = referent
        self.source = None

    def python_type(self):
        return weakref.ref

    def describe(self):
        return f"weakref to {self.referent.describe()}"

    def truth(self, tx):
        return True

    def getattr(self, tx, name):
        raise unsupported("EB0031", f"attribute {name!r} of a weakref made in the frame")

    def call(self, tx, args, kwargs):
        if args or kwargs:
            from ember.exc import PythonException
            raise PythonException(TypeError(f"weakref() takes no arguments ({len(args) + len(kwargs)} given)"))
        return self.referent

    def hash_key(self):
        from ember.capture.variables.objects import NNModuleVariable
        if type(self.referent) in (NNModuleVariable, UserObjectVariable):
            self.referent.hash_key()  # (refuses an object with its own __eq__/__hash__; pins identity)
            real = self.referent.module if isinstance(self.referent, NNModuleVariable) else self.referent.obj
            return weakref_hash_key(real)
        raise unsupported("EB0035", "a weakref made in the frame as a dict key or set element")

    def reconstruct(self, plan) -> str:
        from ember.capture.sources import bind
        return f"{bind(plan.scope, weakref.ref, 'weakref_ref')}({plan.expr(self.referent)})"


def construct_weakref(tx, args, kwargs):
    """``weakref.ref(obj)`` with no callback: a `NewWeakRefVariable` when ``obj`` comes from outside
    the frame (one made in it may die as soon as the frame drops it); None otherwise."""
    if len(args) != 1 or kwargs or getattr(args[0], "source", None) is None:
        return None
    from ember.capture.variables.objects import NNModuleVariable
    from ember.capture.variables.tensor import TensorVariable
    if type(args[0]) not in (TensorVariable, NNModuleVariable, UserObjectVariable):
        # (a container, such as a module's hook dict behind a RemovableHandle: writes through the
        # reference would bypass what tracks that container's owner)
        return None
    return NewWeakRefVariable(args[0])
