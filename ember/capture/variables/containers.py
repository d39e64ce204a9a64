"""Containers of VariableTrackers: tuple, list, dict, set, and iterators.

Tuples are immutable. Lists, dicts and sets built inside the frame are
mutable boxes (so ``a = b = []; a.append(1)`` shows through ``b``, as in
Python). Mutating a container that came from outside the frame (it has a
source) is a side effect, which this version does not replay: it is refused
with a reason, and the frame runs eagerly.
"""
from __future__ import annotations

from typing import Any

from ember.capture.variables.base import ConstantVariable, VariableTracker, unsupported
from ember.capture.variables.generators import IteratorBase
from ember.exc import PythonException


def _all_constant(items) -> bool:
    """Whether a container of these items is a constant: only if no item is itself a mutable
    container (folding `([1],)[0]` to a value would copy the inner list; the trace must keep
    handing out the one tracker, so mutations through it are seen)."""
    return all(i.is_constant() and not isinstance(i, (ListVariable, DictVariable, SetVariable)) or
               (isinstance(i, SetVariable) and i.frozen and i.is_constant()) for i in items)


def _index(tx, seq_vt, items: list, idx: VariableTracker, kind):
    key = idx.as_constant() if idx.is_constant() else None
    if isinstance(key, slice):
        return kind(items[key])
    if isinstance(key, int):
        try:
            return items[key]
        except IndexError:
            raise PythonException(IndexError(f"{seq_vt.python_type().__name__} index out of range")) from None
    raise unsupported(f"indexing {seq_vt.describe()} with {idx.describe()}")


class BaseSequence(VariableTracker):
    python_cls: type = tuple

    def __init__(self, items: list, source=None):
        self.items = list(items)
        self.source = source

    def python_type(self):
        return self.python_cls

    def is_constant(self):
        return _all_constant(self.items)

    def as_constant(self):
        return self.python_cls(i.as_constant() for i in self.items)

    def describe(self):
        return f"{self.python_cls.__name__}[{', '.join(i.describe() for i in self.items)}]"

    def truth(self, tx):
        return bool(self.items)

    def unpack(self, tx):
        return list(self.items)

    def hash_key(self):
        return (self.python_cls, tuple(i.hash_key() for i in self.items))

    def _new(self, items):
        return type(self)(items)

    def call_method(self, tx, name, args, kwargs):
        if name == "__getitem__":
            return _index(tx, self, self.items, args[0], self._new)
        if name == "__len__":
            return ConstantVariable(len(self.items))
        if name == "__contains__":
            return ConstantVariable(_contains(self.items, args[0]))
        if name in ("index", "count") and _all_constant(self.items) and _all_constant(args):
            return ConstantVariable(getattr(self.as_constant(), name)(*[a.as_constant() for a in args]))
        if name == "__add__" and isinstance(args[0], BaseSequence) and type(args[0]) is type(self):
            return self._new(self.items + args[0].items)
        if name == "__mul__" and args[0].is_constant():
            return self._new(self.items * args[0].as_constant())
        return super().call_method(tx, name, args, kwargs)

    def getattr(self, tx, name):
        from ember.capture.variables.functions import BoundMethodVariable
        if hasattr(self.python_cls, name):
            return BoundMethodVariable(self, name)
        return super().getattr(tx, name)


def _contains(items, needle) -> bool:
    if needle.is_constant() and _all_constant(items):
        return needle.as_constant() in [i.as_constant() for i in items]
    try:
        key = needle.hash_key()
        return any(i.hash_key() == key for i in items)
    except Exception:
        raise unsupported("`in` on a container of non-constant values") from None


