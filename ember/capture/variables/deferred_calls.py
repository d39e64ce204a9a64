"""Logging calls (``logger.warning(...)``), and what a forward compiled as a frame of its own records on
its real ctx, in a compiled frame: replayed after the graph, in program
order with the other side effects, instead of breaking it."""
from __future__ import annotations

import logging

import torch

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


# What forward records on its ctx: eager only notes it on the ctx, for apply to read after forward returns.
CTX_RECORDING_METHODS = {"save_for_backward", "mark_non_differentiable", "mark_dirty", "set_materialize_grads"}


def deferred_call(obj_vt, obj, name) -> VariableTracker | None:
    """The method ``name`` of an outside object, where it is a call replayed after the graph."""
    if obj_vt.source is None:
        return None
    if isinstance(obj, logging.Logger) and name in LOGGING_METHODS:
        return DeferredCallVariable(obj_vt, name)
    if name in CTX_RECORDING_METHODS and isinstance(obj, torch.autograd.function.FunctionCtx):
        return DeferredCtxCallVariable(obj_vt, name)
    return None


class DeferredCtxCallVariable(VariableTracker):
    """``ctx.save_for_backward(x)`` (and the other records) on the real ctx of an ``autograd.Function``
    whose forward is compiled as a frame of its own (its ``apply`` broke the caller's graph): replayed
    after the graph on what the graph computed, instead of breaking the forward's frame. (Eager's apply
    too reads them only after forward returns: a tensor saved, then changed in place in forward, is
    saved as changed.)"""

    def __init__(self, obj_vt, name):
        self.obj_vt = obj_vt
        self.name = name

    def describe(self):
        return f"ctx.{self.name}"

    def truth(self, tx):
        return True

    def call(self, tx, args, kwargs):
        from ember.capture.variables.tensor import TensorVariable
        if kwargs or any(not (isinstance(a, TensorVariable) or a.is_constant()) for a in args):
            raise unsupported("EB0046", f"{self.describe()} with arguments that are not tensors or constants")
        if self.name != "set_materialize_grads" and any(not isinstance(a, TensorVariable) for a in args) and not (
                self.name == "save_for_backward" and all(isinstance(a, TensorVariable) or a.as_constant() is None
                                                         for a in args)):
            raise unsupported("EB0046", f"{self.describe()} of a value that is not a tensor")
        tx.side_effects.defer_call(self.obj_vt, self.name, list(args), {})
        return ConstantVariable(None)
