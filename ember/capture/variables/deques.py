"""``collections.deque``: made inside the frame (BFS queues, sliding windows) or passed in.

The deque exists only as a tracker while tracing: a list of item trackers with the
deque's own methods (``appendleft``, ``popleft``, ``rotate``, ``maxlen`` dropping from
the other end, ...). Anything it does not model — slicing, which a real deque refuses
too, comparisons — is a graph break, never a list's
behaviour. A deque passed in (guarded on its length and ``maxlen``) that the frame changes is
written back after the graph, in place (``clear`` + ``extend``: its identity is kept). Iterating it takes a snapshot guarded like CPython's: a deque changed while
iterated raises eager's RuntimeError at the next step. If it escapes (returned, live
across a break) the generated code builds ``deque(items, maxlen)``.
"""
from __future__ import annotations

import collections

from ember.capture.variables.base import ConstantVariable, VariableTracker, unsupported
from ember.capture.variables.generators import IteratorBase, each_item
from ember.exc import PythonException


_METHODS = {"append", "appendleft", "pop", "popleft", "extend", "extendleft", "clear", "rotate", "reverse",
            "copy", "__len__", "__iter__", "__contains__", "__getitem__", "__setitem__", "__delitem__",
            "__iadd__", "index", "count", "remove", "insert"}

_MUTATING = {"append", "appendleft", "pop", "popleft", "extend", "extendleft", "clear", "rotate", "reverse",
             "__setitem__", "__delitem__", "__iadd__", "remove", "insert"}


class DequeVariable(VariableTracker):
    def __init__(self, items: list, maxlen: int | None, source=None):
        self.source = source
        self.items = list(items)
        self.maxlen = maxlen
        self.mutations = 0  # CPython's deque->state: iterators compare it
        self._trim_left()

    def python_type(self):
        return collections.deque

    def describe(self):
        return f"deque[{len(self.items)}]"

    def truth(self, tx):
        return bool(self.items)

    def unpack(self, tx):
        return list(self.items)

    def iter(self, tx):
        return _DequeIterator(self)

    def hash_key(self):
        raise PythonException(TypeError("unhashable type: 'collections.deque'"))

    def reconstruct(self, cg) -> str:
        from ember.capture.variables.containers import ListVariable
        from ember.capture.variables.generators import _bind
        items = cg.expr(ListVariable(list(self.items)))
        return f"{_bind(cg, collections.deque, 'deque')}({items}, {self.maxlen!r})"

    def getattr(self, tx, name):
        if name == "maxlen":
            return ConstantVariable(self.maxlen)
        if name in _METHODS:
            from ember.capture.variables.functions import BoundMethodVariable
            return BoundMethodVariable(self, name)
        return super().getattr(tx, name)

    # -- mutations -----------------------------------------------------------------------
    def _changed(self):
        self.mutations += 1

    def _trim_left(self):
        if self.maxlen is not None and len(self.items) > self.maxlen:
            del self.items[:len(self.items) - self.maxlen]

    def _trim_right(self):
        if self.maxlen is not None and len(self.items) > self.maxlen:
            del self.items[self.maxlen:]

    def call_method(self, tx, name, args, kwargs):
        if self.source is not None and name in _MUTATING:
            tx.side_effects.mutated_container(self)
        if kwargs:
            raise unsupported("EB0039", f"deque.{name} with keyword arguments")
        items = self.items
        if name == "append" and len(args) == 1:
            self._changed(); items.append(args[0]); self._trim_left(); return ConstantVariable(None)
        if name == "appendleft" and len(args) == 1:
            self._changed(); items.insert(0, args[0]); self._trim_right(); return ConstantVariable(None)
        if name in ("pop", "popleft") and not args:
            if not items:
                raise PythonException(IndexError(f"{name} from an empty deque"))
            self._changed()
            return items.pop() if name == "pop" else items.pop(0)
        if name in ("extend", "extendleft", "__iadd__") and len(args) == 1:
            # CPython copies only the deque itself; any other iterable is consumed one item at a
            # time, each added before the next is produced (a generator reading the deque sees it)
            source = DequeVariable(list(items), None) if args[0] is self else args[0]
            for item in each_item(tx, source):
                self._changed()
                if name == "extendleft":
                    items.insert(0, item); self._trim_right()
                else:
                    items.append(item); self._trim_left()
            return self if name == "__iadd__" else ConstantVariable(None)
        if name == "clear" and not args:
            self._changed(); items.clear(); return ConstantVariable(None)
        if name == "rotate" and len(args) <= 1:
            n = args[0].as_constant() if args else 1
            if not isinstance(n, int):
                raise unsupported("EB0036", "deque.rotate by a non-constant")
            if items:
                n %= len(items)
                items[:] = items[-n:] + items[:-n] if n else items
            self._changed()
            return ConstantVariable(None)
        if name == "reverse" and not args:
            self._changed(); items.reverse(); return ConstantVariable(None)
        if name == "copy" and not args:
            return DequeVariable(list(items), self.maxlen)
        if name == "__len__" and not args:
            return ConstantVariable(len(items))
        if name in ("index", "count"):
            # as a list's (the same comparisons; a deque's index takes the same start/stop)
            from ember.capture.variables.containers import ListVariable
            return ListVariable(list(items)).call_method(tx, name, args, kwargs)
        if name == "remove" and len(args) == 1:
            from ember.capture.variables.containers import ListVariable
            try:  # (the first equal item, compared as list.index compares)
                i = ListVariable(list(items)).call_method(tx, "index", args, {}).as_constant()
            except PythonException as e:
                if isinstance(e.exc, ValueError):
                    raise PythonException(ValueError(str(e.exc).replace(" in list", " in deque"))) from None
                raise
            self._changed(); del items[i]; return ConstantVariable(None)
        if name == "insert" and len(args) == 2 and args[0].is_constant() and type(args[0].as_constant()) is int:
            if self.maxlen is not None and len(items) >= self.maxlen:
                raise PythonException(IndexError("deque already at its maximum size"))
            self._changed(); items.insert(args[0].as_constant(), args[1]); return ConstantVariable(None)
        if name == "__iter__" and not args:
            return self.iter(tx)
        if name == "__contains__" and len(args) == 1:
            from ember.capture.variables.containers import _contains
            return ConstantVariable(_contains(items, args[0], tx))
        if name in ("__getitem__", "__setitem__", "__delitem__") and args and args[0].is_constant():
            i = args[0].as_constant()
            if not isinstance(i, int):
                raise PythonException(TypeError(f"sequence index must be integer, not '{type(i).__name__}'"))
            if not -len(items) <= i < len(items):
                raise PythonException(IndexError("deque index out of range"))
            if name == "__getitem__":
                return items[i]
            self._changed()
            if name == "__setitem__":
                items[i] = args[1]
            else:
                del items[i]
            return ConstantVariable(None)
        raise unsupported("EB0039", f"deque.{name}")


