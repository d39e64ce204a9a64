"""Objects of user classes created inside the frame (``Point(x, y)``, dataclasses, dict subclasses).

The object exists only as a tracker while tracing: ``__init__`` is inlined with
the tracker as ``self``, attribute writes go into ``attrs``, and a dict
subclass keeps its items in a `DictVariable`. If the object escapes (it is
returned or stored somewhere outside), the generated code rebuilds it after
the graph runs: ``cls.__new__(cls)``, the items, then ``__dict__``.
"""
from __future__ import annotations

import collections
import types

from ember.capture.variables import attr_messages
from ember.capture.variables.base import ConstantVariable, VariableTracker, unsupported
from ember.capture.variables.containers import DictVariable
from ember.exc import PythonException

_DICT_BASES = (dict, collections.OrderedDict)


def hashed_by_identity(cls: type) -> bool:
    """Instances of ``cls`` hash and compare by identity (what keying a tracker by its id models);
    a class with its own ``__eq__``/``__hash__`` (a dataclass: unhashable) does not."""
    return getattr(cls, "__hash__", None) is object.__hash__ and getattr(cls, "__eq__", None) is object.__eq__


def python_new(cls: type):
    """The Python ``__new__`` of a class otherwise constructible as a plain object, or None."""
    raw = _lookup(cls, "__new__")
    fn = raw.__func__ if isinstance(raw, staticmethod) else raw
    if not isinstance(fn, types.FunctionType) or not constructible(cls, any_new=True):
        return None
    return fn


def dataclass_value_fields(cls: type):
    """The compared fields of a dataclass whose ``__eq__`` and ``__hash__`` are the generated ones
    (``eq=True`` with ``frozen=True`` or ``unsafe_hash=True``): two instances are equal keys iff they
    have the same class and equal field tuples. None for any other class."""
    import dataclasses
    params = getattr(cls, "__dataclass_params__", None)
    if params is None or not params.eq or not (params.frozen or params.unsafe_hash):
        return None
    # (dataclasses makes them with exec: their code comes from "<string>")
    generated = all(getattr(getattr(getattr(cls, n, None), "__code__", None), "co_filename", None) == "<string>"
                    for n in ("__eq__", "__hash__"))
    if not generated:
        return None
    return [f.name for f in dataclasses.fields(cls) if f.compare]


def _field_key(vt, cls):
    """A dataclass key's part for one field: its constant, or a nested value-like dataclass's key."""
    if vt.is_constant():
        return vt.as_constant()
    if isinstance(vt, NewObjectVariable):
        key = vt.hash_key()
        if key[0] == "__dataclass__":
            return key
    raise unsupported("EB0035", f"a {cls.__name__} object (its own __eq__/__hash__) as a dict key or set element")


def constructible(cls: type, any_new: bool = False) -> bool:
    import torch
    if issubclass(cls, (torch.nn.Module, torch.Tensor, BaseException)):
        return False
    if type(cls).__call__ is not type.__call__:
        # a metaclass that changes instance creation (one that only customises class creation,
        # ABCMeta, or transformers' ModelOutput metaclass that renames __init__ kwargs, is fine)
        return False
    new = object.__new__ if any_new else cls.__new__
    dict_base = next((b for b in cls.__mro__ if b in _DICT_BASES), None)
    if any_new and dict_base is not None:  # (its Python __new__ reaches dict's: see ContainerNewFunction)
        new = dict_base.__new__
    if new is object.__new__:
        return dict_base is None and all(b.__module__ != "builtins" or b is object for b in cls.__mro__)
    return dict_base is not None and new in (dict.__new__, collections.OrderedDict.__new__) and all(
        b in _DICT_BASES or b is object or b.__module__ != "builtins" for b in cls.__mro__)


def rebuild(cls, attrs: dict, items):
    """Runtime helper for generated code: make the object the trace described (never through the
    class's own ``__new__``: the trace already ran it)."""
    obj = cls.__new__(cls) if items is not None or cls is types.SimpleNamespace else object.__new__(cls)
    if items is not None:
        setter = collections.OrderedDict.__setitem__ if isinstance(obj, collections.OrderedDict) \
            else dict.__setitem__
        for k, v in items:
            setter(obj, k, v)
    if _has_slots(cls):  # a slot is a descriptor on the class: set through it, not in __dict__
        for k, v in attrs.items():
            object.__setattr__(obj, k, v)
    else:
        obj.__dict__.update(attrs)
    return obj


