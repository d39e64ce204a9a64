"""Trackers for values from outside the frame that are read, and guarded, only as far as the
trace looks at them.

A loop resumed after a graph break gets the rest of its iterator; a training step appends to a
log list. Guarding every item and the exact length would recompile on every iteration or call;
these trackers guard an item when the trace takes it and the length only once the trace
observes it (``>= k`` while it stopped early, ``== k`` once it ran out or read the whole list).
"""
from __future__ import annotations

from ember.capture.sources import CallSource, ItemSource
from ember.capture.variables.base import ConstantVariable
from ember.capture.variables.containers import IteratorVariable, ListVariable
from ember.capture.variables.lazy_items import index_read


def _wrap(tx, value, source):
    from ember.capture.builder import wrap
    return wrap(tx, value, source)


def _remaining_items(it):
    from ember.capture.builder import remaining_items
    return remaining_items(it)


class LazyIteratorVariable(IteratorVariable):
    """A tuple/range/... iterator from outside (e.g. the rest of a loop handed to a resume
    function): an item is wrapped, and guarded, when the trace takes it, and the number of
    items left only as far as the trace looked (``>= k`` while it stopped early, ``== k`` once
    it ran out), so resuming one loop at different positions shares compiled code."""

    def __init__(self, tx, rest: tuple, source):
        self._tx = tx
        self._rest = rest
        self._rest_src = CallSource(_remaining_items, source, ())
        self._wrapped: list = []
        self.pos = 0
        self.source = source

    def _take(self, n: int) -> None:
        """Wrap the first ``n`` items (they exist)."""
        while len(self._wrapped) < n:
            i = len(self._wrapped)
            self._wrapped.append(_wrap(self._tx, self._rest[i], ItemSource(self._rest_src, i)))

    @property
    def items(self):  # everything: the whole length is observed
        self._tx.guards.length(self._rest_src, len(self._rest))
        self._take(len(self._rest))
        return self._wrapped

    @items.setter
    def items(self, value):
        raise AttributeError("items of an iterator from outside are read-only")

    def describe(self):
        return "iterator"

    def next(self, tx):
        if self.pos >= len(self._rest):
            tx.guards.length(self._rest_src, len(self._rest))  # ran out: exactly this many
            return None
        tx.guards.min_length(self._rest_src, self.pos + 1)
        self._take(self.pos + 1)
        tx.side_effects.mutated_container(self)
        self.pos += 1
        return self._wrapped[self.pos - 1]

    def unpack(self, tx):
        rest = self.items[self.pos:]
        if rest:
            tx.side_effects.mutated_container(self)
        self.pos = len(self._rest)
        return rest


class LazyListVariable(ListVariable):
    """A list from outside the frame: its length and items are read (and guarded) only when the
    trace looks at them. Appends before that are recorded as appends and replayed with
    ``extend``, so a list the frame only appends to (a log of losses) is not guarded by its
    length — which changes on every call."""

    def __init__(self, tx, value: list, source):
        self._tx = tx
        self._value = value
        self._items = None
        self._read: dict = {}  # index -> tracker of the items read so far (``lst[i]``)
        self.appended: list = []
        self.source = source

    @property
    def only_appended(self) -> bool:
        return self._items is None

    @property
    def items(self):
        if self._items is None:
            tx = self._tx
            tx.guards.length(self.source, len(self._value))
            self._items = [self._item(tx, i) for i in range(len(self._value))]
            self._items += self.appended
        return self._items

    def _item(self, tx, i: int):
        if i not in self._read:
            self._read[i] = _wrap(tx, self._value[i], ItemSource(self.source, i))
        return self._read[i]

    def _lazy_read(self, tx, name, args, kwargs):
        """``lst[i]`` (a constant int in range) and ``len(lst)`` of a list not yet read whole: the
        length guarded (as torch.compile does for any access), only the item read wrapped (and
        guarded), so a later item changing type does not recompile. None: not such a read."""
        if self._items is not None or self.appended:
            return None
        n = len(self._value)
        read = index_read(n, name, args, kwargs)
        if read is None:
            return None
        tx.guards.length(self.source, n)
        return ConstantVariable(n) if read == "len" else self._item(tx, read)

    def truth(self, tx):
        if self._items is None and not self.appended:
            tx.guards.length(self.source, len(self._value))
            return bool(self._value)
        return super().truth(tx)

    @items.setter
    def items(self, value):
        self._items = value

    def describe(self):
        return "list" if self._items is None else super().describe()

    def _new(self, items):
        return ListVariable(items)

    def call_method(self, tx, name, args, kwargs):
        read = self._lazy_read(tx, name, args, kwargs)
        if read is not None:
            return read
        if name == "append" and self._items is None and len(args) == 1 and not kwargs:
            tx.side_effects.mutated_container(self)
            self.appended.append(args[0])
            return ConstantVariable(None)
        return super().call_method(tx, name, args, kwargs)
