"""Classes as values: ``ClassVariable`` (a class read from outside or made known by ``type(obj)``).

Its attributes resolve like the class's (static lookup, guarded by identity of what was read),
calling it constructs a value (``builtins.construct``), plain Enum classes answer lookups by value
and name, and ``Cls.count += 1`` is recorded and replayed like an attribute write on an object.
"""
from __future__ import annotations

import inspect
import types

from ember.capture.sources import AttrSource, CallSource
from ember.capture.variables.base import ConstantVariable, unsupported
from ember.capture.variables.objects import MissingAttribute, _guard_absent, class_source, pending_class_attribute
from ember.exc import PythonException


_HEAPTYPE = 1 << 9  # Py_TPFLAGS_HEAPTYPE: a class made by a class statement (not a builtin type)


class ClassVariable(ConstantVariable):
    """A class object, e.g. for ``isinstance`` or to construct a value: a constant that can also
    be called and whose attributes resolve like the class's."""

    def describe(self):
        return f"class {self.value.__qualname__}"

    def getattr(self, tx, name):
        from ember.capture.builder import _TRUSTED_MODULES, wrap
        cls = self.value
        base = self.source
        if base is None and (getattr(cls, "__module__", None) or "").split(".")[0] not in _TRUSTED_MODULES:
            base = class_source(cls)  # a class the trace knows (e.g. type(obj)): re-read it by identity
        if isinstance(cls, type):
            pending = pending_class_attribute(tx, cls, name)
            if pending is not None:
                return pending
            if name == "__dict__" and tx.side_effects.has_attrs(cls):
                raise unsupported("EB0032", f"reading the __dict__ of class {cls.__qualname__} after assigning its attributes")
        if name == "__subclasses__" and isinstance(cls, type) and type(cls).__subclasses__ is type.__subclasses__:
            return SubclassesVariable(cls)
        from ember.capture.variables.new_module import class_attribute_override
        override = class_attribute_override(cls, name)
        if override is not None:
            return override
        try:
            raw = inspect.getattr_static(cls, name)
        except AttributeError:
            _guard_absent(tx, base, cls, name)
            raise MissingAttribute(f"type object '{cls.__name__}' has no attribute '{name}'") from None
        src = AttrSource(base, name) if base is not None else None
        from ember import compat
        if compat.is_apply_descriptor(raw):  # `MyFunction.apply` where torch's apply is in C (2.14+)
            from ember.capture.variables.functions import UserFunctionVariable, UserMethodVariable
            if base is not None:
                tx.guards.id_match(CallSource(inspect.getattr_static, base, (name,)), raw)
            return UserMethodVariable(UserFunctionVariable(compat.FUNCTION_APPLY), self)
        if isinstance(raw, (staticmethod, classmethod)) or isinstance(raw, types.FunctionType):
            value = getattr(cls, name)
            if isinstance(value, types.MethodType):
                from ember.capture.variables.functions import UserFunctionVariable, UserMethodVariable
                fsrc = AttrSource(src, "__func__") if src is not None else None
                if fsrc is not None and isinstance(value.__func__, types.FunctionType):
                    tx.guards.id_match(fsrc, value.__func__)
                return UserMethodVariable(UserFunctionVariable(value.__func__, fsrc), self)
            if src is not None and isinstance(value, types.FunctionType):
                from ember.capture.variables.functions import UserFunctionVariable
                tx.guards.id_match(src, value)  # a method read off its class: identity, like a callable
                return UserFunctionVariable(value, src)
            return wrap(tx, value, src)
        return wrap(tx, getattr(cls, name), src)

    def setattr(self, tx, name, value):
        """``Cls.count += 1``: recorded like an attribute write on an object, replayed with
        ``setattr(cls, ...)`` after the graph; reads in the frame (``Cls.count``, ``self.count``, a
        subclass's) see it. Only a plain value over a plain value: a function, property or other
        descriptor would change how instances bind the name, and a metaclass may intercept it."""
        cls = self.value
        plain_value = True
        try:
            plain_value = not hasattr(value.python_type(), "__get__")
        except Exception:
            plain_value = False
        old = inspect.getattr_static(cls, name, None) if isinstance(cls, type) else None
        if not isinstance(cls, type) or not (cls.__flags__ & _HEAPTYPE) \
                or type(cls).__setattr__ is not type.__setattr__ \
                or (name.startswith("__") and name.endswith("__")) \
                or any(name in k.__dict__ for k in type(cls).__mro__) \
                or not plain_value or hasattr(type(old), "__get__") or isinstance(old, type):
            return super().setattr(tx, name, value)
        target = self if self.source is not None else ClassVariable(cls, class_source(cls))
        tx.side_effects.store_attr(target, cls, name, value)

    def call(self, tx, args, kwargs):
        from ember.capture.variables.builtins import construct
        return construct(tx, self.value, args, kwargs)  # (an Enum called with a value: its member)

    def unpack(self, tx):
        if _plain_enum(self.value):
            return [ConstantVariable(member) for member in self.value]  # `for m in Color`
        return super().unpack(tx)

    def call_method(self, tx, name, args, kwargs):
        if _plain_enum(self.value) and name in ("__getitem__", "__contains__", "__len__") and \
                not kwargs and all(a.is_constant() for a in args):
            try:  # `Color["RED"]`, `Color.RED in Color`, len(Color)
                return ConstantVariable(getattr(self.value, name)(*[a.as_constant() for a in args]))
            except Exception as e:
                raise PythonException(e) from None
        if name == "__getitem__" and not kwargs and len(args) == 1 and _typing_subscript(self.value):
            alias = _generic_alias(tx, self.value, args[0])
            if alias is not None:
                return alias
        return super().call_method(tx, name, args, kwargs)


