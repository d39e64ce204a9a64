"""Containers of VariableTrackers: tuple, list, dict, set, and iterators.

Tuples are immutable. Lists, dicts and sets built inside the frame are
mutable boxes (so ``a = b = []; a.append(1)`` shows through ``b``, as in
Python). Mutating a container that came from outside the frame (it has a
source) is a side effect, which this version does not replay: it is refused
with a reason, and the frame runs eagerly.
"""
from __future__ import annotations

import collections
import itertools
import operator
import types
from typing import Any

from ember.capture.variables.base import ConstantVariable, VariableTracker, unsupported
from ember.exc import PythonException, Unsupported
from ember.capture.variables.lazy_items import LazyTupleItems


def _all_constant(items) -> bool:
    """Whether a container of these items is a constant: only if no item is itself a mutable
    container (folding `([1],)[0]` to a value would copy the inner list; the trace must keep
    handing out the one tracker, so mutations through it are seen)."""
    return all(i.is_constant() and not isinstance(i, (ListVariable, DictVariable, SetVariable)) or
               (isinstance(i, SetVariable) and i.frozen and i.is_constant()) for i in items)


def _index(tx, seq_vt, items: list, idx: VariableTracker, kind):
    key = idx.as_constant() if idx.is_constant() else None
    if hasattr(key, "__index__") and type(key).__module__ == "numpy" and type(key).__name__ != "bool_":
        key = key.__index__()  # a NumPy integer (its value guarded), as Python's list indexing reads it
    if isinstance(key, slice):
        return kind(items[key])
    if isinstance(key, int):
        try:
            return items[key]
        except IndexError:
            raise PythonException(IndexError(f"{seq_vt.python_type().__name__} index out of range")) from None
    raise unsupported("EB0039", f"indexing {seq_vt.describe()} with {idx.describe()}")


#: Creation order of list/tuple/dict trackers: a traced region (a cond branch) that writes a container
#: born before it has a side effect (see SideEffects.container_writes, capture/subgraph.py).
BIRTHS = itertools.count()


class BaseSequence(VariableTracker):
    python_cls: type = tuple
    born = -1  # (see BIRTHS; trackers of outside containers built without __init__ count as old)

    def __init__(self, items: list, source=None):
        self.items = list(items)
        self.source = source
        self.born = next(BIRTHS)

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
        # as Python hashes a tuple: by its items only (a namedtuple and a tuple with the same items
        # are one key), so a key of constants equals the constant tuple a dict from outside holds
        return tuple(i.hash_key() for i in self.items)

    def _new(self, items):
        return type(self)(items)

    def call_method(self, tx, name, args, kwargs):
        _check_arity(self.python_cls, name, args, kwargs)
        try:
            return self._call_method(tx, name, args, kwargs)
        except (IndexError, ValueError) as e:  # what the real list raises: pop(10), index("x") ...
            raise PythonException(e) from None
        except TypeError as e:
            if name in ("__delitem__", "__setitem__", "insert", "pop", "index", "count"):  # `del lst[1.5]`
                raise PythonException(e) from None
            raise

    def _call_method(self, tx, name, args, kwargs):
        if name == "__getitem__":
            return _index(tx, self, self.items, args[0], self._new)
        if name == "__len__":
            return ConstantVariable(len(self.items))
        if name == "__contains__":
            return ConstantVariable(_contains(self.items, args[0], tx))
        if name in ("index", "count") and _all_constant(self.items) and _all_constant(args) \
                and not _any_dynamic_number([*self.items, *args[:1]]):  # (index's start/stop: pinned)
            return ConstantVariable(getattr(self.as_constant(), name)(*[a.as_constant() for a in args]))
        if name == "count" and len(args) == 1 and not kwargs:
            return ConstantVariable(_find(self.items, args[0], f"{self.python_cls.__name__}.count", tx, count=True))
        if name == "index" and len(args) == 1 and not kwargs:
            i = _find(self.items, args[0], f"{self.python_cls.__name__}.index", tx)  # `tensors.index(t)`
            if i >= 0:
                return ConstantVariable(i)
            if not args[0].is_constant():  # (eager's message shows the value's repr)
                raise unsupported("EB0039", f"{self.python_cls.__name__}.index of a value not in {self.describe()}")
            getattr(self.python_cls(i.as_constant() if i.is_constant() else object() for i in self.items),
                    "index")(args[0].as_constant())  # raises eager's ValueError
        if name == "__add__" and isinstance(args[0], BaseSequence) and type(args[0]) is type(self):
            return self._new(self.items + args[0].items)
        if name == "__add__" and isinstance(args[0], (BaseSequence, DictVariable, SetVariable, ConstantVariable)):
            other = args[0].python_type().__name__
            raise PythonException(TypeError(f'can only concatenate {self.python_cls.__name__} (not "{other}") '
                                            f'to {self.python_cls.__name__}'))
        if name == "__iter__":
            return self.iter(tx)
        if name in _COMPARE_DUNDERS and self.is_constant() and args[0].is_constant():
            return ConstantVariable(getattr(self.as_constant(), name)(args[0].as_constant()))
        if name in ("__mul__", "__rmul__", "__imul__") and args[0].is_constant():
            n = args[0].as_constant()
            if not isinstance(n, int):
                raise PythonException(TypeError(f"can't multiply sequence by non-int of type '{type(n).__name__}'"))
            if name == "__imul__" and isinstance(self, ListVariable):  # in place: the same list
                self._mutable(name, tx)
                self.items[:] = self.items * n
                return self
            return self._new(self.items * n)
        if hasattr(self.python_cls, name):  # a real method the tracker does not model
            raise unsupported("EB0039", f"{self.python_cls.__name__}.{name} on {self.describe()}")
        return super().call_method(tx, name, args, kwargs)

    def getattr(self, tx, name):
        from ember.capture.variables.functions import BoundMethodVariable
        if hasattr(self.python_cls, name):
            return BoundMethodVariable(self, name)
        return super().getattr(tx, name)


