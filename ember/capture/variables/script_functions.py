"""TorchScript functions (``torch.jit.script`` / ``torch.jit.trace`` of a Python function) in a
traced frame. TorchScript keeps the Python function it was made from as ``_torchdynamo_inline``: a
call traces that function (the same computation, so the call joins the graph); passed anywhere
else (returned, handed to an opaque call) the value stays the ScriptFunction itself.
ScriptModules are not covered here (their calls break the graph)."""
from __future__ import annotations

import inspect
import types

import torch

from ember.capture.builder import OpaqueCallableVariable


def python_original(value):
    """The Python function a TorchScript function (``torch.jit.script`` / ``trace`` of a function)
    was made from, or None."""
    if type(value) is not torch.jit.ScriptFunction:
        return None
    fn = inspect.getattr_static(value, "_torchdynamo_inline", None)
    return fn if isinstance(fn, types.FunctionType) else None


def wrap_script_function(guards, value, source):
    """The tracker of ScriptFunction ``value`` (pinned by identity), or None if it has no Python original."""
    inline = python_original(value)
    if inline is None:
        return None
    if source is not None:
        guards.id_match(source, value)
    return ScriptFunctionVariable(value, source, inline)


class ScriptFunctionVariable(OpaqueCallableVariable):
    """A TorchScript function (``torch.jit.script`` / ``trace`` of a Python function): a call traces
    the Python function it was made from; anywhere else it is the ScriptFunction object itself."""

    def __init__(self, value, source, inline):
        super().__init__(value, source, "calling a TorchScript function")
        self.inline = inline

    def describe(self):
        return f"TorchScript function {getattr(self.inline, '__qualname__', self.inline)}"

    def python_type(self):
        return type(self.value)

    def call(self, tx, args, kwargs):
        from ember.capture.variables.functions import UserFunctionVariable
        return UserFunctionVariable(self.inline).call(tx, args, kwargs)

    def reconstruct(self, plan) -> str:
        from ember.capture.sources import bind
        return bind(plan.scope, self.value, "script_fn")

