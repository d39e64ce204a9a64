"""Callees at a breaking call: Python functions, methods and submodules called by the instruction
a graph break runs eagerly go through ember themselves, so their own bodies get compiled (as
torch.compile's frame hook compiles each new frame)."""
from __future__ import annotations

import inspect
import types
import weakref

import torch

from ember.bytecode.closure_twin import closure_twin_code
from ember.capture.skipfiles import compile_disabled, optimizer_file
from ember.capture.variables.base import VariableTracker


def _compiled_callee(vt, resumes, tx):
    from ember.capture.variables.functions import UserFunctionVariable, UserMethodVariable
    from ember.capture.variables.module_hooks import has_hooks
    from ember.capture.variables.objects import NNModuleVariable
    if isinstance(vt, NNModuleVariable) and vt.source is not None:
        m = vt.module
        own = m.__dict__.get("forward")
        forward = own if own is not None else inspect.getattr_static(type(m), "forward", None)
        if isinstance(forward, types.FunctionType) and not has_hooks(m):
            # `self.sub(x)` at a break: call sub's forward through ember (as Module.__call__ would,
            # with no hooks — guarded), so the submodule gets its own graphs.
            tx.guards.hook_keys(vt.source, [], [])
            if own is not None:  # an instance-level forward (a plain function, not bound)
                from ember.capture.sources import AttrSource
                tx.guards.id_match(AttrSource(vt.source, "forward"), own)
                return _Rebuilt(resumes.compiled_function(own))
            tx.guards.not_in_instance_dict(vt.source, "forward")
            return _Rebuilt(resumes.compiled_function(forward), bound_to=vt)
        if isinstance(forward, types.FunctionType) and own is None \
                and type(m).__call__ is torch.nn.Module.__call__:
            # Hooks (maybe the reason for the break) run as Module.__call__ runs them; the forward
            # between them goes through ember.
            return _Rebuilt(_CallWithCompiledForward(resumes.compiled_function(forward)), bound_to=vt)
        return vt
    from ember.capture.eager_frames import nonrecursive_disabled
    if isinstance(vt, UserFunctionVariable):
        if nonrecursive_disabled(vt.fn) is not None:  # runs as it is, its callees compiled
            return _Rebuilt(resumes.compiled_function(vt.fn))
        if _compile_disabled(vt.fn):
            return vt
        if vt.source is not None and closure_twin_code(vt.fn.__code__) is not None:
            # A function read from the program's variables is guarded by its code and globals
            # only (builder.py: a closure made anew does not recompile), so the object called at
            # run time may be another one, with other cells and defaults: call that one.
            return _Rebuilt(RuntimeCallee(resumes), bound_to=vt)
        return _Rebuilt(resumes.compiled_function(vt.fn))
    from ember.capture.variables.torch_fn import TorchFunctionVariable
    if isinstance(vt, TorchFunctionVariable) and type(vt.fn) is types.FunctionType \
            and optimizer_file(vt.fn.__code__.co_filename) and not _compile_disabled(vt.fn):
        # An optimizer's own Python function (the step wrapper's `func(*args)` inside
        # `Optimizer.profile_hook_step`) is compiled as a frame, as torch.compile compiles
        # torch/optim frames; torch's other functions at a break run as they are.
        compiled = resumes.compiled_function(vt.fn)
        return vt if compiled is vt.fn else _Rebuilt(compiled)
    from ember.capture.variables.functions import NestedFunctionVariable
    if isinstance(vt, NestedFunctionVariable) and closure_twin_code(vt.code) is not None:
        return _Rebuilt(RuntimeCallee(resumes), bound_to=vt)
    from ember.capture.variables.functions import PartialVariable
    if isinstance(vt, PartialVariable) and isinstance(vt.func, UserFunctionVariable) \
            and not _compile_disabled(vt.func.fn):
        # `functools.partial(f, ...)(x)`: f through ember, its bound arguments as they are
        if vt.func.source is not None and closure_twin_code(vt.func.fn.__code__) is not None:
            return PartialVariable(_Rebuilt(RuntimeCallee(resumes), bound_to=vt.func), vt.args, vt.kwargs)
        return PartialVariable(_Rebuilt(resumes.compiled_function(vt.func.fn)), vt.args, vt.kwargs)
    if isinstance(vt, UserMethodVariable) and isinstance(vt.func, UserFunctionVariable):
        if nonrecursive_disabled(vt.func.fn) is not None:
            return _Rebuilt(resumes.compiled_function(vt.func.fn), bound_to=vt.obj)
        if _compile_disabled(vt.func.fn):  # e.g. MyFunction.apply: the real bound method
            from ember.capture.variables.autograd_function import apply_with_compiled_forward
            rebuilt = apply_with_compiled_forward(vt, resumes)  # (its forward compiled, as a frame)
            return rebuilt if rebuilt is not None else _Rebuilt(vt.func.fn, bound_to=vt.obj)
        # (an object made in the frame is rebuilt once, shared with the rest of the frame)
        return _Rebuilt(resumes.compiled_function(vt.func.fn), bound_to=vt.obj)
    decorated = _decorated_callee(vt, resumes, tx)
    return vt if decorated is None else decorated


