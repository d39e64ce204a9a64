"""``with`` blocks: which context managers ember traces, and how.

* torch's grad-mode and autocast contexts (`GradModeVariable`, `AutocastVariable`
  in objects.py) and `InferenceModeVariable` here: enter/exit become nodes of
  the graph, so the graph runs the block under that mode.
* `RecordFunctionVariable` (``torch.autograd.profiler.record_function``, and the
  profilers ``torch.profiler.profile`` / ``torch.autograd.profiler.profile`` made
  with plain settings): traced as a no-op, as torch.compile does (a graph runs
  unprofiled inside the block; the object the ``with`` gives cannot be used in the
  frame: such a use breaks there).
* `CatchWarningsVariable` (``warnings.catch_warnings()``): the graph emits no
  Python warnings, so the block's filter changes (``warnings.simplefilter``)
  are no-ops whose effect ends at the block's exit anyway.
* Any other object — a user class with ``__enter__``/``__exit__``, a
  ``contextlib.contextmanager`` generator, ``contextlib.nullcontext`` — has its
  ``__enter__`` and ``__exit__`` inlined like any method (`enter_with`).

A graph break inside a block of a user context manager hands its bound
``__exit__`` to the resume function; for a ``contextlib.contextmanager`` the
generator behind it is handed over suspended at its ``yield``
(``_mark_managed_generator``, variables/generator_resume.py). A block of inference
mode is left around the break and entered again by the resume function
(variables/inference_breaks.py). Inside a ``catch_warnings`` block a break is refused
(the frame runs eagerly, as torch.compile runs it).
"""
from __future__ import annotations

import warnings

import torch

from ember.capture.variables.base import ConstantVariable, VariableTracker, unsupported
from ember.exc import PythonException


class InferenceModeVariable(VariableTracker):
    """``torch.inference_mode(mode=True)``: ``_enter_inference_mode`` / ``_exit_inference_mode``
    nodes in the graph (a break inside the block: see variables/inference_breaks.py)."""

    def __init__(self, mode: bool):
        self.mode = mode
        self.node = None
        self.real = None

    @classmethod
    def create(cls, args, kwargs):
        mode = (args[0] if args else kwargs.get("mode", ConstantVariable(True))).as_constant()
        return cls(bool(mode))

    def describe(self):
        return f"inference_mode({self.mode})"

    def python_type(self):
        return torch.inference_mode

    def enter(self, tx):
        self.prior_grad = torch.is_grad_enabled()
        self.node = tx.output.graph.call_function(torch.autograd.grad_mode._enter_inference_mode, (self.mode,))
        # Traced under the real mode too, so fake results answer is_inference()/requires_grad as eager.
        self.real = torch.inference_mode(self.mode)
        self.real.__enter__()
        tx.output.active_contexts.append(self.real)
        tx.output.active_inference.append(self)
        return ConstantVariable(None)

    def exit(self, tx):
        tx.output.graph.call_function(torch.autograd.grad_mode._exit_inference_mode, (self.node,))
        self.real.__exit__(None, None, None)
        tx.output.active_contexts.remove(self.real)
        tx.output.active_inference.remove(self)
        return ConstantVariable(None)

    def call(self, tx, args, kwargs):
        # Used as a decorator: @torch.inference_mode() def f(...).
        if len(args) == 1 and not kwargs:
            return ContextWrappedFunction(self, args[0])
        return super().call(tx, args, kwargs)


class RecordFunctionVariable(VariableTracker):
    """``torch.autograd.profiler.record_function(name)`` or a profiler: no-op while traced."""

    def __init__(self, cls=torch.autograd.profiler.record_function):
        self.cls = cls

    def describe(self):
        return self.cls.__name__

    def python_type(self):
        return self.cls

    def enter(self, tx):
        return self

    def exit(self, tx):
        return ConstantVariable(None)


class _OutsideRecordFunction(RecordFunctionVariable):
    """A ``record_function`` object made outside the frame, entered in it: a no-op; ``as`` binds the
    object itself."""

    def __init__(self, outer):
        super().__init__()
        self.outer = outer

    def enter(self, tx):
        return self.outer