class TupleVariable(BaseSequence):
    python_cls = tuple

    def __init__(self, items, source=None, tuple_type: type | None = None):
        super().__init__(items, source)
        self.tuple_type = tuple_type  # a namedtuple / torch.return_types class, or None

    def python_type(self):
        return self.tuple_type or tuple

    def _new(self, items):
        return TupleVariable(items)

    def as_constant(self):
        values = tuple(i.as_constant() for i in self.items)
        if self.tuple_type is not None and self.tuple_type is not tuple:
            return self.tuple_type(values) if hasattr(self.tuple_type, "n_fields") else self.tuple_type(*values)
        return values

    def getattr(self, tx, name):
        fields = getattr(self.tuple_type, "_fields", None)
        if fields and name in fields:
            return self.items[fields.index(name)]
        match_args = getattr(self.tuple_type, "__match_args__", None)  # torch.return_types structseqs
        if match_args and name in match_args:
            return self.items[match_args.index(name)]
        if fields and name in ("_replace", "_asdict"):
            from ember.capture.variables.functions import BoundMethodVariable
            return BoundMethodVariable(self, name)
        return super().getattr(tx, name)

    def call_method(self, tx, name, args, kwargs):
        fields = getattr(self.tuple_type, "_fields", None)
        if fields and name == "_replace":
            items = list(self.items)
            for k, v in kwargs.items():
                if k not in fields:
                    raise unsupported(f"_replace got unexpected field {k!r} (ValueError)")
                items[fields.index(k)] = v
            return TupleVariable(items, tuple_type=self.tuple_type)
        if fields and name == "_asdict":
            return DictVariable(dict(zip(fields, self.items)))
        return super().call_method(tx, name, args, kwargs)


class ListVariable(BaseSequence):
    python_cls = list

    def iter(self, tx):
        return ListIteratorVariable(self)

    def _mutable(self, what: str, tx=None):
        if self.source is not None:
            tx.side_effects.mutated_container(self)

    def call_method(self, tx, name, args, kwargs):
        items = self.items
        if name == "append":
            self._mutable(name, tx); items.append(args[0]); return ConstantVariable(None)
        if name == "extend":
            self._mutable(name, tx); items.extend(args[0].unpack(tx)); return ConstantVariable(None)
        if name == "insert":
            self._mutable(name, tx); items.insert(args[0].as_constant(), args[1]); return ConstantVariable(None)
        if name == "pop":
            self._mutable(name, tx)
            return items.pop(*[a.as_constant() for a in args])
        if name == "clear":
            self._mutable(name, tx); items.clear(); return ConstantVariable(None)
        if name == "reverse":
            self._mutable(name, tx); items.reverse(); return ConstantVariable(None)
        if name == "copy":
            return ListVariable(list(items))
        if name == "remove":
            self._mutable(name, tx)
            key = args[0].hash_key()
            for i, it in enumerate(items):
                if it.hash_key() == key:
                    del items[i]
                    return ConstantVariable(None)
            raise PythonException(ValueError("list.remove(x): x not in list"))
        if name == "sort" and _all_constant(items):
            self._mutable(name, tx)
            kw = {k: v.as_constant() for k, v in kwargs.items()}
            items[:] = [ConstantVariable(v) for v in sorted(self.as_constant(), **kw)]
            return ConstantVariable(None)
        if name == "__setitem__":
            self._mutable(name, tx)
            key = args[0].as_constant()
            if isinstance(key, slice):
                items[key] = args[1].unpack(tx)
            else:
                items[key] = args[1]
            return ConstantVariable(None)
        if name == "__delitem__":
            self._mutable(name, tx)
            del items[args[0].as_constant()]
            return ConstantVariable(None)
        if name == "__iadd__":
            self._mutable(name, tx); items.extend(args[0].unpack(tx)); return self
        return super().call_method(tx, name, args, kwargs)


