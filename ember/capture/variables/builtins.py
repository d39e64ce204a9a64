"""Python builtins, ``math``/``operator`` functions, and methods of constants.

Pure functions on constant arguments are folded (run now, result baked in).
With tracked arguments each builtin has a small handler; anything else is
refused with a reason.
"""
from __future__ import annotations

import abc
import collections
import collections.abc
import functools
import math
import operator
import os
import sys
import types

import torch

from ember.capture.variables.symbolic import (VALUE_TEXT_BUILTINS, SymNodeVariable, dynamic_number, is_number,
                                              symbolic_conversion, symbolic_operation, symbolic_prod)
from ember.fake.symbolic import has_symbols, has_unbacked
from ember.capture.variables.base import is_none, unpinned_number, derived_lazy
from ember.capture.variables.base import ConstantVariable, VariableTracker, unsupported
from ember.capture.variables.frame_builtins import frame_dir, frame_exc_info, frame_exception, frame_locals, frame_vars
from ember.capture.variables.iterators import length_hint
from ember.capture.variables.user_operators import _user_hash, _user_text
from ember.capture.variables.containers import (DictVariable, IteratorVariable, ListVariable, SetVariable,
                                                TupleVariable)
from ember.capture.variables.ordering import _key_values, comparable, order_by_keys, ordered
from ember.capture.variables.tensor import TensorVariable, user_defines
from ember.exc import PythonException

# Builtins that are safe to run on constant arguments at trace time.
_PURE_BUILTINS = {
    abs, all, any, bool, chr, divmod, float, format, frozenset, hash, int, isinstance, issubclass, len,
    max, min, ord, pow, range, repr, reversed, round, set, slice, sorted, str, sum, tuple, list, dict,
    zip, enumerate, type, callable, bin, hex, oct, complex, bytes,
}
_PURE_MODULES = ("math", "operator", "_operator", "cmath")
_PURE_SYS = {sys.getrecursionlimit, sys.getdefaultencoding,
             # alternate constructors of builtin value types (bound to the class): pure on constants
             int.from_bytes, float.fromhex, bytes.fromhex, str.maketrans, bytes.maketrans,
             os.fspath}  # (on a str or bytes constant: itself)

# operator functions that map onto tensors as graph ops
_TENSOR_OPERATORS = {
    operator.add, operator.sub, operator.mul, operator.truediv, operator.floordiv, operator.mod,
    operator.pow, operator.matmul, operator.neg, operator.pos, operator.abs, operator.invert,
    operator.and_, operator.or_, operator.xor, operator.lshift, operator.rshift,
    operator.lt, operator.le, operator.gt, operator.ge, operator.eq, operator.ne,
    operator.getitem, operator.iadd, operator.isub, operator.imul, operator.itruediv,
    operator.ifloordiv, operator.imod, operator.ipow, operator.imatmul, operator.iand, operator.ior,
    operator.ixor, operator.ilshift, operator.irshift, operator.setitem,
}


_ITEM_OPERATORS = {operator.getitem, operator.setitem, operator.delitem}
_COMPARISONS = {operator.lt, operator.le, operator.gt, operator.ge, operator.eq, operator.ne}


# operator functions that mutate their first argument when it is mutable (`operator.isub(s, t)`)
_MUTATING_OPERATORS = {
    operator.iadd, operator.isub, operator.imul, operator.imatmul, operator.itruediv, operator.ifloordiv,
    operator.imod, operator.ipow, operator.ilshift, operator.irshift, operator.iand, operator.ior,
    operator.ixor, operator.iconcat, operator.setitem, operator.delitem,
}


def _has_tensor(vts) -> bool:
    return any(isinstance(v, TensorVariable) for v in vts)


_MUTABLE = (list, dict, set, bytearray)


def _mutable_ids(value, out: set, top: bool) -> set:
    """ids of the lists/dicts/sets/bytearrays in ``value`` (through builtin containers);
    ``top``: the value itself counts too."""
    if isinstance(value, _MUTABLE) and top:
        out.add(id(value))
    if isinstance(value, (list, tuple, set, frozenset)):
        for v in value:
            _mutable_ids(v, out, True)
    elif isinstance(value, dict):
        for k, v in value.items():
            _mutable_ids(k, out, True)
            _mutable_ids(v, out, True)
    return out


def _shares_mutable(result, args) -> bool:
    if not isinstance(result, (list, tuple, set, frozenset, dict, bytearray)):
        return False
    mine = _mutable_ids(args, set(), False)
    return bool(mine) and not mine.isdisjoint(_mutable_ids(result, set(), True))


def _constants(vts):
    return all(v.is_constant() for v in vts)


