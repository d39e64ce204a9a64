"""The lazily read items of a plain tuple from outside (an argument, ``*args``).

Its type and length are guarded when it is wrapped (`builder.wrap`); an item is wrapped, and so
guarded, when ``t[i]`` (a constant index) reads it, so an item the trace never reads may change
type without a recompile, as torch.compile guards tuples. Anything else that needs the items
(unpacking, iterating, slicing, comparing) reads them all through ``items``.
"""
from __future__ import annotations

from ember.capture.variables.base import ConstantVariable


def index_read(n: int, name: str, args, kwargs):
    """For a sequence of ``n`` items not read yet: ``"len"`` for ``len(seq)``, the index for
    ``seq[i]`` (a constant int in range), or None for any other call (which reads it whole)."""
    if kwargs:
        return None
    if name == "__len__" and not args:
        return "len"
    if name == "__getitem__" and len(args) == 1 and type(args[0]) is ConstantVariable \
            and type(args[0].value) is int and -n <= args[0].value < n:
        return args[0].value % n
    return None


class LazyTupleItems:
    """Mixed into ``TupleVariable`` (before ``BaseSequence``): ``items`` as a property."""

    _pending = None  # (tx, value, source) while items are unread
    _read = None     # index -> tracker of the items read so far

    @property
    def items(self):
        if self._pending is not None:
            tx, value, source = self._pending
            self._items = [self._item(i) for i in range(len(value))]
            self._pending = None
        return self._items

    @items.setter
    def items(self, value):
        self._items = value

    def _item(self, i: int):
        tx, value, source = self._pending
        if i not in self._read:
            from ember.capture.builder import wrap
            from ember.capture.sources import ItemSource
            self._read[i] = wrap(tx, value[i], ItemSource(source, i))
        return self._read[i]

    def _lazy_read(self, name, args, kwargs):
        """``len(t)``, ``t[i]`` (a constant index in range) of unread items, or None."""
        if self._pending is None:
            return None
        n = len(self._pending[1])
        read = index_read(n, name, args, kwargs)
        if read is None:
            return None
        return ConstantVariable(n) if read == "len" else self._item(read)  # (its length is guarded already)

    def truth(self, tx):
        if self._pending is not None:
            return bool(self._pending[1])
        return super().truth(tx)

    @property
    def lazy(self) -> bool:
        return self._pending is not None


def lazy_tuple(tx, value: tuple, source) -> "TupleVariable":
    """The tracker of a plain tuple from outside whose type and length are guarded already: its
    items wrapped (and guarded) as the trace reads them (`TupleVariable.items`)."""
    from ember.capture.variables.containers import TupleVariable
    vt = TupleVariable([], source)
    vt._pending = (tx, value, source)
    vt._read = {}
    return vt
