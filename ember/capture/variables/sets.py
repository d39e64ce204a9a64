"""Sets and frozensets made in the frame (and plain subclasses of them): `SetVariable`.

Each set keeps a real "shadow" set of its keys that goes through the same operations as eager's
set, so iteration and ``pop`` follow eager's hash order. Imported through ``containers``.
"""
from __future__ import annotations

from typing import Any

from ember.capture.variables.base import ConstantVariable, VariableTracker, unsupported
from ember.capture.variables.containers import (DictVariable, ListVariable, _set_operand, _subclass_method,
                                                set_key)
from ember.exc import PythonException


_SET_OPERATORS = {"__or__": "|", "__and__": "&", "__sub__": "-", "__xor__": "^",
                  "__ior__": "|=", "__iand__": "&=", "__isub__": "-=", "__ixor__": "^="}
_SET_COMPARE = {"__eq__", "__ne__", "__lt__", "__le__", "__gt__", "__ge__"}
_SET_ALGEBRA = {"union": "__or__", "intersection": "__and__", "difference": "__sub__",
                "symmetric_difference": "__xor__"}
_SET_UPDATES = {"update": "__or__", "intersection_update": "__and__", "difference_update": "__sub__",
                "symmetric_difference_update": "__xor__"}
_SET_MUTATORS = {"add", "discard", "remove", "clear", "pop", *_SET_UPDATES, "__ior__", "__iand__", "__isub__",
                 "__ixor__"}


def _not_a_set_operand(vt) -> bool:
    """A value no set operator or comparison accepts, and with no reflected method of its own (a
    tuple tracker may stand for a dict view, which has one)."""
    return isinstance(vt, (ListVariable, DictVariable)) or (isinstance(vt, ConstantVariable) and type(vt.value) in (
        int, float, bool, str, bytes, complex, type(None), list))