class BuiltinVariable(VariableTracker):
    """A builtin function (``len``, ``isinstance``, ...) or a pure math/operator function."""

    def __init__(self, fn, source=None):
        self.fn = fn
        self.source = source

    def describe(self):
        return f"builtin {getattr(self.fn, '__name__', self.fn)}"

    def python_type(self):
        return type(self.fn)

    def is_constant(self):
        return True

    def as_constant(self):
        return self.fn

    def truth(self, tx):
        return True

    def hash_key(self):
        return self.fn

    def getattr(self, tx, name):
        if name in ("__name__", "__qualname__", "__module__", "__doc__", "__text_signature__"):
            try:
                return ConstantVariable(getattr(self.fn, name))
            except AttributeError as e:
                raise PythonException(e) from None
        return super().getattr(tx, name)

    def call(self, tx, args, kwargs):
        fn = self.fn
        if fn in (str, repr) and len(args) == 1 and not kwargs and args[0].is_constant() \
                and args[0].python_type() in (int, float):
            # `"step " + str(step)`: rebuilt from the argument at run time, not a guard per value
            lazy = derived_lazy(fn, [args[0]], symbols=True)
            if lazy is not None:
                return lazy
        if fn in VALUE_TEXT_BUILTINS and any(dynamic_number(a) for a in (*args, *kwargs.values())):
            # (a break as torch.compile's: the size stays dynamic, the call runs after the graph)
            if fn.__module__ == "math":
                raise unsupported("EB0036", f"math.{fn.__name__}() of a dynamic size needs its exact value")
            raise unsupported("EB0037", f"{fn.__name__}() of a dynamic size needs its exact value")
        if fn is pow and len(args) == 2 and not kwargs and any(dynamic_number(a) for a in args):
            return tx.binary_op(operator.pow, args[0], args[1])  # pow(n, 2): symbolic, as n ** 2
        dunder = _SUBCLASS_DUNDERS.get(fn)
        if dunder is not None and len(args) == 1 and not kwargs and isinstance(args[0], TensorVariable) \
                and user_defines(args[0].cls, dunder):
            # len(t) of a tensor subclass that defines __len__ (and the like): the subclass's method
            return args[0].getattr(tx, dunder).call(tx, [], {})
        handler = _HANDLERS.get(fn)
        if handler is not None:
            result = handler(tx, *args, **kwargs)
            if result is not NotImplemented:
                return result
        if fn in _TENSOR_OPERATORS and fn not in _ITEM_OPERATORS and len(args) == 2 and not kwargs \
                and any(type(a).__name__ == "NumpyNdarrayVariable" for a in args):
            return tx.binary_op(fn, args[0], args[1])  # (an ndarray: NumPy's rules, numpy_arrays.binary)
        if fn in _TENSOR_OPERATORS and _has_tensor(args) and (
                fn not in _ITEM_OPERATORS or isinstance(args[0], TensorVariable)):
            # `operator.setitem(d, k, tensor)` acts on the dict, not the graph: only an item
            # operation on a tensor is a graph op
            return tx.output.call_function(fn, args, kwargs)
        if len(args) == 1 and not kwargs and isinstance(args[0], SymNodeVariable):
            symbolic = symbolic_conversion(tx, fn, args[0])  # float(x.size(0)), int(n), abs(...)
            if symbolic is not None:
                return symbolic
        if fn is round and len(args) == 2 and not kwargs and isinstance(args[0], SymNodeVariable) \
                and isinstance(args[0].sym, torch.SymFloat) and has_symbols(args[0].sym) \
                and args[1].is_constant() and type(args[1].as_constant()) is int:
            return tx.output.call_function(round, list(args), {})  # round(lr, 3): a SymFloat, unguarded
        if fn in _MUTATING_OPERATORS and not kwargs:
            # never folded: on a list/dict/set (constant or not) they act on the object itself
            if fn in (operator.setitem, operator.delitem):
                name = "__setitem__" if fn is operator.setitem else "__delitem__"
                return args[0].call_method(tx, name, list(args[1:]), {})
            if fn is operator.iconcat and isinstance(args[0], (ListVariable, TupleVariable)):
                return tx.binary_op(operator.iadd, args[0], args[1])
            if fn is not operator.iconcat and len(args) == 2:
                return tx.binary_op(fn, args[0], args[1])
        if fn in (operator.neg, operator.pos, operator.invert) and len(args) == 1 and not kwargs \
                and not args[0].is_constant():
            return tx.unary_op(fn, args[0])  # (as `-v`: a user class's __neg__ too)
        if fn in (operator.truth, operator.not_) and len(args) == 1 and not kwargs and not args[0].is_constant():
            return ConstantVariable(args[0].truth(tx) != (fn is operator.not_))  # (as `not v`)
        if fn in (operator.is_, operator.is_not) and len(args) == 2 and not kwargs:
            # before folding: a constant list's as_constant() is a new list each time (`is` on copies)
            return tx.compare_identity(args[0], args[1], fn is operator.is_not)
        pure = fn in _PURE_BUILTINS or fn in _PURE_SYS or getattr(fn, "__module__", None) in _PURE_MODULES
        if pure and _constants(args) and _constants(kwargs.values()):
            consts = [a.as_constant() for a in args]
            kw_consts = {k: v.as_constant() for k, v in kwargs.items()}
            try:
                value = fn(*consts, **kw_consts)
            except Exception as e:
                raise PythonException(e) from None  # eager raises this very exception
            if _shares_mutable(value, (consts, kw_consts)):
                # the result is (or holds) a list/dict/set of an argument: as_constant() made copies,
                # so a folded result would not be the caller's object (a later write would miss it)
                raise unsupported("EB0037", f"builtin {getattr(fn, '__name__', fn)} returning a mutable "
                                  "container of its arguments")
            return wrap_constant(value)
        if fn in (operator.is_, operator.is_not):
            return tx.compare_identity(args[0], args[1], fn is operator.is_not)
        if fn is operator.contains:
            return args[0].call_method(tx, "__contains__", [args[1]], {})
        if fn in (operator.getitem, operator.setitem, operator.delitem):
            name = {operator.getitem: "__getitem__", operator.setitem: "__setitem__",
                    operator.delitem: "__delitem__"}[fn]
            return args[0].call_method(tx, name, list(args[1:]), {})
        if fn in _COMPARISONS and len(args) == 2 and not kwargs:
            return tx.compare_op(fn, args[0], args[1])  # (as `a < b`: a user class's __lt__ too)
        if fn in _TENSOR_OPERATORS and len(args) == 2:
            return tx.binary_op(fn, args[0], args[1])
        if fn is math.sqrt or getattr(fn, "__module__", None) == "math":
            raise unsupported("EB0036", f"math.{fn.__name__} on a non-constant value")
        raise unsupported("EB0037", f"builtin {getattr(fn, '__name__', fn)} with arguments "
                          f"{[a.describe() for a in args]}")


