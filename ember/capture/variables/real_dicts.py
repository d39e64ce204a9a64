"""Read-only dict methods of a real dict-subclass object from outside the frame (an HF
``ModelOutput``, a user ``dict`` subclass): answered now and guarded by re-reading them the same
way. An OrderedDict is read in its linked order (``move_to_end`` changes it), not its hash table's.
"""
from __future__ import annotations

import collections

from ember.capture.variables.base import VariableTracker, unsupported
from ember.exc import PythonException


def _base_dict(d) -> type:
    """The C mapping whose methods read ``d`` in its own order: an OrderedDict's order is its
    linked list (``move_to_end`` changes it), not the hash table that dict's methods walk."""
    return collections.OrderedDict if isinstance(d, collections.OrderedDict) else dict


def _dict_keys(d):
    return list(_base_dict(d).keys(d))


def _dict_values(d):
    return list(_base_dict(d).values(d))


def _dict_items(d):
    return list(_base_dict(d).items(d))


_ABSENT = object()


def _dict_getitem(d, k):
    """``dict.__getitem__(d, k)`` that never calls the subclass's ``__missing__`` (which may write
    the dict): a missing key raises KeyError, in the trace and in a guard on a later call."""
    v = dict.get(d, k, _ABSENT)
    if v is _ABSENT:
        raise KeyError(k)
    return v


_DICT_READS = {"keys": _dict_keys, "values": _dict_values, "items": _dict_items, "get": dict.get,
               "__getitem__": _dict_getitem, "__contains__": dict.__contains__, "__len__": dict.__len__}


class RealDictReadVariable(VariableTracker):
    """A read-only dict method (``keys``, ``get``...) of a real dict-subclass object from outside the
    frame (e.g. an HF ``ModelOutput``): answered now, guarded by re-reading it the same way."""

    def __init__(self, obj_vt, name):
        self.obj_vt = obj_vt
        self.name = name

    def describe(self):
        return f"dict.{self.name} of {self.obj_vt.describe()}"

    def truth(self, tx):
        return True

    def call(self, tx, args, kwargs):
        from ember.capture.builder import wrap
        from ember.capture.sources import CallSource
        if kwargs or not all(a.is_constant() for a in args):
            raise unsupported("EB0036", f"{self.describe()} with non-constant arguments")
        fn = _DICT_READS[self.name]
        cargs = tuple(a.as_constant() for a in args)
        try:
            value = fn(self.obj_vt.obj, *cargs)
        except KeyError as e:
            if self.name == "__getitem__" and hasattr(type(self.obj_vt.obj), "__missing__"):
                # eager calls __missing__ on the real object (it may insert the key): run it there
                raise unsupported("EB0039", f"{self.describe()} of a missing key: "
                                  f"{type(self.obj_vt.obj).__name__}.__missing__") from None
            raise PythonException(e) from None
        src = CallSource(fn, self.obj_vt.source, cargs) if self.obj_vt.source is not None else None
        return wrap(tx, value, src)