def _has_slots(cls: type) -> bool:
    return any(isinstance(v, types.MemberDescriptorType) for k in cls.__mro__ for v in vars(k).values())


class NewObjectVariable(VariableTracker):
    def __init__(self, cls: type):
        from ember.capture.variables.containers import BIRTHS
        self.cls = cls
        self.born = next(BIRTHS)  # (creation order, as containers': see autograd_function's ctx attributes)
        self.attrs: dict[str, VariableTracker] = {}
        self.dict_base = next((b for b in cls.__mro__ if b in _DICT_BASES), None)
        self.items = DictVariable({}, dict_cls=self.dict_base) if self.dict_base else None
        if self.items is not None:
            self.items.owner = self  # (d[missing] consults the subclass's __missing__)
        self._dict_view: DictVariable | None = None  # `obj.__dict__`, once read: shares `attrs`

    def python_type(self):
        return self.cls

    def describe(self):
        return f"new {self.cls.__qualname__} object"

    def hash_key(self):
        if not hashed_by_identity(self.cls):
            names = dataclass_value_fields(self.cls)
            if names is not None and all(n in self.attrs for n in names):
                # equal keys iff same class and equal fields; a field may itself be such a dataclass
                return ("__dataclass__", self.cls, tuple(_field_key(self.attrs[n], self.cls) for n in names))
            raise unsupported("EB0035", f"a {self.cls.__name__} object (its own __eq__/__hash__) as a dict key or set element")
        return ("__new_object__", id(self))

    def truth(self, tx):
        if self.items is not None and "__bool__" not in self._class_dict_names() \
                and "__len__" not in self._class_dict_names():
            return bool(self.items.items)
        if _lookup(self.cls, "__bool__") or _lookup(self.cls, "__len__"):
            meth = "__bool__" if _lookup(self.cls, "__bool__") else "__len__"
            from ember.capture.variables.user_operators import checked_truth
            return checked_truth(meth, self.getattr(tx, meth).call(tx, [], {}))
        return True

    def _class_dict_names(self):
        names = set()
        for klass in self.cls.__mro__:
            if klass in _DICT_BASES or klass is object:
                break
            names.update(klass.__dict__)
        return names

    def getattr(self, tx, name):
        from ember.capture.variables.objects import with_getattr_fallback
        return with_getattr_fallback(tx, self, self.cls, name, lambda: self._getattribute(tx, name))

    def _getattribute(self, tx, name):
        custom = _lookup(self.cls, "__getattribute__")
        if isinstance(custom, types.FunctionType):
            # A Python __getattribute__ (HF configs' attribute_map) runs; object.__getattribute__
            # inside it is `generic_getattr`.
            from ember.capture.variables.functions import UserFunctionVariable, UserMethodVariable
            return UserMethodVariable(UserFunctionVariable(custom), self).call(tx, [ConstantVariable(name)], {})
        return self.generic_getattr(tx, name)


    def generic_getattr(self, tx, name):
        from ember.capture.builder import wrap
        from ember.capture.variables.functions import UserFunctionVariable, UserMethodVariable
        from ember.capture.variables.objects import ClassVariable, MissingAttribute
        descriptor = self._python_data_descriptor(tx, name, "__get__")
        if descriptor is not None:  # a data descriptor on the class wins over the instance's dict
            desc_vt, method = descriptor
            return UserFunctionVariable(method).call(tx, [desc_vt, self, ClassVariable(self.cls)], {})
        if name in self.attrs:
            return self.attrs[name]
        if name == "__class__":
            return ClassVariable(self.cls)
        if name == "__weakref__" and self.cls.__weakrefoffset__ != 0 and \
                isinstance(_lookup(self.cls, "__weakref__"), types.GetSetDescriptorType):
            return ConstantVariable(None)  # (no weak reference to an object made in the frame exists)
        if name == "__dict__" and self.cls.__dictoffset__ != 0:
            if _has_slots(self.cls):  # (its slots are not in __dict__; `attrs` holds both)
                raise unsupported("EB0031", f"the __dict__ of a {self.cls.__name__} object (with slots) made in the frame")
            if self._dict_view is None:
                self._dict_view = DictVariable.sharing(self.attrs)
            return self._dict_view
        from ember.capture.sources import AttrSource
        from ember.capture.variables.objects import class_member, class_source, pending_class_attribute
        pending = pending_class_attribute(tx, self.cls, name)
        if pending is not None:  # a class attribute the frame assigned (`Cls.count += 1`)
            return pending
        attr = _lookup(self.cls, name)
        if isinstance(attr, types.MemberDescriptorType) and attr.__objclass__ in self.cls.__mro__ \
                and attr.__objclass__.__module__ != "builtins":
            raise MissingAttribute(attr_messages.unset_slot(self.cls, name))
        if attr is None:
            tx.guards.not_on_mro(class_source(self.cls), name)  # the class may gain it
            getattr_hook = _lookup(self.cls, "__getattr__")
            if isinstance(getattr_hook, types.FunctionType):
                from ember.capture.variables.objects import call_getattr_hook
                return call_getattr_hook(tx, self, self.cls, name)
            raise MissingAttribute(f"'{self.cls.__name__}' object has no attribute '{name}'")
        # Methods and properties come from the class, which may be monkeypatched: guard the lookup.
        member = class_member(tx, attr, AttrSource(class_source(self.cls), name), self, self.cls)
        if member is not None:
            return member
        if self.items is not None and isinstance(attr, (types.MethodDescriptorType, types.WrapperDescriptorType,
                                                        types.BuiltinMethodType)):
            from ember.capture.variables.functions import BoundMethodVariable
            return BoundMethodVariable(self, name)
        if hasattr(attr, "__get__") and not isinstance(attr, (int, float, str, bool, type(None), tuple)):
            getter = getattr(type(attr), "__get__", None)
            if isinstance(getter, types.FunctionType):
                # A non-data descriptor of a Python class (`torch.distributions.utils.lazy_property`,
                # functools.cached_property is C): the instance dict missed, so its __get__ runs.
                from ember.capture.sources import CallSource
                from ember.capture.variables.objects import class_source
                desc_vt = wrap(tx, attr, CallSource(_lookup, class_source(self.cls), (name,)))
                return UserFunctionVariable(getter).call(tx, [desc_vt, self, ClassVariable(self.cls)], {})
            raise unsupported("EB0031", f"descriptor {name!r} of {self.cls.__name__}")
        # A plain class attribute, read through the class's lookup: guarded (the class may rebind it
        # between calls) and the very object (a class-level list the frame appends to is the one
        # `Cls.items` reads, and its mutations reach it).
        from ember.capture.sources import CallSource
        return wrap(tx, attr, CallSource(_lookup, class_source(self.cls), (name,)))

    def setattr(self, tx, name, value):
        """``obj.name = value``: the class's own Python ``__setattr__`` first (it decides, as in
        Python: a property of the class is only reached through its ``object.__setattr__``), else
        `generic_setattr`."""
        custom = _lookup(self.cls, "__setattr__")
        if isinstance(custom, types.FunctionType):
            from ember.capture.variables.functions import UserFunctionVariable
            UserFunctionVariable(custom).call(tx, [self, ConstantVariable(name), value], {})
            return
        self.generic_setattr(tx, name, value)

    def generic_setattr(self, tx, name, value):
        """``object.__setattr__(obj, name, value)``: a property's setter or a Python data descriptor's
        ``__set__`` of the class runs; else the instance attribute is written."""
        if name in ("__class__", "__dict__"):
            raise unsupported("EB0032", f"assigning {name} of a {self.cls.__qualname__} object made in the frame")
        attr = _lookup(self.cls, name)
        if isinstance(attr, property):
            if attr.fset is None:  # (eager's error: a handler in the frame may catch it)
                failure = PythonException(AttributeError(f"property {name!r} of {self.cls.__name__!r} object has no setter"))
                failure.replayable = True  # (uncaught: the assignment, run eagerly, raises it again)
                raise failure
            from ember.capture.variables.functions import UserFunctionVariable
            UserFunctionVariable(attr.fset).call(tx, [self, value], {})
            return
        descriptor = self._python_data_descriptor(tx, name, "__set__")
        if descriptor is not None:  # `obj.x = v` calls the class's descriptor: its __set__ decides
            from ember.capture.variables.functions import UserFunctionVariable
            desc_vt, method = descriptor
            UserFunctionVariable(method).call(tx, [desc_vt, self, value], {})
            return
        self.object_setattr(name, value)

    def _python_data_descriptor(self, tx, name, method_name):
        """(tracker of the descriptor, its Python ``method_name``) when the class attribute ``name``
        is a data descriptor (it has ``__set__`` or ``__delete__``) of a Python class; None if it is
        none, or a builtin one (property, slots) handled elsewhere."""
        attr = _lookup(self.cls, name)
        if attr is None or isinstance(attr, (property, types.MemberDescriptorType, types.GetSetDescriptorType)):
            return None
        kind = type(attr)
        if not (hasattr(kind, "__set__") or hasattr(kind, "__delete__")):
            return None
        method = getattr(kind, method_name, None)
        if not isinstance(method, types.FunctionType):
            raise unsupported("EB0031", f"descriptor {name!r} of {self.cls.__name__} without a Python {method_name}")
        from ember.capture.builder import wrap
        from ember.capture.sources import CallSource
        from ember.capture.variables.objects import class_source
        # (read from the classes' __dict__: `cls.name` would call the descriptor's __get__)
        return wrap(tx, attr, CallSource(_lookup, class_source(self.cls), (name,))), method

    def _write_attr(self, name, value):
        self.attrs[name] = value
        if self._dict_view is not None:
            self._dict_view.keys.setdefault(name, ConstantVariable(name))

    def delattr(self, tx, name):
        custom = _lookup(self.cls, "__delattr__")
        if isinstance(custom, types.FunctionType):  # `del obj.x` calls it (it decides, as in Python)
            from ember.capture.variables.functions import UserFunctionVariable
            UserFunctionVariable(custom).call(tx, [self, ConstantVariable(name)], {})
            return
        if custom not in (None, object.__delattr__):
            raise unsupported("EB0008", f"deleting {name!r} on {self.cls.__name__} with a builtin __delattr__")
        self.object_delattr(tx, name)

    def object_delattr(self, tx, name):
        """``object.__delattr__(self, name)``: the class's own ``__delattr__`` bypassed."""
        attr = _lookup(self.cls, name)
        if isinstance(attr, property):
            if attr.fdel is None:
                raise PythonException(AttributeError(
                    f"property {name!r} of {self.cls.__name__!r} object has no deleter"))
            if not isinstance(attr.fdel, types.FunctionType):
                raise unsupported("EB0008", f"property {name!r} of {self.cls.__name__} with a builtin deleter")
            from ember.capture.variables.functions import UserFunctionVariable
            UserFunctionVariable(attr.fdel).call(tx, [self], {})
            return
        descriptor = self._python_data_descriptor(tx, name, "__delete__")
        if descriptor is not None:
            vt, method = descriptor
            from ember.capture.variables.functions import UserFunctionVariable
            UserFunctionVariable(method).call(tx, [vt, self], {})
            return
        if name not in self.attrs:
            from ember.capture.variables.objects import MissingAttribute
            if isinstance(attr, types.MemberDescriptorType):
                raise MissingAttribute(name)  # an unset slot: CPython says just its name
            if self.cls.__dictoffset__ == 0:
                raise MissingAttribute(attr_messages.cannot_set(self.cls, name))
            raise MissingAttribute(attr_messages.missing(self.cls, name))
        del self.attrs[name]
        if self._dict_view is not None:
            self._dict_view.keys.pop(name, None)

    def object_setattr(self, name, value):
        """``object.__setattr__(self, name, value)``: bypasses class-level __setattr__. Without an
        instance ``__dict__`` only the class's slots can be set."""
        if self.cls.__dictoffset__ == 0 and not isinstance(_lookup(self.cls, name), types.MemberDescriptorType):
            raise PythonException(AttributeError(attr_messages.cannot_set(self.cls, name)))
        self._write_attr(name, value)

    def call_method(self, tx, name, args, kwargs):
        attr = _lookup(self.cls, name)
        if self.items is not None and (attr is None or not isinstance(attr, (types.FunctionType, property))):
            result = self.items.call_method(tx, name, args, kwargs)
            return self if result is self.items else result  # (`d.__ior__(x)` returns d itself)
        if name[:2] == "__" == name[-2:]:
            # an implicit call (`obj[k]`, `len(obj)`): Python looks on the type only (not the
            # instance dict or __getattr__) and raises TypeError without it
            if attr is None:
                raise unsupported("EB0038", f"{name} of {self.describe()} (its class defines none)")
            member = self.class_method(tx, name)
            if member is not None:
                return member.call(tx, args, kwargs)
        return self.getattr(tx, name).call(tx, args, kwargs)

    def class_method(self, tx, name):
        """``type(obj).name`` bound to this object (what an implicit call finds, whatever the
        instance dict holds), or None if that is not a function, property or classmethod."""
        from ember.capture.sources import AttrSource
        from ember.capture.variables.objects import class_member, class_source
        attr = _lookup(self.cls, name)
        return None if attr is None else class_member(tx, attr, AttrSource(class_source(self.cls), name), self,
                                                      self.cls)

    def unpack(self, tx):
        if self.items is not None and _lookup(self.cls, "__iter__") in (None, dict.__iter__,
                                                                        collections.OrderedDict.__iter__):
            return self.items.unpack(tx)
        it = _lookup(self.cls, "__iter__")
        if isinstance(it, types.FunctionType):
            result = checked_iterator(self.getattr(tx, "__iter__").call(tx, [], {}))
            if result is self:  # an iterator object (`__iter__` returns self): `__next__` until it stops
                return drain(tx, self)
            return result.unpack(tx)
        if it is None and isinstance(_lookup(self.cls, "__getitem__"), types.FunctionType):
            from ember.capture.polyfills.stdlib import sequence_iter
            from ember.capture.variables.functions import UserFunctionVariable
            return UserFunctionVariable(sequence_iter).call(tx, [self], {}).unpack(tx)  # obj[0], obj[1] ...
        raise unsupported("EB0034", f"iterating over {self.describe()}")

    def call(self, tx, args, kwargs):
        if isinstance(_lookup(self.cls, "__call__"), types.FunctionType):
            return self.getattr(tx, "__call__").call(tx, args, kwargs)
        return super().call(tx, args, kwargs)