def _any_dynamic_number(vts) -> bool:
    from ember.capture.variables.symbolic import dynamic_number
    return any(dynamic_number(v) for v in vts)


def _contains(items, needle, tx=None) -> bool:
    """``needle in items`` as CPython runs it: item by item, identity first, then ``==``. An ``==``
    that involves a tensor gives a tensor whose truth depends on data (or raises): a break."""
    if needle.is_constant() and _all_constant(items) and not _any_dynamic_number([needle, *items]):
        return needle.as_constant() in [i.as_constant() for i in items]
    return _find(items, needle, "`in`", tx) >= 0


def _find(items, needle, what: str, tx=None, count: bool = False) -> int:
    """The position of the first item equal to ``needle`` (-1 if none; with ``count``, how many
    are), compared as CPython's ``list.remove``/``index``/``count``/``in`` do: identity first, then
    ``item == needle`` (a user class's ``__eq__`` traced, given ``tx``; a tensor's ``==`` is data)."""
    from ember.capture.variables.symbolic import symbolic_equal
    from ember.capture.variables.tensor import TensorVariable
    from ember.capture.variables.user_operators import _user_class, user_compare
    found = 0
    try:
        key = None
        for i, item in enumerate(items):
            if item is needle:
                equal = True
            elif tx is not None and (number_equal := symbolic_equal(tx, item, needle)) is not None:
                equal = number_equal
            elif tx is not None and (_user_class(item) is not None or _user_class(needle) is not None) and \
                    (result := user_compare(tx, operator.eq, item, needle)) is not None:
                if not result.is_constant():
                    raise unsupported("EB0016", f"{what}: __eq__ returned {result.describe()}")
                equal = bool(result.as_constant())
            else:
                if key is None:
                    key = (needle.hash_key(),)
                equal = item.hash_key() == key[0]
                if not equal and (isinstance(item, TensorVariable) or isinstance(needle, TensorVariable)) \
                        and not _never_equal_to_tensor(item, needle):
                    from ember.capture.variables.tensor_truth import raise_ambiguous_equal
                    raise_ambiguous_equal(item, needle)
                    raise unsupported("EB0016", f"{what} compares a tensor with == (its truth depends on data)")
            if equal and not count:
                return i
            found += equal
        return found if count else -1
    except Unsupported:
        raise
    except Exception:
        raise unsupported("EB0036", f"{what} on a container of non-constant values") from None


def _never_equal_to_tensor(a, b) -> bool:
    """A plain tensor against a str, bytes or None: Tensor.__eq__ returns NotImplemented, so
    ``==`` falls back to identity, False (``["b", t].index("b")``, ``t in ("a", None)``)."""
    import torch
    from ember.capture.variables.tensor import TensorVariable
    t, other = (a, b) if isinstance(a, TensorVariable) else (b, a)
    return type(other) is ConstantVariable and type(other.value) in (str, bytes, type(None)) \
        and t.python_type() in (torch.Tensor, torch.nn.Parameter)


