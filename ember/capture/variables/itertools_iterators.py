"""itertools iterators traced lazily, as consumed: ``chain`` (and ``chain.from_iterable``), ``islice``,
``repeat``, ``count``; built by ``construct_itertool`` (see ember/capture/variables/generators.py
for the iterator protocol they share)."""
from __future__ import annotations

from ember.capture.variables.base import ConstantVariable, VariableTracker, unsupported
from ember.capture.variables.generators import IteratorBase, _bind
from ember.exc import PythonException

class ChainIterator(IteratorBase):
    """``itertools.chain(*iterables)`` / ``chain.from_iterable(iterable)``: each input is iterated
    only when the previous one is exhausted."""

    def __init__(self, sources: IteratorBase):
        self.sources = sources      # an iterator over the iterables
        self.current = None

    def describe(self):
        return "itertools.chain"

    def next(self, tx):
        while True:
            if self.current is None:
                source = self.sources.next(tx)
                if source is None:
                    return None
                self.current = source.iter(tx)
            item = self.current.next(tx)
            if item is not None:
                return item
            self.current = None

    def remaining(self):
        rest = [] if self.current is None else self.current.remaining()
        sources = self.sources.remaining()
        if rest is None or sources is None:
            return None
        out = list(rest)
        for s in sources:
            items = s.remaining() if isinstance(s, IteratorBase) else getattr(s, "items", None)
            if items is None or not isinstance(items, list):
                return None
            out += items
        return out

    def reconstruct(self, plan) -> str:
        items = self._reconstruct_items(plan)
        if items is None:
            raise unsupported("EB0006", "an itertools.chain over lazy iterators live across a graph break")
        if not plan.at_break:  # returned: a chain still (over the items left)
            import itertools
            return f"{_bind(plan, itertools.chain, 'chain')}({items})"
        return items


class IsliceIterator(IteratorBase):
    """``itertools.islice(iterable, [start,] stop[, step])``: pulls only what it yields."""

    def __init__(self, iterator, start: int, stop, step: int):
        self.iterator = iterator
        self.next_index = start     # index (in the input) of the next item to produce
        self.stop = stop
        self.step = step
        self.seen = 0               # items pulled from the input so far

    def describe(self):
        return "itertools.islice"

    def next(self, tx):
        if self.stop is not None and self.next_index >= self.stop:
            return None
        while self.seen < self.next_index:
            if self.iterator.next(tx) is None:
                self.stop = 0
                return None
            self.seen += 1
        item = self.iterator.next(tx)
        if item is None:
            self.stop = 0
            return None
        self.seen += 1
        self.next_index += self.step
        return item

    def reconstruct(self, plan) -> str:
        rest = self.iterator.remaining()
        if rest is None:
            raise unsupported("EB0006", "an itertools.islice over a lazy iterator live across a graph break")
        import itertools
        start = self.next_index - self.seen
        stop = None if self.stop is None else max(self.stop - self.seen, start)
        items = list(itertools.islice(rest, start, stop, self.step))
        if not plan.at_break:  # returned: an islice still (over the items left)
            return f"{_bind(plan, itertools.islice, 'islice')}(({''.join(plan.expr(i) + ', ' for i in items)}), None)"
        return f"{_bind(plan, iter, 'iter')}(({''.join(plan.expr(i) + ', ' for i in items)}))"


class RepeatIterator(IteratorBase):
    def __init__(self, value, times):
        self.value = value
        self.times = times

    def describe(self):
        return "itertools.repeat"

    def next(self, tx):
        if self.times is not None:
            if self.times <= 0:
                return None
            self.times -= 1
        return self.value

    def remaining(self):
        return None if self.times is None else [self.value] * max(self.times, 0)

    def reconstruct(self, plan) -> str:
        if not plan.at_break:  # returned: a repeat still
            import itertools
            times = "" if self.times is None else f", {max(self.times, 0)}"
            return f"{_bind(plan, itertools.repeat, 'repeat')}({plan.expr(self.value)}{times})"
        items = self._reconstruct_items(plan)
        if items is None:
            raise unsupported("EB0006", "an endless itertools.repeat live across a graph break")
        return items


class CountIterator(IteratorBase):
    """``itertools.count(start, step)`` over constant numbers (endless: only consumed lazily)."""

    def __init__(self, current, step):
        self.current = current
        self.step = step

    def describe(self):
        return "itertools.count"

    def next(self, tx):
        value = self.current
        self.current = value + self.step
        return ConstantVariable(value)

    def reconstruct(self, plan) -> str:
        import itertools
        return f"{_bind(plan, itertools.count, 'count')}({self.current!r}, {self.step!r})"


def construct_itertool(tx, cls, args, kwargs):
    """The lazy tracker for an ``itertools`` constructor call, or None if not modelled."""
    import itertools
    from ember.capture.variables.containers import IteratorVariable
    if cls is itertools.chain and not kwargs:
        return ChainIterator(IteratorVariable(list(args)))
    if cls is itertools.islice and not kwargs and 2 <= len(args) <= 4:
        bounds = [a.as_constant() for a in args[1:]]
        s = slice(*bounds) if len(bounds) > 1 else slice(bounds[0])
        start, stop, step = s.start or 0, s.stop, s.step or 1
        if not all(v is None or (isinstance(v, int) and v >= 0) for v in (start, stop)) or step < 1:
            raise PythonException(ValueError("Indices for islice() must be None or an integer: 0 <= x <= "
                                             "sys.maxsize."))
        return IsliceIterator(args[0].iter(tx), start, stop, step)
    if cls is itertools.count and len(args) + len(kwargs) <= 2:
        start = args[0] if args else kwargs.get("start", ConstantVariable(0))
        step = args[1] if len(args) > 1 else kwargs.get("step", ConstantVariable(1))
        if start.is_constant() and step.is_constant() and all(
                type(v.as_constant()) in (int, float) for v in (start, step)):
            return CountIterator(start.as_constant(), step.as_constant())
        return None
    if cls is itertools.repeat and len(args) + len(kwargs) in (1, 2):
        times = args[1] if len(args) > 1 else kwargs.get("times")
        return RepeatIterator(args[0], None if times is None else times.as_constant())
    from ember.capture.variables.combinatorics import construct_combinatoric
    found = construct_combinatoric(tx, cls, args, kwargs)  # product, combinations, permutations, ...
    if found is not None:
        return found
    from ember.capture.polyfills.itertools_ import POLYFILLS
    poly = POLYFILLS.get(getattr(cls, "__name__", None))
    if poly is not None and getattr(itertools, cls.__name__, None) is cls:
        from ember.capture.variables.functions import UserFunctionVariable
        return UserFunctionVariable(poly).call(tx, list(args), kwargs)  # a traced generator
    return None


class ChainFromIterable(VariableTracker):
    def describe(self):
        return "itertools.chain.from_iterable"

    def truth(self, tx):
        return True

    def call(self, tx, args, kwargs):
        if kwargs or len(args) != 1:
            raise unsupported("EB0002", "chain.from_iterable takes one argument (TypeError)")
        return ChainIterator(args[0].iter(tx))