_MAX_DRAINED = 10_000


def drain(tx, it) -> list:
    """The items an iterator object (a Python ``__next__``) produces until StopIteration."""
    items = []
    while True:
        try:
            items.append(it.call_method(tx, "__next__", [], {}))
        except PythonException as e:
            if isinstance(e.exc, StopIteration) or e.exc is StopIteration:
                return items
            raise
        if len(items) > _MAX_DRAINED:
            raise unsupported("EB0007", "an iterator object produced too many items (infinite iterator?)")


def checked_iterator(vt):
    """What ``iter()`` checks of a ``__iter__``'s answer: an iterator (it has ``__next__``)."""
    try:
        t = vt.python_type()
    except Exception:  # noqa: BLE001 - a tracker that cannot tell: not checked
        return vt
    if isinstance(t, type) and not hasattr(t, "__next__"):
        raise PythonException(TypeError(f"iter() returned non-iterator of type '{t.__name__}'"))
    return vt


def _lookup(cls, name):
    for klass in cls.__mro__:
        if name in klass.__dict__:
            return klass.__dict__[name]
    return None


def construct_with_new(tx, cls: type, new_fn, args: list, kwargs: dict) -> VariableTracker:
    """``cls(*args)`` for a class with a Python ``__new__``: it runs inlined (``object.__new__(cls)``
    inside it makes the object); ``__init__`` follows when it returned an instance of ``cls``."""
    from ember.capture.variables.functions import UserFunctionVariable
    from ember.capture.variables.objects import ClassVariable, class_source
    obj = UserFunctionVariable(new_fn).call(tx, [ClassVariable(cls, class_source(cls)), *args], kwargs)
    if isinstance(obj, NewObjectVariable):
        if issubclass(obj.cls, cls):
            _run_init(tx, obj, obj.cls, args, kwargs, new_overridden=True)
        return obj
    # an object that existed before (a singleton, a cache): Python still runs its __init__ when it
    # is an instance of cls
    real = getattr(obj, "obj", None)
    if real is not None and type(obj).__name__ == "UserObjectVariable":
        if isinstance(real, cls):
            _run_init(tx, obj, type(real), args, kwargs, new_overridden=True)
        return obj
    try:
        t = obj.python_type()
    except Exception:  # noqa: BLE001 - no type to tell
        raise unsupported("EB0042", f"{cls.__qualname__}.__new__ returned {obj.describe()}") from None
    if isinstance(t, type) and issubclass(t, cls):
        raise unsupported("EB0042", f"{cls.__qualname__}.__new__ returned an existing {t.__name__} (its __init__ runs)")
    return obj


