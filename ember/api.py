"""ember's public entry points: compile, reset, explain."""
from __future__ import annotations

import functools
import inspect
import types
from typing import Callable

import torch

from ember import metrics
from ember.backends.registry import lookup_backend
from ember.capture.cache import FrameCache, reset_all
from ember.capture.variables.objects import has_hooks


def _resolve_backend(backend, mode, options) -> Callable:
    fn = lookup_backend(backend)
    if mode is None and not options:
        return fn
    extra = {}
    params = inspect.signature(fn).parameters
    takes_kwargs = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())
    if mode is not None and ("mode" in params or takes_kwargs):
        extra["mode"] = mode
    if options and ("options" in params or takes_kwargs):
        extra["options"] = options
    return functools.partial(fn, **extra) if extra else fn


class CompiledFunction:
    """What ``ember.compile(fn)`` returns for a plain function."""

    def __init__(self, fn: Callable, backend, fullgraph: bool, dynamic, mode, options, disable: bool):
        functools.update_wrapper(self, fn)
        self._orig_fn = fn
        self._disable = disable
        self.dynamic = dynamic
        if isinstance(fn, types.MethodType):
            self._cache = FrameCache(fn.__func__, _resolve_backend(backend, mode, options), fullgraph)
            self._bound_self = fn.__self__
        elif isinstance(fn, types.FunctionType):
            self._cache = FrameCache(fn, _resolve_backend(backend, mode, options), fullgraph)
            self._bound_self = None
        else:
            raise TypeError(f"ember.compile expects a function or nn.Module, got {type(fn).__name__}")

    def __call__(self, *args, **kwargs):
        if self._disable:
            return self._orig_fn(*args, **kwargs)
        if self._bound_self is not None:
            return self._cache(self._bound_self, *args, **kwargs)
        return self._cache(*args, **kwargs)

    def __get__(self, obj, objtype=None):
        if obj is None:
            return self
        return functools.partial(self.__call__, obj)


class CompiledModule(torch.nn.Module):
    """What ``ember.compile(module)`` returns: behaves like the module, compiles ``forward``.

    Attribute reads and writes go to the original module (``_orig_mod``), so
    ``state_dict()``, ``parameters()`` and assignments all see the same object.
    """

    def __init__(self, module: torch.nn.Module, backend, fullgraph, dynamic, mode, options, disable):
        super().__init__()
        self._modules["_orig_mod"] = module
        object.__setattr__(self, "_ember_disable", disable)
        forward = type(module).forward
        if not isinstance(forward, types.FunctionType):
            raise TypeError(f"cannot compile {type(module).__name__}.forward of type {type(forward).__name__}")
        object.__setattr__(self, "_ember_cache", FrameCache(forward, _resolve_backend(backend, mode, options),
                                                            fullgraph, label=f"{type(module).__name__}.forward"))

    @property
    def _orig_mod(self) -> torch.nn.Module:
        return self._modules["_orig_mod"]

    def forward(self, *args, **kwargs):
        mod = self._modules["_orig_mod"]
        # The cache compiles type(mod).forward called directly; whatever Module.__call__ would add
        # (hooks, global ones included) or an instance-level forward means running the module as is.
        if (self._ember_disable or type(mod).forward is not self._ember_cache.fn
                or "forward" in mod.__dict__ or has_hooks(mod)):
            return mod(*args, **kwargs)
        return self._ember_cache(mod, *args, **kwargs)

    def __call__(self, *args, **kwargs):
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


def compile(model: Callable | None = None, *, backend: str | Callable = "eager", fullgraph: bool = False,
            dynamic: bool | None = None, mode: str | None = None, options: dict | None = None,
            disable: bool = False):
    """Compile a function or ``nn.Module`` (the knobs of PyTorch's compile).

    Usable directly, ``ember.compile(fn, backend="inductor")``, or as a
    decorator, ``@ember.compile`` / ``@ember.compile(fullgraph=True)``.
    ``dynamic`` is accepted; until dynamic shapes land, every shape is static
    and a changed shape recompiles.
    """
    if model is None:
        return lambda m: compile(m, backend=backend, fullgraph=fullgraph, dynamic=dynamic, mode=mode,
                                 options=options, disable=disable)
    if isinstance(model, torch.nn.Module):
        return CompiledModule(model, backend, fullgraph, dynamic, mode, options, disable)
    return CompiledFunction(model, backend, fullgraph, dynamic, mode, options, disable)


def reset() -> None:
    """Forget every compiled entry and zero the counters."""
    reset_all()
    metrics.clear()


def explain(fn: Callable, *explain_args, **explain_kwargs):
    """``ember.explain(fn)(*args)``: graphs, breaks, guards (see ember.report.explain)."""
    from ember.report.explain import explain as _explain
    return _explain(fn, *explain_args, **explain_kwargs)

