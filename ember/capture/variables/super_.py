"""``super()`` inside inlined methods."""
from __future__ import annotations

import functools
import types

from ember.capture.variables.base import VariableTracker, unsupported


class SuperVariable(VariableTracker):
    def __init__(self, cls: type, obj: VariableTracker):
        self.cls = cls
        self.obj = obj

    def python_type(self):
        return super

    def describe(self):
        return f"super({self.cls.__name__})"

    def getattr(self, tx, name):
        from ember.capture.builder import wrap
        from ember.capture.variables.functions import UserFunctionVariable, UserMethodVariable
        from ember.capture.variables.objects import ClassVariable
        # In a classmethod the second argument is the class itself: look up on its own MRO.
        on_class = isinstance(self.obj, ClassVariable) and isinstance(self.obj.value, type)
        if name == "__class__":  # super's own attribute, never looked up on the MRO
            return ClassVariable(super)
        real_type = self.obj.value if on_class else self.obj.python_type()
        mro = real_type.__mro__
        start = mro.index(self.cls) + 1 if self.cls in mro else len(mro)
        for klass in mro[start:]:
            if name in klass.__dict__:
                attr = klass.__dict__[name]
                if isinstance(attr, classmethod):
                    # guarded by re-doing the lookup, like the methods below
                    from ember.capture.sources import AttrSource, ConstSource
                    from ember.capture.variables.objects import class_member
                    sup = _super_object(self.cls, real_type)
                    src = AttrSource(ConstSource(sup, f"super({self.cls.__qualname__}, "
                                                      f"{real_type.__qualname__})"), name)
                    return class_member(tx, attr, src, ClassVariable(real_type), real_type)
                if type(self.obj).__name__ == "NewModuleVariable" and attr is _module_init():
                    from ember.capture.variables.new_module import ModuleInitVariable
                    return ModuleInitVariable(self.obj)
                if hasattr(self.obj, "module_member") and attr is _module_getattr():
                    return _GenericAttr(self.obj, "module_member")
                if hasattr(self.obj, "module_setattr") and attr is _module_setattr():
                    return _GenericAttr(self.obj, "module_setattr")
                if hasattr(self.obj, "generic_setattr") and attr is object.__setattr__:
                    return _GenericAttr(self.obj, "generic_setattr")
                if hasattr(self.obj, "generic_getattr") and attr is object.__getattribute__:
                    return _GenericAttr(self.obj, "generic_getattr")
                if attr is object.__new__:
                    from ember.capture.variables.new_object import ObjectNewFunction
                    return ObjectNewFunction()
                if isinstance(attr, (types.FunctionType, property, staticmethod)):
                    # Guarded by re-doing the same lookup (`super(C, T).name`): a class on the MRO
                    # may be monkeypatched later.
                    from ember.capture.sources import AttrSource, ConstSource
                    from ember.capture.variables.objects import class_member
                    sup = _super_object(self.cls, real_type)
                    src = AttrSource(ConstSource(sup, f"super({self.cls.__qualname__}, "
                                                      f"{real_type.__qualname__})"), name)
                    return class_member(tx, attr, src, self.obj, real_type)
                from ember.capture.variables.containers import ListVariable, SetVariable
                if (isinstance(self.obj, SetVariable) and klass in (set, frozenset)) or \
                        (isinstance(self.obj, ListVariable) and klass is list):
                    from ember.capture.variables.functions import BoundMethodVariable
                    return BoundMethodVariable(self.obj, name)  # the base type's own method
                from ember.capture.variables.new_object import NewObjectVariable
                if isinstance(self.obj, NewObjectVariable):
                    from ember.capture.variables import exception_objects as eo
                    if isinstance(self.obj, eo.ExceptionObjectVariable) and name == "__init__" \
                            and klass in eo.ARGS_ONLY_BASES:
                        return eo.ExceptionInitFunction(self.obj)
                    if attr is object.__init__:
                        return _NoOp()
                    if attr is object.__setattr__:
                        return _ObjectSetattr(self.obj)
                    if attr is object.__delattr__:
                        return _ObjectDelattr(self.obj)
                    if self.obj.items is not None and klass in (dict, __import__("collections").OrderedDict):
                        from ember.capture.variables.functions import BoundMethodVariable
                        return BoundMethodVariable(self.obj.items, name)
                if attr is object.__ne__:
                    return _ObjectNe(self.obj)
                if attr is object.__eq__:
                    return _ObjectEq(self.obj)
                if name in PURE_READ_METHODS and isinstance(attr, (types.MethodDescriptorType,
                                                                   types.WrapperDescriptorType)) \
                        and hasattr(self.obj, "obj"):
                    return RealReadMethodVariable(attr, self.obj)
                if attr is object.__init__ or isinstance(attr, (types.WrapperDescriptorType,)):
                    raise unsupported("EB0031", f"super().{name} resolves to a builtin slot")
                if isinstance(attr, types.MethodDescriptorType) and not on_class:
                    # A C method of a builtin base (`super().to(...)` in a Tensor subclass reaches
                    # TensorBase.to): bound to the object, as `super()` binds it — the descriptor
                    # alone, called (or rebuilt at a break) without it, lost `self`.
                    from ember.capture.sources import AttrSource, ConstSource
                    from ember.capture.variables.functions import PartialVariable
                    sup = _super_object(self.cls, real_type)
                    fn = wrap(tx, attr, AttrSource(ConstSource(sup, f"super({self.cls.__qualname__}, "
                                                                    f"{real_type.__qualname__})"), name))
                    return PartialVariable(fn, [self.obj], {})
                if hasattr(type(attr), "__get__") and not (on_class and isinstance(attr, _CLASS_GET_IS_SELF)):
                    # a descriptor the cases above do not model (a slot, a getset, a user
                    # descriptor, a cached_property): `super().name` is its __get__ result, which
                    # reading it off the class, below, was not (a slot read as its member_descriptor)
                    raise unsupported("EB0031", f"super().{name} is a {type(attr).__name__} "
                                                f"(a descriptor ember does not call through super())")
                # a plain class attribute: read through the same lookup, so it is guarded (a later
                # `Base.attr = 5` recompiles)
                from ember.capture.sources import AttrSource, ConstSource
                sup = _super_object(self.cls, real_type)
                return wrap(tx, attr, AttrSource(ConstSource(sup, f"super({self.cls.__qualname__}, "
                                                                  f"{real_type.__qualname__})"), name))
        raise unsupported("EB0031", f"super() has no attribute {name!r}")


