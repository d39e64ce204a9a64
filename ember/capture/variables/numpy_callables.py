"""NumPy's callables in captured code: ``np.<fn>``, ufuncs and scalar types (``np.sum``,
``np.add``, ``np.float32``), and methods of NumPy scalar and dtype constants.

A call whose arguments are all constants is folded by NumPy itself (a constant result); one
with an array, or a symbolic size, is one graph node through ``torch._numpy``, checked against
NumPy by the probe (see numpy_arrays.py). ``np.random`` and functions without a
``torch._numpy`` counterpart break; NumPy's Python helpers (``np.isscalar``) are traced as Python.
"""
from __future__ import annotations

import types

from ember.capture.variables.base import ConstantVariable, VariableTracker, unsupported
from ember.capture.variables.numpy_arrays import _BREAKING_METHODS, _np, _symbolic, _tnp_equivalent, numpy_call


class NumpyCallableVariable(VariableTracker):
    """A NumPy function, ufunc or scalar type (``np.sum``, ``np.add``, ``np.float32``)."""

    def __init__(self, fn, source=None):
        self.fn = fn
        self.source = source

    def describe(self):
        return f"numpy.{getattr(self.fn, '__name__', self.fn)}"

    def python_type(self):
        return type(self.fn)

    def is_constant(self):
        return isinstance(self.fn, type) and self.fn is not _np().dtype  # np.float32 as a dtype argument

    def as_constant(self):
        if self.is_constant():
            return self.fn
        return super().as_constant()

    def truth(self, tx):
        return True

    def getattr(self, tx, name):
        if name in ("__name__", "__qualname__"):
            return ConstantVariable(getattr(self.fn, name))
        raise unsupported("EB0031", f"attribute {name!r} of {self.describe()}")

    def call(self, tx, args, kwargs):
        fn = self.fn
        np = _np()
        is_type = isinstance(fn, type)
        if fn is np.dtype:
            consts = _constants(args, kwargs)
            if consts is None:
                raise unsupported("EB0053", "np.dtype of a traced value")
            try:
                return ConstantVariable(np.dtype(*consts[0], **consts[1]))
            except Exception as e:
                from ember.exc import PythonException
                raise PythonException(e) from None
        tnp_fn = None if is_type else _tnp_equivalent(fn)
        if not is_type and tnp_fn is None:
            if "random" in (getattr(fn, "__module__", "") or ""):
                raise unsupported("EB0053", f"{self.describe()} draws from NumPy's global RNG (runs eagerly)")
            if isinstance(fn, types.FunctionType):
                # NumPy's Python helpers without a torch._numpy counterpart (np.isscalar): traced as
                # Python, what they call going through here again
                from ember.capture.variables.functions import UserFunctionVariable
                return UserFunctionVariable(fn, self.source).call(tx, args, kwargs)
            raise unsupported("EB0053", f"{self.describe()} has no torch._numpy equivalent (runs eagerly)")
        consts = _constants(args, kwargs)
        if consts is not None:
            cargs, ckwargs = consts
            try:
                import warnings
                with warnings.catch_warnings():
                    warnings.simplefilter("error")  # (a warning eager would print: let eager run it)
                    result = fn(*cargs, **ckwargs)
            except Warning:
                raise unsupported("EB0053", f"{self.describe()} warns on these constants (runs eagerly)") from None
            except Exception as e:
                from ember.exc import PythonException
                raise PythonException(e) from None
            if _constant_result(result):
                from ember.capture.variables.builtins import wrap_constant
                return wrap_constant(result)
            if is_type or not isinstance(result, np.ndarray):
                raise unsupported("EB0053", f"{self.describe()} returned a {type(result).__name__}")
        elif is_type:
            raise unsupported("EB0053", f"{self.describe()} of a traced value")
        return numpy_call(tx, "fn", tnp_fn, args, kwargs, label=fn.__name__, np_callable=fn)


def constant_attribute(tx, value, name):
    """An attribute of a NumPy scalar or dtype constant (``np.float32(2).item()``, ``dt.itemsize``):
    computed now when it is a constant; methods run on constants only, and only those that return
    constants (``.reshape`` makes an array, ``.tofile`` writes a file: they run eagerly)."""
    try:
        attr = getattr(value, name)
    except AttributeError as e:
        from ember.capture.variables.objects import MissingAttribute
        raise MissingAttribute(str(e)) from None
    if callable(attr) and not isinstance(attr, type):
        return _ConstantNumpyMethod(value, name)
    if not _constant_result(attr) and not isinstance(attr, type):
        raise unsupported("EB0031", f"attribute {name!r} of a NumPy {type(value).__name__}")
    from ember.capture.variables.builtins import wrap_constant
    return wrap_constant(attr)


class _ConstantNumpyMethod(VariableTracker):
    def __init__(self, value, name):
        self.value, self.name = value, name

    def describe(self):
        return f"{type(self.value).__name__}.{self.name}"

    def truth(self, tx):
        return True

    def reconstruct(self, plan) -> str:
        """At a break before the call: the same method of the same constant."""
        return f"___getattr({plan.expr(ConstantVariable(self.value))}, {self.name!r})"

    def call(self, tx, args, kwargs):
        consts = _constants(args, kwargs)
        if consts is None or self.name in _BREAKING_METHODS - {"item", "tolist", "__bool__", "__int__", "__float__",
                                                                "__index__", "__complex__"}:
            raise unsupported("EB0053", f"{self.describe()} (runs eagerly)")
        try:
            result = getattr(self.value, self.name)(*consts[0], **consts[1])
        except Exception as e:
            from ember.exc import PythonException
            raise PythonException(e) from None
        if not _constant_result(result):
            raise unsupported("EB0053", f"{self.describe()} returned a {type(result).__name__} (runs eagerly)")
        from ember.capture.variables.builtins import wrap_constant
        return wrap_constant(result)


def _constant_result(value) -> bool:
    np = _np()
    if isinstance(value, (tuple, list)):
        return all(_constant_result(v) for v in value)
    return isinstance(value, (np.generic, np.dtype, int, float, bool, complex, str, type(None)))


def _constants(args, kwargs):
    """(args, kwargs) as Python values when every argument is a constant, else None."""
    try:
        return [_constant(a) for a in args], {k: _constant(v) for k, v in kwargs.items()}
    except _NotConstant:
        return None


class _NotConstant(Exception):
    pass


def _constant(vt):
    from ember.capture.variables.containers import ListVariable, TupleVariable
    from ember.capture.variables.numpy_arrays import NumpyNdarrayVariable
    if _symbolic(vt) or isinstance(vt, NumpyNdarrayVariable):
        raise _NotConstant  # (np.ones([2, n]) of a dynamic n: traced, not folded at n's value)
    if isinstance(vt, (ListVariable, TupleVariable)):
        items = [_constant(i) for i in vt.items]
        return items if isinstance(vt, ListVariable) else tuple(items)
    if vt.is_constant():
        return vt.as_constant()
    raise _NotConstant
