"""Container classes and methods read off them: plain subclasses of set/frozenset/list made in the
frame (`plain_subclass`), and builtin container methods called unbound (``set.add(s, x)``,
``frozenset.__and__(p, q)``, ``dict.__getitem__(d, k)``)."""
from __future__ import annotations

import collections
import types

from ember.capture.variables.base import ConstantVariable, VariableTracker, unsupported
from ember.capture.variables.containers import DictVariable, ListVariable, SetVariable, TupleVariable
from ember.exc import PythonException

_HARMLESS_CLASS_NAMES = {"__module__", "__qualname__", "__doc__", "__dict__", "__weakref__", "__annotations__",
                         "__firstlineno__", "__static_attributes__", "__orig_bases__", "__parameters__",
                         "__slotnames__"}  # (copyreg caches __slotnames__ on the class)


#: dunders CPython calls on an instance only when the program calls them by that name (never from a
#: builtin operation of the base type): a subclass defining them still behaves as its base does
#: (transformers' LogitsProcessorList: a list with a ``__call__``)
_EXPLICIT_DUNDERS = {"__call__"}


def plain_subclass(cls: type) -> type | None:
    """The builtin base (set, frozenset, list, tuple) of a subclass whose instances behave as the base
    type does: no slot of its own (``__init__``, ``__eq__``, ``__contains__`` ...), only plain Python
    methods, which are inlined (non-dunder ones, and ``__call__``). None for any other class."""
    if type(cls) is not type or cls in (set, frozenset, list, tuple) or hasattr(cls, "_fields"):
        return None
    base = next((b for b in (frozenset, set, list, tuple) if issubclass(cls, b)), None)
    if base is None:
        return None
    for klass in cls.__mro__:
        if klass is base:
            return base
        if klass.__module__ == "builtins":
            return None
        for name, value in klass.__dict__.items():
            if name in _HARMLESS_CLASS_NAMES:
                continue
            if (name.startswith("__") and name not in _EXPLICIT_DUNDERS) or not isinstance(value, types.FunctionType):
                return None
    return None


def call_subclass_instance(tx, vt, cls: type, base: type, args: list, kwargs: dict):
    """``obj(*args)`` for an instance of a `plain_subclass` ``cls`` of ``base``: its ``__call__``."""
    from ember.capture.variables.containers import _subclass_method
    from ember.capture.variables.functions import UserFunctionVariable, UserMethodVariable
    method = _subclass_method(cls, base, "__call__") if cls is not base else None
    if method is None:
        raise PythonException(TypeError(f"'{cls.__name__}' object is not callable"))
    return UserMethodVariable(UserFunctionVariable(method), vt).call(tx, args, kwargs)


# Builtin container methods read off their class (``set.add``, ``frozenset.__and__``), called with
# the container first: the tracker's own method of that name.
_UNBOUND_OWNERS = {list: ListVariable, tuple: TupleVariable, dict: DictVariable, set: SetVariable,
                   frozenset: SetVariable, collections.OrderedDict: DictVariable, collections.defaultdict: DictVariable}
#: immutable scalar types whose unbound methods (`str.upper`, `int.bit_length`) fold on constants
SCALAR_OWNERS = (str, bytes, int, float, complex, bool)


class UnboundContainerMethodVariable(VariableTracker):
    def __init__(self, owner: type, name: str, source=None):
        self.owner = owner
        self.name = name
        self.source = source

    def describe(self):
        return f"{self.owner.__name__}.{self.name}"

    def python_type(self):
        return type(getattr(self.owner, self.name))

    def truth(self, tx):
        return True

    def hash_key(self):
        # a dict key / set element: the builtin descriptor itself (hashed and compared by identity;
        # one read from a class is identity-guarded when it is wrapped)
        return getattr(self.owner, self.name)

    def getattr(self, tx, name):
        if name in ("__name__", "__qualname__", "__doc__", "__text_signature__"):
            return ConstantVariable(getattr(getattr(self.owner, self.name), name))
        if name == "__objclass__":
            from ember.capture.variables.objects import ClassVariable
            return ClassVariable(self.owner)
        return super().getattr(tx, name)

    def call(self, tx, args, kwargs):
        if not args:
            raise PythonException(TypeError(f"unbound method {self.owner.__name__}.{self.name}() needs an argument"))
        obj = args[0]
        if self.owner is dict and getattr(obj, "dict_base", None) is not None and obj.items is not None:
            result = obj.items.call_method(tx, self.name, list(args[1:]), kwargs)  # a dict subclass made in the frame
            return obj if result is obj.items else result
        if isinstance(obj, ConstantVariable) and isinstance(obj.value, self.owner):  # `tuple.count((1, 1), 1)`
            from ember.capture.variables.builtins import ConstantMethodVariable
            return ConstantMethodVariable(obj.value, self.name).call(tx, list(args[1:]), kwargs)
        if self.owner in SCALAR_OWNERS and obj.is_constant() and isinstance(obj.as_constant(), self.owner):
            from ember.capture.variables.builtins import ConstantMethodVariable  # `str.isalnum(c)`
            return ConstantMethodVariable(obj.as_constant(), self.name).call(tx, list(args[1:]), kwargs)
        try:
            t = obj.python_type()
        except Exception:
            t = None
        if not (isinstance(obj, _UNBOUND_OWNERS.get(self.owner, ())) and t is not None and issubclass(t, self.owner)):
            if t is not None and not issubclass(t, self.owner) and isinstance(obj, ConstantVariable):
                raise PythonException(TypeError(f"descriptor '{self.name}' for '{self.owner.__name__}' objects "
                                                f"doesn't apply to a '{t.__name__}' object"))
            raise unsupported("EB0039", f"calling {self.describe()} on {obj.describe()}")
        return obj.call_method(tx, self.name, list(args[1:]), kwargs)  # the base type's own method