class CatchWarningsVariable(VariableTracker):
    """``warnings.catch_warnings()``; with ``record=True`` its ``__enter__`` gives a new list of the
    warnings the block issues: the trace issues none (a Python warning of the program's own breaks
    the graph, which a catch_warnings block refuses: the frame runs eagerly), so it stays empty.
    (Warnings torch's kernels issue while the graph runs are emitted, not recorded: as
    torch.compile.)"""

    rebuilt_once = True  # (returned or handed over: one new object per tracker, see convert_frame)

    def __init__(self, record: bool = False):
        self.record = record
        self.entered = False

    def describe(self):
        return "warnings.catch_warnings"

    def python_type(self):
        return warnings.catch_warnings

    def reconstruct(self, plan) -> str:
        """One that was never entered escapes the frame (returned, kept in a list): made anew after
        the graph, as the frame made it; an entered one holds the filters it saved."""
        if self.entered:
            raise unsupported("EB0015", "a warnings.catch_warnings the frame entered escapes it")
        from ember.capture.sources import bind
        return f"{bind(plan.scope, warnings.catch_warnings, 'catch_warnings')}(record={self.record!r})"

    def enter(self, tx):
        self.entered = True
        tx.trace.catch_warnings_depth += 1
        if self.record:
            from ember.capture.variables.containers import ListVariable
            return ListVariable([])
        return ConstantVariable(None)

    def exit(self, tx):
        tx.trace.catch_warnings_depth -= 1
        return ConstantVariable(None)


# Changing the warnings filters: a no-op inside a catch_warnings block (restored at its exit,
# and the graph emits no warnings); elsewhere a real global change, run at a graph break.
WARNING_FILTER_FUNCTIONS = (warnings.simplefilter, warnings.filterwarnings, warnings.resetwarnings)


def call_warning_filter(tx, fn):
    if tx.trace.catch_warnings_depth > 0:
        return ConstantVariable(None)
    raise unsupported("EB0014", f"warnings.{fn.__name__} changes the warnings filters outside a catch_warnings block")


def construct_context(tx, cls, args, kwargs):
    """The tracker for ``cls(*args, **kwargs)`` if ``cls`` is a context manager traced specially."""
    if cls is torch.inference_mode:
        return InferenceModeVariable.create(args, kwargs)
    if cls is torch.autograd.profiler.record_function:
        return RecordFunctionVariable()
    if cls in (torch.profiler.profile, torch.autograd.profiler.profile) and not args \
            and all(v.is_constant() for v in kwargs.values()):
        # (a schedule or on_trace_ready callback would never be called: those run eagerly)
        return RecordFunctionVariable(cls)
    sdpa = _remade_sdpa_kernel(tx, cls, args, kwargs)
    if sdpa is not None:
        return sdpa
    if cls is warnings.catch_warnings:
        record = kwargs.get("record")
        if args or set(kwargs) - {"record"} or (record is not None and not record.is_constant()):
            raise unsupported("EB0014", "warnings.catch_warnings(module=... / positional arguments) inside the compiled region")
        return CatchWarningsVariable(bool(record.as_constant()) if record is not None else False)
    return None


def _remade_sdpa_kernel(tx, cls, args, kwargs):
    """``_GeneratorContextManager(func, args, kwds)`` of ``sdpa_kernel``'s generator: what a function
    decorated outside with ``@sdpa_kernel(...)`` remakes for each call (ContextDecorator's
    ``_recreate_cm``); traced as the ``with sdpa_kernel(...)`` block it stands for."""
    import contextlib
    from ember.capture.variables.functions import _sdpa_kernel_fn
    sdpa = _sdpa_kernel_fn()
    if sdpa is None or not (isinstance(cls, type) and issubclass(cls, contextlib._GeneratorContextManager)) \
            or len(args) != 3 or kwargs:
        return None
    func = getattr(args[0], "fn", getattr(args[0], "value", None))
    if func is None or func is not getattr(sdpa, "__wrapped__", None):
        return None
    from ember.capture.variables.sdpa_kernels import SdpaKernelVariable
    from ember.capture.variables.containers import DictVariable
    if not isinstance(args[2], DictVariable):
        raise unsupported("EB0025", "sdpa_kernel remade with keyword arguments that are not a dict")
    return SdpaKernelVariable.create(tx, list(args[1].unpack(tx)), dict(args[2].items.items()))