class DictVariable(VariableTracker):
    """A dict with constant (or hashable-tracker) keys. ``keys`` keeps the key VTs."""

    def __init__(self, items: dict[Any, VariableTracker], keys: dict[Any, VariableTracker] | None = None,
                 source=None, dict_cls: type = dict):
        self.items = dict(items)
        self.keys = dict(keys) if keys is not None else {k: ConstantVariable(k) for k in items}
        self.source = source
        self.dict_cls = dict_cls
        self.default_factory: VariableTracker | None = None  # for collections.defaultdict
        # Where the key order comes from, kept when `source` is dropped (a **kwargs dict is the
        # frame's own, but its order is the caller's), and the order it had then.
        self.order_source = source
        self.initial_keys = list(self.items) if source is not None else None

    def python_type(self):
        return self.dict_cls

    def describe(self):
        return f"dict[{', '.join(map(repr, self.items))}]"

    def truth(self, tx):
        return bool(self.items)

    def is_constant(self):
        return _all_constant(self.items.values())

    def as_constant(self):
        return self.dict_cls((k, v.as_constant()) for k, v in self.items.items())

    def _observe_order(self, tx):
        """The program sees the key order (iterating, or copying it into another dict): guard the
        order the dict came in with (what the current order follows from)."""
        if self.order_source is not None:
            tx.guards.dict_keys(self.order_source, self.initial_keys, ordered=True)

    def unpack(self, tx):
        self._observe_order(tx)
        return list(self.keys.values())

    def _mutable(self, what, tx=None):
        if self.source is not None:
            tx.side_effects.mutated_container(self)

    def getattr(self, tx, name):
        from ember.capture.variables.functions import BoundMethodVariable
        if hasattr(dict, name):
            return BoundMethodVariable(self, name)
        return super().getattr(tx, name)

    def set_item(self, key_vt, value):
        k = key_vt.hash_key()
        self.items[k] = value
        self.keys.setdefault(k, key_vt)

    def call_method(self, tx, name, args, kwargs):
        items = self.items
        if name == "__getitem__":
            k = args[0].hash_key()
            if k not in items and self.default_factory is not None:
                self._mutable(name, tx)
                self.set_item(args[0], self.default_factory.call(tx, [], {}))
            if k not in items:
                raise PythonException(KeyError(k))
            return items[k]
        if name == "get":
            k = args[0].hash_key()
            return items.get(k, args[1] if len(args) > 1 else ConstantVariable(None))
        if name == "__contains__":
            return ConstantVariable(args[0].hash_key() in items)
        if name == "__len__":
            return ConstantVariable(len(items))
        if name == "keys":
            self._observe_order(tx)
            return TupleVariable(list(self.keys.values()))  # a snapshot view
        if name == "values":
            self._observe_order(tx)
            return TupleVariable(list(items.values()))
        if name == "items":
            self._observe_order(tx)
            return TupleVariable([TupleVariable([self.keys[k], v]) for k, v in items.items()])
        if name == "copy":
            self._observe_order(tx)
            return DictVariable(items, self.keys, dict_cls=self.dict_cls)
        if name == "__setitem__":
            self._mutable(name, tx); self.set_item(args[0], args[1]); return ConstantVariable(None)
        if name == "__delitem__":
            self._mutable(name, tx); k = args[0].hash_key(); del items[k]; del self.keys[k]
            return ConstantVariable(None)
        if name == "pop":
            self._mutable(name, tx)
            k = args[0].hash_key()
            if k in items:
                self.keys.pop(k)
                return items.pop(k)
            if len(args) > 1:
                return args[1]
            raise PythonException(KeyError(k))
        if name == "setdefault":
            self._mutable(name, tx)
            k = args[0].hash_key()
            if k not in items:
                self.set_item(args[0], args[1] if len(args) > 1 else ConstantVariable(None))
            return items[k]
        if name == "update":
            self._mutable(name, tx)
            if args:
                other = args[0]
                if isinstance(other, DictVariable):
                    other._observe_order(tx)
                    for k, v in other.items.items():
                        self.set_item(other.keys[k], v)
                else:
                    for pair in other.unpack(tx):
                        kv = pair.unpack(tx)
                        self.set_item(kv[0], kv[1])
            for k, v in kwargs.items():
                self.set_item(ConstantVariable(k), v)
            return ConstantVariable(None)
        if name == "clear":
            self._mutable(name, tx); items.clear(); self.keys.clear(); return ConstantVariable(None)
        return super().call_method(tx, name, args, kwargs)