class SetVariable(VariableTracker):
    """A set or frozenset (or an instance of a plain subclass of one, made in the frame). ``items``
    maps each element's key (`set_key`) to its tracker. ``shadow`` is a real set of the keys that
    goes through the same operations as the program's set, so iterating the tracker (and ``pop``)
    follows the order eager Python has (hash order, not insertion order)."""

    def __init__(self, items: list, source=None, frozen: bool = False, set_cls: type | None = None):
        self.items: dict[Any, VariableTracker] = {}
        self.shadow: set = set()
        for it in items:
            k = set_key(it)
            self.items.setdefault(k, it)
            self.shadow.add(k)
        if source is None:
            self._sync()
        # else: a set from outside iterates as it came (its table may differ from a fresh one's)
        self.source = source
        self.set_cls = set_cls or (frozenset if frozen else set)
        self.frozen = issubclass(self.set_cls, frozenset)

    def _sync(self, *others: "SetVariable | dict"):
        """Reorder ``items`` as the shadow iterates (trackers of new keys come from ``others``)."""
        pairs = [*self.items.items()]
        for o in others:
            pairs += o.items.items() if isinstance(o, SetVariable) else o.items() if isinstance(o, dict) else o
        # The very key object the real operation kept (of equal keys 1, 1.0 and True, which one a
        # set keeps depends on the operation), else an equal one.
        by_id, by_eq = {}, {}
        for k, v in reversed(pairs):
            by_id[id(k)] = v
            by_eq[k] = v
        self.items = {k: by_id[id(k)] if id(k) in by_id else by_eq[k] for k in self.shadow}

    @property
    def base_cls(self) -> type:
        return frozenset if self.frozen else set

    def python_type(self):
        return self.set_cls

    def describe(self):
        return f"{self.set_cls.__name__}[{', '.join(i.describe() for i in self.items.values())}]"

    def is_constant(self):
        return all(v.is_constant() for v in self.items.values())

    def as_constant(self):
        return self.set_cls(v.as_constant() for v in self.items.values())

    def truth(self, tx):
        return bool(self.items)

    def unpack(self, tx):
        return list(self.items.values())

    def iter(self, tx):
        if _subclass_method(self.set_cls, self.base_cls, "__iter__") is not None:
            return super().iter(tx)
        from ember.capture.variables.dict_views import SizeCheckedIterator
        return SizeCheckedIterator(self, "set")  # changing the size while iterating raises

    def getattr(self, tx, name):
        from ember.capture.variables.functions import BoundMethodVariable, UserFunctionVariable, UserMethodVariable
        method = _subclass_method(self.set_cls, self.base_cls, name)
        if method is not None:
            return UserMethodVariable(UserFunctionVariable(method), self)  # a subclass method
        if name == "__class__":
            from ember.capture.variables.objects import ClassVariable
            return ClassVariable(self.set_cls)
        if hasattr(self.set_cls, name) and callable(getattr(self.set_cls, name)):
            return BoundMethodVariable(self, name)
        return super().getattr(tx, name)

    def call(self, tx, args, kwargs):
        from ember.capture.variables.container_methods import call_subclass_instance
        return call_subclass_instance(tx, self, self.set_cls, self.base_cls, args, kwargs)

    def _new(self, shadow: set, *others) -> "SetVariable":
        out = SetVariable([], set_cls=self.base_cls)
        out.shadow = shadow
        out.items = {}
        out._sync(self, *others)
        return out

    def _arity(self, name, args, kwargs, lo, hi=None):
        n = len(args)
        if kwargs:
            raise PythonException(TypeError(f"{self.base_cls.__name__}.{name}() takes no keyword arguments"))
        if n < lo or (hi is not None and n > hi):
            raise PythonException(TypeError(f"{self.base_cls.__name__}.{name}() takes {'exactly' if lo == hi else 'at least'} "
                                            f"{lo} argument{'s' if lo != 1 else ''} ({n} given)"))

    def call_method(self, tx, name, args, kwargs):
        if name in _SET_MUTATORS:
            if self.frozen and not name.startswith("__"):
                raise PythonException(AttributeError(f"'{self.set_cls.__name__}' object has no attribute '{name}'"))
            if not self.frozen and self.source is not None:
                tx.side_effects.mutated_container(self)
        items = self.items
        if name == "add":
            self._arity(name, args, kwargs, 1, 1)
            k = set_key(args[0])
            self.shadow.add(k)
            self._sync({k: args[0]})
            return ConstantVariable(None)
        if name in ("discard", "remove"):
            self._arity(name, args, kwargs, 1, 1)
            k = set_key(args[0]) if not isinstance(args[0], SetVariable) else set_key(args[0]._frozen_copy())
            if k not in items and name == "remove":
                raise PythonException(KeyError(args[0].as_constant() if args[0].is_constant() else k))
            self.shadow.discard(k)
            self._sync()
            return ConstantVariable(None)
        if name == "clear":
            self._arity(name, args, kwargs, 0, 0)
            self.shadow.clear()
            self._sync()
            return ConstantVariable(None)
        if name == "pop":
            self._arity(name, args, kwargs, 0, 0)
            if not items:
                raise PythonException(KeyError("pop from an empty set"))
            k = self.shadow.pop()  # the element eager pops
            value = items[k]
            self._sync()
            return value
        if name == "copy":
            self._arity(name, args, kwargs, 0, 0)
            return self._new(self.shadow.copy())
        if name in _SET_UPDATES or name in _SET_ALGEBRA:
            if name in _SET_ALGEBRA:
                one = name == "symmetric_difference"
                self._arity(name, args, kwargs, 1 if one else 0, 1 if one else None)
            operands, pool = _operands(tx, args)
            try:
                result = getattr(self.shadow, name)(*operands)  # the real operation, on the keys
            except TypeError as e:
                raise PythonException(e) from None
            if name in _SET_ALGEBRA:
                return self._new(result, pool)
            self._sync(pool)
            return ConstantVariable(None)
        if name in ("issuperset", "isdisjoint") and not isinstance(args[0] if args else None, SetVariable):
            # Python pulls the items one at a time and stops at the first decisive one (a
            # generator argument is left part-consumed)
            self._arity(name, args, kwargs, 1, 1)
            if isinstance(args[0], ConstantVariable):
                _set_operand(tx, args[0])  # TypeError for a non-iterable
            it = args[0].iter(tx)
            while True:
                item = it.next(tx)
                if item is None:
                    return ConstantVariable(True)
                if (set_key(item) in items) == (name == "isdisjoint"):
                    return ConstantVariable(False)
        if name in ("issubset", "issuperset", "isdisjoint"):
            self._arity(name, args, kwargs, 1, 1)
            operands, _ = _operands(tx, args)
            return ConstantVariable(getattr(self.shadow, name)(*operands))
        if name in _SET_OPERATORS:
            self._arity(name, args, kwargs, 1, 1)
            other = args[0]
            if not isinstance(other, SetVariable):
                if _not_a_set_operand(other):
                    return ConstantVariable(NotImplemented)  # what the slot returns; the operator raises
                raise unsupported("EB0038", f"{self.describe()} {_SET_OPERATORS[name]} {other.describe()}")
            if name.startswith("__i") and not self.frozen:  # in place: the same set, mutated
                getattr(self.shadow, name)(other.shadow)
                self._sync(other)
                return self
            return self._new(getattr(self.shadow, name.replace("__i", "__"))(other.shadow), other)
        if name in _SET_COMPARE:
            self._arity(name, args, kwargs, 1, 1)
            other = args[0]
            if not isinstance(other, SetVariable):
                if _not_a_set_operand(other):
                    return ConstantVariable(NotImplemented)
                raise unsupported("EB0038", f"{self.describe()} {name} {other.describe()}")
            return ConstantVariable(getattr(self.shadow, name)(other.shadow))
        if name == "__contains__":
            needle = args[0]
            if isinstance(needle, SetVariable) and not needle.frozen:  # looked up as a frozenset
                needle = needle._frozen_copy()
            return ConstantVariable(set_key(needle) in items)
        if name == "__len__":
            return ConstantVariable(len(items))
        if name == "__iter__":
            return self.iter(tx)
        if hasattr(self.base_cls, name):  # a real method the tracker does not model
            raise unsupported("EB0039", f"{self.base_cls.__name__}.{name} on {self.describe()}")
        return super().call_method(tx, name, args, kwargs)

    def _frozen_copy(self) -> "SetVariable":
        return SetVariable(list(self.items.values()), frozen=True)


def _operands(tx, args) -> tuple[list, list]:
    """The arguments of a set method as the real method would get them (another set's shadow, or
    the keys of an iterable's items, in order), and the trackers of all their keys."""
    operands, pool = [], []
    for a in args:
        if isinstance(a, SetVariable):
            operands.append(a.shadow)
            pool += a.items.items()
        elif isinstance(a, ConstantVariable) and type(a.value) in (set, frozenset):
            # The constant itself (its keys are its elements): a set built from a set copies its
            # table layout, which the same keys added one by one need not reproduce.
            operands.append(a.value)
            pool += [(k, ConstantVariable(k)) for k in a.value]
        else:
            keys = []
            for i in _set_operand(tx, a):
                k = set_key(i)
                keys.append(k)
                pool.append((k, i))
            operands.append(keys)
    return operands, pool
