"""Live dict views (``d.keys()``, ``d.values()``, ``d.items()``) and size-checked iterators.

A view shows the dict as it is when used, not when it was made::

    ks = d.keys(); d["c"] = 3; list(ks)   # includes "c"

and iterating a dict (or a set, or a view) while its size changes raises
``RuntimeError: dictionary changed size during iteration`` at the next step, as
CPython's iterators do. A dict whose keys change while the size stays the same
(one deleted, one added) is iterated in ways that depend on CPython's table
layout: refused (unsupported) rather than guessed.
"""
from __future__ import annotations

import collections
import operator

from ember.capture.variables.base import ConstantVariable, VariableTracker, unsupported
from ember.capture.variables.containers import IteratorVariable, TupleVariable
from ember.exc import PythonException

_VIEW_TYPES = {"keys": type({}.keys()), "values": type({}.values()), "items": type({}.items())}


def _entries(container, kind: str, keys: list) -> list:
    """The trackers a view of ``kind`` yields for ``keys`` (values read now)."""
    if kind == "set":
        return [container.items[k] for k in keys]
    if kind == "keys":
        return [container.keys[k] for k in keys]
    if kind == "values":
        return [container.items[k] for k in keys]
    return [TupleVariable([container.keys[k], container.items[k]]) for k in keys]


class SizeCheckedIterator(IteratorVariable):
    """``iter(d)``, ``iter(d.items())``, ``iter(s)`` for a dict or set made or tracked in the frame."""

    def __init__(self, container, kind: str):
        self.container = container
        self.kind = kind  # "keys", "values", "items" (a dict) or "set"
        self.snapshot = list(container.items)
        self.size = len(self.snapshot)
        self.pos = 0
        self.source = None
        self.broken = False

    @property
    def items(self):
        return _entries(self.container, self.kind, self.snapshot) if self._unchanged() else []

    def describe(self):
        return f"{self.kind}_iterator({self.size - self.pos} left)"

    def _unchanged(self) -> bool:
        current = self.container.items
        return len(current) == self.size and all(k in current for k in self.snapshot)

    def next(self, tx):
        current = self.container.items
        if self.broken or len(current) != self.size:
            if self.kind != "set" and issubclass(self.container.dict_cls, collections.OrderedDict):
                raise unsupported("EB0002", "an OrderedDict changed during iteration")
            self.broken = True  # (CPython's iterator keeps raising once it has)
            what = "Set" if self.kind == "set" else "dictionary"
            raise PythonException(RuntimeError(f"{what} changed size during iteration"))
        if not self._unchanged():
            raise unsupported("EB0039", "dict/set keys replaced during iteration (CPython's order depends on its table)")
        if self.pos >= self.size:
            return None
        key = self.snapshot[self.pos]
        self.pos += 1
        return _entries(self.container, self.kind, [key])[0]

    def unpack(self, tx):
        out = []
        while True:
            item = self.next(tx)
            if item is None:
                return out
            out.append(item)

    def remaining(self):
        return None

    def reconstruct(self, plan) -> str:
        """A dict's: a real iterator over the (rebuilt or caller's) dict, made once the side effects
        are replayed and advanced past what the trace consumed (`ResumedDictIterator`), so that a
        dict that changes size after the graph break raises as in eager. A set's: a tuple iterator
        over what is left, in the traced order (a rebuilt set need not iterate in that order)."""
        from ember.capture.sources import bind
        if not self._unchanged():
            raise unsupported("EB0006", "an iterator over a dict/set that changed size, live across a graph break")
        if self.kind != "set":
            owner = getattr(self.container, "owner", None)  # a dict subclass's instance made in the frame
            d = plan.expr(owner if owner is not None else self.container)
            plan.finish_later(self, "{}._start()")
            return f"{bind(plan.scope, ResumedDictIterator, 'ResumedDictIterator')}({d}, {self.kind!r}, {self.pos})"
        rest = _entries(self.container, self.kind, self.snapshot[self.pos:])
        inner = "".join(f"{plan.expr(v)}, " for v in rest)
        return f"{bind(plan.scope, iter, 'iter')}(({inner}))"