def wrap_constant(value) -> VariableTracker:
    """A tracker for a value computed at trace time from constants."""
    if isinstance(value, (list, tuple)) and type(value) in (list, tuple):
        items = [wrap_constant(v) for v in value]
        return ListVariable(items) if isinstance(value, list) else TupleVariable(items)
    if type(value) is dict:
        return DictVariable({k: wrap_constant(v) for k, v in value.items()})
    if type(value) in (set, frozenset):
        return SetVariable([wrap_constant(v) for v in value], frozen=type(value) is frozenset)
    if isinstance(value, type):
        from ember.capture.variables.objects import ClassVariable
        return ClassVariable(value)
    if type(value) is type(iter(range(0))):  # (`reversed(range(3))` folded: a range iterator still)
        from ember.capture.variables.iterators import RangeIterator
        return RangeIterator(list(value))
    if isinstance(value, (types.GeneratorType, zip, map, filter, enumerate, reversed)) or \
            type(value).__name__.endswith("iterator"):
        return IteratorVariable([wrap_constant(v) for v in value])
    return ConstantVariable(value)


# -- handlers for builtins with tracked arguments ------------------------------

def _isinstance(tx, obj, classes):
    from ember.capture.variables.classes import typing_origin
    cls = typing_origin(classes) or classes.as_constant()
    if any(isinstance(c, abc.ABCMeta) for c in (cls if isinstance(cls, tuple) else (cls,))):
        # ABC.register() between calls changes the answer: guard on abc's registration counter
        tx.guards.global_state("abc_token", abc.get_cache_token, abc.get_cache_token(), "abc.get_cache_token()")
    try:
        t = obj.python_type()
    except Exception:
        from ember.capture.variables.generators import IteratorBase
        wanted = cls if isinstance(cls, tuple) else (cls,)
        if isinstance(obj, IteratorBase) and all(c in (collections.abc.Iterator, collections.abc.Iterable) or (
                isinstance(c, type) and (c.__module__ == "builtins" or issubclass(c, torch.Tensor))
                and not issubclass(c, collections.abc.Iterator) and c is not object) for c in wanted):
            # an iterator of some builtin type: an Iterator and Iterable, never a list, tuple, int,
            # tensor ...
            return ConstantVariable(any(c in (collections.abc.Iterator, collections.abc.Iterable) for c in wanted))
        raise unsupported("EB0037", f"isinstance on {obj.describe()}") from None
    if isinstance(obj, TensorVariable):
        from ember.capture.variables.tensor_isinstance import flag_isinstance, legacy_type_isinstance
        legacy = legacy_type_isinstance(obj, cls)
        if legacy is not None:
            if legacy[0] or not legacy[1]:
                return ConstantVariable(legacy[0])
            cls = legacy[1]
        answer = flag_isinstance(tx, obj, cls)
        if answer is not None:
            return ConstantVariable(answer)
    if isinstance(obj, TensorVariable) and t is torch.Tensor:
        # an intermediate is a plain Tensor; Parameter only for parameters read from a module
        return ConstantVariable(issubclass(t, cls) if not isinstance(cls, tuple) else
                                any(issubclass(t, c) for c in cls))
    if hasattr(obj, "obj") and not isinstance(obj.obj, VariableTracker):
        # user objects: use the real isinstance (handles __instancecheck__). (A bound method's or
        # super()'s `.obj` is the tracker of its self: their own type answers, below.)
        return ConstantVariable(isinstance(obj.obj, cls))
    if hasattr(obj, "module") and not isinstance(obj.module, VariableTracker):
        return ConstantVariable(isinstance(obj.module, cls))
    return ConstantVariable(issubclass(t, cls))