class ObjectNewFunction(VariableTracker):
    """``object.__new__`` (what ``super().__new__(cls)`` in a ``__new__`` reaches): a new object."""

    def describe(self):
        return "object.__new__"

    def call(self, tx, args, kwargs):
        from ember.capture.variables.objects import ClassVariable
        if not args or not isinstance(args[0], ClassVariable) or not isinstance(args[0].value, type):
            raise unsupported("EB0042", "object.__new__ of something other than a class")
        cls = args[0].value
        if len(args) > 1 or kwargs:
            raise PythonException(TypeError("object.__new__() takes exactly one argument (the type to instantiate)"))
        if not constructible(cls, any_new=True):
            raise unsupported("EB0042", f"object.__new__({cls.__qualname__})")
        check_instantiable(cls)
        return NewObjectVariable(cls)


def check_instantiable(cls: type) -> None:
    """Eager's TypeError for an abstract class (``object.__new__`` refuses it, with its message)."""
    if getattr(cls, "__abstractmethods__", None):
        try:
            object.__new__(cls)
        except TypeError as e:
            raise PythonException(e) from None


def construct_object(tx, cls: type, args: list, kwargs: dict) -> NewObjectVariable:
    check_instantiable(cls)
    obj = NewObjectVariable(cls)
    _run_init(tx, obj, cls, args, kwargs)
    return obj