class ResumedDictIterator:
    """A dict iterator handed to a graph break's resume function: ``_start()`` (run once the side
    effects are replayed) makes the real iterator and advances it past the ``skip`` entries the
    trace consumed; it then behaves as that iterator (a size change raises RuntimeError)."""

    __slots__ = ("_args", "it")

    def __init__(self, d, kind: str, skip: int):
        self._args = (d, kind, skip)
        self.it = None

    def _start(self):
        d, kind, skip = self._args
        base = collections.OrderedDict if isinstance(d, collections.OrderedDict) else dict
        it = iter(getattr(base, kind)(d))  # (the base type's view: a subclass's own keys() is not iter's)
        for _ in range(skip):
            next(it)
        self.it = it

    def __iter__(self):
        return self

    def __next__(self):
        return next(self.it)

    def __length_hint__(self):
        return operator.length_hint(self.it)


class DictViewVariable(VariableTracker):
    """``d.keys()`` / ``d.values()`` / ``d.items()`` of a dict tracker: reads the dict when used."""

    def __init__(self, dict_vt, kind: str):
        self.dict_vt = dict_vt
        self.kind = kind

    def python_type(self):
        return _VIEW_TYPES[self.kind]

    def describe(self):
        return f"dict_{self.kind}({self.dict_vt.describe()})"

    def truth(self, tx):
        return bool(self.dict_vt.items)

    def iter(self, tx):
        self.dict_vt._observe_order(tx)
        return SizeCheckedIterator(self.dict_vt, self.kind)

    def unpack(self, tx):
        self.dict_vt._observe_order(tx)
        return _entries(self.dict_vt, self.kind, list(self.dict_vt.items))

    def call_method(self, tx, name, args, kwargs):
        d = self.dict_vt
        if name == "__len__" and not args and not kwargs:
            return ConstantVariable(len(d.items))
        if name == "__iter__" and not args and not kwargs:
            return self.iter(tx)
        if name == "__contains__" and len(args) == 1 and not kwargs:
            if self.kind == "values":
                from ember.capture.variables.containers import _contains
                return ConstantVariable(_contains(_entries(d, "values", list(d.items)), args[0]))
            if self.kind == "keys":
                return d.call_method(tx, "__contains__", args, kwargs)
            pair = args[0].as_constant() if args[0].is_constant() else None
            if self.kind == "items" and isinstance(pair, tuple) and len(pair) == 2:
                from ember.capture.variables.containers import set_key
                k = set_key(ConstantVariable(pair[0]))
                if k not in d.items:
                    return ConstantVariable(False)
                mine = d.items[k]
                if mine.is_constant():
                    return ConstantVariable(mine.as_constant() == pair[1])
        raise unsupported("EB0039", f"dict_{self.kind}.{name}")

    def getattr(self, tx, name):
        from ember.capture.variables.functions import BoundMethodVariable
        if name == "mapping":  # a read-only proxy of the live dict
            from ember.capture.variables.mapping_proxy import MappingProxyVariable
            return MappingProxyVariable(self.dict_vt)
        if hasattr(_VIEW_TYPES[self.kind], name):
            return BoundMethodVariable(self, name)
        return super().getattr(tx, name)

    def reconstruct(self, plan) -> str:
        """The view of the rebuilt (or caller's) dict."""
        return f"{plan.expr(self.dict_vt)}.{self.kind}()"


# -- keys/items views as sets ---------------------------------------------------------------------
_SET_OPERATORS = frozenset({operator.and_, operator.or_, operator.xor, operator.sub, operator.iand, operator.ior,
                            operator.ixor, operator.isub, operator.eq, operator.ne, operator.lt, operator.le,
                            operator.gt, operator.ge})
