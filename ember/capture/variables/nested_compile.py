"""``torch.compile(fn)`` / ``ember.compile(fn)`` called inside a frame ember is tracing.

torch.compile ignores a compile nested in a compiled frame: the wrapped function is traced inline,
into the outer frame's graph, with the outer frame's backend (code that compiles a kernel lazily in
its forward, ``torch.compile(flex_attention)(q, k, v)``, is one graph). ember does the same: the call
returns the function (or module) itself, and calling that traces it. The decorator-factory form
``torch.compile(backend=...)(fn)`` returns ``fn`` too. Compiling something else (a class, a value
the trace cannot call) is left to the ordinary call, as before.
"""
from __future__ import annotations

import torch

from ember.capture.variables.base import VariableTracker, unsupported


def compile_entry_points() -> tuple:
    import ember
    return (torch.compile, ember.compile)


class NestedCompileVariable(VariableTracker):
    """``torch.compile`` / ``ember.compile`` themselves, read inside a traced frame."""

    def __init__(self, value, source=None):
        self.value = value
        self.source = source

    def describe(self):
        return f"{getattr(self.value, '__module__', '?')}.compile"

    def truth(self, tx):
        return True

    def call(self, tx, args, kwargs):
        if len(args) > 1:
            raise unsupported("EB0033", f"{self.describe()} with {len(args)} positional arguments")
        target = args[0] if args else kwargs.get("model")
        if target is None:
            return _CompileDecorator(self)  # torch.compile(backend=...): applied to the function next
        return target


class _CompileDecorator(VariableTracker):
    """What ``torch.compile(backend=...)`` returns: applied to a function, the function itself."""

    def __init__(self, entry: NestedCompileVariable):
        self.entry = entry

    def describe(self):
        return f"{self.entry.describe()}(...) decorator"

    def truth(self, tx):
        return True

    def call(self, tx, args, kwargs):
        if len(args) != 1 or kwargs:
            raise unsupported("EB0033", f"calling {self.describe()} with {len(args)} arguments")
        return args[0]