class TupleVariable(LazyTupleItems, BaseSequence):
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
            # (a namedtuple takes its fields as arguments; a structseq or a plain subclass, one iterable)
            return self.tuple_type(*values) if hasattr(self.tuple_type, "_fields") else self.tuple_type(values)
        return values

    def getattr(self, tx, name):
        t = self.tuple_type
        if t is not None and t is not tuple and not hasattr(t, "_fields") and not hasattr(t, "n_fields"):
            # a plain subclass made in the frame (`container_methods.plain_subclass`): its methods inlined
            method = _subclass_method(t, tuple, name)
            if method is not None:
                from ember.capture.variables.functions import UserFunctionVariable, UserMethodVariable
                return UserMethodVariable(UserFunctionVariable(method), self)
        fields = getattr(self.tuple_type, "_fields", None)
        if fields and name in fields:
            return self.items[fields.index(name)]
        match_args = getattr(self.tuple_type, "__match_args__", None)  # torch.return_types structseqs
        if match_args and name in match_args:
            return self.items[match_args.index(name)]
        if fields and name in ("_replace", "_asdict"):
            from ember.capture.variables.functions import BoundMethodVariable
            return BoundMethodVariable(self, name)
        if fields and name in ("_fields", "_field_defaults"):
            return ConstantVariable(getattr(self.tuple_type, name))
        if fields and self.tuple_type not in (tuple, None) and not hasattr(tuple, name):
            # a method or property defined on the NamedTuple class
            import inspect
            try:
                raw = inspect.getattr_static(self.tuple_type, name)
            except AttributeError:
                raw = None
            if isinstance(raw, (types.FunctionType, property)):
                from ember.capture.variables.functions import UserMethodVariable
                from ember.capture.variables.objects import ClassVariable, class_source
                fn = ClassVariable(self.tuple_type, class_source(self.tuple_type)).getattr(
                    tx, name) if isinstance(raw, types.FunctionType) else None
                if fn is not None:
                    return UserMethodVariable(fn, self)
                from ember.capture.variables.functions import UserFunctionVariable
                return UserFunctionVariable(raw.fget).call(tx, [self], {})
        return super().getattr(tx, name)

    def call_method(self, tx, name, args, kwargs):
        read = self._lazy_read(name, args, kwargs)
        if read is not None:
            return read
        fields = getattr(self.tuple_type, "_fields", None)
        if fields and name == "_replace":
            items = list(self.items)
            for k, v in kwargs.items():
                if k not in fields:
                    raise unsupported("EB0002", f"_replace got unexpected field {k!r} (ValueError)")
                items[fields.index(k)] = v
            return TupleVariable(items, tuple_type=self.tuple_type)
        if fields and name == "_asdict":
            return DictVariable(dict(zip(fields, self.items)))
        return super().call_method(tx, name, args, kwargs)


_COMPARE_DUNDERS = {"__eq__", "__ne__", "__lt__", "__le__", "__gt__", "__ge__"}

# How many positional arguments the methods of the builtin sequences take (TypeError otherwise).
_ARITY = {"append": (1, 1), "extend": (1, 1), "insert": (2, 2), "pop": (0, 1), "clear": (0, 0),
          "reverse": (0, 0), "copy": (0, 0), "remove": (1, 1), "index": (1, 3), "count": (1, 1),
          "sort": (0, 0), "__imul__": (1, 1), "__mul__": (1, 1), "__iadd__": (1, 1), "__add__": (1, 1),
          "__getitem__": (1, 1), "__setitem__": (2, 2), "__delitem__": (1, 1), "__contains__": (1, 1),
          "__len__": (0, 0), "__iter__": (0, 0), **{n: (1, 1) for n in _COMPARE_DUNDERS}}


def _check_arity(cls, name, args, kwargs):
    if name not in _ARITY:
        return
    lo, hi = _ARITY[name]
    if not lo <= len(args) <= hi or (kwargs and name != "sort"):
        raise PythonException(TypeError(f"{cls.__name__}.{name}() got {len(args)} positional arguments"
                                        f"{' and keyword arguments' if kwargs else ''}"))


