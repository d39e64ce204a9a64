"""``inspect.signature(f)`` in a frame, for a function the trace knows: computed on the real function
(or a stand-in with the same code, defaults and annotations for one made in the frame)."""
from __future__ import annotations

import inspect
import types

from ember.capture.variables.base import VariableTracker, unsupported


class SignatureFunctionVariable(VariableTracker):
    """``inspect.signature(f)`` of a function known to the trace: computed now on the real function
    (whose identity the trace already pins), instead of tracing ``inspect`` itself."""

    def describe(self):
        return "inspect.signature"

    def truth(self, tx):
        return True

    def call(self, tx, args, kwargs):
        from ember.capture.variables.functions import UserFunctionVariable, UserMethodVariable
        from ember.capture.variables.objects import UserObjectVariable
        target = args[0] if args else None
        if kwargs or len(args) != 1:
            raise unsupported("EB0037", "inspect.signature with extra arguments")
        if isinstance(target, UserFunctionVariable):
            sig = inspect.signature(target.fn)
        elif isinstance(target, UserMethodVariable) and isinstance(target.func, UserFunctionVariable):
            sig = inspect.signature(types.MethodType(target.func.fn, object()))
        elif type(target).__name__ == "NestedFunctionVariable" and _constant_signature(target):
            sig = inspect.signature(_signature_stand_in(target))
        else:
            raise unsupported("EB0037", f"inspect.signature of {target.describe() if target else '?'}")
        return UserObjectVariable(sig, None)


def _constant_signature(fn_vt) -> bool:
    """A function made in the frame whose signature is fixed by constants: its code, constant
    defaults and annotations, and nothing that ``inspect`` would follow instead (``__wrapped__``,
    ``__signature__``)."""
    values = [*fn_vt.defaults_vts, *fn_vt.kwdefaults_vts.values(), *fn_vt.annotations]
    return not fn_vt.attrs and not fn_vt.special and all(v.is_constant() for v in values)


def _signature_stand_in(fn_vt):
    """A real function with the same code, defaults and annotations (its closure cells empty:
    ``inspect.signature`` reads none of them)."""
    fn = types.FunctionType(fn_vt.code, fn_vt.globals, fn_vt.name,
                            tuple(d.as_constant() for d in fn_vt.defaults_vts) or None,
                            tuple(types.CellType() for _ in fn_vt.code.co_freevars))
    fn.__kwdefaults__ = {k: v.as_constant() for k, v in fn_vt.kwdefaults_vts.items()} or None
    flat = [v.as_constant() for v in fn_vt.annotations]
    fn.__annotations__ = dict(zip(flat[::2], flat[1::2]))
    fn.__qualname__ = fn_vt.qualname
    return fn
