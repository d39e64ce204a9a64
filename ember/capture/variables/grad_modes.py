"""Grad-mode and autocast regions: ``torch.no_grad()``, ``enable_grad()``, ``set_grad_enabled(b)``
(as context managers and decorators) and ``torch.autocast``. Entering one records the mode change
as a graph node and also applies it while tracing, so fake tensors get what eager would give."""
from __future__ import annotations

import torch

from ember.capture.variables.base import ConstantVariable, VariableTracker, unsupported


class GradModeVariable(VariableTracker):
    """``torch.no_grad()``, ``torch.enable_grad()``, ``torch.set_grad_enabled(b)``.

    Entering records a ``torch._C._set_grad_enabled`` node in the graph (so the
    graph runs the region under that mode) and also sets the mode for tracing,
    so fake tensors get the requires_grad eager would give them.
    """

    def __init__(self, target: bool, prior: bool, applied: bool):
        self.target = target
        self.prior = prior
        self.applied = applied

    @classmethod
    def create(cls, tx, fn, args):
        prior = torch.is_grad_enabled()
        if fn is torch.no_grad:
            return cls(False, prior, False)
        if fn is torch.enable_grad:
            return cls(True, prior, False)
        # set_grad_enabled acts at construction, like in eager.
        var = cls(bool(args[0]), prior, True)
        tx.output.set_grad_enabled(var.target)
        return var

    def describe(self):
        return f"grad_mode({self.target})"

    def enter(self, tx):
        self.prior = torch.is_grad_enabled() if not self.applied else self.prior
        tx.output.set_grad_enabled(self.target)
        return ConstantVariable(None)

    def exit(self, tx):
        tx.output.set_grad_enabled(self.prior)
        return ConstantVariable(None)

    def reconstruct(self, plan) -> str:
        """The real object (held across a graph break, or returned): ``no_grad()`` /
        ``enable_grad()`` as new; a ``set_grad_enabled(b)`` made without acting again (it acted
        at construction, in the graph), with the mode it restores on exit."""
        from ember.capture.sources import bind
        if not self.applied:
            return f"{bind(plan.scope, torch.enable_grad if self.target else torch.no_grad, 'grad_ctx')}()"
        return f"{bind(plan.scope, made_set_grad_enabled, 'set_grad_enabled')}({self.target!r}, {self.prior!r})"

    def call(self, tx, args, kwargs):
        # Used as a decorator: @torch.no_grad() def f(...).
        if len(args) == 1 and not kwargs:
            if self.applied:
                # `@torch.set_grad_enabled(b)`: construction set the mode, decorating puts the
                # mode it found back (torch.set_grad_enabled.__call__)
                tx.output.set_grad_enabled(self.prior)
            return GradModeWrappedFunction(self.target, args[0])
        return super().call(tx, args, kwargs)


def made_set_grad_enabled(mode: bool, prev: bool) -> torch.set_grad_enabled:
    """A ``torch.set_grad_enabled(mode)`` object as eager's construction left it (``prev`` is the
    mode it found), made without changing the mode now."""
    obj = torch.set_grad_enabled.__new__(torch.set_grad_enabled)
    obj.prev, obj.mode = prev, mode
    return obj


class GradModeWrappedFunction(VariableTracker):
    def __init__(self, target, fn):
        self.target = target
        self.fn = fn

    def call(self, tx, args, kwargs):
        real = self.real_wrapper()
        if real is not None:  # (torch's own wrapper, traced: a break inside nests through it)
            from ember.capture.variables.functions import UserFunctionVariable
            return UserFunctionVariable(real).call(tx, args, kwargs)
        prior = torch.is_grad_enabled()
        tx.output.set_grad_enabled(self.target)
        out = self.fn.call(tx, args, kwargs)
        tx.output.set_grad_enabled(prior)
        return out

    def real_wrapper(self):
        """``no_grad()(f)`` / ``enable_grad()(f)`` as torch makes it, for a plain function ``f``
        (no closure, no defaults: any function of its code and globals, which its guards pin,
        behaves as this one), or None."""
        from ember.capture.variables.functions import UserFunctionVariable
        if type(self.fn) is not UserFunctionVariable:
            return None
        f = self.fn.fn
        if f.__closure__ or f.__defaults__ or f.__kwdefaults__:
            return None
        return (torch.enable_grad if self.target else torch.no_grad)()(f)

    def reconstruct(self, plan) -> str:
        """The real decorated function (on the stack at a break at its call, or kept in a local):
        ``no_grad()(fn)`` / ``enable_grad()(fn)``, whose call sets the mode as this one's does."""
        from ember.capture.sources import bind
        ctx = bind(plan.scope, torch.enable_grad if self.target else torch.no_grad, "grad_ctx")
        return f"{ctx}()({plan.expr(self.fn)})"


class AutocastVariable(VariableTracker):
    """``torch.autocast(device_type, dtype=None, enabled=True, cache_enabled=None)`` as a context.

    Entering records ``torch.amp._enter_autocast`` in the graph (exit: ``_exit_autocast``), so the
    graph runs the region under autocast; the trace enters a real autocast too, so fake tensors
    get the dtypes autocast gives them. ``dtype=None`` means the device's default autocast dtype.
    """

    def __init__(self, device_type: str, dtype, enabled: bool, cache_enabled):
        self.device_type = device_type
        self.dtype = dtype if dtype is not None else torch.get_autocast_dtype(device_type)
        self.enabled = enabled
        self.cache_enabled = torch.is_autocast_cache_enabled() if cache_enabled is None else cache_enabled
        self.node = None
        self.real = None

    @classmethod
    def create(cls, args, kwargs):
        names = ("device_type", "dtype", "enabled", "cache_enabled")
        values = dict(zip(names, [a.as_constant() for a in args]))
        values.update({k: v.as_constant() for k, v in kwargs.items()})
        if "device_type" not in values:
            raise unsupported("EB0014", "torch.autocast without device_type")
        return cls(values["device_type"], values.get("dtype"), values.get("enabled", True),
                   values.get("cache_enabled"))

    def describe(self):
        return f"autocast({self.device_type}, {self.dtype}, enabled={self.enabled})"

    @property
    def block(self) -> tuple:
        """(enabled, dtype, cache_enabled) inside the block."""
        return (self.enabled, self.dtype, self.cache_enabled)

    def enter(self, tx):
        from ember.capture.variables.autocast_breaks import autocast_state
        self.prior = autocast_state(self.device_type)
        vals = (self.device_type, self.dtype, self.enabled, self.cache_enabled)
        self.node = tx.output.graph.call_function(torch.amp._enter_autocast, vals)
        from ember.compat import UNMANAGED_AUTOCAST
        self.real = UNMANAGED_AUTOCAST(*vals)
        self.real.__enter__()
        tx.output.active_contexts.append(self.real)
        tx.output.active_autocasts.append(self)
        return ConstantVariable(None)

    def exit(self, tx):
        tx.output.graph.call_function(torch.amp._exit_autocast, (self.node,))
        self.real.__exit__(None, None, None)
        tx.output.active_contexts.remove(self.real)
        tx.output.active_autocasts.remove(self)
        return ConstantVariable(None)