def class_layout(cls: type) -> tuple:
    """What a trace of a `plain_subclass` instance bakes in about ``cls``: the contents of the class
    dicts up to the builtin base (a method added or replaced later must recompile)."""
    base = plain_subclass(cls)
    out = []
    for klass in cls.__mro__:
        if klass is base or klass.__module__ == "builtins":
            break
        out.append(tuple((k, v) for k, v in klass.__dict__.items() if k not in ("__dict__", "__weakref__")))
    return tuple(out)


def guard_class_layout(tx, cls: type) -> None:
    from ember.capture.sources import CallSource
    from ember.capture.variables.objects import class_source
    tx.guards.equals(CallSource(class_layout, class_source(cls), ()), class_layout(cls))


def list_subclass_input(tx, value: list, source):
    """The tracker of a `plain_subclass` of list from outside the frame (a processor list passed in):
    a list tracker of that class (its mutations replayed like a list's), guarded by type, length,
    the class's methods, and an empty instance ``__dict__`` (an instance attribute would shadow a
    method). None for any other list subclass."""
    from ember.capture.builder import wrap
    from ember.capture.sources import AttrSource, ItemSource
    cls = type(value)
    if plain_subclass(cls) is not list or getattr(value, "__dict__", None):
        return None
    tx.guards.type_match(source, value)
    tx.guards.length(source, len(value))
    tx.guards.length(AttrSource(source, "__dict__"), 0)
    guard_class_layout(tx, cls)
    lst = ListVariable([wrap(tx, v, ItemSource(source, i)) for i, v in enumerate(value)], source)
    lst.list_cls = cls
    return lst


_SCALAR_TYPES = (int, float, bool, str, bytes, complex)  # (their builtin methods are pure)


def _plain_value(v) -> bool:
    from torch.torch_version import TorchVersion  # (a str: C methods read its text)
    return type(v) in (*_SCALAR_TYPES, type(None), TorchVersion) or \
        (type(v) is tuple and all(_plain_value(i) for i in v))


def fold_scalar_type_method(fn, args, kwargs):
    """A builtin method of a scalar type (``int.from_bytes``, ``bool.__new__(bool, 1)``,
    ``float.fromhex``), or of a compiled regex or a match (``pattern.fullmatch(s)``, ``m.group(1)``),
    called with plain constants: computed now (they read nothing else and change nothing). None for
    anything else."""
    import re
    owner = getattr(fn, "__self__", None)
    # (a compiled regex or a match is read-only too, but tracing re.match's own code guards re's
    # pattern cache, which other code keeps changing: not folded yet)
    immutable_owner = False
    scalar_owner = any(owner is t for t in _SCALAR_TYPES)  # (by identity: `in` would call owner's __eq__)
    if not isinstance(fn, types.BuiltinMethodType) or not (scalar_owner or immutable_owner):
        return None
    if not all(a.is_constant() for a in [*args, *kwargs.values()]):
        return None
    values = [a.as_constant() for a in args]
    kw = {k: v.as_constant() for k, v in kwargs.items()}
    if fn.__name__ == "__new__":  # its first argument is the class to make: a scalar type, exactly
        if not values or not any(values[0] is t for t in _SCALAR_TYPES) or \
                not all(_plain_value(v) for v in [*values[1:], *kw.values()]):
            return None
    elif not all(_plain_value(v) for v in [*values, *kw.values()]):
        return None
    from ember.exc import PythonException
    try:
        result = fn(*values, **kw)
    except Exception as e:  # noqa: BLE001 - eager raises this very exception
        raise PythonException(e) from None
    fresh_container = type(result) in (list, dict) and all(   # (a new list or dict: `split`, `groupdict`)
        _plain_value(v) for v in (result.values() if type(result) is dict else result))
    if not (_plain_value(result) or fresh_container or isinstance(result, re.Match) and immutable_owner):
        return None
    from ember.capture.variables.builtins import wrap_constant
    return wrap_constant(result)