class SetVariable(VariableTracker):
    def __init__(self, items: list, source=None, frozen: bool = False):
        self.items: dict[Any, VariableTracker] = {}
        for it in items:
            self.items.setdefault(it.hash_key(), it)
        self.source = source
        self.frozen = frozen

    def python_type(self):
        return frozenset if self.frozen else set

    def is_constant(self):
        return all(v.is_constant() for v in self.items.values())

    def as_constant(self):
        return self.python_type()(v.as_constant() for v in self.items.values())

    def truth(self, tx):
        return bool(self.items)

    def unpack(self, tx):
        return list(self.items.values())

    def getattr(self, tx, name):
        from ember.capture.variables.functions import BoundMethodVariable
        if hasattr(set, name):
            return BoundMethodVariable(self, name)
        return super().getattr(tx, name)

    def call_method(self, tx, name, args, kwargs):
        if name in ("add", "discard", "remove", "update", "clear"):
            if self.frozen:
                raise unsupported(f"frozenset has no method {name} (AttributeError)")
            if self.source is not None:
                tx.side_effects.mutated_container(self)
        if name == "add":
            self.items.setdefault(args[0].hash_key(), args[0]); return ConstantVariable(None)
        if name == "update":
            for a in args:
                for it in a.unpack(tx):
                    self.items.setdefault(it.hash_key(), it)
            return ConstantVariable(None)
        if name in ("discard", "remove"):
            k = args[0].hash_key()
            if k not in self.items and name == "remove":
                raise PythonException(KeyError(args[0].hash_key()))
            self.items.pop(k, None)
            return ConstantVariable(None)
        if name == "clear":
            self.items.clear(); return ConstantVariable(None)
        if name == "__contains__":
            return ConstantVariable(args[0].hash_key() in self.items)
        if name == "__len__":
            return ConstantVariable(len(self.items))
        if name in ("union", "intersection", "difference", "__or__", "__and__", "__sub__", "issubset",
                    "issuperset", "symmetric_difference", "__xor__") and self.is_constant() \
                and all(a.is_constant() for a in args):
            r = getattr(self.as_constant(), name)(*[a.as_constant() for a in args])
            return SetVariable([ConstantVariable(v) for v in r]) if isinstance(r, (set, frozenset)) \
                else ConstantVariable(r)
        return super().call_method(tx, name, args, kwargs)


class IteratorVariable(IteratorBase):
    """An iterator over a known list of items; advancing it mutates ``pos``."""

    def __init__(self, items: list, source=None):
        self.items = list(items)
        self.pos = 0
        self.source = source  # a real iterator from outside: consumption is replayed

    def describe(self):
        return f"iterator({len(self.items) - self.pos} left)"

    def next(self, tx):
        """The next item, or None when exhausted."""
        if self.pos >= len(self.items):
            return None
        if self.source is not None:
            tx.side_effects.mutated_container(self)
        self.pos += 1
        return self.items[self.pos - 1]

    def unpack(self, tx):
        rest = self.items[self.pos:]
        if self.source is not None and rest:
            tx.side_effects.mutated_container(self)
        self.pos = len(self.items)
        return rest

    def remaining(self):
        return None if self.source is not None else self.items[self.pos:]


class ListIteratorVariable(IteratorVariable):
    """``iter(lst)``: like CPython's list iterator, an index into the list as it is when advanced
    (items appended while iterating are produced; the list is not copied)."""

    def __init__(self, seq: ListVariable, start: int = 0, source=None):
        self.seq = seq
        self.start = start  # index of the first item when the tracker was made
        self.pos = 0  # items produced since (replayed on a real iterator from outside)
        self.source = source

    @property
    def items(self):
        return self.seq.items[self.start:] if self.start else self.seq.items

    def remaining(self):
        return self.items[self.pos:]

    def describe(self):
        return f"list_iterator({len(self.seq.items) - self.pos} left)"

    def reconstruct(self, plan) -> str:
        """The list itself (built once, shared with whoever else holds it), iterated from ``pos``."""
        from ember.capture.sources import bind
        if self.source is not None:
            return self.source.expr(plan.scope)  # the real one, advanced by the side effects
        index = self.start + self.pos
        if not index:
            return f"{bind(plan.scope, iter, 'iter')}({plan.expr(self.seq)})"
        # Positioned once the list has its final contents (an outside list gets them when the side
        # effects are replayed: setting the index before would clamp it to the old length).
        plan.finish_later(self, "{}.__setstate__(%d)" % index)
        return f"{bind(plan.scope, iter, 'iter')}({plan.expr(self.seq)})"
