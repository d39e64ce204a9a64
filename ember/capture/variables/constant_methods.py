"""Attributes and methods of Python constants (``"{:.2f}".format``, ``(3).bit_length``, a
NumPy scalar's): called on constant arguments as eager calls them."""
from __future__ import annotations

import operator

from ember.capture.variables.base import ConstantVariable, VariableTracker, unsupported
from ember.capture.variables.containers import TupleVariable
from ember.capture.variables.symbolic import dynamic_number
from ember.exc import PythonException


def wrap_constant(value) -> VariableTracker:
    from ember.capture.variables.builtins import wrap_constant as wrap  # (builtins imports this module)
    return wrap(value)


def _constants(vts) -> bool:
    return all(v.is_constant() for v in vts)

# Methods of constants whose first argument is any iterable (consumed whole).
_ITERABLE_ARG_METHODS = {"join", "union", "intersection", "difference", "symmetric_difference", "issubset",
                         "issuperset", "isdisjoint", "update", "extend"}


def _dict_like(vt) -> bool:
    """A dict or a keys view (iterating either gives the keys alone)."""
    from ember.capture.variables.containers import DictVariable
    from ember.capture.variables.dict_views import DictViewVariable
    if isinstance(vt, DictViewVariable):
        return getattr(vt, "kind", None) == "keys"
    import collections
    return isinstance(vt, DictVariable) and vt.python_type() in (dict, collections.OrderedDict,
                                                                collections.defaultdict, collections.Counter)


class ConstantMethodVariable(VariableTracker):
    def __init__(self, value, name):
        self.value = value
        self.name = name

    def describe(self):
        return f"{type(self.value).__name__}.{self.name}"

    def reconstruct(self, cg) -> str:
        """At a break (``"{:.2f}".format(t.item())``): the same method of the same constant."""
        return f"___getattr({cg.expr(wrap_constant(self.value))}, {self.name!r})"

    def truth(self, tx):
        return True

    def getattr(self, tx, name):
        if name == "__self__":
            return wrap_constant(self.value)
        if name in ("__name__", "__qualname__", "__doc__", "__text_signature__"):
            try:
                return ConstantVariable(getattr(getattr(self.value, self.name), name))
            except AttributeError as e:
                raise PythonException(e) from None
        return super().getattr(tx, name)

    def call(self, tx, args, kwargs):
        from ember.capture.variables.generators import IteratorBase
        if self.name in _ITERABLE_ARG_METHODS and args and isinstance(args[0], IteratorBase):
            args = [TupleVariable(args[0].unpack(tx)), *args[1:]]  # str.join(generator) consumes it
        elif self.name in _ITERABLE_ARG_METHODS and args and _dict_like(args[0]):
            # ",".join(d) / frozenset.union(d.keys()): only the keys are read (the values, a float
            # argument, must not be pinned by reading the whole dict as a constant)
            args = [TupleVariable(args[0].iter(tx).unpack(tx)), *args[1:]]
        if isinstance(self.value, str) and self.name in ("format", "__mod__") \
                and any(dynamic_number(a) for a in (*args, *kwargs.values())):
            # "{}".format(x.size(0)): a break as torch.compile's (the size stays dynamic)
            raise unsupported("EB0036", f"{self.describe()} of a dynamic size needs its exact value")
        if _constants(args) and _constants(kwargs.values()):
            try:
                result = getattr(self.value, self.name)(*[a.as_constant() for a in args],
                                                        **{k: v.as_constant() for k, v in kwargs.items()})
            except Exception as e:
                raise PythonException(e) from None  # eager raises this very exception
            return wrap_constant(result)
        if isinstance(self.value, str) and self.name == "format":
            from ember.capture.variables.user_operators import format_objects
            return format_objects(tx, self.value, args, kwargs)
        op = getattr(operator, self.name.strip("_"), None) if self.name.startswith("__") else None
        if op is not None and len(args) == 1:
            return tx.binary_op(op, ConstantVariable(self.value), args[0])
        raise unsupported("EB0036", f"{self.describe()} with non-constant arguments")


def constant_attribute(tx, cvt: ConstantVariable, name: str) -> VariableTracker:
    value = cvt.value
    if type(value).__module__ == "numpy":  # a NumPy scalar or dtype: see numpy_arrays.constant_attribute
        from ember.capture.variables.numpy_callables import constant_attribute as numpy_attribute
        return numpy_attribute(tx, value, name)
    method = _enum_method(value, name)
    if method is not None:  # `red.apply(t)`: a method the program's Enum class defines, inlined
        from ember.capture.variables.functions import UserFunctionVariable, UserMethodVariable
        if isinstance(method, property):  # (its getter, run as eager runs it: on every read)
            return UserFunctionVariable(method.fget).call(tx, [cvt], {})
        if isinstance(method, staticmethod):
            return UserFunctionVariable(method.__func__)
        return UserMethodVariable(UserFunctionVariable(method), cvt)
    try:
        attr = getattr(value, name)
    except AttributeError as e:
        from ember.capture.variables.objects import MissingAttribute
        raise MissingAttribute(str(e)) from None  # eager's message
    if callable(attr) and not isinstance(attr, type):
        return ConstantMethodVariable(value, name)
    return wrap_constant(attr)




def _enum_method(value, name: str):
    """The Python function (or property, staticmethod of one) ``name`` an Enum member's own class
    (or a mixin of the program's) defines, or None (enum's own members and attributes, builtins:
    read as constants)."""
    import enum
    import types
    if not isinstance(value, enum.Enum):
        return None
    for klass in type(value).__mro__:
        if name in vars(klass):
            attr = vars(klass)[name]
            if klass.__module__ == "enum":
                return None
            if isinstance(attr, property) and isinstance(attr.fget, types.FunctionType) or \
                    isinstance(attr, staticmethod) and isinstance(attr.__func__, types.FunctionType):
                return attr
            return attr if isinstance(attr, types.FunctionType) else None
    return None