# builtins that call a dunder of their one argument (a tensor subclass may define it)
_SUBCLASS_DUNDERS = {len: "__len__", iter: "__iter__", bool: "__bool__", repr: "__repr__", str: "__str__",
                     hash: "__hash__", abs: "__abs__", int: "__int__", float: "__float__", reversed: "__reversed__"}


def _len(tx, obj):
    if isinstance(obj, TensorVariable):
        # the tensor's __len__: a dynamic first dimension stays a symbol (torch.arange(len(x)) must
        # not pin the batch size, as x.shape[0] does not)
        return obj.call_method(tx, "__len__", [], {})
    result = obj.call_method(tx, "__len__", [], {})
    if dynamic_number(result) and result.python_type() is int:
        # a user class's __len__ returning a dynamic size (self.k.shape[-2]): the size itself, with
        # a guard on its sign, not on its value (the cache length must not pin the graph)
        if not bool(result.sym >= 0):
            raise PythonException(ValueError("__len__() should return >= 0"))
        return result
    if result.is_constant():
        # what len() checks of a __len__'s answer (a user class can return anything)
        n = result.as_constant()
        if not hasattr(type(n), "__index__"):
            raise PythonException(TypeError(f"'{type(n).__name__}' object cannot be interpreted as an integer"))
        n = operator.index(n)
        if n < 0:
            raise PythonException(ValueError("__len__() should return >= 0"))
        if n > sys.maxsize:
            raise PythonException(OverflowError("cannot fit 'int' into an index-sized integer"))
        if type(result.as_constant()) is not int:
            return ConstantVariable(n)
    return result


def _attribute_error(e) -> bool:
    """An AttributeError raised while reading an attribute (a missing one, or one a Python
    ``__getattr__`` / property raised), which getattr(default) and hasattr absorb."""
    exc = getattr(e, "exc", None)
    return isinstance(exc, AttributeError) or exc is AttributeError


def _getattr(tx, obj, name, *default):
    try:
        return tx.getattr(obj, name.as_constant())
    except PythonException as e:
        if default and _attribute_error(e):
            return default[0]
        raise


def _hasattr(tx, obj, name):
    if unpinned_number(obj):  # (an int or float has only its class's attributes: no value read)
        return ConstantVariable(hasattr(obj.python_type(), name.as_constant()))
    try:
        tx.getattr(obj, name.as_constant())
        return ConstantVariable(True)
    except PythonException as e:
        if _attribute_error(e):
            return ConstantVariable(False)
        raise


def _setattr(tx, obj, name, value):
    obj.setattr(tx, name.as_constant(), value)
    return ConstantVariable(None)


def _delattr(tx, obj, name):
    method = getattr(obj, "delattr", None)
    if method is None:
        raise unsupported("EB0008", f"delattr on {obj.describe()}")
    method(tx, name.as_constant())
    return ConstantVariable(None)


def _iter_items(tx, vt):
    return vt.iter(tx).unpack(tx)


def _enumerate(tx, iterable, start=None):
    from ember.capture.variables.generators import EnumerateIterator
    from ember.capture.variables.symbolic import dynamic_number
    if start is not None and dynamic_number(start) and start.python_type() is int:
        return EnumerateIterator(iterable.iter(tx), start)  # (a dynamic int stays a symbol)
    s = start.as_constant() if start is not None else 0
    return EnumerateIterator(iterable.iter(tx), s)


def _zip(tx, *iterables, strict=None):
    from ember.capture.variables.generators import ZipIterator
    return ZipIterator([it.iter(tx) for it in iterables], bool(strict is not None and strict.as_constant()))


def _map(tx, fn, *iterables):
    from ember.capture.variables.generators import MapIterator
    if not iterables:
        raise unsupported("EB0002", "map() must have at least two arguments (TypeError)")
    return MapIterator(fn, [it.iter(tx) for it in iterables])


