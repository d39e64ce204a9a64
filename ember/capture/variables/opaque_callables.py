"""Callables ember cannot trace into (a C function, a builtin method of an outside object)."""
from __future__ import annotations

import sys

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
        owner = getattr(self, "owner_vt", None)
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


def handling_traced_exception(tx) -> bool:
    """An exception raised by the traced code (not the caller's) is being handled here."""
    t = tx
    while t is not None:
        if not t.exc_inherited and t.current_exception is not None:
            return True
        t = t.parent
    return False