class ContextWrappedFunction(VariableTracker):
    """A function decorated with a context-manager instance (``@torch.inference_mode()``)."""

    def __init__(self, ctx, fn):
        self.ctx = ctx
        self.fn = fn

    def describe(self):
        return f"{self.fn.describe()} under {self.ctx.describe()}"

    def truth(self, tx):
        return True

    def call(self, tx, args, kwargs):
        from ember.capture.variables.saved_hooks import DisableSavedHooksVariable
        if isinstance(self.ctx, DisableSavedHooksVariable):
            self.ctx.enter(tx, decorated=True)  # (a fresh manager for every call, as ContextDecorator)
        else:
            self.ctx.enter(tx)
        out = self.fn.call(tx, args, kwargs)
        self.ctx.exit(tx)
        return out


def _outside_autocast(tx, ctx):
    """An ``autocast`` object made outside the frame (what ``@torch.autocast(...)`` keeps and enters
    at every call): the block it makes, from the settings it holds (read, guarded); likewise an
    ``inference_mode`` one; a ``record_function`` one: a no-op block; anything else as it is."""
    from ember.capture.variables.objects import UserObjectVariable
    if isinstance(ctx, UserObjectVariable) and type(ctx.obj) is torch.autograd.profiler.record_function:
        return _OutsideRecordFunction(ctx)  # (`@record_function("name")`: a no-op while traced)
    if isinstance(ctx, UserObjectVariable) and type(ctx.obj) is torch.inference_mode:
        mode = tx.getattr(ctx, "mode")
        if not mode.is_constant() or any(getattr(b, "outside", None) is ctx.obj for b in tx.output.active_inference):
            return ctx
        block = InferenceModeVariable(bool(mode.as_constant()))
        block.outside = ctx.obj
        return block
    cls = torch.amp.autocast_mode.autocast
    if not isinstance(ctx, UserObjectVariable) or not isinstance(ctx.obj, cls) \
            or type(ctx.obj).__enter__ is not cls.__enter__ or type(ctx.obj).__exit__ is not cls.__exit__:
        return ctx
    values = [tx.getattr(ctx, name) for name in ("device", "fast_dtype", "_enabled", "_cache_enabled")]
    if not all(v.is_constant() for v in values) \
            or any(getattr(a, "outside", None) is ctx.obj for a in tx.output.active_autocasts):
        # (the same object entered again inside its own block, a recursive decorated function:
        # its __exit__ then restores what the inner __enter__ saved on it, as eager does)
        return ctx
    from ember.capture.variables.grad_modes import AutocastVariable
    device, dtype, enabled, cache_enabled = (v.as_constant() for v in values)
    block = AutocastVariable(device, dtype, enabled, cache_enabled)
    block.outside = ctx.obj
    return block


def enter_with(tx, ctx):
    """BEFORE_WITH: (the ``__exit__`` to leave on the stack, the ``__enter__`` to call)."""
    from ember.capture.variables.grad_modes import AutocastVariable, GradModeVariable
    from ember.capture.variables.objects import MissingAttribute
    from ember.capture.variables.saved_hooks import DisableSavedHooksVariable
    from ember.capture.variables.sdpa_kernels import SdpaKernelVariable
    from ember.capture.compile_settings import SettingContextVariable
    ctx = _outside_autocast(tx, ctx)
    if isinstance(ctx, (GradModeVariable, AutocastVariable, InferenceModeVariable, RecordFunctionVariable,
                        CatchWarningsVariable, DisableSavedHooksVariable, SdpaKernelVariable,
                        SettingContextVariable)):
        return _WithExit(ctx), _Enter(ctx)
    from ember.capture.variables.tensor import TensorVariable
    if isinstance(ctx, TensorVariable) or ctx.is_constant():
        kind = torch.Tensor if isinstance(ctx, TensorVariable) else type(ctx.as_constant())
        if hasattr(kind, "__enter__"):  # e.g. `with torch.device("cuda"):`
            raise unsupported("EB0014", f"`with` on {ctx.describe()}")
        raise PythonException(TypeError(f"{ctx.describe()} does not support the context manager protocol"))
    try:
        t = ctx.python_type()
    except Exception:  # noqa: BLE001 — a tracker without a known type: looked up as before
        t = None
    if isinstance(t, type) and not all(any(n in k.__dict__ for k in t.__mro__) for n in ("__enter__", "__exit__")):
        # Python looks both up on the type (not the instance dict, nor __getattr__)
        raise PythonException(TypeError(f"'{t.__name__}' object does not support the context manager protocol"))
    _mark_managed_generator(tx, ctx, t)
    from ember.capture.variables.instance_lookup import type_attribute
    from ember.capture.variables.objects import UserObjectVariable
    try:
        if isinstance(ctx, UserObjectVariable):  # (the class's methods, even where the instance shadows them)
            return type_attribute(tx, ctx, ctx.obj, "__exit__"), type_attribute(tx, ctx, ctx.obj, "__enter__")
        from ember.capture.variables.new_object import NewObjectVariable
        if type(ctx) is NewObjectVariable:
            members = [ctx.class_method(tx, n) for n in ("__exit__", "__enter__")]
            if None not in members:
                return members[0], members[1]
        enter = tx.getattr(ctx, "__enter__")
        exit_fn = tx.getattr(ctx, "__exit__")
    except MissingAttribute:
        raise PythonException(TypeError(f"{ctx.describe()} does not support the context manager protocol")) \
            from None
    return exit_fn, enter