def _decorated_callee(vt, resumes, tx):
    """A function the frame decorated with ``torch.no_grad()`` / ``enable_grad()`` /
    ``set_grad_enabled(b)`` / ``inference_mode(b)`` (traced as such): the function compiled, called
    under the context, as torch's decorator would call it."""
    from ember.capture.compile_settings import SettingRegionVariable, ember_settings
    from ember.capture.variables.ctx_managers import ContextWrappedFunction, InferenceModeVariable
    from ember.capture.variables.grad_modes import GradModeWrappedFunction
    if isinstance(vt, SettingRegionVariable):  # (torch's tracing-setting decorators: ember's settings)
        ctx = (ember_settings, vt.settings)
    elif isinstance(vt, GradModeWrappedFunction):
        ctx = (torch.set_grad_enabled, vt.target)
    elif isinstance(vt, ContextWrappedFunction) and isinstance(vt.ctx, InferenceModeVariable):
        ctx = (torch.inference_mode, vt.ctx.mode)
    else:
        return None
    inner = _compiled_callee(vt.inner if isinstance(vt, SettingRegionVariable) else vt.fn, resumes, tx)
    return _CalledUnder(ctx, inner) if isinstance(inner, (_Rebuilt, _CalledUnder)) else None


class _CalledUnder(VariableTracker):
    """``inner`` (a compiled callee) called inside ``ctx`` = (context class, its argument)."""

    def __init__(self, ctx, inner):
        self.ctx = ctx
        self.inner = inner

    def reconstruct(self, plan) -> str:
        from ember.capture.sources import bind
        return f"{bind(plan.scope, _call_under, 'call_under')}({bind(plan.scope, self.ctx[0], 'ctx')}, " \
               f"{self.ctx[1]!r}, {plan.expr(self.inner)})"


def _call_under(ctx_cls, arg, fn):
    def call(*args, **kwargs):
        with ctx_cls(arg):
            return fn(*args, **kwargs)
    return call


class ClosureCall:
    """A call of closure ``fn`` through the compiled cache of its code's twin
    (bytecode/closure_twin.py): ``fn``'s cells and defaults, one cache for every function object
    of the code."""

    __slots__ = ("compiled", "fn")

    def __init__(self, compiled, fn):
        self.compiled = compiled
        self.fn = fn

    def __call__(self, /, *args, **kwargs):
        return ClosureCall.call(self.compiled, self.fn, args, kwargs)

    @staticmethod
    def call(compiled, fn, args, kwargs):
        twin = compiled.fn
        # (each `def` makes new default tuples: the cache rebinds them, its guards decide)
        if twin.__defaults__ is not fn.__defaults__:
            twin.__defaults__ = fn.__defaults__
        if twin.__kwdefaults__ is not fn.__kwdefaults__:
            twin.__kwdefaults__ = fn.__kwdefaults__
        try:
            return compiled(*(fn.__closure__ or ()), *args, **kwargs)
        except TypeError:
            if _binds(fn, args, kwargs):
                raise
        # The arguments do not fit (the twin's message counts its cell parameters): the
        # function's own call raises eager's TypeError before running anything.
        return fn(*args, **kwargs)


def _binds(fn, args, kwargs) -> bool:
    try:
        inspect.signature(fn).bind(*args, **kwargs)
    except TypeError:
        return False
    return True


class RuntimeCallee:
    """The callee at a break is the function object found at run time (one the frame made with
    ``def``/``lambda``, a new object on every call, or one read from a variable, guarded by its
    code only): called through its code's one compiled twin, as torch.compile compiles the new
    frame once per code, with that object's cells and defaults."""

    def __init__(self, resumes):
        self.compiled_function = weakref.WeakMethod(resumes.compiled_function)  # (no cycle back)
        self._hit = None  # (code, globals, compiled twin) of the last call: the same next time

    def __call__(self, fn, /, *args, **kwargs):
        hit = self._hit
        if hit is not None and hit[0] is fn.__code__ and hit[1] is fn.__globals__ \
                and "_torchdynamo_disable" not in fn.__dict__:
            compiled = hit[2]
        else:
            compiled_function = self.compiled_function()
            if compiled_function is None:  # the owner is gone: nothing compiles it
                return fn(*args, **kwargs)
            call = compiled_function(fn, twin=True)
            if type(call) is not ClosureCall:  # (runs as it is, or compiled per object)
                return call(*args, **kwargs)
            compiled = call.compiled
            if "_torchdynamo_disable" not in fn.__dict__:
                self._hit = (fn.__code__, fn.__globals__, compiled)
        return ClosureCall.call(compiled, fn, args, kwargs)


class _CallWithCompiledForward:
    """``module(*args, **kwargs)``, hooks and all, with the compiled forward in place of the
    class's for the duration of the call (an instance attribute, which ``Module.__call__``
    looks up first). A forward already set on the instance is left alone: a plain call."""

    def __init__(self, compiled_forward):
        self.compiled_forward = compiled_forward

    def __call__(self, module, *args, **kwargs):
        d = module.__dict__
        if "forward" in d:
            return module(*args, **kwargs)
        d["forward"] = bound = types.MethodType(self.compiled_forward, module)
        try:
            return module(*args, **kwargs)
        finally:
            if d.get("forward") is bound:
                del d["forward"]


def _compile_disabled(fn) -> bool:
    """``torch.compiler.disable``d functions (and torch's own wrappers) run as they are: compiling
    them would compile what the user asked to run eagerly."""
    module = getattr(fn, "__module__", None) or ""
    from ember.capture.variables.copying import COPY_FUNCTIONS
    if fn in COPY_FUNCTIONS:
        # copy.copy/deepcopy are traced whole (variables/copying.py) or not at all: their bodies
        # (memo dicts keyed by id(), reductors) would only break and recompile on every call.
        return True
    from ember.compat import FUNCTION_APPLY  # (torch's apply, or ember's stand-in for the C one)
    return compile_disabled(fn) or module.startswith("torch.autograd") or fn is FUNCTION_APPLY


class _Rebuilt(VariableTracker):
    """A value the break's residual code gets as a constant (a compiled callee)."""

    def __init__(self, value, bound_to=None):
        self.value = value
        self.bound_to = bound_to