class ListVariable(BaseSequence):
    python_cls = list
    list_cls: type = list  # or a plain subclass of list made in the frame (`container_methods.plain_subclass`)

    def python_type(self):
        return self.list_cls

    def as_constant(self):
        return self.list_cls(i.as_constant() for i in self.items)

    def getattr(self, tx, name):
        if self.list_cls is not list:
            method = _subclass_method(self.list_cls, list, name)
            if method is not None:
                from ember.capture.variables.functions import UserFunctionVariable, UserMethodVariable
                return UserMethodVariable(UserFunctionVariable(method), self)
            if name == "__class__":
                from ember.capture.variables.objects import ClassVariable
                return ClassVariable(self.list_cls)
        return super().getattr(tx, name)

    def iter(self, tx):
        return ListIteratorVariable(self)

    def call(self, tx, args, kwargs):
        from ember.capture.variables.container_methods import call_subclass_instance
        return call_subclass_instance(tx, self, self.list_cls, list, args, kwargs)

    def _mutable(self, what: str, tx=None):
        if tx is not None:
            tx.side_effects.container_writes.append(self.born)
            if getattr(getattr(tx, "trace", None), "checkpoints", None):
                from ember.capture.speculation import note_container_write
                note_container_write(tx, self)
        if self.source is not None:
            tx.side_effects.mutated_container(self)

    def _extend(self, tx, other) -> None:
        """list.extend: a list or tuple is copied first (``lst.extend(lst)`` doubles it); any other
        iterable is consumed one item at a time, each appended before the next is produced, so a
        generator reading the list sees the items already added (as CPython's list_extend)."""
        from ember.capture.variables.generators import each_item
        if isinstance(other, (ListVariable, TupleVariable)):
            self.items.extend(other.unpack(tx))
            return
        for item in each_item(tx, other):
            self.items.append(item)

    def _call_method(self, tx, name, args, kwargs):
        items = self.items
        if name == "append":
            self._mutable(name, tx); items.append(args[0]); return ConstantVariable(None)
        if name == "extend":
            self._mutable(name, tx); self._extend(tx, args[0]); return ConstantVariable(None)
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
            i = _find(items, args[0], "list.remove", tx)
            if i < 0:
                raise PythonException(ValueError("list.remove(x): x not in list"))
            self._mutable(name, tx)
            del items[i]
            return ConstantVariable(None)
        if name == "sort" and not args and set(kwargs) <= {"key", "reverse"} and not (
                _all_constant(items) and _all_constant(kwargs.values())):
            # A key function (a lambda, a method) is called once per item as Python does; the order
            # is decided here when it does not depend on data (constant keys, tuples with distinct
            # constant heads; comparing tensors would read data).
            from ember.capture.variables.ordering import order_by_keys
            order = order_by_keys(tx, items, kwargs.get("key"), kwargs.get("reverse"), "list.sort")
            self._mutable(name, tx)
            items[:] = [items[i] for i in order]
            return ConstantVariable(None)
        if name == "sort" and _all_constant(items) and _all_constant(kwargs.values()):
            self._mutable(name, tx)
            kw = {k: v.as_constant() for k, v in kwargs.items()}
            values = list(self.as_constant())
            try:
                values.sort(**kw)
            except Exception as e:  # (the list is left as the failed sort left it, as in eager)
                items[:] = [ConstantVariable(v) for v in values]
                raise PythonException(e) from None
            items[:] = [ConstantVariable(v) for v in values]
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
            self._mutable(name, tx); self._extend(tx, args[0]); return self
        return super()._call_method(tx, name, args, kwargs)


# Methods a dict subclass from collections overrides (in C) with dict's own behaviour, as far as the
# DictVariable model goes.
_SAME_AS_DICT = {"__setitem__", "__delitem__", "__iter__", "__getitem__", "__contains__", "__len__", "update",
                 "pop", "setdefault", "clear", "keys", "values", "items", "get", "copy", "__missing__",
                 # (their class-specific results are decided by the `|` operator's rules)
                 "__or__", "__ior__", "__ror__",
                 "__eq__", "__ne__"}  # (dict_equal compares OrderedDicts in order)


def _dict_override(cls: type, name: str):
    """``name`` as ``cls`` defines it above ``dict`` in its MRO (None if it is dict's own)."""
    for klass in cls.__mro__:
        if klass is dict:
            return None
        if name in klass.__dict__:
            return klass.__dict__[name]
    return None


