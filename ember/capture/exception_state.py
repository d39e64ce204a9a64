"""The exception a traced frame is handling (``sys.exc_info()``), mixed into the Translator: what
a raise in the trace chains to, and the guards that pin what was current when the frame was called."""
from __future__ import annotations

import sys

from ember.capture.variables.base import unsupported
from ember.exc import PythonException


class ExceptionStateMixin:
    def current_exception_now(self):
        """The exception being handled here (``sys.exc_info()[1]``). When the trace has not changed
        it, it is whatever was current when the frame was called — None is guarded; another one
        (the frame runs inside a caller's ``except`` block, or is a resume function that starts in
        one) cannot be traced, as eager chains a new exception to it on every call."""
        if not self.exc_inherited:
            return self.current_exception
        if self.exc_at_entry is not None and self.exc_at_entry_is_ours:
            # A resume function that starts in an except block: the residual made the handled
            # exception current, the same object on every call (a constant of the traced frame).
            self.guards.global_state("exception_handled", _handled_exception, self.exc_at_entry,
                                     "the exception being handled when called")
            return self.exc_at_entry
        if self.exc_at_entry is not None:
            # Only calls made while an exception is being handled run eagerly (guarded so).
            self.guards.global_state("exception_handled", _handling_no_exception, False,
                                     "no exception being handled when called")
            failure = unsupported("EB0011", "exception raised or re-raised inside an except block entered before the trace")
            failure.per_call = True
            raise failure
        self.guards.global_state("no_exception_handled", _handling_no_exception, True,
                                 "no exception being handled when called")
        return None

    def chain_exception(self, e: PythonException) -> None:
        """Set ``__context__`` of an exception raised in the trace, as raising it in eager would."""
        if getattr(e, "chained", False):
            return
        e.chained = True
        current = self.current_exception_now()
        exc = e.exc
        if not isinstance(current, BaseException) or current is exc:
            return
        # As CPython does: break a cycle through the new exception's context chain.
        o = current
        while o is not None:
            if o.__context__ is exc:
                o.__context__ = None
                break
            o = o.__context__
        exc.__context__ = current


def _handling_no_exception() -> bool:
    return sys.exc_info()[1] is None


def _handled_exception():
    return sys.exc_info()[1]