# a set subclass whose instances behave as sets for these operators (its own dunders would run Python)
_SET_DUNDERS = ("__iter__", "__contains__", "__len__", "__eq__", "__ne__", "__lt__", "__le__", "__gt__", "__ge__",
                "__and__", "__rand__", "__or__", "__ror__", "__xor__", "__rxor__", "__sub__", "__rsub__",
                "__iand__", "__ior__", "__ixor__", "__isub__", "__hash__")
_MISSING = object()


def _real_operand(v):
    """A real Python value standing for ``v`` (a keys/items view rebuilt on a dict of its constant
    entries, a constant set or other constant), or ``_MISSING`` where ``v`` holds non-constants."""
    from ember.capture.variables.sets import SetVariable
    if isinstance(v, DictViewVariable):
        d = v.dict_vt
        keys = [d.keys[k] for k in d.items]
        values = [d.items[k] for k in d.items]
        if v.kind == "values" or not all(k.is_constant() for k in keys) or \
                (v.kind == "items" and not all(x.is_constant() for x in values)):
            return _MISSING
        real = dict(zip([k.as_constant() for k in keys],
                        [x.as_constant() for x in values] if v.kind == "items" else [None] * len(keys)))
        return real.keys() if v.kind == "keys" else real.items()
    if isinstance(v, SetVariable):
        cls = v.set_cls
        base = frozenset if issubclass(cls, frozenset) else set
        if any(getattr(cls, n, None) is not getattr(base, n, None) for n in _SET_DUNDERS) or not v.is_constant():
            return _MISSING
        return base(x.as_constant() for x in v.items.values())
    if v.is_constant():
        return v.as_constant()
    return _MISSING


def view_set_operation(fn, a: VariableTracker, b: VariableTracker) -> VariableTracker | None:
    """``a <op> b`` for a set operator or comparison where an operand is a keys or items view, or
    None where neither is. CPython gives such an operation a new plain ``set`` (even ``s |= view``
    leaves ``s`` alone: ``set.__ior__`` refuses a view and the view's ``__ror__`` makes a new set),
    or a bool, so it is computed on real copies when every entry is a constant."""
    if fn not in _SET_OPERATORS or not any(isinstance(v, DictViewVariable) and v.kind != "values" for v in (a, b)):
        return None
    ra, rb = _real_operand(a), _real_operand(b)
    if ra is _MISSING or rb is _MISSING:
        raise unsupported("EB0036", f"operator {fn.__name__} on {a.describe()} and {b.describe()} (non-constant entries)")
    try:
        result = fn(ra, rb)
    except Exception as e:
        raise PythonException(e) from None  # eager raises this very exception
    if result is ra or result is rb or not isinstance(result, (bool, set)):
        raise unsupported("EB0038", f"operator {fn.__name__} on {a.describe()} and {b.describe()}")
    from ember.capture.variables.builtins import wrap_constant
    return wrap_constant(result)


def dict_equal(a, b) -> bool:
    """``a == b`` for two dicts: same keys (in the same order when both are OrderedDicts) and values
    equal, identity first as CPython compares them; a value comparison involving anything but
    constants (a tensor's ``==`` is data) is a break."""
    if len(a.items) != len(b.items) or a.items.keys() != b.items.keys():
        return False
    if issubclass(a.dict_cls, collections.OrderedDict) and issubclass(b.dict_cls, collections.OrderedDict) \
            and list(a.items) != list(b.items):
        return False
    for k, va in a.items.items():
        vb = b.items[k]
        if va is vb:
            continue
        if not (va.is_constant() and vb.is_constant()):
            raise unsupported("EB0038", f"comparing dict values {va.describe()} and {vb.describe()}")
        try:
            same = va.as_constant() == vb.as_constant()
        except Exception as e:
            raise PythonException(e) from None
        if not same:
            return False
    return True
