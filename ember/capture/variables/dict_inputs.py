"""Dicts from outside the frame: wrapped whole, or read (and guarded) as far as the trace looks.

A plain dict argument with string or int keys (a batch, a config) is a `LazyDictVariable`: ``k in
d``, ``d[k]``, ``d.get(k)`` and ``len(d)`` guard only what they read (that ``k`` is, or is not, a
key; the value's own guards; the length), as torch.compile guards them, so a key added or a value
changed that the trace never read does not recompile::

    def f(x, batch):
        return x * batch["scale"]       # batch["step"] changing type, or a new key: same graph

Anything else (iterating, ``keys()``/``items()``, copying, writing, ``**d``) completes it: every key
and value wrapped and the key set guarded, as `wrap_dict` does for every other dict.
"""
from __future__ import annotations

import collections
import enum

import torch

from ember.capture.sources import AttrSource, CallSource, ConstSource, ItemSource
from ember.capture.variables.base import ConstantVariable, unsupported
from ember.capture.variables.containers import DictVariable
from ember.capture.variables.lazy import _wrap as wrap


def wrap_dict(tx, value, source, t, wrapped: dict | None = None):
    """The tracker of a dict (or a collections dict class), every key and value wrapped and the key
    set guarded. ``wrapped``: values already wrapped, by key (a lazily read dict being completed)."""
    from ember.capture.builder import (_identity_key, _identity_object, _nth_key, _nth_value, _plain_constant,
                                       _tensor_key, _weak_identity_key)
    guards = tx.guards
    if source is not None:
        guards.type_match(source, value)  # (again for a lazily read dict: one guard)
        # (the order too where a key is an object, as torch.compile guards such a dict)
        guards.dict_keys(source, list(value.keys()), ordered=any(_identity_object(k) or _tensor_key(k)
                                                                  or _weak_identity_key(k) for k in value))
    from ember.capture.variables.new_object import pybind11_enum_value
    for k in value:
        if not (isinstance(k, (str, int, float, bool, type(None), enum.Enum, tuple, bytes, complex, frozenset,
                               torch.device, torch._ops.OpOverload, torch._ops.OpOverloadPacket))
                or _identity_key(k) or (_tensor_key(k) and source is not None)
                or pybind11_enum_value(k) is not None or _weak_identity_key(k)):
            raise unsupported("EB0035", f"dict with a key of type {type(k).__name__}")
    items, keys = {}, {}
    # (defaultdict, Counter: `d[k]` in a guard on a later call, where k is gone, would call
    # __missing__, and a defaultdict's inserts the key into the caller's dict)
    missing = hasattr(t, "__missing__")
    from ember.capture.variables.real_dicts import _dict_getitem  # (a missing key: a guard miss)
    for i, (k, v) in enumerate(list(value.items())):  # (wrapping a value may add to this dict: globals)
        if _tensor_key(k):
            # A tensor key (an optimizer's state by parameter): the key an input read from its
            # position (the ordered key guard pins the very objects), hashed by identity as
            # eager does; its value read from the same position.
            key_vt = wrap(tx, k, CallSource(_nth_key, source, (i,)))
            hk = key_vt.hash_key()
            items[hk] = wrap(tx, v, CallSource(_nth_value, source, (i,)))
            keys[hk] = key_vt
            continue
        if _weak_identity_key(k):
            # a weak reference to a module or an object (a WeakKeyDictionary's data): keyed by its
            # referent's identity, as `weakref.ref(obj)` made in the frame is (variables/weakrefs.py)
            from ember.capture.variables.weakrefs import weakref_hash_key
            hk = weakref_hash_key(k())
            items[hk] = wrap(tx, v, ItemSource(source, k) if source is not None else None)
            keys[hk] = wrap(tx, k, None)
            continue
        # keys as the trace hashes them (an object, a module: by identity), with their trackers
        by_identity = _identity_object(k) or (isinstance(k, tuple) and not _plain_constant(k))
        # (an object key: what the trace reads from it, an attribute, is guarded through the object
        # itself, the one the dict's key guards pin)
        key_vt = wrap(tx, k, ConstSource(k, f"<dict key {type(k).__qualname__}>")) if by_identity \
            else ConstantVariable(k)
        hk = key_vt.hash_key() if by_identity else k
        if wrapped is not None and k in wrapped:
            items[hk] = wrapped[k]
        else:
            items[hk] = wrap(tx, v, None if source is None else
                             CallSource(_dict_getitem, source, (k,)) if missing else ItemSource(source, k))
        keys[hk] = key_vt
    vt = DictVariable(items, keys, source=source, dict_cls=t)
    if source is not None:
        vt.initial_keys = list(value.keys())  # the real keys (objects, not their hash keys)
        vt.outside = value  # the program's own dict (kept, not copied, by a traced Function's ctx)
    if isinstance(value, collections.defaultdict):  # `d[missing]` calls it, as in eager
        factory_src = AttrSource(source, "default_factory") if source is not None else None
        if value.default_factory is not None:
            vt.default_factory = wrap(tx, value.default_factory, factory_src)
        elif factory_src is not None:
            guards.constant_match(factory_src, None)
    return vt


