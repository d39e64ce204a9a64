"""``types.MappingProxyType``: a read-only, live view of a dict.

    mp = types.MappingProxyType(d); d["k"] = 1; mp["k"]      # 1: the proxy shows the dict as it is now
    isinstance(mp, types.MappingProxyType)                    # True (not a dict)
    mp["k"] = 2                                               # TypeError, as in eager

The tracker holds the dict's own tracker, so writes to the dict (through any name) show through the
proxy. A proxy from outside the frame is traced over the dict it wraps (found with the garbage
collector's referents: a proxy has no attribute naming it), read from the proxy's source, so that
the dict reached through another name is the same tracker (builder.wrap shares trackers by
identity). A proxy of a class namespace (``Cls.__dict__``) is not traced this way: the class's
attributes change through ``setattr``, which the dict tracker would not see.
"""
from __future__ import annotations

import gc
import operator
import types

from ember.capture.variables.base import VariableTracker, unsupported
from ember.exc import PythonException

_READ_METHODS = frozenset({"get", "keys", "values", "items", "copy", "__getitem__", "__contains__", "__len__",
                           "__iter__", "__reversed__"})


def proxy_target(mp: types.MappingProxyType):
    """The mapping a proxy wraps (what a guard re-reads on every call)."""
    refs = gc.get_referents(mp)
    return refs[0] if len(refs) == 1 else None


def _class_namespace(d) -> bool:
    """A dict that looks like a class's namespace (kept out: see the module docstring)."""
    return "__module__" in d and ("__doc__" in d or "__qualname__" in d or "__dict__" in d)


def wrap_mapping_proxy(tx, value: types.MappingProxyType, source):
    """The tracker for a proxy read from ``source``."""
    from ember.capture.builder import wrap
    from ember.capture.sources import CallSource
    from ember.capture.variables.containers import DictVariable
    target = proxy_target(value)
    if not isinstance(target, dict) or _class_namespace(target):
        raise unsupported("EB0031", f"a mappingproxy of a {type(target).__name__} (a class namespace?)")
    if source is not None:
        tx.guards.type_match(source, value)
    mapping = wrap(tx, target, CallSource(proxy_target, source, ()) if source is not None else None)
    if not isinstance(mapping, DictVariable):
        raise unsupported("EB0031", f"a mappingproxy of {mapping.describe()}")
    return MappingProxyVariable(mapping, source)


def make_mapping_proxy(tx, args: list, kwargs: dict) -> "MappingProxyVariable":
    """``types.MappingProxyType(mapping)`` called in the frame."""
    from ember.capture.variables.containers import DictVariable, dict_operand
    if kwargs or len(args) != 1:
        raise PythonException(TypeError(f"mappingproxy() takes exactly one argument ({len(args)} given)"))
    arg = args[0]
    if isinstance(arg, MappingProxyVariable):
        return MappingProxyVariable(arg.mapping)
    mapping = dict_operand(arg)
    if isinstance(mapping, DictVariable) and mapping is arg:
        return MappingProxyVariable(mapping)
    t = arg.python_type()
    if t in (list, tuple, set, frozenset, str, int, float, bool, type(None)):
        raise PythonException(TypeError(f"mappingproxy() argument must be a mapping, not {t.__name__}"))
    raise unsupported("EB0042", f"types.MappingProxyType({arg.describe()})")


class MappingProxyVariable(VariableTracker):
    """A ``mappingproxy`` over a dict tracker."""

    def __init__(self, mapping, source=None):
        self.mapping = mapping  # a DictVariable
        self.source = source

    def python_type(self):
        return types.MappingProxyType

    def describe(self):
        return f"mappingproxy({self.mapping.describe()})"

    def is_constant(self):
        return self.mapping.is_constant()

    def as_constant(self):
        return types.MappingProxyType(self.mapping.as_constant())

    def truth(self, tx):
        return self.mapping.truth(tx)

    def unpack(self, tx):
        return self.mapping.unpack(tx)

    def iter(self, tx):
        return self.mapping.iter(tx)

    def hash_key(self):
        raise PythonException(TypeError("unhashable type: 'mappingproxy'"))

    def getattr(self, tx, name):
        from ember.capture.variables.functions import BoundMethodVariable
        if name in _READ_METHODS or name in ("__eq__", "__ne__", "__or__", "__ror__", "__ior__"):
            return BoundMethodVariable(self, name)
        return super().getattr(tx, name)  # (a missing attribute: AttributeError, as in eager)

    def call_method(self, tx, name, args, kwargs):
        if name in _READ_METHODS:
            return self.mapping.call_method(tx, name, args, kwargs)
        if name == "__setitem__":
            raise PythonException(TypeError("'mappingproxy' object does not support item assignment"))
        if name == "__delitem__":
            raise PythonException(TypeError("'mappingproxy' object does not support item deletion"))
        if name == "__ior__":
            raise PythonException(TypeError("'|=' is not supported by mappingproxy; use '|' instead"))
        if name in ("__eq__", "__ne__") and len(args) == 1 and not kwargs:
            return self.mapping.call_method(tx, name, [unwrap_proxy(args[0])], {})
        if name == "__or__" and len(args) == 1 and not kwargs:
            return tx.binary_op(operator.or_, self.mapping, unwrap_proxy(args[0]))
        if name == "__ror__" and len(args) == 1 and not kwargs:
            return tx.binary_op(operator.or_, unwrap_proxy(args[0]), self.mapping)
        return super().call_method(tx, name, args, kwargs)

    def reconstruct(self, plan) -> str:
        """The caller's proxy itself, or a new proxy over the (rebuilt or caller's) dict."""
        if self.source is not None:
            return plan._read(self.source)
        from ember.capture.sources import bind
        return f"{bind(plan.scope, types.MappingProxyType, 'MappingProxyType')}({plan.expr(self.mapping)})"


def unwrap_proxy(vt):
    """The dict behind a proxy (what the proxy's ``==``, ``!=`` and ``|`` compute with), else ``vt``."""
    return vt.mapping if isinstance(vt, MappingProxyVariable) else vt


def proxy_operands(fn, a, b):
    """``(a, b)`` with proxies replaced by their dicts where CPython's proxy forwards ``fn`` to the
    dict (``==``, ``!=``, ``|``); ``|=`` on a proxy is eager's TypeError."""
    if not (isinstance(a, MappingProxyVariable) or isinstance(b, MappingProxyVariable)):
        return a, b
    if fn is operator.ior and isinstance(a, MappingProxyVariable):
        raise PythonException(TypeError("'|=' is not supported by mappingproxy; use '|' instead"))
    if fn in (operator.eq, operator.ne, operator.or_, operator.ior):
        return unwrap_proxy(a), unwrap_proxy(b)
    return a, b
