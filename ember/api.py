"""ember's public entry points: compile, reset, explain.

``ember.compile`` takes what PyTorch's compile takes: a function, a lambda, a
bound method, a ``functools.partial``, a callable object (its ``__call__`` is
compiled), a ``staticmethod``/``classmethod`` object (the result is one too, so
it works as a decorator inside a class body), an ``nn.Module`` (a
``CompiledModule`` wrapping it), or something already compiled by ember (the
original is compiled again with the new settings, never wrapped twice).
Callables with no Python code of their own (builtins such as ``torch.relu``,
classes) have nothing to compile and run as they are.
"""
from __future__ import annotations

import dataclasses
import functools
import inspect
import sys
import types
import weakref
from typing import Any, Callable

import torch

from ember import metrics
from ember.backends.registry import lookup_backend
from ember.capture import dynamic_dims as _dynamic_dims
from ember.bytecode.closure_twin import closure_twin
from ember.capture.cache import FrameCache, keep_recent, reset_all
from ember.capture.callees import ClosureCall
from ember.distributed import collectives as _collectives
from ember.capture.skipfiles import compile_disabled
from ember.capture.variables.module_hooks import has_hooks, untraced_hooks

_dynamic_dims.collectives = _collectives  # (capture does not import distributed: wired here)


@dataclasses.dataclass(frozen=True)
class _Settings:
    """What ``ember.compile`` was called with (kept to pickle and to re-compile)."""
    backend: Any = "eager"
    fullgraph: bool = False
    dynamic: Any = None
    mode: Any = None
    options: Any = None
    disable: bool = False

    def resolve_backend(self) -> Callable:
        fn = lookup_backend(self.backend)
        if self.mode is None and not self.options:
            return fn
        extra = {}
        params = inspect.signature(fn).parameters
        takes_kwargs = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())
        if self.mode is not None and ("mode" in params or takes_kwargs):
            extra["mode"] = self.mode
        if self.options and ("options" in params or takes_kwargs):
            extra["options"] = self.options
        return functools.partial(fn, **extra) if extra else fn

    def kwargs(self) -> dict:
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}  # not deep copies


def _frame_target(fn) -> tuple[types.FunctionType | None, tuple]:
    """The Python function whose frame a call of ``fn`` runs, and the arguments bound in front
    of the caller's: ``(function, leading args)``; ``(None, ())`` when there is no such frame."""
    if isinstance(fn, types.FunctionType):
        return fn, ()
    if isinstance(fn, types.MethodType):
        inner, lead = _frame_target(fn.__func__)
        return inner, (fn.__self__, *lead) if inner is not None else ()
    call = getattr(type(fn), "__call__", None)
    if isinstance(call, types.FunctionType) and not isinstance(fn, type):
        return call, (fn,)  # a callable object: its class's __call__, bound to it
    return None, ()


def _builtin_trampoline(fn):
    def call_builtin(*args, **kwargs):
        return fn(*args, **kwargs)
    call_builtin.__qualname__ = call_builtin.__name__ = getattr(fn, "__name__", "builtin")
    return call_builtin


# Compiled code lives with the function (per backend and settings), not with one ``ember.compile``
# result, as torch keeps it on the code object: compiling the same function again, or another
# instance of the same module class, reuses the entries (their guards decide). Weak values: a cache
# lives as long as some compiled wrapper uses it, or while it is among the most recently used
# (``cache.keep_recent``: compiling again after the wrapper is gone reuses it, as torch does).
_SHARED_CACHES: "weakref.WeakValueDictionary[tuple, FrameCache]" = weakref.WeakValueDictionary()


def _shared_cache(frame: types.FunctionType, settings: _Settings, label: str = "") -> FrameCache:
    backend = settings.backend
    try:
        key = (id(frame), backend if isinstance(backend, str) else ("id", id(backend)), settings.fullgraph,
               settings.dynamic, settings.mode, repr(settings.options))
        hash(key)
    except TypeError:
        return FrameCache(frame, settings.resolve_backend(), settings.fullgraph, label=label,
                          dynamic=settings.dynamic)
    cache = _SHARED_CACHES.get(key)
    if cache is None or cache.fn is not frame or (not isinstance(backend, str) and cache.settings_backend is not backend):
        cache = FrameCache(frame, settings.resolve_backend(), settings.fullgraph, label=label,
                           dynamic=settings.dynamic)
        cache.settings_backend = backend  # (keeps it alive, so its id in the key stays its own)
        _SHARED_CACHES[key] = cache
    keep_recent(("compiled", *key), cache)
    return cache