def _typing_subscript(cls) -> bool:
    """``cls[...]`` makes a typing alias (``OrderedSet[T]``, ``list[int]``, ``Box[T]`` of a Generic):
    the metaclass has no ``__getitem__`` and the class's ``__class_getitem__`` is typing's own
    (pure: it only builds an alias object)."""
    import typing
    if not isinstance(cls, type) or any("__getitem__" in k.__dict__ for k in type(cls).__mro__):
        return False
    try:
        raw = inspect.getattr_static(cls, "__class_getitem__")
    except AttributeError:
        return False
    func = getattr(raw, "__func__", None)
    generic = typing.Generic.__dict__["__class_getitem__"]  # (3.12+: C code, a classmethod_descriptor)
    # (``collections.abc.Callable``'s is its own GenericAlias subclass, as pure: ``Callable[[T], Any]``)
    alias_class = isinstance(func, type) and issubclass(func, types.GenericAlias)
    return alias_class or raw is generic or func is getattr(generic, "__func__", generic) \
        or (type(raw).__name__ == "classmethod_descriptor" and raw.__objclass__ in (list, dict, set, frozenset, tuple, type))


_NOT = object()


def _generic_alias(tx, cls, index):
    """The alias ``cls[index]``, made now, when the parameters are constants or objects read from
    outside (a ``TypeVar``: guarded by identity); None for anything else."""
    from ember.capture.builder import pin_identity
    from ember.capture.variables.builtins import wrap_constant
    from ember.capture.variables.containers import TupleVariable
    from ember.capture.variables.objects import UserObjectVariable
    from ember.capture.variables.containers import ListVariable

    def param(item):
        """One parameter's value, or _NOT for one that is not fixed now. A list of them is
        ``Callable``'s argument list (``Callable[[int, T], Any]``)."""
        if item.is_constant():
            return item.as_constant()
        if isinstance(item, UserObjectVariable) and item.source is not None:
            pin_identity(tx, item)
            return item.obj
        if isinstance(item, ListVariable):
            inner = [param(i) for i in item.items]
            return _NOT if any(v is _NOT for v in inner) else inner
        return _NOT

    items = index.items if isinstance(index, TupleVariable) else [index]
    values = [param(item) for item in items]
    if any(v is _NOT for v in values):
        return None
    try:
        return wrap_constant(cls[tuple(values) if isinstance(index, TupleVariable) else values[0]])
    except Exception as e:
        raise PythonException(e) from None


def _plain_enum(cls) -> bool:
    """An Enum class whose lookups (by value, by name, iteration) are enum's own: pure, and their
    answers are the class's fixed members."""
    import enum
    return isinstance(cls, type) and issubclass(cls, enum.Enum) and type(cls) is enum.EnumMeta and \
        getattr(getattr(cls, "_missing_", None), "__module__", None) == "enum"



class SubclassesVariable(ConstantVariable):
    """``cls.__subclasses__`` (bound): calling it lists the live direct subclasses now, guarded by
    re-listing them (a subclass defined or collected later changes the answer)."""

    def __init__(self, cls):
        super().__init__(cls.__subclasses__)
        self.cls = cls

    def describe(self):
        return f"{self.cls.__qualname__}.__subclasses__"

    def call(self, tx, args, kwargs):
        from ember.capture.sources import CallSource
        from ember.capture.variables.containers import ListVariable
        if args or kwargs:
            raise PythonException(TypeError(f"type.__subclasses__() takes no arguments ({len(args) + len(kwargs)} given)"))
        subclasses = type.__subclasses__(self.cls)
        tx.guards.equals(CallSource(type.__subclasses__, class_source(self.cls), ()), subclasses)
        return ListVariable([ClassVariable(c) for c in subclasses])


def typing_origin(classes):
    """The class(es) ``isinstance`` checks for an unsubscripted typing alias (``typing.Sequence``:
    collections.abc.Sequence; read through its guarded module attribute), alone or in a tuple of
    classes, else None."""
    import typing
    items = getattr(classes, "items", None)
    if type(classes).__name__ == "TupleVariable" and any(typing_origin(i) is not None for i in items):
        return tuple(typing_origin(i) or i.as_constant() for i in items)
    alias = getattr(classes, "obj", None)
    if isinstance(alias, typing._SpecialGenericAlias):
        return alias.__origin__
    return None