def _mark_managed_generator(tx, ctx, t) -> None:
    """``with cm():`` of a ``contextlib.contextmanager``: the block's exit runs its generator to
    the end, so the generator may be handed over suspended at a graph break inside the block
    (see generator_resume.py: its ``finally`` runs at the exit, not when a reference dies)."""
    import contextlib
    if not (isinstance(t, type) and issubclass(t, contextlib._GeneratorContextManager)):
        return
    from ember.capture.variables.generators import GeneratorVariable
    from ember.capture.variables.new_object import NewObjectVariable
    if type(ctx) is not NewObjectVariable:
        return
    try:
        gen = tx.getattr(ctx, "gen")
    except Exception:  # noqa: BLE001 — no generator attribute: nothing to mark
        return
    if isinstance(gen, GeneratorVariable):
        gen.managed_by_with = True


class _Enter(VariableTracker):
    def __init__(self, ctx):
        self.ctx = ctx

    def call(self, tx, args, kwargs):
        return self.ctx.enter(tx)


class _WithExit(VariableTracker):
    """The bound ``__exit__`` BEFORE_WITH leaves on the stack for a context traced specially."""

    def __init__(self, ctx):
        self.ctx = ctx

    def describe(self):
        return f"{self.ctx.describe()}.__exit__"

    def call(self, tx, args, kwargs):
        return self.ctx.exit(tx)

    def reconstruct(self, plan) -> str:
        """The exit handed to a resume function at a graph break inside the block."""
        from ember.capture.sources import bind
        from ember.capture.variables.grad_modes import GradModeVariable
        if isinstance(self.ctx, GradModeVariable):
            from ember.capture.graph_break import GradModeExit
            return bind(plan.scope, GradModeExit(self.ctx.prior), "grad_exit")
        from ember.capture.variables.grad_modes import AutocastVariable
        if isinstance(self.ctx, AutocastVariable):
            from ember.capture.variables.autocast_breaks import AutocastExit
            return bind(plan.scope, AutocastExit(self.ctx.device_type, self.ctx.prior, self.ctx.block), "autocast_exit")
        from ember.capture.variables.saved_hooks import DisableSavedHooksVariable
        if isinstance(self.ctx, DisableSavedHooksVariable):
            return bind(plan.scope, self.ctx.exit_at_break(), "saved_hooks_exit")
        from ember.capture.variables.sdpa_kernels import SdpaKernelVariable
        if isinstance(self.ctx, SdpaKernelVariable):
            return bind(plan.scope, self.ctx.exit_at_break(), "sdpa_exit")
        if isinstance(self.ctx, InferenceModeVariable):  # entered for real until the residual leaves it
            from ember.capture.variables.inference_breaks import entered_block
            return f"{bind(plan.scope, entered_block, 'inference_block')}({self.ctx.mode!r})"
        from ember.capture.compile_settings import SettingContextVariable
        if isinstance(self.ctx, (RecordFunctionVariable, SettingContextVariable)):
            # A profiler label (or profiler): the part of the block after the break just runs
            # unlabelled (unprofiled).
            return bind(plan.scope, _no_exit, "no_exit")
        raise unsupported("EB0013", f"graph break inside `with {self.ctx.describe()}`")


def _no_exit(*args):
    return None