class _DequeIterator(IteratorBase):
    """Iterates the deque's items in place; a change since the start raises as CPython does."""

    def __init__(self, deque: DequeVariable):
        self.deque = deque
        self.pos = 0
        self.state = deque.mutations

    def describe(self):
        return "deque iterator"

    def next(self, tx):
        if self.deque.mutations != self.state:
            raise PythonException(RuntimeError("deque mutated during iteration"))
        if self.pos >= len(self.deque.items):
            return None
        self.pos += 1
        return self.deque.items[self.pos - 1]

    def remaining(self):
        return None if self.deque.mutations != self.state else list(self.deque.items[self.pos:])

    def reconstruct(self, plan) -> str:
        items = self._reconstruct_items(plan)
        if items is None:
            raise unsupported("EB0006", "a deque iterator after its deque changed, live across a graph break")
        return items


def construct_deque(tx, args, kwargs) -> DequeVariable:
    if len(args) > 2 or set(kwargs) - {"iterable", "maxlen"}:
        raise unsupported("EB0039", "deque() with these arguments")
    iterable = args[0] if args else kwargs.get("iterable")
    maxlen = args[1] if len(args) > 1 else kwargs.get("maxlen")
    n = maxlen.as_constant() if maxlen is not None and maxlen.is_constant() else None
    if maxlen is not None and not maxlen.is_constant():
        raise unsupported("EB0036", "deque(maxlen=<non-constant>)")
    if n is not None and (not isinstance(n, int) or n < 0):
        raise PythonException(ValueError("maxlen must be non-negative"))
    items = iterable.iter(tx).unpack(tx) if iterable is not None else []
    return DequeVariable(items, n)
