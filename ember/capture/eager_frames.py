"""Frames that run as they are while the functions they call are compiled.

torch.compile *skips* some frames — one with a graph break inside a ``for``/``while`` loop,
one marked ``torch.compiler.disable(recursive=False)``, a generator's body — yet compiles every
function such a frame calls, since its frame hook sees each new frame. ember has no frame hook:
it runs a skipped frame as a copy of its code whose call sites pass the callable through
:class:`CalleeHook` first (``ember.bytecode.call_hooks``), which hands back ember's compiled
version of a Python function (or method, or module forward) and anything else unchanged. The
frame itself is the original bytecode, so it behaves exactly as in eager.

    def fn(x):
        for _ in range(100):
            inner(x)                 # compiled once, as its own frame
            print("a graph break")
        return x
"""
from __future__ import annotations

import functools
import inspect
import logging
import os
import types
import weakref

import torch

from ember.bytecode.call_hooks import hook_calls, hooked_function
from ember.capture.skipfiles import optimizer_file, torch_file

log = logging.getLogger("ember.graph_breaks")

_GENERATOR_FLAGS = inspect.CO_GENERATOR | inspect.CO_COROUTINE | inspect.CO_ASYNC_GENERATOR


def nonrecursive_disabled(fn) -> types.FunctionType | None:
    """The function a ``torch.compiler.disable(recursive=False)`` wrapper stands for (its own
    frame runs as it is, the frames it calls are compiled), or None."""
    if getattr(fn, "_torchdynamo_disable", False) and getattr(fn, "_torchdynamo_disable_recursive", True) is False:
        orig = getattr(fn, "_torchdynamo_orig_callable", None)
        if type(orig) is types.FunctionType:
            return orig
    return None


_COMPILE_SETTING_CONTEXTS = ("DynamoConfigPatchProxy", "ErrorOnGraphBreakDecoratorContextManager")


def compile_setting_wrapped(fn):
    """The function a decorator form of one of torch.compile's tracing settings wraps
    (``disable_nested_graph_breaks``, ``error_on_graph_break(b)``, ``patch_dynamo_config``: a
    ``with self: return func(...)`` closure in torch/_dynamo/external_utils.py), or None. Those
    settings steer torch.compile's tracing and do nothing at run time: ember calls the function
    (with ember's equivalent settings: capture/compile_settings.py)."""
    if type(fn) is not types.FunctionType or not _setting_wrapper_code(fn.__code__) \
            or fn.__code__.co_freevars != ("func", "self"):
        return None
    try:
        func, ctx = (c.cell_contents for c in fn.__closure__)
    except ValueError:  # (an empty cell)
        return None
    t = type(ctx)
    if t.__name__ not in _COMPILE_SETTING_CONTEXTS or not t.__module__.startswith("torch."):
        return None
    return func


def wrapper_variable(tx, value, source):
    """The tracker for a wrapper the trace sees through, or None: a tracing setting's wrapper (the
    function it wraps), a :class:`SkippedFrame` (the rest after ``step_unsupported()`` that a
    nested break's chain calls: an opaque call, a break there, never a trace of ember's own code),
    and ``torch.compile`` / ``ember.compile`` (variables/nested_compile.py)."""
    if type(value) is SkippedFrame:
        from ember.capture.variables.opaque_callables import OpaqueCallableVariable
        if source is not None:
            tx.guards.id_match(source, value)
        return OpaqueCallableVariable(value, source, "a frame that runs as it is")
    from ember.capture.variables.nested_compile import NestedCompileVariable, compile_entry_points
    if any(value is f for f in compile_entry_points()):  # a compile nested in the traced frame
        if source is not None:
            tx.guards.id_match(source, value)
        return NestedCompileVariable(value, source)
    func = compile_setting_wrapped(value)
    if func is None:
        return None
    from ember.capture.builder import wrap
    from ember.capture.compile_settings import SettingRegionVariable, settings_of
    from ember.capture.sources import CellContentsSource
    if source is not None:
        tx.guards.id_match(source, value)
    index = value.__code__.co_freevars.index("func")
    inner = wrap(tx, func, CellContentsSource(source, index, "func") if source is not None else None)
    settings = settings_of(value.__closure__[value.__code__.co_freevars.index("self")].cell_contents)
    return SettingRegionVariable(inner, settings, source) if settings else inner


def is_generator_function(fn) -> bool:
    return bool(fn.__code__.co_flags & _GENERATOR_FLAGS)


def _torch_skipped(code) -> bool:
    """torch's own functions a skipped frame calls run as they are (torch.compile's frame hook
    skips them too), except an optimizer's (torch/optim: torch.compile compiles its frames) and
    the wrapper of a ``@torch.no_grad()``-style decorator (it runs as it is, and the function it
    wraps is compiled: ``no_grad()(enable_grad()(f))`` compiles ``f``)."""
    return torch_file(code.co_filename) and not optimizer_file(code.co_filename) \
        and code is not CONTEXT_DECORATOR_CODE and not _setting_wrapper_code(code)


def _setting_wrapper_code(code) -> bool:
    """torch.compile's tracing-setting decorators' wrapper (``builder.compile_setting_wrapped``)."""
    return code.co_name == "inner" and code.co_filename.endswith(os.path.join("_dynamo", "external_utils.py"))


