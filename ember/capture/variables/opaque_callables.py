"""Callables ember cannot trace into (a C function, a builtin method of an outside object)."""
from __future__ import annotations

import sys
import types

import torch

from ember.capture.variables.base import VariableTracker, unsupported


class OpaqueCallableVariable(VariableTracker):
    """A callable ember cannot trace into (a C function, a builtin method of an outside object).

    Reading it is fine; calling it is unsupported — at the call, so the frame can break there."""

    def __init__(self, value, source, reason):
        self.value = value
        self.source = source
        self.reason = reason

    def describe(self):
        return f"opaque callable {getattr(self.value, '__qualname__', self.value)!s}"

    def truth(self, tx):
        return True

    def call(self, tx, args, kwargs):
        from ember.capture.variables.container_methods import fold_scalar_type_method
        if any(self.value is f for f in _regex_functions()):  # (by identity: the value may be unhashable)
            folded = _fold_regex_call(self.value, args, kwargs)
            if folded is not None:
                return folded
        owner = getattr(self, "owner_vt", None)
        got = _tensor_descriptor_get(tx, self, owner, args, kwargs)
        if got is not None:
            return got
        scalar_type = isinstance(getattr(self.value, "__self__", None), type)  # (int.from_bytes: never changes)
        folded = None
        if scalar_type or owner is not None or self.source is not None:
            folded = fold_scalar_type_method(self.value, args, kwargs)
        if folded is not None:
            # the answer is the object's (a compiled regex): pinned by identity
            if owner is not None:
                from ember.capture.builder import pin_identity
                pin_identity(tx, owner)
            elif self.source is not None and not scalar_type:
                tx.guards.id_match(self.source, self.value)
            return folded
        e = unsupported("EB0033", self.reason)
        if self.value in _EXCEPTION_READERS and handling_traced_exception(tx):
            # sys.exc_info() inside an except block of an exception the trace raised: eager's has a
            # traceback through this frame, which no break can hand over: the frame runs eagerly
            e.whole_frame = True
        raise e


_EXCEPTION_READERS = (sys.exc_info, getattr(sys, "exception", sys.exc_info))


def _regex_functions() -> tuple:
    """``re``'s functions whose answer depends only on their arguments (a pattern, a string,
    flags): called now when all of them are constants (``unittest``'s ``assertRaisesRegex``
    compiles its pattern this way). Not traced: their code reads ``re``'s pattern cache."""
    import re
    return (re.compile, re.match, re.search, re.fullmatch, re.split, re.findall, re.sub, re.subn, re.escape)


def _regex_operand(v) -> bool:
    import re
    return type(v) in (str, bytes, int, bool, type(None), re.Pattern, re.RegexFlag)


def _fold_regex_call(fn, args, kwargs):
    """``re.compile("a+")``, ``re.sub("a", "b", s)``... on constants: the eager call's result (a
    compiled pattern is immutable: its methods on constants fold too, see constant_methods.py).
    None when an argument is not a constant (a callable replacement, a tensor's text...)."""
    import re
    if not all(a.is_constant() for a in [*args, *kwargs.values()]):
        return None
    values = [a.as_constant() for a in args]
    kw = {k: v.as_constant() for k, v in kwargs.items()}
    if not all(_regex_operand(v) for v in [*values, *kw.values()]):
        return None
    from ember.capture.variables.builtins import wrap_constant
    from ember.exc import PythonException
    try:
        result = fn(*values, **kw)
    except Exception as e:  # noqa: BLE001 - eager raises this very exception (re.error, TypeError)
        raise PythonException(e) from None
    if not (_regex_operand(result) or isinstance(result, re.Match) or
            type(result) in (list, tuple) and all(_regex_operand(v) or type(v) is tuple for v in result)):
        return None
    return wrap_constant(result)


def handling_traced_exception(tx) -> bool:
    """An exception raised by the traced code (not the caller's) is being handled here."""
    t = tx
    while t is not None:
        if not t.exc_inherited and t.current_exception is not None:
            return True
        t = t.parent
    return False


def _tensor_descriptor_get(tx, vt, owner, args, kwargs):
    """``torch.Tensor.shape.__get__(t)`` (a tensor attribute's descriptor, called as the attribute
    lookup calls it): ``t.shape``, for a tensor ``t`` of the descriptor's class; else None."""
    desc = getattr(vt.value, "__self__", None)
    if getattr(vt.value, "__name__", None) != "__get__" or kwargs or not 1 <= len(args) <= 2 \
            or type(desc) not in (types.GetSetDescriptorType, types.MemberDescriptorType):
        return None
    cls = getattr(desc, "__objclass__", None)
    if not (isinstance(cls, type) and issubclass(cls, torch._C.TensorBase)) \
            or type(args[0]).__name__ != "TensorVariable":
        return None
    # (the descriptor is the one the trace saw: an input `__get__` by identity; one read off a
    # descriptor, guarded as that descriptor was when it was read, by identity as torch's callables)
    if owner is not None:
        from ember.capture.builder import pin_identity
        pin_identity(tx, owner)
    elif vt.source is not None:
        tx.guards.id_match(vt.source, vt.value)
    return args[0].getattr(tx, desc.__name__)
