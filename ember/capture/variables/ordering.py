"""Ordering traced values without reading tensor data: the values ``sorted``/``min``/``max``/
``list.sort`` and sequence comparisons run the real algorithm on.

`comparable` maps a tracker to a Python value that orders like it: constants are themselves,
lists and tuples are lists and tuples of their items, an object whose class compares in Python is a
`_UserOrdered` (each comparison the real algorithm makes is traced, in CPython's order), a
symbolic number a `_SymbolicOrdered` (each comparison a symbolic one), anything else an `_Opaque`
that equals only itself. A comparison that would need data raises `_NeedsData`,
which `ordered` turns into a graph break.
"""
from __future__ import annotations

import operator

from ember.capture.variables.base import is_none, unsupported
from ember.capture.variables.containers import ListVariable, TupleVariable
from ember.exc import PythonException, Unsupported
from ember.fake.symbolic import has_symbols


class _NeedsData(Exception):
    """Ordering two values would compare tensors (or other opaque values): data-dependent."""


class _Opaque:
    """Stands for a traced value inside a sort key: equal only to itself (Python's comparisons
    of tuples and lists try identity first), any other comparison would read data."""
    __slots__ = ()

    def __eq__(self, other):
        if other is self:
            return True
        raise _NeedsData()

    def __ne__(self, other):
        return not self.__eq__(other)

    def __lt__(self, other):
        raise _NeedsData()

    __le__ = __gt__ = __ge__ = __lt__
    __hash__ = object.__hash__


class _ComparedByCmp:
    """The six comparisons, each answered by ``self._cmp(operator.<op>, other)``."""
    __slots__ = ()

    def __lt__(self, other):
        return self._cmp(operator.lt, other)

    def __le__(self, other):
        return self._cmp(operator.le, other)

    def __gt__(self, other):
        return self._cmp(operator.gt, other)

    def __ge__(self, other):
        return self._cmp(operator.ge, other)

    def __eq__(self, other):
        return self._cmp(operator.eq, other)

    def __ne__(self, other):
        return self._cmp(operator.ne, other)

    __hash__ = object.__hash__


class _UserOrdered(_ComparedByCmp):
    """Stands for an object whose class compares in Python (``__lt__`` ...): each comparison the
    real sort (or tuple comparison) makes runs that method traced, in the very order CPython's
    algorithm makes it."""
    __slots__ = ("tx", "vt")

    def __init__(self, tx, vt):
        self.tx, self.vt = tx, vt

    def _cmp(self, fn, other):
        from ember.capture.variables.user_operators import user_compare
        if isinstance(other, _UserOrdered):
            other_vt = other.vt
        elif isinstance(other, _Opaque):
            raise _NeedsData()
        else:
            from ember.capture.variables.builtins import wrap_constant
            other_vt = wrap_constant(other)
        result = user_compare(self.tx, fn, self.vt, other_vt)
        if result is None:
            if fn in (operator.eq, operator.ne):  # neither side decides: identity
                return (self.vt is other_vt) == (fn is operator.eq)
            raise _NeedsData()
        if not result.is_constant():
            raise _NeedsData()
        return result.truth(self.tx) if not isinstance(result.as_constant(), bool) else result.as_constant()


class _SymbolicOrdered(_ComparedByCmp):
    """Stands for a symbolic int or float (an argument made dynamic, a size): each comparison the
    real algorithm makes is a symbolic comparison (a guard on that outcome, not on the value)."""
    __slots__ = ("tx", "vt")

    def __init__(self, tx, vt):
        self.tx, self.vt = tx, vt

    def _cmp(self, fn, other):
        from ember.capture.variables.builtins import wrap_constant
        if isinstance(other, _SymbolicOrdered):
            other_vt = other.vt
        elif type(other) in (int, float, bool):
            other_vt = wrap_constant(other)
        else:
            return NotImplemented  # (its own reflected comparison, or eager's TypeError)
        return self.tx.binary_op(fn, self.vt, other_vt).truth(self.tx)


def comparable(vt, memo: dict, tx=None) -> object:
    """A Python value that orders like ``vt`` where the order does not depend on data: constants
    are themselves, tuples and lists of trackers are tuples and lists of their items, an object
    whose class compares in Python a `_UserOrdered` (given ``tx``), anything else an `_Opaque` (one
    per tracker, so a tracker meets itself by identity)."""
    from ember.capture.variables.symbolic import SymNodeVariable
    if tx is not None and isinstance(vt, SymNodeVariable) and has_symbols(vt.sym):
        return memo.setdefault(id(vt), _SymbolicOrdered(tx, vt))  # (not its value: that fixes it)
    if vt.is_constant():
        return vt.as_constant()
    if type(vt) in (TupleVariable, ListVariable):
        return (tuple if type(vt) is TupleVariable else list)(comparable(i, memo, tx) for i in vt.items)
    if tx is not None and id(vt) not in memo:
        from ember.capture.variables.user_operators import _python_method, _user_class
        cls = _user_class(vt)
        if cls is not None and any(_python_method(cls, n) is not None for n in ("__lt__", "__gt__", "__le__", "__ge__")):
            memo[id(vt)] = _UserOrdered(tx, vt)
    return memo.setdefault(id(vt), _Opaque())


def ordered(run, what: str):
    """``run()`` (a sort, min or max over `comparable` values); what it raises is what eager
    raises, and a comparison that would read tensor data is a graph break."""
    try:
        return run()
    except _NeedsData:
        raise unsupported("EB0016", f"{what} compares non-constant values (ordering them would compare data)") from None
    except Unsupported:
        raise  # (from a traced comparison method: already what eager raises, or a break)
    except Exception as e:  # values that do not compare: eager raises this very TypeError
        raise PythonException(e) from None


def _key_values(tx, items, key, what: str) -> list:
    """``key(item)`` for each item, in order (as Python calls it), as values that order like them."""
    memo: dict = {}
    return [comparable(key.call(tx, [i], {}), memo, tx) for i in items]


def order_by_keys(tx, items, key, reverse, what: str) -> list[int]:
    """The stable order ``sorted(items, key=key, reverse=reverse)`` puts the items in, as indices.
    ``key`` None: the items themselves are compared."""
    if key is None or is_none(key):
        memo: dict = {}
        keys = [comparable(i, memo, tx) for i in items]
    else:
        keys = _key_values(tx, items, key, what)
    rev = reverse.as_constant() if reverse is not None else False
    return ordered(lambda: sorted(range(len(items)), key=keys.__getitem__, reverse=rev), what)
