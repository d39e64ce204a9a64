"""Logging calls (``logger.warning(...)``) in a compiled frame: replayed after the graph, in program
order with the other side effects, instead of breaking it."""
from __future__ import annotations

from ember.capture.variables.base import ConstantVariable, VariableTracker, unsupported


LOGGING_METHODS = {"debug", "info", "warning", "warn", "error", "exception", "critical", "log",
                   "warning_once", "info_once", "warning_advice"}


class DeferredCallVariable(VariableTracker):
    """``logger.warning(...)`` and friends: a side effect with no bearing on the graph, so it is
    replayed after the graph (in program order with the other side effects) instead of breaking."""

    def __init__(self, obj_vt, name):
        self.obj_vt = obj_vt
        self.name = name

    def describe(self):
        return f"deferred {type(self.obj_vt.obj).__name__}.{self.name}"

    def truth(self, tx):
        return True

    def call(self, tx, args, kwargs):
        from ember.capture.builder import handling_traced_exception
        shows_stack = kwargs.get("stack_info")
        if shows_stack is not None and not (shows_stack.is_constant() and not shows_stack.as_constant()):
            e = unsupported("EB0026", f"{self.describe()} with stack_info (the stack is the frame's own)")
            e.whole_frame = True
            raise e
        exc_info = kwargs.get("exc_info")
        wants_exception = self.name == "exception" or (
            exc_info is not None and not (exc_info.is_constant() and not exc_info.as_constant()))
        if wants_exception and handling_traced_exception(tx):
            # the record shows the exception's traceback through this frame: logged after the
            # graph it would show none, and no break can hand it over, so the frame runs eagerly
            e = unsupported("EB0011", f"{self.describe()} of an exception raised in the compiled frame")
            e.whole_frame = True
            raise e
        tx.side_effects.defer_call(self.obj_vt, self.name, list(args), dict(kwargs))
        return ConstantVariable(None)