def _run_init(tx, obj, cls, args, kwargs, new_overridden: bool = False):
    from ember.capture.variables.functions import UserFunctionVariable
    init = _lookup(cls, "__init__")
    if isinstance(init, types.FunctionType):
        UserFunctionVariable(init).call(tx, [obj, *args], kwargs)
    elif init is object.__init__:
        if (args or kwargs) and not new_overridden:  # (a Python __new__ takes the arguments instead)
            raise unsupported("EB0002", f"{cls.__name__}() takes no arguments (TypeError)")
    elif obj.items is not None and init in (dict.__init__, collections.OrderedDict.__init__):
        obj.items.call_method(tx, "update", list(args), kwargs)
    else:
        raise unsupported("EB0042", f"{cls.__name__}.__init__ is not a Python function")


class ObjectSetattrFunction(VariableTracker):
    """``object.__setattr__`` (frozen dataclasses use it in ``__init__``)."""

    def describe(self):
        return "object.__setattr__"

    def call(self, tx, args, kwargs):
        obj, name, value = args
        if hasattr(obj, "generic_setattr"):  # bypasses the class's own __setattr__, as in Python
            obj.generic_setattr(tx, name.as_constant(), value)
        else:
            obj.setattr(tx, name.as_constant(), value)
        return ConstantVariable(None)