class _ClosureEntry(ClosureCall):
    """``ember.compile(closure)``'s call: its code's shared twin cache, with this closure's cells
    and defaults. A ``__code__`` assigned later goes to a cache of the function itself (which
    recompiles on such a change)."""

    __slots__ = ("code", "settings")

    def __init__(self, compiled, fn, settings):
        super().__init__(compiled, fn)
        self.code = fn.__code__
        self.settings = settings

    def __call__(self, /, *args, **kwargs):
        fn = self.fn
        if fn.__code__ is not self.code:
            return _shared_cache(fn, self.settings)(*args, **kwargs)
        return ClosureCall.call(self.compiled, fn, args, kwargs)


class CompiledFunction:
    """What ``ember.compile(fn)`` returns for anything callable that is not an ``nn.Module``."""

    def __init__(self, fn: Callable, settings: _Settings):
        functools.update_wrapper(self, fn)
        self._orig_fn = fn
        self._settings = settings
        self._disable = settings.disable
        self.dynamic = settings.dynamic
        self._cache: FrameCache | None = None
        if isinstance(fn, functools.partial):
            # The partial's own arguments go in front of (and its keywords under) the caller's.
            inner = _compile(fn.func, settings)
            self._cache = getattr(inner, "_cache", None)
            self._call = functools.partial(inner, *fn.args, **fn.keywords)
            return
        from ember.capture.eager_frames import nonrecursive_disabled
        inner = nonrecursive_disabled(fn)
        if inner is not None:
            # compiling a torch.compiler.disable(recursive=False) function compiles the function it
            # marks, as torch.compile unwraps it (called from a compiled frame, it is skipped and
            # the functions it calls are compiled: capture/eager_frames.py)
            fn = inner
        target, lead = _frame_target(fn)
        if target is None and isinstance(fn, (types.BuiltinFunctionType, types.BuiltinMethodType)) \
                and not compile_disabled(fn):
            # `ember.compile(torch.sin)`: a C function has no frame of its own; a Python one that
            # calls it does (one graph of that call, as torch.compile makes)
            target, lead = _builtin_trampoline(fn), ()
        if target is None or compile_disabled(fn):
            # A builtin, a class: no Python frame to compile; torch.compiler.disable'd: not to compile.
            self._call = fn
            return
        twin = closure_twin(target) if target.__closure__ is not None and not lead else None
        if twin is not None:
            # A closure: compiled once per code, whichever function object of it is compiled (a
            # factory's `def`/`lambda` compiled anew), as torch.compile keeps code on the code
            # object; this object's cells and defaults are passed on each call.
            self._cache = _shared_cache(twin, settings, label=target.__qualname__)
            self._call = _ClosureEntry(self._cache, target, settings)
            return
        self._cache = _shared_cache(target, settings)
        self._call = functools.partial(self._cache, *lead) if lead else self._cache

    def __call__(self, /, *args, **kwargs):
        if self._disable:
            return self._orig_fn(*args, **kwargs)
        return self._call(*args, **kwargs)

    def _ember_traced_as(self) -> str | None:
        """Called inside a frame ember traces: trace the original (attribute name) instead."""
        return None if self._disable else "_orig_fn"

    def __get__(self, obj, objtype=None):
        if obj is None:
            return self
        return types.MethodType(self, obj)

    def __repr__(self):
        return f"<ember compiled {self._orig_fn!r}>"

    def __reduce__(self):
        # Decorated at module level: pickle by name, like the function it replaces.
        module = sys.modules.get(getattr(self, "__module__", None) or "")
        found = module
        for part in (getattr(self, "__qualname__", "") or "").split("."):
            found = getattr(found, part, None)
        if found is self:
            return self.__qualname__
        return _rebuild, (self._orig_fn, self._settings.kwargs())