#: the code of torch's context-manager decorator wrapper (torch/utils/_contextlib.py decorate_context)
CONTEXT_DECORATOR_CODE = torch.no_grad()(lambda: None).__code__


class CalleeHook:
    """``hook(callable)`` -> what a skipped frame calls instead: the compiled function for a
    Python function, a method bound to it, or a module call with its forward compiled. torch's
    own functions and modules are called as they are (torch.compile's frame hook skips their
    frames too).

    ``compiled_function``: the owner's (a ``ResumeCache``'s) callee compiler, which also
    decides what runs as it is (``torch.compiler.disable``d, library code)."""

    def __init__(self, compiled_function):
        # Hooked code holds this hook as a constant, and this hook holds the hooked code (``_codes``)
        # and, through the owner, the compiled frames: code objects are invisible to the cycle
        # collector, so the owner is held weakly (once it is gone, callees run as they are).
        self._owner = weakref.WeakMethod(compiled_function) if inspect.ismethod(compiled_function) \
            else (lambda: compiled_function)
        self._codes: dict = {}  # code object -> its hooked copy (None: could not be made)
        self._const = _HookConstant(self)

    def forget(self) -> None:
        """Drop the hooked copies (a generator's holds its owners: a cycle through code)."""
        self._codes = {}

    def compiled_function(self, f):
        compiled = self._owner()
        return f if compiled is None else compiled(f)

    def __call__(self, f):
        try:
            t = type(f)
            if t is types.FunctionType:
                return f if _torch_skipped(f.__code__) else self.compiled_function(f)
            if t is types.MethodType:
                func = f.__func__
                if type(func) is types.FunctionType and not _torch_skipped(func.__code__):
                    compiled = self.compiled_function(func)
                    return f if compiled is func else types.MethodType(compiled, f.__self__)
                return f
            if isinstance(f, torch.nn.Module):
                return self._module_call(f)
        except Exception as e:  # noqa: BLE001 — the call then runs as it is, never fails here
            log.debug("callee hook: %s: %s", type(e).__name__, e)
        return f

    def _module_call(self, m):
        from ember.capture.callees import _CallWithCompiledForward
        if type(m).__call__ is not torch.nn.Module.__call__ or "forward" in m.__dict__:
            return m
        forward = inspect.getattr_static(type(m), "forward", None)  # (a ScriptModule's raises on the class)
        if type(forward) is not types.FunctionType or torch_file(forward.__code__.co_filename):
            return m  # (torch's own modules: torch.compile does not compile their frames either)
        compiled = self.compiled_function(forward)
        if compiled is forward:
            return m
        return functools.partial(_CallWithCompiledForward(compiled), m)

    def hooked(self, fn: types.FunctionType) -> types.FunctionType:
        """``fn`` running a copy of its code whose calls go through this hook (``fn`` itself if
        the copy cannot be made)."""
        code = fn.__code__
        if code in self._codes:
            new_code = self._codes[code]
        else:
            try:
                # A generator's body runs as it is iterated, possibly after the compiled function
                # that made it is gone: its calls must still reach a live owner (kept, at the cost of
                # a cycle through its code that is never collected: generators in frames are rare).
                const = _KeepingHookConstant(self) if code.co_flags & _GENERATOR_FLAGS else self._const
                new_code = hook_calls(code, const)
            except Exception as e:  # noqa: BLE001 — run it as it is
                log.debug("could not hook the calls of %s: %s: %s", fn.__qualname__, type(e).__name__, e)
                new_code = None
            self._codes[code] = new_code
        if new_code is None:
            return fn
        new = hooked_function(fn, new_code)
        new.__dict__.update(fn.__dict__)
        return new


class _HookConstant:
    """What hooked code calls: the hook, held weakly (the hook holds the hooked code; a strong
    reference back would be a cycle through a code object, never collected). A generator's hooked
    body can outlive its hook: its calls then run as they are."""

    __slots__ = ("_hook",)

    def __init__(self, hook: CalleeHook):
        self._hook = weakref.ref(hook)

    def __call__(self, f):
        hook = self._hook()
        return f if hook is None else hook(f)


class _KeepingHookConstant:
    """The hook and its owners (the ``ResumeCache`` and the cache that owns that), held strongly
    (for generator bodies, see ``CalleeHook.hooked``)."""

    __slots__ = ("_hook", "_owners")

    def __init__(self, hook: CalleeHook):
        owner = hook._owner()
        resumes = getattr(owner, "__self__", None)
        self._hook, self._owners = hook, (owner, getattr(resumes, "_make_compiled", lambda: None)())

    def __call__(self, f):
        return self._hook(f)


_GENERATOR_FLAGS = inspect.CO_GENERATOR | inspect.CO_COROUTINE | inspect.CO_ASYNC_GENERATOR


class SkippedFrame:
    """A frame ember does not compile but runs as :meth:`CalleeHook.hooked` code, made once and
    remade when the function's code or defaults change."""

    def __init__(self, fn: types.FunctionType, hook: CalleeHook):
        self.fn = fn
        self.hook = hook
        self._made = None
        self._key = None

    def __call__(self, *args, **kwargs):
        fn = self.fn
        key = (fn.__code__, fn.__defaults__, fn.__kwdefaults__)
        if self._key is None or any(a is not b for a, b in zip(key, self._key)):
            self._made, self._key = self.hook.hooked(fn), key
        return self._made(*args, **kwargs)