class ObjectDelattrFunction(VariableTracker):
    """``object.__delattr__`` (a custom ``__delattr__`` calls it for what it does not handle)."""

    def describe(self):
        return "object.__delattr__"

    def call(self, tx, args, kwargs):
        if kwargs or len(args) != 2 or not isinstance(args[0], NewObjectVariable) \
                or not isinstance(args[1].as_constant(), str):
            raise unsupported("EB0008", f"object.__delattr__ with {[a.describe() for a in args]}")
        args[0].object_delattr(tx, args[1].as_constant())
        return ConstantVariable(None)


class ModuleSetattrFunction(VariableTracker):
    """``nn.Module.__setattr__`` called by name (``nn.Module.__setattr__(self, name, value)``)."""

    def describe(self):
        return "nn.Module.__setattr__"

    def call(self, tx, args, kwargs):
        if kwargs or len(args) != 3 or not isinstance(args[1].as_constant(), str) \
                or not hasattr(args[0], "module_setattr"):
            raise unsupported("EB0037", f"nn.Module.__setattr__ with {[a.describe() for a in args]}")
        args[0].module_setattr(tx, args[1].as_constant(), args[2])
        return ConstantVariable(None)


class TupleNewFunction(VariableTracker):
    """``tuple.__new__(cls, iterable)`` (a namedtuple's ``_make``): a tuple of ``cls`` from the items."""

    def describe(self):
        return "tuple.__new__"

    def call(self, tx, args, kwargs):
        from ember.capture.variables.containers import TupleVariable
        from ember.capture.variables.objects import ClassVariable
        if kwargs and args and isinstance(args[0], ClassVariable):
            raise PythonException(TypeError("tuple() takes no keyword arguments"))
        if len(args) > 2 and isinstance(args[0], ClassVariable):
            raise PythonException(TypeError(f"tuple expected at most 1 argument, got {len(args) - 1}"))
        if not args or not isinstance(args[0], ClassVariable) or kwargs or len(args) > 2:
            raise unsupported("EB0042", "tuple.__new__ with these arguments")
        cls = args[0].value
        from ember.capture.variables.container_methods import guard_class_layout, plain_subclass
        plain = isinstance(cls, type) and plain_subclass(cls) is tuple
        if not (isinstance(cls, type) and issubclass(cls, tuple)) or \
                (cls is not tuple and not hasattr(cls, "_fields") and not plain):
            raise unsupported("EB0042", f"tuple.__new__({getattr(cls, '__qualname__', cls)})")
        if plain:
            guard_class_layout(tx, cls)  # (its methods are inlined)
        items = args[1].iter(tx).unpack(tx) if len(args) > 1 else []
        return TupleVariable(items, tuple_type=None if cls is tuple else cls)