def _filter(tx, fn, iterable):
    from ember.capture.variables.generators import FilterIterator
    if is_none(fn):
        fn = None
    return FilterIterator(fn, iterable.iter(tx))


def _reversed(tx, seq):
    from ember.capture.variables.containers import ListVariable
    if isinstance(seq, ListVariable) and seq.list_cls is list:
        # CPython's reverse list iterator reads the list by index as it is advanced (writes made
        # after reversed() and before the items are taken are seen): not a snapshot, not folded
        from ember.capture.variables.iterators import ReversedListIterator
        return ReversedListIterator(seq)
    if seq.is_constant():
        return NotImplemented
    return IteratorVariable(list(reversed(seq.unpack(tx))))


def _list(tx, iterable=None):
    return ListVariable(_iter_items(tx, iterable) if iterable is not None else [])


def _tuple(tx, iterable=None):
    return TupleVariable(_iter_items(tx, iterable) if iterable is not None else [])


def _set(tx, iterable=None):
    return SetVariable(_iter_items(tx, iterable) if iterable is not None else [])


def _has_keys_method(vt) -> bool:
    try:
        t = vt.python_type()
    except Exception:
        return False
    return isinstance(t, type) and not issubclass(t, (torch.Tensor, list, tuple, str)) and hasattr(t, "keys")


def _dict(tx, arg=None, **kwargs):
    from ember.capture.variables.containers import dict_operand
    d = DictVariable({})
    if arg is not None:
        arg = dict_operand(arg) or arg  # (a dict subclass's instance made in the frame: its items)
        if isinstance(arg, DictVariable):
            arg._observe_order(tx)
            d = DictVariable(arg.items, arg.keys)
        elif _has_keys_method(arg):  # a mapping (ChainMap, a Mapping subclass): keys(), then [k]
            for k in _iter_items(tx, tx.getattr(arg, "keys").call(tx, [], {})):
                d.set_item(k, tx.getattr(arg, "__getitem__").call(tx, [k], {}))
        else:
            for pair in _iter_items(tx, arg):
                k, v = pair.unpack(tx)
                d.set_item(k, v)
    for k, v in kwargs.items():
        d.set_item(ConstantVariable(k), v)
    return d


def _sum(tx, iterable, start=None):
    items = _iter_items(tx, iterable)
    if not items:
        return start if start is not None else ConstantVariable(0)  # (the start object itself)
    if _constants(items) and (start is None or start.is_constant()) and \
            not any(isinstance(i, SymNodeVariable) for i in items):
        values = [i.as_constant() for i in items]
        first = start.as_constant() if start is not None else 0
        # (lists are added as trackers below: a folded result would hold copies of their items)
        if not _mutable_ids(values, set(), False) and not _mutable_ids(first, set(), True):
            return wrap_constant(_fold(sum, values, first))  # (sum([[1]]): eager's TypeError)
    acc = start if start is not None else ConstantVariable(0)
    for item in items:
        acc = tx.binary_op(operator.add, acc, item)
    return acc


def _minmax(pick):
    def handler(tx, *args, **kwargs):
        items = args if len(args) > 1 else _iter_items(tx, args[0])
        key = kwargs.pop("key", None)
        if key is not None and not is_none(key):
            keys = _key_values(tx, items, key, f"{pick.__name__}(key=...)")
            if not items:
                if "default" in kwargs:
                    return kwargs["default"]
                raise PythonException(ValueError(f"{pick.__name__}() arg is an empty sequence"))
            best = ordered(lambda: pick(range(len(items)), key=keys.__getitem__), f"{pick.__name__}()")
            return items[best]
        if len(items) == 1 and set(kwargs) <= {"default"}:
            return items[0]  # (one item: nothing is compared, its value is not needed)
        if not kwargs and len(items) > 1 and any(isinstance(i, SymNodeVariable) for i in items) \
                and all(is_number(i) for i in items) \
                and len({i.python_type() for i in items}) == 1 and items[0].python_type() in (int, float):
            # min(x.size(0), 3): symbolic. Only for one type: sym_max(2, 1.5) is 2.0 where max gives
            # the int 2, and bools would come back as ints; mixed types pick by guarded comparison.
            acc = items[0]
            for item in items[1:]:
                acc = tx.output.call_function(torch.sym_min if pick is min else torch.sym_max, [acc, item], {})
            return acc
        if not kwargs and len(items) > 1 and any(isinstance(i, SymNodeVariable) and has_symbols(i.sym)
                                                 for i in items) and all(is_number(i) for i in items):
            # mixed types (min(scale, 1), max(v, 0)): as Python picks, the first item no other beats,
            # by symbolic comparisons (a guard on each outcome, not on every value)
            beats = operator.lt if pick is min else operator.gt
            best = items[0]
            for item in items[1:]:
                if tx.binary_op(beats, item, best).truth(tx):
                    best = item
            return best
        if _constants(items) and set(kwargs) <= {"default"}:
            # picked by index: the result is the item's own tracker (max of two lists is one of
            # them, not a copy that a later append would miss)
            if not items:
                if "default" in kwargs:
                    return kwargs["default"]
                _fold(pick, [])  # (raises eager's ValueError)
            values = [i.as_constant() for i in items]
            return items[_fold(pick, range(len(items)), key=values.__getitem__)]
        if items and not any(isinstance(i, TensorVariable) for i in items) and set(kwargs) <= {"default"}:
            memo: dict = {}
            keys = [comparable(i, memo, tx) for i in items]
            return items[ordered(lambda: pick(range(len(items)), key=keys.__getitem__), f"{pick.__name__}()")]
        raise unsupported("EB0016", f"{pick.__name__}() on tensors compares data")
    return handler