_DICT_ARITY = {"get": (1, 2), "pop": (1, 2), "setdefault": (1, 2), "update": (0, 1), "keys": (0, 0), "values": (0, 0),
               "items": (0, 0), "copy": (0, 0), "clear": (0, 0), "__getitem__": (1, 1), "__setitem__": (2, 2),
               "__delitem__": (1, 1), "__contains__": (1, 1), "__len__": (0, 0), "popitem": (0, 0)}


class DictVariable(VariableTracker):
    """A dict with constant (or hashable-tracker) keys. ``keys`` keeps the key VTs."""

    def __init__(self, items: dict[Any, VariableTracker], keys: dict[Any, VariableTracker] | None = None,
                 source=None, dict_cls: type = dict):
        self.items = dict(items)
        self.keys = dict(keys) if keys is not None else {k: ConstantVariable(k) for k in items}
        self.source = source
        self.dict_cls = dict_cls
        self.born = next(BIRTHS)
        self.default_factory: VariableTracker | None = None  # for collections.defaultdict
        # Where the key order comes from, kept when `source` is dropped (a **kwargs dict is the
        # frame's own, but its order is the caller's), and the order it had then.
        self.order_source = source
        self.initial_keys = list(self.items) if source is not None else None

    @classmethod
    def sharing(cls, attrs: dict) -> "DictVariable":
        """A dict tracker over ``attrs`` itself (name -> tracker: an object's ``__dict__``), so that
        writes through either side are seen by the other. The owner adds a key it writes to
        ``keys`` too."""
        view = cls({})
        view.items = attrs
        view.keys = {k: ConstantVariable(k) for k in attrs}
        return view

    @classmethod
    def read_only_of(cls, pairs, why: str, view_of=None) -> "DictVariable":
        """A new dict of ``(key tracker or str, value tracker)`` pairs the program may read, not change
        (``why``: the break's reason): ``__kwdefaults__``, a partial's ``keywords`` ... ``view_of``:
        (owner tracker, attribute): at a break it is that attribute of the rebuilt owner, not a copy."""
        d = cls({})
        for k, v in pairs:
            d.set_item(k if isinstance(k, VariableTracker) else ConstantVariable(k), v)
        d.read_only = why
        d.view_of = view_of
        return d

    def python_type(self):
        return self.dict_cls

    def describe(self):
        return f"dict[{', '.join(map(repr, self.items))}]"

    def truth(self, tx):
        return bool(self.items)

    def is_constant(self):
        return _all_constant(self.items.values()) and (self.default_factory is None
                                                       or self.default_factory.is_constant())

    def as_constant(self):
        pairs = [(k, v.as_constant()) for k, v in self.items.items()]
        cls = self.dict_cls
        if cls is dict:
            return dict(pairs)
        # Not `cls(pairs)`: Counter(pairs) would count the pairs, defaultdict(pairs) takes a factory.
        if issubclass(cls, collections.defaultdict):
            out = cls(self.default_factory.as_constant() if self.default_factory is not None else None)
        else:
            out = cls()
        for k, v in pairs:
            out[k] = v
        return out

    def _observe_order(self, tx):
        """The program sees the key order (iterating, or copying it into another dict): guard the
        order the dict came in with (what the current order follows from)."""
        if self.order_source is not None:
            tx.guards.dict_keys(self.order_source, self.initial_keys, ordered=True)

    def unpack(self, tx):
        self._observe_order(tx)
        return list(self.keys.values())

    def iter(self, tx):
        from ember.capture.variables.dict_views import SizeCheckedIterator
        self._observe_order(tx)
        return SizeCheckedIterator(self, "keys")  # changing the size while iterating raises

    read_only: str | None = None  # why the program may not mutate it (a view built from other state)
    view_of = None  # (owner tracker, attribute) of a read-only view (read_only_of)
    born = -1
    owner = None  # the dict subclass's instance made in the frame whose items these are

    def _mutable(self, what, tx=None):
        if self.read_only is not None:
            raise unsupported("EB0032", self.read_only)
        if tx is not None:
            tx.side_effects.container_writes.append(self.born)
            if getattr(getattr(tx, "trace", None), "checkpoints", None):
                from ember.capture.speculation import note_container_write
                note_container_write(tx, self)
        if self.source is not None:
            tx.side_effects.mutated_container(self)

    def getattr(self, tx, name):
        from ember.capture.variables.functions import BoundMethodVariable
        if hasattr(dict, name):
            return BoundMethodVariable(self, name)
        if name == "default_factory" and issubclass(self.dict_cls, collections.defaultdict):
            return self.default_factory if self.default_factory is not None else ConstantVariable(None)
        if self.dict_cls is not dict and name != "default_factory" and callable(getattr(self.dict_cls, name, None)):
            return BoundMethodVariable(self, name)  # Counter.most_common, OrderedDict.move_to_end, ...
        if self._has_own_attrs():
            if self.attr_dict is not None and name in self.attr_dict.items:
                return self.attr_dict.items[name]
            if not hasattr(self.dict_cls, name):
                from ember.capture.variables.objects import MissingAttribute
                cls = self.dict_cls  # (CPython names a C type by its tp_name: 'collections.OrderedDict')
                shown = cls.__name__ if cls.__flags__ & (1 << 9) else f"{cls.__module__}.{cls.__qualname__}"
                raise MissingAttribute(f"'{shown}' object has no attribute '{name}'")
        return super().getattr(tx, name)

    attr_dict: "DictVariable | None" = None  # instance attributes set in the frame (`d._metadata = ...`)

    def _has_own_attrs(self) -> bool:
        """A dict of a builtin dict subclass with an instance ``__dict__`` (OrderedDict, defaultdict,
        Counter) made in the frame: ember knows all its instance attributes."""
        return self.source is None and self.owner is None and self.read_only is None and \
            self.dict_cls is not dict and self.dict_cls.__module__ == "collections" and \
            self.dict_cls.__dictoffset__ != 0

    def setattr(self, tx, name, value):
        # `destination._metadata = OrderedDict()` (Module.state_dict): an instance attribute of a
        # dict made in the frame, rebuilt with it if it escapes (convert_frame). A name the class
        # defines (a method, a descriptor) is left to the generic refusal.
        if not self._has_own_attrs() or hasattr(self.dict_cls, name):
            return super().setattr(tx, name, value)
        if self.attr_dict is None:
            self.attr_dict = DictVariable({})
        self.attr_dict._mutable("setattr", tx)
        self.attr_dict.set_item(ConstantVariable(name), value)

    def set_item(self, key_vt, value):
        k = set_key(key_vt)
        self.items[k] = value
        self.keys.setdefault(k, key_vt)

    def call_method(self, tx, name, args, kwargs):
        if self.dict_cls is not dict:
            own = _dict_override(self.dict_cls, name)
            if isinstance(own, types.FunctionType):  # Counter.update, .most_common, ...: run its code
                from ember.capture.variables.functions import UserFunctionVariable, UserMethodVariable
                return UserMethodVariable(UserFunctionVariable(own), self).call(tx, args, kwargs)
            if issubclass(self.dict_cls, collections.OrderedDict) and name in ("move_to_end", "popitem") \
                    and _dict_override(collections.OrderedDict, name) is own:
                return self._ordered_method(tx, name, args, kwargs)
            if own is not None and not (name in _SAME_AS_DICT or name == "popitem" and not args and not kwargs
                                        or name == "__init__" and own is collections.OrderedDict.__init__):
                # e.g. OrderedDict.popitem(last=False), move_to_end: not what the dict model does
                raise unsupported("EB0039", f"{self.dict_cls.__name__}.{name}")
        if name in _DICT_ARITY:
            lo, hi = _DICT_ARITY[name]
            if not lo <= len(args) <= hi or (kwargs and name != "update"):
                raise PythonException(TypeError(f"{self.dict_cls.__name__}.{name}() got {len(args)} positional arguments"
                                                f"{' and keyword arguments' if kwargs else ''}"))
        return self._call_method(tx, name, args, kwargs)

    def _ordered_method(self, tx, name, args, kwargs):
        """OrderedDict's ``move_to_end(key, last=True)`` and ``popitem(last=True)``."""
        names = ("key", "last") if name == "move_to_end" else ("last",)
        bound = dict(zip(names, args))
        for k, v in kwargs.items():
            if k not in names or k in bound:
                raise PythonException(TypeError(f"{name}() got an unexpected keyword argument {k!r}"))
            bound[k] = v
        if len(args) > len(names) or (name == "move_to_end" and "key" not in bound):
            raise PythonException(TypeError(f"{name}() takes at most {len(names)} arguments"))
        last = bound.get("last", ConstantVariable(True))
        if not last.is_constant():
            raise unsupported("EB0039", f"OrderedDict.{name} with last={last.describe()}")
        last = bool(last.as_constant())
        if name == "popitem":
            if not self.items:
                raise PythonException(KeyError("dictionary is empty"))
            self._mutable(name, tx)
            k = next(reversed(self.items)) if last else next(iter(self.items))
            return TupleVariable([self.keys.pop(k), self.items.pop(k)])
        k = set_key(bound["key"])
        if k not in self.items:
            raise PythonException(KeyError(bound["key"].as_constant() if bound["key"].is_constant() else k))
        self._mutable(name, tx)
        value, key_vt = self.items.pop(k), self.keys.pop(k)
        if last:
            self.items[k], self.keys[k] = value, key_vt
        else:  # (in place: iterators and views hold these dicts)
            rest_items, rest_keys = list(self.items.items()), list(self.keys.items())
            self.items.clear(); self.keys.clear()
            self.items[k], self.keys[k] = value, key_vt
            self.items.update(rest_items); self.keys.update(rest_keys)
        return ConstantVariable(None)

    def _call_method(self, tx, name, args, kwargs):
        items = self.items
        if name == "__getitem__":
            k = set_key(args[0])
            if k not in items and self.default_factory is not None:
                self._mutable(name, tx)
                self.set_item(args[0], self.default_factory.call(tx, [], {}))
            owner = self.owner  # (the items of a dict subclass's instance made in the frame: its class)
            cls = owner.cls if owner is not None else self.dict_cls
            missing = _dict_override(cls, "__missing__") if cls is not dict else None
            if k not in items and isinstance(missing, types.FunctionType):  # Counter: 0
                from ember.capture.variables.functions import UserFunctionVariable, UserMethodVariable
                return UserMethodVariable(UserFunctionVariable(missing), owner or self).call(tx, [args[0]], {})
            if k not in items:
                raise PythonException(KeyError(k))
            return items[k]
        if name == "get":
            k = set_key(args[0])
            return items.get(k, args[1] if len(args) > 1 else ConstantVariable(None))
        if name == "__contains__":
            return ConstantVariable(set_key(args[0]) in items)
        if name == "__len__":
            return ConstantVariable(len(items))
        if name in ("keys", "values", "items"):
            from ember.capture.variables.dict_views import DictViewVariable
            return DictViewVariable(self, name)  # live: reads the dict when used
        if name == "copy":
            self._observe_order(tx)
            out = DictVariable(items, self.keys, dict_cls=self.dict_cls)
            out.default_factory = self.default_factory  # (a defaultdict's copy keeps its factory)
            return out
        if name == "__setitem__":
            self._mutable(name, tx); self.set_item(args[0], args[1]); return ConstantVariable(None)
        if name == "__delitem__":
            k = set_key(args[0])
            if k not in items:
                raise PythonException(KeyError(args[0].as_constant() if args[0].is_constant() else k))
            self._mutable(name, tx); del items[k]; del self.keys[k]
            return ConstantVariable(None)
        if name == "popitem":
            if not items:
                raise PythonException(KeyError("popitem(): dictionary is empty"))
            self._mutable(name, tx)
            k = next(reversed(items))
            return TupleVariable([self.keys.pop(k), items.pop(k)])
        if name == "pop":
            self._mutable(name, tx)
            k = set_key(args[0])
            if k in items:
                self.keys.pop(k)
                return items.pop(k)
            if len(args) > 1:
                return args[1]
            raise PythonException(KeyError(k))
        if name == "setdefault":
            self._mutable(name, tx)
            k = set_key(args[0])
            if k not in items:
                self.set_item(args[0], args[1] if len(args) > 1 else ConstantVariable(None))
            return items[k]
        if name == "update":
            self._mutable(name, tx)
            if args:
                other = dict_operand(args[0]) or args[0]
                if isinstance(other, DictVariable):
                    other._observe_order(tx)
                    for k, v in other.items.items():
                        self.set_item(other.keys[k], v)
                else:
                    for i, pair in enumerate(other.unpack(tx)):
                        kv = pair.unpack(tx)
                        if len(kv) != 2:
                            raise PythonException(ValueError(
                                f"dictionary update sequence element #{i} has length {len(kv)}; 2 is required"))
                        self.set_item(kv[0], kv[1])
            for k, v in kwargs.items():
                self.set_item(ConstantVariable(k), v)
            return ConstantVariable(None)
        if name == "clear":
            self._mutable(name, tx); items.clear(); self.keys.clear(); return ConstantVariable(None)
        if name == "__init__":  # dict.__init__(d, ...) (a subclass's super().__init__()): update()
            if len(args) > 1:
                raise PythonException(TypeError(f"dict expected at most 1 argument, got {len(args)}"))
            return self._call_method(tx, "update", args, kwargs)
        if name in ("__eq__", "__ne__") and len(args) == 1 and not kwargs:
            other = dict_operand(args[0])
            if other is None:
                return ConstantVariable(NotImplemented)
            from ember.capture.variables.dict_views import dict_equal
            return ConstantVariable(dict_equal(self, other) == (name == "__eq__"))
        if name == "__iter__" and not args and not kwargs:
            return self.iter(tx)
        if name in ("__or__", "__ior__", "__ror__") and len(args) == 1 and not kwargs:
            if name == "__ior__" and dict_operand(args[0]) is None:
                self.call_method(tx, "update", args, {})  # any iterable of pairs
                return self
            if dict_operand(args[0]) is None:
                return ConstantVariable(NotImplemented)
            args = [dict_operand(args[0])]
            if name == "__ror__":
                return tx.binary_op(operator.or_, args[0], self)
            return tx.binary_op(operator.or_ if name == "__or__" else operator.ior, self, args[0])
        if hasattr(dict, name):  # a real method the tracker does not model (its bound method calls back here)
            raise unsupported("EB0039", f"dict.{name} on {self.describe()}")
        return super().call_method(tx, name, args, kwargs)