_ABSENT = object()


class LazyDictVariable(DictVariable):
    """A plain dict from outside with str/int keys, read lazily (see the module docstring). Until
    it is completed, ``items``/``keys`` are not built; reading either completes it."""

    def __init__(self, tx, value: dict, source) -> None:
        super().__init__({})
        self._tx = tx
        self._value = self.outside = value
        self._read: dict = {}  # key -> wrapped value, for the keys read so far
        self._items = self._keys = None
        self.source = self.order_source = source
        self.initial_keys = None

    # -- completing
    def _complete(self) -> None:
        if self._items is None:
            done = wrap_dict(self._tx, self._value, self.source, dict, wrapped=self._read)
            self._items, self._keys = done.items, done.keys
            self.initial_keys = done.initial_keys

    @property
    def items(self):
        self._complete()
        return self._items

    @items.setter
    def items(self, value):
        self._items = value

    @property
    def keys(self):
        self._complete()
        return self._keys

    @keys.setter
    def keys(self, value):
        self._keys = value

    def _observe_order(self, tx):
        self._complete()
        super()._observe_order(tx)

    @property
    def lazy(self) -> bool:
        return self._items is None

    # -- reads that guard only what they read
    def _lookup(self, tx, key_vt):
        """The value tracker of a constant key, or _ABSENT; guards its presence (or absence)."""
        key = key_vt.as_constant()
        present = key in self._value
        tx.guards.dict_contains(self.source, key, present)
        if not present:
            return _ABSENT
        if key not in self._read:
            self._read[key] = wrap(tx, self._value[key], ItemSource(self.source, key))
        return self._read[key]

    def _plain_key(self, args) -> bool:
        return len(args) >= 1 and isinstance(args[0], ConstantVariable) and type(args[0].value) in (str, int)

    def call_method(self, tx, name, args, kwargs):
        if self._items is None and not kwargs and self._plain_key(args):
            if name == "__getitem__" and len(args) == 1:
                found = self._lookup(tx, args[0])
                if found is _ABSENT:
                    from ember.exc import PythonException
                    raise PythonException(KeyError(args[0].value))
                return found
            if name == "get" and len(args) in (1, 2):
                found = self._lookup(tx, args[0])
                if found is _ABSENT:
                    return args[1] if len(args) == 2 else ConstantVariable(None)
                return found
            if name == "__contains__" and len(args) == 1:
                return ConstantVariable(self._lookup(tx, args[0]) is not _ABSENT)
        if self._items is None and name == "__len__" and not args and not kwargs:
            tx.guards.length(self.source, len(self._value))
            return ConstantVariable(len(self._value))
        return super().call_method(tx, name, args, kwargs)

    def truth(self, tx):
        if self._items is None:
            tx.guards.length(self.source, len(self._value))
            return bool(self._value)
        return super().truth(tx)

    def describe(self):
        return "dict" if self._items is None else super().describe()