def _abs(tx, x):
    if isinstance(x, TensorVariable):
        return tx.output.call_function(operator.abs, [x], {})
    if type(x).__name__ == "NumpyNdarrayVariable":  # through torch._numpy
        from ember.capture.variables.numpy_bridge import unary
        return unary(tx, operator.abs, x)
    from ember.capture.variables.user_operators import user_unary_op
    result = user_unary_op(tx, operator.abs, x)  # a user class's __abs__
    return NotImplemented if result is None else result


def _iter(tx, obj, *sentinel):
    if sentinel:
        if len(sentinel) > 1:
            raise PythonException(TypeError(f"iter expected at most 2 arguments, got {1 + len(sentinel)}"))
        from ember.capture.polyfills.stdlib import call_until
        from ember.capture.variables.functions import UserFunctionVariable
        return UserFunctionVariable(call_until).call(tx, [obj, sentinel[0]], {})
    return obj.iter(tx)


def _next(tx, it, *default):
    from ember.capture.variables.generators import IteratorBase
    if not isinstance(it, IteratorBase):
        raise unsupported("EB0037", f"next() on {it.describe()}")
    item = it.next(tx)
    if item is None:
        if default:
            return default[0]
        raise it.stop_iteration()
    return item


def _type(tx, obj, *rest):
    if rest:
        raise unsupported("EB0037", "type() with three arguments")
    from ember.capture.variables.objects import ClassVariable
    return ClassVariable(obj.python_type())


def _bool(tx, x=None):
    if x is None:
        return ConstantVariable(False)
    if isinstance(x, TensorVariable) and x.fake.numel() == 1 and not has_symbols(tuple(x.fake.shape)) \
            and (x._input_scalar(max_numel=1) or x._unbacked_scalars(tx)):
        x = x.call_method(tx, "item", [], {})  # (Tensor.__bool__ is `.item() != 0`)
    if isinstance(x, SymNodeVariable) and has_unbacked(x.sym):
        # a data-dependent value converted, not branched on: a SymBool of the graph, as torch does
        if isinstance(x.sym, torch.SymBool):
            return x
        return symbolic_operation(tx, operator.ne, [x, ConstantVariable(0)])
    return ConstantVariable(x.truth(tx))


def _any_all(pick):
    # Short-circuits like the builtin: stops pulling items at the first decisive one.
    def handler(tx, iterable):
        it = iterable.iter(tx)
        decisive = pick is any
        while True:
            item = it.next(tx)
            if item is None:
                return ConstantVariable(not decisive)
            if item.truth(tx) == decisive:
                return ConstantVariable(decisive)
    return handler


def _callable(tx, obj):
    """``callable(obj)``: whether its type defines ``__call__`` (never the instance's attributes, nor a
    class's ``__getattr__``)."""
    if unpinned_number(obj):
        return ConstantVariable(False)
    if obj.is_constant() and isinstance(obj, ConstantVariable):
        return NotImplemented  # (a container of constants is answered by its type: its numbers unread)
    try:
        t = obj.python_type()
    except Exception:
        t = None
    if isinstance(t, type):
        from ember.capture.guards import on_mro
        return ConstantVariable(on_mro(t, "__call__"))
    return ConstantVariable(not isinstance(obj, (TensorVariable, ListVariable, TupleVariable,
                                                 DictVariable, SetVariable)))


def _print(tx, *args, **kwargs):
    raise unsupported("EB0026", "print() has a side effect outside the graph")