class CompiledModule(torch.nn.Module):
    """What ``ember.compile(module)`` returns: behaves like the module, compiles ``forward``.

    Attribute reads and writes go to the original module (``_orig_mod``), so
    ``state_dict()``, ``parameters()`` and assignments all see the same object.
    Pickling and ``copy.deepcopy`` give a compiled copy of the module.
    """

    def __init__(self, module: torch.nn.Module, settings: _Settings):
        super().__init__()
        self._modules["_orig_mod"] = module
        object.__setattr__(self, "_ember_ready", True)
        object.__setattr__(self, "_ember_settings", settings)
        object.__setattr__(self, "_ember_disable", settings.disable)
        # A class that overrides __call__ runs its own __call__ (around Module.__call__): that is
        # the frame to compile. Otherwise forward is, with Module.__call__'s hooks checked here.
        call = type(module).__call__
        via_call = call is not torch.nn.Module.__call__
        frame = call if via_call else inspect.getattr_static(type(module), "forward", None)
        # A frame that is not a plain function (a forward already compiled by a decorator, a
        # partialmethod, a builtin) is not compiled here: the module runs as it is.
        cache = _shared_cache(frame, settings, label=f"{type(module).__name__}.{frame.__name__}") \
            if isinstance(frame, types.FunctionType) else None
        object.__setattr__(self, "_ember_cache", cache)
        object.__setattr__(self, "_ember_via_call", via_call)
        # For a module with hooks or an instance-level forward: its whole call, compiled as the
        # frame of `_call_module` (hooks are traced like those of any module the frame calls).
        object.__setattr__(self, "_ember_call_cache", FrameCache(
            _call_module, settings.resolve_backend(), settings.fullgraph,
            label=f"{type(module).__name__}.__call__", dynamic=settings.dynamic) if not via_call else None)

    @property
    def _orig_mod(self) -> torch.nn.Module:
        return self._modules["_orig_mod"]

    @property
    def training(self) -> bool:
        return self._modules["_orig_mod"].training

    @training.setter
    def training(self, value: bool) -> None:
        # Module.__init__ sets the default before the wrapped module is there: ignore that one.
        if self.__dict__.get("_ember_ready"):
            self._modules["_orig_mod"].training = value

    def __len__(self) -> int:
        return len(self._modules["_orig_mod"])

    def _ember_traced_as(self) -> str | None:
        """Called inside a frame ember traces: trace the original module's call instead (unless
        the wrapper has hooks of its own; the tracer guards that it has none)."""
        if self._ember_disable or self._forward_hooks or self._forward_pre_hooks or self._backward_hooks \
                or self._backward_pre_hooks:
            return None
        return "_orig_mod"

    def forward(self, /, *args, **kwargs):
        mod = self._modules["_orig_mod"]
        # The cache compiles type(mod).forward called directly; whatever Module.__call__ would add
        # (hooks, global ones included) or an instance-level forward means running the module as is.
        cache = self._ember_cache
        if self._ember_disable or cache is None:
            return mod(*args, **kwargs)
        if self._ember_via_call:
            if type(mod).__call__ is not cache.fn:
                return mod(*args, **kwargs)
        elif inspect.getattr_static(type(mod), "forward", None) is not cache.fn:
            return mod(*args, **kwargs)
        elif "forward" in mod.__dict__ or has_hooks(mod):
            if untraced_hooks(mod) or _uninitialized_lazy(mod):
                # Hooks the tracer does not take (backward, always-called); a lazy module's
                # first call (its pre-hook creates the parameters, then goes away).
                return mod(*args, **kwargs)
            return self._ember_call_cache(mod, *args, **kwargs)
        return cache(mod, *args, **kwargs)

    def __call__(self, /, *args, **kwargs):
        if (self._forward_hooks or self._forward_pre_hooks or self._backward_hooks
                or self._backward_pre_hooks):
            # Hooks registered on the compiled wrapper itself: Module.__call__ runs them around
            # (the compiled) forward, as for any module.
            return super().__call__(*args, **kwargs)
        return self.forward(*args, **kwargs)

    def __getattr__(self, name):
        if name == "_orig_mod":
            return self._modules["_orig_mod"]
        return getattr(self._modules["_orig_mod"], name)

    def __setattr__(self, name, value):
        if name in ("_modules", "_parameters", "_buffers") or name.startswith("_ember"):
            return super().__setattr__(name, value)
        setattr(self._modules["_orig_mod"], name, value)

    def __delattr__(self, name):
        delattr(self._modules["_orig_mod"], name)

    def __reduce__(self):
        return _rebuild, (self._orig_mod, self._ember_settings.kwargs())

    def state_dict(self, *args, **kwargs):
        return self._orig_mod.state_dict(*args, **kwargs)

    def load_state_dict(self, *args, **kwargs):
        return self._orig_mod.load_state_dict(*args, **kwargs)

    def train(self, mode: bool = True):
        self._orig_mod.train(mode)
        return self

    def __repr__(self):
        return f"CompiledModule({self._orig_mod!r})"

    def __dir__(self):
        return sorted(set(dir(self._orig_mod)) | set(super().__dir__()))


