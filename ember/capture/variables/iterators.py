"""Iterators over items the trace knows: ``IteratorVariable`` (a list of items, advanced in place;
one standing for a real iterator from outside has its consumption replayed) and
``ListIteratorVariable`` (``iter(lst)``: an index into the list as it is when advanced).
"""
from __future__ import annotations

from ember.capture.variables.generators import IteratorBase


class IteratorVariable(IteratorBase):
    """An iterator over a known list of items; advancing it mutates ``pos``."""

    real_type = None

    def __init__(self, items: list, source=None, real_type: type | None = None):
        self.items = list(items)
        self.pos = 0
        self.source = source  # a real iterator from outside: consumption is replayed
        self.real_type = real_type  # the type of the object it stands for, where known

    def describe(self):
        return f"iterator({len(self.items) - self.pos} left)"

    def python_type(self):
        if self.real_type is None:
            return super().python_type()
        return self.real_type

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

    def __init__(self, seq, start: int = 0, source=None):
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


class ReversedListIterator(IteratorVariable):
    """``reversed(lst)``: like CPython's reverse list iterator, an index into the list read when
    advanced (a write made after ``reversed()`` is seen; once past the front, or when the index is
    beyond a list that shrank, it is exhausted for good)."""

    real_type = type(reversed([]))

    def __init__(self, seq):
        self.seq = seq
        self.index = len(seq.items) - 1
        self.pos = 0
        self.source = None

    @property
    def items(self):  # (what IteratorVariable's helpers read: the items still to come, in order)
        return self.remaining()

    def remaining(self):
        if not 0 <= self.index < len(self.seq.items):
            return []
        return [self.seq.items[i] for i in range(self.index, -1, -1)]

    def describe(self):
        return f"list_reverseiterator({max(self.index + 1, 0)} left)"

    def next(self, tx):
        if 0 <= self.index < len(self.seq.items):
            item = self.seq.items[self.index]
            self.index -= 1
            return item
        self.index = -1
        return None

    def unpack(self, tx):
        out = []
        while (item := self.next(tx)) is not None:
            out.append(item)
        return out

    def reconstruct(self, plan) -> str:
        """``reversed`` of the list itself (shared with whoever holds it), at the same index."""
        from ember.capture.sources import bind
        plan.finish_later(self, "{}.__setstate__(%d)" % self.index)
        return f"{bind(plan.scope, reversed, 'reversed')}({plan.expr(self.seq)})"


def length_hint(tx, obj, default=None):
    """``operator.length_hint(obj[, default])``: len() of a list, tuple, dict or set, the items left
    of a list iterator (what its ``__length_hint__`` says); anything else is left to a break."""
    from ember.capture.variables.containers import DictVariable, ListVariable, SetVariable, TupleVariable
    from ember.capture.variables.base import ConstantVariable
    if isinstance(obj, (ListIteratorVariable, ReversedListIterator)):
        return ConstantVariable(len(obj.remaining()))
    if isinstance(obj, (ListVariable, TupleVariable, DictVariable, SetVariable)):
        return obj.call_method(tx, "__len__", [], {})
    return NotImplemented


RANGE_ITERATOR = type(iter(range(0)))


class RangeIterator(IteratorVariable):
    """``iter(range(...))`` or ``reversed(range(...))`` of constant ints: returned from the frame it
    is a range iterator again, over the ints still to come (handed to a graph break, the tuple
    iterator the resumed frame can trace)."""

    def __init__(self, ints):
        from ember.capture.variables.base import ConstantVariable
        super().__init__([ConstantVariable(i) for i in ints], real_type=RANGE_ITERATOR)

    def reconstruct(self, plan) -> str:
        from ember.capture.sources import bind
        rest = [item.as_constant() for item in self.items[self.pos:]]
        step = rest[1] - rest[0] if len(rest) > 1 else 1
        start, stop = (rest[0], rest[-1] + step) if rest else (0, 0)
        return f"{bind(plan.scope, iter, 'iter')}({bind(plan.scope, range, 'range')}({start}, {stop}, {step}))"