# descriptors whose __get__(None, cls) is the descriptor itself (a classmethod's super() reads them raw)
_CLASS_GET_IS_SELF = (types.MethodDescriptorType, types.GetSetDescriptorType, types.MemberDescriptorType)


@functools.lru_cache(maxsize=1024)
def _super_object(cls: type, real_type: type):
    """One ``super(cls, real_type)`` per pair, so guards through it are shared (and deduplicated)."""
    return super(cls, real_type)


PURE_READ_METHODS = {"get", "__getitem__", "__contains__", "__len__", "keys", "values", "items", "index",
                     "count"}


class RealReadMethodVariable(VariableTracker):
    """A read-only builtin method (``dict.get``) applied to a real object from outside the frame.

    The answer is read now and guarded by re-running the same call on later calls.
    """

    def __init__(self, method, obj_vt):
        self.method = method
        self.obj_vt = obj_vt

    def describe(self):
        return f"{self.method.__qualname__} of {self.obj_vt.describe()}"

    def call(self, tx, args, kwargs):
        from ember.capture.builder import wrap
        from ember.capture.sources import CallSource
        if kwargs or not all(a.is_constant() for a in args):
            raise unsupported("EB0036", f"{self.describe()} with non-constant arguments")
        cargs = tuple(a.as_constant() for a in args)
        value = self.method(self.obj_vt.obj, *cargs)
        src = CallSource(self.method, self.obj_vt.source, cargs) if self.obj_vt.source else None
        return wrap(tx, value, src)


def _module_init():
    import torch
    return torch.nn.Module.__init__


def _module_setattr():
    import torch
    return torch.nn.Module.__setattr__


def _module_getattr():
    import torch
    return torch.nn.Module.__getattr__


class _GenericAttr(VariableTracker):
    """``super().__setattr__`` / ``super().__getattribute__`` resolving to ``object``'s, on an object
    from outside the frame (inside its class's custom ``__setattr__`` / ``__getattribute__``)."""

    def __init__(self, obj, method):
        self.obj = obj
        self.method = method

    def call(self, tx, args, kwargs):
        name = args[0].as_constant()
        if not isinstance(name, str) or kwargs:
            raise unsupported("EB0037", f"object.{self.method} with {[a.describe() for a in args]}")
        from ember.capture.variables.base import ConstantVariable
        result = getattr(self.obj, self.method)(tx, name, *args[1:])
        return result if result is not None else ConstantVariable(None)


class _NoOp(VariableTracker):
    def call(self, tx, args, kwargs):
        from ember.capture.variables.base import ConstantVariable
        return ConstantVariable(None)


class _ObjectSetattr(VariableTracker):
    def __init__(self, obj):
        self.obj = obj

    def call(self, tx, args, kwargs):
        from ember.capture.variables.base import ConstantVariable
        self.obj.object_setattr(args[0].as_constant(), args[1])
        return ConstantVariable(None)


class _ObjectDelattr(VariableTracker):
    def __init__(self, obj):
        self.obj = obj

    def call(self, tx, args, kwargs):
        from ember.capture.variables.base import ConstantVariable
        self.obj.object_delattr(tx, args[0].as_constant())
        return ConstantVariable(None)


class _ObjectEq(VariableTracker):
    """``object.__eq__(self, other)``: True if identical, else NotImplemented."""

    def __init__(self, obj):
        self.obj = obj

    def call(self, tx, args, kwargs):
        from ember.capture.variables.base import ConstantVariable
        if len(args) != 1 or kwargs:
            raise unsupported("EB0002", "object.__eq__ takes one argument")
        same = tx.compare_identity(self.obj, args[0], False).as_constant()
        return ConstantVariable(True if same else NotImplemented)


class _ObjectNe(_ObjectEq):
    """``object.__ne__(self, other)``: the inverse of ``type(self).__eq__``, NotImplemented kept."""

    def call(self, tx, args, kwargs):
        from ember.capture.variables.base import ConstantVariable
        if len(args) != 1 or kwargs:
            raise unsupported("EB0002", "object.__ne__ takes one argument")
        eq = self.obj.call_method(tx, "__eq__", [args[0]], {})
        if not eq.is_constant():
            raise unsupported("EB0036", "object.__ne__ of a non-constant __eq__ result")
        v = eq.as_constant()
        return ConstantVariable(v if v is NotImplemented else not v)