def _id(tx, obj):
    # Objects that exist outside the frame keep their identity (guarded by ID_MATCH or held by
    # the code being traced), so their id() is a constant of this trace.
    if type(obj).__name__ == "UserFunctionVariable" and obj.source is not None:
        tx.guards.id_match(obj.source, obj.fn)
    from ember.capture.builder import pin_identity
    pin_identity(tx, obj)  # modules and objects are otherwise guarded by type
    for attr in ("fn", "module", "obj", "value"):
        if hasattr(obj, attr) and type(obj).__name__ in (
                "UserFunctionVariable", "NNModuleVariable", "UserObjectVariable", "ClassVariable",
                "BuiltinVariable", "TorchFunctionVariable", "PythonModuleVariable"):
            return ConstantVariable(id(getattr(obj, attr)))
    if type(obj).__name__ in ("UserMethodVariable", "NewObjectVariable", "NestedFunctionVariable"):
        # Made during the trace (a bound method is a new object on every access in Python too):
        # any value unique for the trace will do, as long as it is only compared, which is how
        # id() is used on such values (e.g. inspect.unwrap's cycle memo).
        return ConstantVariable(id(obj))
    if isinstance(obj, TensorVariable) and obj.source is not None and obj.real is not None:
        # an input tensor: its id() is that of the object the call passes (guarded by number)
        tx.guards.id_equals(obj.source, obj.real)
        return ConstantVariable(id(obj.real))
    source = getattr(obj, "source", None)
    hit = tx.output.source_memo.get(source) if source is not None else None
    if hit is not None and hit[1] is obj and type(hit[0]) in (list, dict, set, frozenset, tuple, collections.deque):
        # a container from outside (a global memo's key `id(MY_DICT)`): the object the source gives
        # now, guarded by number like an input tensor's
        tx.guards.id_equals(source, hit[0])
        return ConstantVariable(id(hit[0]))
    raise unsupported("EB0037", f"id() of {obj.describe()}")


def _super(tx, *args):
    return tx.make_super(args)


def _fold(fn, *args, **kwargs):
    """``fn(*args, **kwargs)`` on constants; what it raises is what eager raises."""
    try:
        return fn(*args, **kwargs)
    except Exception as e:
        raise PythonException(e) from None


def _sorted_keys(iterable, kwargs):
    """``sorted(d)`` / ``sorted(d.keys())`` of a dict whose keys are all str or all int, without a
    key function: the result depends on the key set only, not on its order (the keys are unique and
    totally ordered), so the order is not observed (guarded) — as torch.compile, which does not
    recompile for a dict input whose keys came in another order here. None: not such a call."""
    import collections
    from ember.capture.variables.dict_views import DictViewVariable
    d = iterable.dict_vt if isinstance(iterable, DictViewVariable) and iterable.kind == "keys" else iterable
    if not isinstance(d, DictVariable) or d.dict_cls not in (dict, collections.OrderedDict, collections.defaultdict,
                                                             collections.Counter) or set(kwargs) - {"reverse"}:
        return None
    keys = list(d.keys.values())
    if not keys or not all(type(k) is ConstantVariable for k in keys) \
            or len({type(k.value) for k in keys} | {str}) > 1 and len({type(k.value) for k in keys} | {int}) > 1:
        return None  # (all str, or all int: no ties, no TypeError)
    if not _constants(kwargs.values()):
        return None
    reverse = bool(kwargs["reverse"].as_constant()) if "reverse" in kwargs else False
    return ListVariable(sorted(keys, key=lambda k: k.value, reverse=reverse))


def _sorted(tx, iterable, **kwargs):
    by_keys = _sorted_keys(iterable, kwargs)
    if by_keys is not None:
        return by_keys
    items = _iter_items(tx, iterable)
    key = kwargs.pop("key", None)
    if set(kwargs) - {"reverse"}:
        raise PythonException(TypeError(f"sort() got an unexpected keyword argument {next(iter(kwargs))!r}"))
    if key is None and _constants(items) and _constants(kwargs.values()) and not any(
            isinstance(i, SymNodeVariable) and has_symbols(i.sym) for i in items):
        # sorted by index (a stable sort, as sorted's): the items keep their trackers (sorting
        # lists gives those lists, not copies)
        values = [i.as_constant() for i in items]
        order = _fold(sorted, range(len(items)), key=values.__getitem__,
                      **{k: v.as_constant() for k, v in kwargs.items()})
        return ListVariable([items[i] for i in order])
    order = order_by_keys(tx, items, key, kwargs.get("reverse"), "sorted()")
    return ListVariable([items[i] for i in order])


def _pow(tx, base, exp, mod=None):
    if mod is None and (isinstance(base, TensorVariable) or isinstance(exp, TensorVariable)):
        return tx.binary_op(operator.pow, base, exp)
    return NotImplemented


def _reduce(tx, fn, iterable, *initial):
    """functools.reduce, as a loop over the items (each call traced)."""
    items = _iter_items(tx, iterable)
    if initial:
        acc = initial[0]
    elif items:
        acc, items = items[0], items[1:]
    else:
        raise PythonException(TypeError("reduce() of empty iterable with no initial value"))
    for item in items:
        acc = fn.call(tx, [acc, item], {})
    return acc