def _uninitialized_lazy(module: torch.nn.Module) -> bool:
    check = getattr(module, "has_uninitialized_params", None)
    return isinstance(module, torch.nn.modules.lazy.LazyModuleMixin) and check is not None and check()


def _call_module(module, *args, **kwargs):
    return module(*args, **kwargs)


def _rebuild(model, settings: dict):
    """Unpickling a compiled function or module: compile the unpickled original again."""
    return compile(model, **settings)


def _compile(model, settings: _Settings):
    if isinstance(model, types.MethodType) and isinstance(model.__self__, CompiledModule) \
            and model.__func__ in (CompiledModule.forward, CompiledModule.__call__):
        model = model.__self__  # ember.compile(compiled.forward): the compiled module, compiled again
    if isinstance(model, CompiledModule):
        return CompiledModule(model._orig_mod, settings)
    if isinstance(model, CompiledFunction):
        return _compile(model._orig_fn, settings)
    if isinstance(model, torch.nn.Module):
        return CompiledModule(model, settings)
    if isinstance(model, staticmethod):
        return staticmethod(_compile(model.__func__, settings))
    if isinstance(model, classmethod):
        return classmethod(_compile(model.__func__, settings))
    if isinstance(model, type) and any("__call__" in vars(k) for k in model.__mro__ if k is not object):
        # A class (`@compile` on a class statement): its instances' calls are compiled, as
        # torch.compile does it; the class itself is returned and constructs as before.
        model.__call__ = _compile(model.__call__, settings)
        return model
    if not callable(model):
        raise TypeError(f"ember.compile expects a callable (a function or an nn.Module), "
                        f"got {type(model).__name__}")
    return CompiledFunction(model, settings)


def compile(model: Callable | None = None, *, backend: str | Callable = "eager", fullgraph: bool = False,
            dynamic: bool | None = None, mode: str | None = None, options: dict | None = None,
            disable: bool = False):
    """Compile a function or ``nn.Module`` (the knobs of PyTorch's compile).

    Usable directly, ``ember.compile(fn, backend="inductor")``, or as a
    decorator, ``@ember.compile`` / ``@ember.compile(fullgraph=True)``.
    ``dynamic``: None (automatic: static first; a dimension whose size changed becomes a
    symbol when the frame recompiles), True (every dimension a symbol from the start) or
    False (all static). See ember/capture/dynamic_dims.py.
    """
    from ember.support import check_supported
    check_supported()  # an unsupported Python raises here, naming the supported versions
    settings = _Settings(backend, fullgraph, dynamic, mode, options, disable)
    settings.resolve_backend()  # an unknown backend name fails here, not at the first call
    if model is None:
        return lambda m: _compile(m, settings)
    return _compile(model, settings)


def reset() -> None:
    """Forget every compiled entry and zero the counters (compiled autograd's graphs too)."""
    reset_all()
    metrics.clear()
    from ember.autograd import reset as reset_compiled_autograd
    reset_compiled_autograd()


def install_torch_reset() -> None:
    """Make ``torch.compiler.reset()`` forget ember's compiled entries too (and zero its counters),
    as ``torch.compiler.set_stance`` sets ember's stance: a program that resets the compiler between
    runs (to recompile after changing a setting) gets fresh compiles from ember as well."""
    original = getattr(torch.compiler, "reset", None)
    if original is None or getattr(original, "_ember_resets_too", False):
        return

    @functools.wraps(original)
    def reset_too() -> None:
        original()
        reset()

    reset_too._ember_resets_too = True
    torch.compiler.reset = reset_too


def explain(fn: Callable, *explain_args, **explain_kwargs):
    """``ember.explain(fn)(*args)``: graphs, breaks, guards (see ember.report.explain)."""
    from ember.report.explain import explain as _explain
    return _explain(fn, *explain_args, **explain_kwargs)