def dict_operand(vt) -> DictVariable | None:
    """The dict tracker behind ``vt`` as an argument of a dict method (which reads a dict subclass's
    items directly): a dict tracker, or the items of a dict subclass's instance made in the frame."""
    if isinstance(vt, DictVariable):
        return vt
    if type(vt).__name__ == "MappingProxyVariable":  # (dict methods read a mapping's items alike)
        return vt.mapping
    items = getattr(vt, "items", None)
    return items if isinstance(items, DictVariable) and getattr(vt, "dict_base", None) is not None else None


def set_key(vt: VariableTracker):
    """The key of ``vt`` as a set element / dict key: TypeError for an unhashable value (a list, a
    dict, a set), as Python raises; a function or a class is its own key (compared by identity)."""
    if isinstance(vt, (ListVariable, DictVariable)) or (isinstance(vt, SetVariable) and not vt.frozen):
        raise PythonException(TypeError(f"unhashable type: '{vt.python_type().__name__}'"))
    if isinstance(vt, SetVariable) and not vt.is_constant():
        keys = frozenset(vt.items)  # a frozenset of trackers: equal when their keys are
        return ("__frozenset__", keys)
    fn = getattr(vt, "fn", None)
    if fn is not None and type(vt).__name__ in ("UserFunctionVariable", "TorchFunctionVariable"):
        return fn
    key = vt.hash_key()
    if isinstance(vt, ConstantVariable):
        try:
            hash(key)
        except TypeError as e:  # a slice, a list inside a tuple ...
            raise PythonException(e) from None
    return key


def _set_operand(tx, vt) -> list:
    """The items of an iterable argument of a set method (``s.union([1, 2])``)."""
    if isinstance(vt, SetVariable):
        return list(vt.items.values())
    if isinstance(vt, ConstantVariable):
        try:
            iter(vt.value)
        except TypeError as e:
            raise PythonException(e) from None
    return vt.iter(tx).unpack(tx)


def _subclass_method(cls: type, base: type, name: str):
    """The plain function ``name`` defined by a class between ``cls`` and ``base``, or None."""
    for klass in cls.__mro__:
        if klass is base:
            return None
        if isinstance(klass.__dict__.get(name), types.FunctionType):
            return klass.__dict__[name]
    return None


# Iterators over known items live in iterators.py; re-exported here (that module imports this one).
from ember.capture.variables.iterators import IteratorVariable, ListIteratorVariable  # noqa: E402,F401


# Sets live in their own module; re-exported here, where every tracker module imports containers
# from (sets.py imports this module, so it must not be imported before it).
from ember.capture.variables.sets import SetVariable  # noqa: E402,F401