def _int_float(kind):
    def handler(tx, x=None, *rest, **kwargs):
        if isinstance(x, TensorVariable):
            from ember.capture.scalar_inputs import known_int
            if kind is int and not rest and not kwargs and known_int(x) is not None:
                return known_int(x)  # (a tensor of a size expression's value: the expression)
            if rest or kwargs or x.fake.numel() != 1 or has_symbols(tuple(x.fake.shape)) or not x._unbacked_scalars(tx):
                raise unsupported("EB0017", f"{kind.__name__}() of a tensor reads its data")
            x = x.call_method(tx, "item", [], {})  # (captured: an unbacked symbol, as .item())
            if not isinstance(x, SymNodeVariable) and x.is_constant() and type(x.as_constant()) in (int, float, bool):
                return ConstantVariable(kind(x.as_constant()))  # (a 0-d input's value, guarded)
            if isinstance(x, SymNodeVariable):
                converted = symbolic_conversion(tx, kind, x)
                if converted is not None:
                    return converted
        if kind in (int, float) and type(x).__name__ == "NumpyNdarrayVariable" and not rest and not kwargs:
            from ember.capture.variables.numpy_arrays import symbolic_int_of_scalar
            # `int(n)` of a NumPy int argument, `float(v)` of a NumPy float one: a symbol
            symbolic = symbolic_int_of_scalar(tx, x, float if kind is float else int)
            if symbolic is not None:
                return symbolic
        if x is not None and not rest and not kwargs:
            from ember.capture.variables.user_operators import user_number
            result = user_number(tx, kind, x)  # a user class's __int__ / __float__ / __index__
            if result is not None:
                return result
        return NotImplemented
    return handler


def _index_of(tx, x=None, *rest, **kwargs):
    """``operator.index(obj)`` of a user object with a Python ``__index__``."""
    if x is None or rest or kwargs:
        return NotImplemented
    from ember.capture.variables.user_operators import user_number
    result = user_number(tx, None, x)
    return NotImplemented if result is None else result


def _divmod(tx, a=None, b=None, *rest, **kwargs):
    """``divmod(n, k)`` of a symbolic size: ``(n // k, n % k)``, kept symbolic (as each alone is)."""
    if rest or kwargs or a is None or b is None or not (isinstance(a, SymNodeVariable) or isinstance(b, SymNodeVariable)) \
            or not (is_number(a) and is_number(b)):
        return NotImplemented
    return TupleVariable([tx.binary_op(operator.floordiv, a, b), tx.binary_op(operator.mod, a, b)])


_HANDLERS = {
    isinstance: _isinstance, divmod: _divmod, len: _len, getattr: _getattr, hasattr: _hasattr, setattr: _setattr,
    delattr: _delattr,
    enumerate: _enumerate, zip: _zip, map: _map, filter: _filter, reversed: _reversed, list: _list,
    tuple: _tuple, set: _set, dict: _dict, sum: _sum, min: _minmax(min), max: _minmax(max),
    abs: _abs, iter: _iter, next: _next, type: _type, bool: _bool, any: _any_all(any),
    all: _any_all(all), callable: _callable, print: _print, id: _id, super: _super, sorted: _sorted,
    int: _int_float(int), float: _int_float(float), frozenset: lambda tx, it=None: SetVariable(
        _iter_items(tx, it) if it is not None else [], frozen=True),
    str: lambda tx, *a, **k: _user_text(tx, "str", a, k), repr: lambda tx, *a, **k: _user_text(tx, "repr", a, k),
    hash: lambda tx, *a, **k: _user_hash(tx, a, k), pow: _pow, functools.reduce: _reduce, vars: frame_vars,
    locals: frame_locals, dir: frame_dir, operator.index: _index_of, operator.length_hint: length_hint,
    math.prod: lambda tx, *a, **k: symbolic_prod(tx, _iter_items, a, k),
    sys.exc_info: frame_exc_info,
}
if hasattr(sys, "exception"):  # (3.11+)
    _HANDLERS[sys.exception] = frame_exception
# sys functions answered from the trace's exception state (see frame_builtins.py), never folded
_FRAME_STATE_SYS = frozenset(f for f in (sys.exc_info, getattr(sys, "exception", None)) if f is not None)



# -- constants' attributes (constant_methods.py; re-exported here) ---------------
from ember.capture.variables.constant_methods import ConstantMethodVariable, constant_attribute  # noqa: E402,F401

# (constructing values from classes lives in constructors.py; re-exported here)
from ember.capture.variables.constructors import construct, plain_exception_class  # noqa: E402,F401
