"""torch.compile's tracing settings used by the program, as ember's own settings.

``torch._dynamo.disable_nested_graph_breaks`` and ``torch._dynamo.error_on_graph_break(b)`` (and
``patch_dynamo_config(nested_graph_breaks=...)``), as decorators, steer how torch.compile traces the
function they wrap; ember's equivalents are ``ember.config.nested_graph_breaks`` and
``ember.config.error_on_graph_break``. Where the trace calls such a function the settings hold
while it traces it (`SettingRegionVariable`): a graph break inside takes them (`mark`), so that

- with nesting off the break is a plain one at the frame's own instruction (no nested break
  through any frame), as torch's check at the breaking frame makes it;
- with ``error_on_graph_break`` the break is an ``ember.Unsupported`` error to the caller, as with
  ``fullgraph=True`` (a program's own exception still propagates as in eager).

Where such a function runs at a break (the residual calls it), ember compiles the function it wraps
and runs it with the settings patched into ``ember.config`` (`RunWithSettings`), so the frames
compiled while it runs honour them, as torch's wrapper patches its config at run time.
"""
from __future__ import annotations

import types

from ember.capture.variables.base import VariableTracker
from ember.exc import Unsupported

#: torch's objects behind the decorators (torch/_dynamo/decorators.py), by class name
_CONTEXT_CLASSES = ("DynamoConfigPatchProxy", "ErrorOnGraphBreakDecoratorContextManager")


def settings_of(ctx) -> dict | None:
    """ember's settings for one of torch's tracing-setting objects, None for anything else (an
    empty dict for settings ember has no equivalent of)."""
    t = type(ctx)
    if t.__name__ not in _CONTEXT_CLASSES or not t.__module__.startswith("torch."):
        return None
    if t.__name__ == "ErrorOnGraphBreakDecoratorContextManager":
        return {"error_on_graph_break": bool(ctx.error_on_graph_break)}
    try:
        changes = dict(ctx.changes)
    except Exception:  # noqa: BLE001 - a version whose patch object differs: nothing to honour
        return {}
    return {"nested_graph_breaks": bool(changes["nested_graph_breaks"])} if "nested_graph_breaks" in changes \
        else {}


def mark(e: Unsupported, trace) -> None:
    """Record on a graph break the settings of the regions the trace is in where it happened
    (``trace.settings``: the innermost one's value of each), if any."""
    if getattr(e, "break_settings", None) is None and trace.settings:
        from ember.config import config
        marked = {"nested_graph_breaks": config.nested_graph_breaks,
                  "error_on_graph_break": config.error_on_graph_break}
        for region in trace.settings:
            marked.update(region)
        e.break_settings = marked


def setting(e: BaseException, name: str) -> bool:
    """The setting ``name`` where break ``e`` happened (ember.config's where no region set it)."""
    from ember.config import config
    marked = getattr(e, "break_settings", None)
    return marked[name] if marked else getattr(config, name)


def error_on_break(e: BaseException) -> bool:
    """Break ``e`` is an error for the caller (``error_on_graph_break`` where it happened), not a
    graph break; a per-call failure (the program raised) is not a break."""
    return isinstance(e, Unsupported) and not getattr(e, "per_call", False) \
        and setting(e, "error_on_graph_break")


class SettingRegionVariable(VariableTracker):
    """A function wrapped by one of torch's tracing-setting decorators: called in the trace, the
    function runs inlined with ``settings`` patched into ember.config."""

    def __init__(self, inner: VariableTracker, settings: dict, source=None):
        self.inner = inner
        self.settings = settings
        self.source = source

    def describe(self):
        return f"{self.inner.describe()} (with {self.settings})"

    def python_type(self):
        return types.FunctionType

    def getattr(self, tx, name):
        return self.inner.getattr(tx, name)

    def call(self, tx, args, kwargs):
        tx.trace.settings.append(self.settings)
        try:
            return self.inner.call(tx, args, kwargs)
        except Unsupported as e:
            mark(e, tx.trace)
            raise
        finally:
            tx.trace.settings.pop()


class SettingContextVariable(VariableTracker):
    """``with torch._dynamo.error_on_graph_break(b):`` / ``disable_nested_graph_breaks():`` in the
    frame: the block is a region of ``settings`` (``real``: torch's object, made at trace time
    from constants). A graph break inside the block leaves it for the rest of the block (which
    runs in a resume function with the settings of its own frame)."""

    rebuilt_once = True

    def __init__(self, settings: dict, make, args: tuple):
        self.settings = settings
        self.make = make  # torch's function and its constant arguments, to make one at run time
        self.args = args
        self.entered = False

    def describe(self):
        return f"{self.make.__name__}{self.args!r}"

    def enter(self, tx):
        from ember.capture.variables.base import ConstantVariable
        self.entered = True
        tx.trace.settings.append(self.settings)
        return ConstantVariable(None)

    def exit(self, tx):
        from ember.capture.variables.base import ConstantVariable
        if tx.trace.settings and tx.trace.settings[-1] is self.settings:
            tx.trace.settings.pop()
        return ConstantVariable(None)

    def reconstruct(self, plan) -> str:
        from ember.capture import codegen
        from ember.capture.sources import bind
        parts = ", ".join(codegen.literal(a, plan.scope, bind) for a in self.args)
        return f"{bind(plan.scope, self.make, 'setting_ctx')}({parts})"


def setting_context(fn, args: list, kwargs: dict):
    """The tracker of ``fn(*args)`` when it makes one of torch's tracing-setting context managers
    from constants (``torch._dynamo.error_on_graph_break(True)``), else None."""
    if kwargs or not all(a.is_constant() for a in args) or getattr(fn, "__name__", "") not in (
            "error_on_graph_break", "disable_nested_graph_breaks"):
        return None
    values = tuple(a.as_constant() for a in args)
    if fn.__name__ == "disable_nested_graph_breaks" and values not in ((), (None,)):
        return None  # (the decorator applied to a function in the frame: not modelled)
    try:
        real = fn(*values)
    except Exception:  # noqa: BLE001 - eager raises it: left to the call as it is
        return None
    settings = settings_of(real)
    return None if settings is None else SettingContextVariable(settings, fn, values)


def ember_settings(settings: dict):
    """A context manager: ``settings`` patched into ember.config."""
    from ember.config import config
    return config.patch(**settings)


class RunWithSettings:
    """At run time: ``compiled`` (ember's compiled function a decorator wraps) called with the
    decorator's settings patched into ember.config."""

    def __init__(self, compiled, settings: dict):
        self.compiled = compiled
        self.settings = settings

    def __call__(self, *args, **kwargs):
        from ember.config import config
        with config.patch(**self.settings):
            return self.compiled(*args, **kwargs)