class ContainerNewFunction(VariableTracker):
    """``list.__new__(cls, ...)`` / ``dict.__new__(cls, ...)`` / ``OrderedDict.__new__(cls, ...)``
    (also what ``super().__new__(cls, *args)`` in a subclass's ``__new__`` reaches): a new, empty
    container of ``cls``; the other arguments are ignored, as the C ``__new__`` ignores them
    (``__init__`` fills it)."""

    def __init__(self, base: type):
        self.base = base

    def describe(self):
        return f"{self.base.__name__}.__new__"

    def call(self, tx, args, kwargs):
        from ember.capture.variables.container_methods import guard_class_layout, plain_subclass
        from ember.capture.variables.containers import ListVariable
        from ember.capture.variables.objects import ClassVariable
        if not args or not isinstance(args[0], ClassVariable) or not isinstance(args[0].value, type):
            raise unsupported("EB0042", f"{self.describe()} of something other than a class")
        cls = args[0].value
        if not issubclass(cls, self.base):
            raise PythonException(TypeError(f"{self.describe()}({cls.__name__}): {cls.__name__} is not a subtype "
                                            f"of {self.base.__name__}"))
        if self.base is list:
            if cls is list:
                return ListVariable([])
            if plain_subclass(cls) is list:
                guard_class_layout(tx, cls)
                lst = ListVariable([])
                lst.list_cls = cls
                return lst
            raise unsupported("EB0042", f"list.__new__({cls.__qualname__})")
        if cls in _DICT_BASES:
            return DictVariable({}, dict_cls=cls)
        if constructible(cls, any_new=True):  # (OrderedDict's __new__ is dict's)
            check_instantiable(cls)
            return NewObjectVariable(cls)
        raise unsupported("EB0042", f"{self.describe()}({cls.__qualname__})")


def pybind11_enum_value(obj) -> int | None:
    """The value of a pybind11 enum member (``torch.nn.attention.SDPBackend.MATH``), whose C++
    ``__eq__``/``__hash__`` compare members of its type by value; None for anything else, and for
    an arithmetic enum (equal to plain ints, so not to be keyed apart from them)."""
    t = type(obj)
    if type(t).__name__ != "pybind11_type" or "__entries" not in t.__dict__:
        return None
    try:
        value = int(obj)
        if obj == value:
            return None
    except Exception:  # noqa: BLE001
        return None
    return value
