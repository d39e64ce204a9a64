"""Opcode handlers for stack manipulation, building, operators, jumps and iteration.

Mixed into `ember.capture.interpreter.Translator`; one method per opcode.
"""
from __future__ import annotations

import collections
import dis
import types
import operator
import torch

from ember.capture.variables.symbolic import (SizeVariable, SymNodeVariable, SymSliceVariable, holds_symbols,
                                              dynamic_number, symbolic_contains, symbolic_operation,
                                              symbolic_sequence_operation)
from ember.capture.variables.random_draws import RandomValueVariable, derived_value, random_operands
from ember.capture.assumptions import assume_branch
from ember.capture.eager_errors import unpack_error
from ember.capture.variables.base import (ConstantVariable, VariableTracker, concat_strings, derived_lazy,
                                          format_value, is_none as _is_none, unpinned_number, unsupported)
from ember.exc import PythonException
from ember.capture.variables.builtins import wrap_constant
from ember.fake.symbolic import has_symbols
from ember.capture.variables.containers import (BaseSequence, DictVariable, IteratorVariable, ListVariable,
                                                SetVariable, TupleVariable)
from ember.capture.variables.dict_views import dict_equal, view_set_operation
from ember.capture.variables.mapping_proxy import proxy_operands
from ember.capture.variables.deques import DequeVariable
from ember.capture.variables.generators import IteratorBase
from ember.capture.variables.tensor import TensorVariable, use_tensors
from ember.capture.variables.numpy_arrays import NumpyNdarrayVariable, index_of_scalar
from ember.capture.variables.numpy_bridge import binary as numpy_binary, unary as numpy_unary

_BINARY_OPS = {
    "+": operator.add, "-": operator.sub, "*": operator.mul, "/": operator.truediv,
    "//": operator.floordiv, "%": operator.mod, "**": operator.pow, "@": operator.matmul,
    "&": operator.and_, "|": operator.or_, "^": operator.xor, "<<": operator.lshift, ">>": operator.rshift,
    "+=": operator.iadd, "-=": operator.isub, "*=": operator.imul, "/=": operator.itruediv,
    "//=": operator.ifloordiv, "%=": operator.imod, "**=": operator.ipow, "@=": operator.imatmul,
    "&=": operator.iand, "|=": operator.ior, "^=": operator.ixor, "<<=": operator.ilshift,
    ">>=": operator.irshift,
}
_INPLACE_TO_PLAIN = {
    operator.iadd: operator.add, operator.isub: operator.sub, operator.imul: operator.mul,
    operator.itruediv: operator.truediv, operator.ifloordiv: operator.floordiv, operator.imod: operator.mod,
    operator.ipow: operator.pow, operator.imatmul: operator.matmul, operator.iand: operator.and_,
    operator.ior: operator.or_, operator.ixor: operator.xor, operator.ilshift: operator.lshift,
    operator.irshift: operator.rshift,
}
_SET_DUNDERS = {operator.or_: "__or__", operator.and_: "__and__", operator.sub: "__sub__",
                operator.xor: "__xor__"}
_BINARY_SYMBOLS = {operator.or_: "|", operator.and_: "&", operator.sub: "-", operator.xor: "^"}
_COMPARE_OPS = {"<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge,
                "==": operator.eq, "!=": operator.ne}
_NB_OPS = [sym for _name, sym in dis._nb_ops]


def _user_compare(tx, fn, a, b):
    from ember.capture.variables.user_operators import user_compare
    return user_compare(tx, fn, a, b)


_UNION_DICTS = (dict, collections.OrderedDict, collections.defaultdict)


def _dict_union_class(a: type, b: type) -> type | None:
    """The class of ``a | b`` for dicts whose ``|`` is the plain union (the right operand's values
    win), or None. A subclass on the right that defines ``__ror__`` answers (OrderedDict,
    defaultdict do); otherwise the left operand's class."""
    if a not in _UNION_DICTS or b not in _UNION_DICTS:
        return None
    if b is not a and issubclass(b, a) and b.__ror__ is not a.__ror__:
        return b
    return a


def _dict_items_of(vt, dunders: tuple):
    """The `DictVariable` holding the items of a dict subclass's instance made in the frame whose
    class leaves ``dunders`` to its dict base (so the operator is the base's), else None."""
    from ember.capture.variables.new_object import NewObjectVariable, _lookup
    if not isinstance(vt, NewObjectVariable) or vt.items is None:
        return None
    if any(_lookup(vt.cls, n) is not _lookup(vt.dict_base, n) for n in dunders):
        return None
    return vt.items


def _first_not_none(value, otherwise):
    return value if value is not None else otherwise()


class OpcodeMixin:
    # -- stack -----------------------------------------------------------------
    def NOP(self, inst):
        pass

    RESUME = NOP
    CACHE = NOP
    EXTENDED_ARG = NOP

    def POP_TOP(self, inst):
        self.release_references(self.pop())

    def COPY(self, inst):
        self.push(self.stack[-inst.arg])

    def SWAP(self, inst):
        s = self.stack
        s[-1], s[-inst.arg] = s[-inst.arg], s[-1]

    # -- building ------------------------------------------------------------------
    def BUILD_TUPLE(self, inst):
        self.push(TupleVariable(self.popn(inst.arg)))

    def BUILD_LIST(self, inst):
        self.push(ListVariable(self.popn(inst.arg)))

    def BUILD_SET(self, inst):
        self.push(SetVariable(self.popn(inst.arg)))

    def BUILD_MAP(self, inst):
        items = self.popn(2 * inst.arg)
        d = DictVariable({})
        for k, v in zip(items[::2], items[1::2]):
            d.set_item(k, v)
        self.push(d)

    def BUILD_CONST_KEY_MAP(self, inst):
        keys = self.pop().as_constant()
        values = self.popn(inst.arg)
        d = DictVariable({})
        for k, v in zip(keys, values):
            d.set_item(ConstantVariable(k), v)
        self.push(d)

    def BUILD_SLICE(self, inst):
        parts = self.popn(inst.arg)
        parts = [(index_of_scalar(self, p) or p) if isinstance(p, NumpyNdarrayVariable) else p for p in parts]
        if not all(p.is_constant() for p in parts):
            from ember.capture.scalar_inputs import known_int  # (a tensor of a size expression's value)
            parts = [known_int(p) if known_int(p) is not None else p for p in parts]
        if not all(p.is_constant() for p in parts):
            raise unsupported("EB0036", "slice with non-constant bounds (tensor-valued slice bounds)")
        if any(isinstance(p, SymNodeVariable) for p in parts):
            self.push(SymSliceVariable(parts))  # `y[:x.size(0)]`
            return
        self.push(ConstantVariable(slice(*[p.as_constant() for p in parts])))

    def BUILD_STRING(self, inst):
        parts = self.popn(inst.arg)
        lazy = derived_lazy(concat_strings, parts, symbols=True)
        self.push(lazy if lazy is not None else ConstantVariable("".join(p.as_constant() for p in parts)))

    def _built_target(self, inst):
        """The container a LIST_APPEND/MAP_ADD/..._UPDATE instruction fills: built by the frame, or after a
        break a resume function's argument (`{**f()}` broken inside f): filling it is a mutation to replay."""
        target = self.stack[-inst.arg]
        if getattr(target, "source", None) is not None:
            self.side_effects.mutated_container(target)
        return target

    def LIST_APPEND(self, inst):
        value = self.pop()
        self._built_target(inst).items.append(value)

    def SET_ADD(self, inst):
        value = self.pop()
        target = self.stack[-inst.arg]
        target.call_method(self, "add", [value], {})

    def MAP_ADD(self, inst):
        value = self.pop()
        key = self.pop()
        self._built_target(inst).set_item(key, value)

    def LIST_EXTEND(self, inst):
        seq = self.pop()
        self._built_target(inst).items.extend(seq.iter(self).unpack(self))

    def SET_UPDATE(self, inst):
        seq = self.pop()
        target = self.stack[-inst.arg]
        target.call_method(self, "update", [seq], {})

    def DICT_UPDATE(self, inst):
        other = self.pop()
        target = self._built_target(inst)
        if not isinstance(other, DictVariable):
            raise unsupported("EB0038", f"dict update from {other.describe()}")
        other._observe_order(self)
        for k, v in other.items.items():
            target.set_item(other.keys[k], v)

    def DICT_MERGE(self, inst):
        other = self.pop()
        target = self._built_target(inst)
        if not isinstance(other, DictVariable):
            raise unsupported("EB0038", f"** of {other.describe()}")
        other._observe_order(self)
        for k, v in other.items.items():
            if k in target.items:
                raise unsupported("EB0002", f"duplicate keyword argument {k!r} (TypeError)")
            target.set_item(other.keys[k], v)

    def LIST_TO_TUPLE(self, inst):
        self.push(TupleVariable(self.pop().items))

    def UNPACK_SEQUENCE(self, inst):
        seq = self.pop()
        items = seq.iter(self).unpack(self) if not isinstance(seq, BaseSequence) else seq.items
        if len(items) != inst.arg:
            raise unpack_error(seq, len(items), inst.arg, None)
        for item in reversed(items):
            self.push(item)

    def UNPACK_EX(self, inst):
        seq = self.pop()
        items = seq.iter(self).unpack(self) if not isinstance(seq, BaseSequence) else list(seq.items)
        before, after = inst.arg & 0xFF, inst.arg >> 8
        if len(items) < before + after:
            raise unpack_error(seq, len(items), before, after)
        middle = ListVariable(items[before:len(items) - after])
        for item in reversed(items[len(items) - after:]):
            self.push(item)
        self.push(middle)
        for item in reversed(items[:before]):
            self.push(item)

    def FORMAT_VALUE(self, inst):
        flags = inst.arg
        spec = self.pop().as_constant() if flags & 0x04 else ""
        value = self.pop()
        from ember.capture.variables.user_operators import _python_method, _user_class, enum_text, user_str
        if (text := enum_text(self, value, flags & 0x03, spec)) is not None:  # (an Enum's own __str__)
            return self.push(text)
        if not value.is_constant() and flags & 0x03 != 3:
            # a user object whose class formats through its Python __str__/__repr__ (object.__format__, '': str())
            text = None
            try:
                t = value.python_type()
            except Exception:
                t = None
            if t is not None and (flags & 0x03 or (t.__format__ is object.__format__ and spec == "")):
                text = user_str(self, "repr" if flags & 0x03 == 2 else "str", value)
            elif t is not None and not flags & 0x03 and _user_class(value) is not None and \
                    _python_method(t, "__format__") is not None:
                text = value.call_method(self, "__format__", [ConstantVariable(spec)], {})  # its own __format__
                if not (text.is_constant() and isinstance(text.as_constant(), str)):
                    raise PythonException(TypeError(f"__format__ must return a str, not "
                                                    f"{text.python_type().__name__}"))
                self.push(ConstantVariable(text.as_constant()))
                return
            if text is not None:
                self.push(ConstantVariable(format(text.as_constant(), spec)))
                return
        if not value.is_constant():
            raise unsupported("EB0040", f"formatting {value.describe()} into a string")
        lazy = derived_lazy(format_value, [value, ConstantVariable(flags & 0x03), ConstantVariable(spec)],
                            symbols=True)
        if lazy is not None:  # a scalar argument only formatted: not guarded by value
            self.push(lazy)
            return
        v = value.as_constant()
        conv = flags & 0x03
        try:
            v = str(v) if conv == 1 else repr(v) if conv == 2 else ascii(v) if conv == 3 else v
            text = format(v, spec)
        except Exception as e:  # (a bad format spec) eager raises this very exception
            raise PythonException(e) from None
        self.push(ConstantVariable(text))

    # -- operators --------------------------------------------------------------------
    def binary_op(self, fn, a: VariableTracker, b: VariableTracker) -> VariableTracker:
        a, b = proxy_operands(fn, a, b)  # `mp | d`: the proxy's dict
        if isinstance(a, RandomValueVariable) or isinstance(b, RandomValueVariable):
            derived = derived_value(self, _INPLACE_TO_PLAIN.get(fn, fn), [a, b])
            if derived is not None:  # `random.uniform(0, 1) * 2`: computed after the draws
                return derived
            a, b = random_operands(self, a, b)  # `x * random.uniform(0.8, 1.2)`: a 0-d tensor input
        if isinstance(a, NumpyNdarrayVariable) or isinstance(b, NumpyNdarrayVariable):
            return numpy_binary(self, fn, a, b)  # through torch._numpy (variables/numpy_arrays.py)
        if isinstance(a, TensorVariable) or isinstance(b, TensorVariable):
            if fn in _INPLACE_TO_PLAIN and not isinstance(a, TensorVariable):
                fn = _INPLACE_TO_PLAIN[fn]  # 3 += tensor rebinds, it does not mutate
            return self.output.call_function(fn, [a, b], {})
        symbolic = symbolic_operation(self, _INPLACE_TO_PLAIN.get(fn, fn), [a, b])  # `x.size(0) * 2`
        if symbolic is None:
            symbolic = symbolic_sequence_operation(self, fn, a, b)  # `shape[1:] + (h,)`
        if symbolic is not None:
            return symbolic
        viewed = view_set_operation(fn, a, b)  # `d.keys() & s`, `d.items() - other.items()`
        if viewed is not None:
            return viewed
        if fn in (operator.mod, operator.imod) and isinstance(a, ConstantVariable) and type(a.value) is str \
                and dynamic_number(b):
            # "%d" % x.size(0): a break as torch.compile's (the size stays dynamic, no guard per size)
            raise unsupported("EB0036", "str % of a dynamic size needs its exact value")
        if a.is_constant() and b.is_constant() and not isinstance(a, (ListVariable, DictVariable, SetVariable)) \
                and not holds_symbols(a) and not holds_symbols(b):  # (`(n,) * 2` keeps n a symbol: below)
            lazy = _lazy_arithmetic(fn, a, b)
            if lazy is not None:  # e.g. `step + 1` of an unused scalar argument: not guarded by value
                return lazy
            try:
                return wrap_constant(fn(a.as_constant(), b.as_constant()))
            except Exception as e:
                raise PythonException(e) from None  # eager raises this very exception
        plain = _INPLACE_TO_PLAIN.get(fn, fn)
        if isinstance(a, BaseSequence) or isinstance(b, BaseSequence):
            # `t = (); t += (x.sin(),)`: a constant tuple meets a tracked one
            a, b = _constant_tuple_as_sequence(a), _constant_tuple_as_sequence(b)
        if fn is operator.iadd and isinstance(a, (ListVariable, DequeVariable)):
            return a.call_method(self, "__iadd__", [b], {})
        if isinstance(a, BaseSequence) and plain is operator.add and isinstance(b, BaseSequence):
            a_list, b_list = isinstance(a, ListVariable), isinstance(b, ListVariable)
            for v in (a, b):
                cls = v.python_type()
                if cls not in (list, tuple) and (cls.__add__ is not (list.__add__ if isinstance(v, ListVariable)
                                                                      else tuple.__add__)
                                                 or getattr(cls, "__radd__", None) is not None):
                    raise unsupported("EB0038", f"+ on a {cls.__name__} object (its own __add__)")
            if a_list != b_list:
                kind, other = ("list", "tuple") if a_list else ("tuple", "list")
                raise PythonException(TypeError(f'can only concatenate {kind} (not "{other}") to {kind}'))
            # (a list or tuple subclass concatenates into the plain type, as in Python)
            return ListVariable(a.items + b.items) if a_list else TupleVariable(a.items + b.items)
        if isinstance(a, BaseSequence) and plain is operator.mul and b.is_constant():
            # `lst *= 2` repeats the list in place (seen through every alias)
            return a.call_method(self, "__imul__" if fn is operator.imul and isinstance(a, ListVariable)
                                 else "__mul__", [b], {})
        if isinstance(b, BaseSequence) and plain is operator.mul and a.is_constant():
            return b.call_method(self, "__mul__", [a], {})
        if plain is operator.or_ and dict in (_dict_base(a), _dict_base(b)):
            # a plain dict subclass's instance: dict's own `|` (a plain dict) and `|=` (in place)
            da = _dict_items_of(a, ("__or__", "__ior__", "__ror__")) or a
            db = _dict_items_of(b, ("__or__", "__ior__", "__ror__")) or b
            if da is not a or db is not b:
                result = self.binary_op(fn, da, db)
                return a if result is da else result
        if isinstance(a, DictVariable) and plain is operator.or_ and not isinstance(b, DictVariable) \
                and (b.is_constant() or isinstance(b, (BaseSequence, SetVariable))) and a.dict_cls in _UNION_DICTS:
            if fn is operator.ior:  # `d |= pairs` takes what update() takes
                a.call_method(self, "update", [b], {})
                return a
            raise PythonException(TypeError(f"unsupported operand type(s) for |: '{a.python_type().__name__}' "
                                            f"and '{b.python_type().__name__}'"))
        if isinstance(a, DictVariable) and plain is operator.or_ and isinstance(b, DictVariable):
            union_cls = _dict_union_class(a.dict_cls, b.dict_cls)
            if union_cls is None:  # e.g. Counter's `|` keeps the larger count, not the right operand's
                raise unsupported("EB0038", f"operator | on {a.dict_cls.__name__} and {b.dict_cls.__name__}")
            a._observe_order(self)
            b._observe_order(self)
            if fn is operator.or_:
                d = DictVariable(a.items, a.keys, dict_cls=union_cls)
                d.default_factory = (a if union_cls is a.dict_cls else b).default_factory
            else:
                d = a
                d._mutable("__ior__", self)  # (an outside dict: replayed after the graph)
            for k, v in b.items.items():
                d.set_item(b.keys[k], v)
            return d
        if isinstance(a, SetVariable) and plain in _SET_DUNDERS:
            # `s |= t` mutates s (seen through every alias); `s | t` makes a new set
            result = a.call_method(self, _SET_DUNDERS[plain] if fn is plain else
                                   _SET_DUNDERS[plain].replace("__", "__i", 1), [b], {})
            if result.is_constant() and result.as_constant() is NotImplemented:  # b is no set
                raise PythonException(TypeError(
                    f"unsupported operand type(s) for {_BINARY_SYMBOLS.get(plain, plain.__name__)}"
                    f"{'=' if fn is not plain else ''}: '{a.python_type().__name__}' and "
                    f"'{b.python_type().__name__}'"))
            return result
        from ember.capture.variables.user_operators import user_binary_op
        result = user_binary_op(self, fn, a, b)  # `__add__`/`__radd__`/`__iadd__` of user classes
        if result is not None:
            return result
        raise unsupported("EB0038", f"operator {getattr(fn, '__name__', fn)} on {a.describe()} and {b.describe()}")

    def BINARY_OP(self, inst):
        b = self.pop()
        a = self.pop()
        self.push(self.binary_op(_BINARY_OPS[_NB_OPS[inst.arg]], a, b))

    def BINARY_SUBSCR(self, inst):
        index = self.pop()
        obj = self.pop()
        if isinstance(obj, (TensorVariable, ListVariable, TupleVariable)) or (
                isinstance(obj, ConstantVariable) and obj.python_type() in (str, bytes, tuple, range)):
            # (python_type, not the value: reading a lazily guarded constant's value guards it)
            from ember.capture.variables.user_operators import user_number
            as_int = user_number(self, None, index)  # `seq[obj]`: the object's __index__
            index = index if as_int is None else as_int
        if isinstance(obj, TensorVariable):
            if isinstance(index, SymNodeVariable) and isinstance(index.sym, torch.SymInt) \
                    and has_symbols(index.sym) and obj.fake.dim() > 0 \
                    and obj.python_type() in (torch.Tensor, torch.nn.Parameter):
                # `x[n]` with a symbolic int: Tensor.__getitem__ would read n's value (`__index__`,
                # a guard per value); torch.select keeps it symbolic (a guard on its sign and range)
                self.push(self.output.call_function(torch.select, [obj, ConstantVariable(0), index], {}))
                return
            self.push(self.output.call_function(operator.getitem, [obj, index], {}))
        elif not isinstance(obj, (ListVariable, DictVariable, SizeVariable)) and not getattr(obj, "lazy", False) \
                and obj.is_constant() and index.is_constant() and not holds_symbols(obj):
            try:
                self.push(wrap_constant(obj.as_constant()[index.as_constant()]))
            except Exception as e:
                raise PythonException(e) from None  # eager raises this very exception
        elif _type_subscript(obj, index):
            # `Callable[[PyTree], bool]`, `list[int]`, `Optional[T]` (annotations of a nested def):
            # a typing object made from constants, as eager makes it
            form = _typing_form(obj)
            if form is not None and callable(getattr(obj, "identity_guard", None)):
                obj.identity_guard()  # (which special form: all are of one type)
            try:
                self.push(wrap_constant((obj.as_constant() if form is None else form)[_annotation_value(index)]))
            except Exception as e:
                raise PythonException(e) from None
        else:
            self.push(obj.call_method(self, "__getitem__", [index], {}))

    def STORE_SUBSCR(self, inst):
        index = self.pop()
        obj = self.pop()
        value = self.pop()
        if isinstance(obj, TensorVariable):
            self.output.call_function(operator.setitem, [obj, index, value], {})
        else:
            obj.call_method(self, "__setitem__", [index, value], {})

    def DELETE_SUBSCR(self, inst):
        index = self.pop()
        obj = self.pop()
        obj.call_method(self, "__delitem__", [index], {})

    def COMPARE_OP(self, inst):
        b, a = self.pop(), self.pop()
        self.push(self.compare_op(_COMPARE_OPS[inst.argval], a, b))

    def compare_op(self, fn, a: VariableTracker, b: VariableTracker) -> VariableTracker:
        """``a < b`` and the like (``fn``: operator.lt, ...), also as ``operator.lt(a, b)``."""
        a, b = proxy_operands(fn, a, b)  # `mp == d`: the proxy's dict
        if isinstance(a, NumpyNdarrayVariable) or isinstance(b, NumpyNdarrayVariable):
            return numpy_binary(self, fn, a, b)
        if isinstance(a, TensorVariable) or isinstance(b, TensorVariable):
            return self.output.call_function(fn, [a, b], {})
        if (symbolic := _first_not_none(symbolic_operation(self, fn, [a, b]),  # `x.size(0) > 3`
                                          lambda: symbolic_sequence_operation(self, fn, a, b))) is not None:
            return symbolic
        if (viewed := view_set_operation(fn, a, b)) is not None:
            return viewed
        if fn in (operator.eq, operator.ne) and (unpinned_number(a) and _is_none(b) or unpinned_number(b) and _is_none(a)):
            return ConstantVariable(fn is operator.ne)  # `n == None`: by the number's type, not its value
        if a.is_constant() and b.is_constant():
            try:
                return ConstantVariable(fn(a.as_constant(), b.as_constant()))
            except Exception as e:
                raise PythonException(e) from None  # eager raises this very exception
        if isinstance(a, SetVariable) and isinstance(b, SetVariable):
            return a.call_method(self, f"__{fn.__name__}__", [b], {})
        if _plain_sequence(a) and _plain_sequence(b):
            # lexicographic, identity first per item (heapq's `(priority, tensor)` entries): decided
            # without data unless two different non-constant items meet
            from ember.capture.variables.ordering import comparable, ordered
            memo: dict = {}
            ca, cb = comparable(a, memo, self), comparable(b, memo, self)
            return ConstantVariable(ordered(lambda: fn(ca, cb), "comparing sequences"))
        if fn in (operator.eq, operator.ne) and isinstance(da := _dict_items_of(a, ("__eq__", "__ne__")) or a,
                                                              DictVariable) \
                and isinstance(db := _dict_items_of(b, ("__eq__", "__ne__")) or b, DictVariable):
            return ConstantVariable(dict_equal(da, db) == (fn is operator.eq))
        if (user := _user_compare(self, fn, a, b)) is not None:  # a class's Python __eq__/__lt__/...
            return user
        if fn in (operator.eq, operator.ne):
            same = self.compare_identity(a, b, False).as_constant()
            if not same and _comparable_by_identity(a) and _comparable_by_identity(b):
                return ConstantVariable(fn is operator.ne)
            if same:
                return ConstantVariable(fn is operator.eq)
        raise unsupported("EB0038", f"comparing {a.describe()} with {b.describe()}")

    def IS_OP(self, inst):
        b = self.pop()
        a = self.pop()
        use_tensors(a, b)  # (`x is None` of a tensor input: a use, as torch.compile counts it)
        self.push(self.compare_identity(a, b, bool(inst.arg)))

    def CONTAINS_OP(self, inst):
        container = self.pop()
        item = self.pop()
        if isinstance(container, TensorVariable):
            raise unsupported("EB0016", "`in` on a tensor reads its data")
        if type(container) is ConstantVariable and (r := symbolic_contains(self, item, container.value, inst.arg)):
            return self.push(r)  # `x.size(0) in (0, 1)`, `n in range(8)`: a symbolic bool, or guards per comparison
        if isinstance(container, DictVariable) and container.dict_cls is dict:  # (keys only: a value may be a symbol)
            result = container.call_method(self, "__contains__", [item], {}).as_constant()
        elif container.is_constant() and item.is_constant() and not isinstance(container, (ListVariable,)) \
                and not dynamic_number(item) \
                and not any(dynamic_number(i) for i in getattr(container, "items", ()) or ()):
            # (a dynamic size inside: compared item by item below, a guard per comparison)
            result = item.as_constant() in container.as_constant()
        elif _iterated_for_contains(container):
            # a class without __contains__: Python iterates it (identity first, then ==)
            from ember.capture.polyfills.stdlib import contains_by_iteration
            from ember.capture.variables.functions import UserFunctionVariable
            result = UserFunctionVariable(contains_by_iteration).call(self, [container, item], {}).truth(self)
        else:
            result = container.call_method(self, "__contains__", [item], {}).as_constant()
        self.push(ConstantVariable(result != bool(inst.arg)))

    def UNARY_NEGATIVE(self, inst):
        self.push(self.unary_op(operator.neg, self.pop()))

    def UNARY_POSITIVE(self, inst):
        self.push(self.unary_op(operator.pos, self.pop()))

    def UNARY_INVERT(self, inst):
        self.push(self.unary_op(operator.invert, self.pop()))

    def unary_op(self, fn, v: VariableTracker) -> VariableTracker:
        """``-v``, ``+v``, ``~v`` (``fn``: operator.neg, pos or invert), also as ``operator.neg(v)``."""
        if isinstance(v, RandomValueVariable) and (derived := derived_value(self, fn, [v])) is not None:
            return derived  # `-random.uniform(0, 1)`
        if isinstance(v, NumpyNdarrayVariable):
            return numpy_unary(self, fn, v)
        if isinstance(v, TensorVariable):
            return self.output.call_function(fn, [v], {})
        if (symbolic := symbolic_operation(self, fn, [v])) is not None:
            return symbolic
        if v.is_constant():
            try:
                result = fn(v.as_constant())
            except Exception as e:  # (`-"a"`) eager raises this very exception
                raise PythonException(e) from None
            return ConstantVariable(result)
        from ember.capture.variables.user_operators import user_unary_op
        result = user_unary_op(self, fn, v)  # `__neg__` of a user class
        if result is None:
            raise unsupported("EB0038", f"{fn.__name__} of {v.describe()}")
        return result

    def UNARY_NOT(self, inst):
        self.push(ConstantVariable(not self.pop().truth(self)))

    # -- jumps ----------------------------------------------------------------------------
    def JUMP_FORWARD(self, inst):
        self.jump_to(inst.argval)

    JUMP_BACKWARD = JUMP_FORWARD
    JUMP_BACKWARD_NO_INTERRUPT = JUMP_FORWARD
    JUMP = JUMP_FORWARD

    def _pop_jump(self, inst, when: bool):
        value = self.pop()
        if isinstance(value, TensorVariable):  # `if not valid.all(): raise ...`: assumed, tested after
            jump = assume_branch(self, inst, value, when)  # the graph (capture/assumptions.py)
            if jump is not None:
                if jump:
                    self.jump_to(inst.argval)
                return
        if value.truth(self) == when:
            self.jump_to(inst.argval)

    # (conditional jumps of every direction and version arrive as POP_JUMP_IF_*: bytecode.normalize)
    def POP_JUMP_IF_TRUE(self, inst):
        self._pop_jump(inst, True)

    def POP_JUMP_IF_FALSE(self, inst):
        self._pop_jump(inst, False)

    def _pop_jump_none(self, inst, when_none: bool):
        v = use_tensors(self.pop())[0]  # (as `x is None`: IS_OP)
        is_none = _is_none(v)
        if is_none == when_none:
            self.jump_to(inst.argval)

    def POP_JUMP_IF_NONE(self, inst):
        self._pop_jump_none(inst, True)

    def POP_JUMP_IF_NOT_NONE(self, inst):
        self._pop_jump_none(inst, False)

    def JUMP_IF_FALSE_OR_POP(self, inst):
        if not self.stack[-1].truth(self):
            self.jump_to(inst.argval)
        else:
            self.pop()

    def JUMP_IF_TRUE_OR_POP(self, inst):
        if self.stack[-1].truth(self):
            self.jump_to(inst.argval)
        else:
            self.pop()

    # -- iteration ------------------------------------------------------------------------------
    def GET_ITER(self, inst):
        self.push(self.pop().iter(self))

    def FOR_ITER(self, inst):
        it = self.stack[-1]
        if not isinstance(it, IteratorBase):
            raise unsupported("EB0034", f"iterating {it.describe()}")
        item = it.next(self)
        if item is None:  # (argval: where the loop goes on, past 3.12's END_FOR: bytecode.normalize)
            self.pop()
            self.jump_to(inst.argval)
        else:
            self.push(item)

    # -- raising ----------------------------------------------------------------------------------
    def LOAD_ASSERTION_ERROR(self, inst):
        from ember.capture.builder import wrap
        self.push(wrap(self, AssertionError, None))  # the builtin, as a global read of it would give

    # -- class statements -------------------------------------------------------------------------
    def LOAD_BUILD_CLASS(self, inst):
        # `class C: ...` in the frame makes a new class on every call, which the trace cannot bake
        # in: the call of __build_class__ that follows is a graph break, as in torch.compile, and
        # the rest of the frame resumes compiled (guarding the new class by identity, so each
        # call recompiles up to the recompile limit, as torch.compile does). Inside a `try` block,
        # where torch.compile skips the frame, the rest runs eagerly instead (`eager_rest`, see
        # graph_break.build_residual): a compiled rest would only recompile every call.
        import builtins
        from ember.capture.builder import OpaqueCallableVariable
        build = OpaqueCallableVariable(builtins.__build_class__, None, "defining a class in the compiled frame")
        build.class_statement = True
        self.push(build)


    # -- structural pattern matching (match/case) ------------------------------------------------
    def MATCH_SEQUENCE(self, inst):
        import collections.abc as cabc
        t = self.stack[-1].python_type()
        is_seq = issubclass(t, cabc.Sequence) and not issubclass(t, (str, bytes, bytearray))
        self.push(ConstantVariable(is_seq))

    def MATCH_MAPPING(self, inst):
        import collections.abc as cabc
        self.push(ConstantVariable(issubclass(self.stack[-1].python_type(), cabc.Mapping)))

    def MATCH_KEYS(self, inst):
        keys = self.stack[-1].as_constant()
        subject = self.stack[-2]
        if not isinstance(subject, DictVariable):
            raise unsupported("EB0038", f"match on mapping {subject.describe()}")
        if all(k in subject.items for k in keys):
            self.push(TupleVariable([subject.items[k] for k in keys]))
        else:
            self.push(ConstantVariable(None))

    def MATCH_CLASS(self, inst):
        # stack: subject, class, keyword attribute names -> the attributes (a tuple), or None
        from ember.capture.variables.builtins import BuiltinVariable
        from ember.exc import PythonException
        names = self.pop().as_constant()
        cls_vt = self.pop()
        subject = self.pop()
        cls = cls_vt.as_constant() if cls_vt.is_constant() else None
        if not isinstance(cls, type):
            raise PythonException(TypeError("called match pattern must be a class"))
        if not BuiltinVariable(isinstance).call(self, [subject, cls_vt], {}).as_constant():
            self.push(ConstantVariable(None))
            return
        attrs = []
        positional = ()
        if inst.arg:
            match_args = getattr(cls, "__match_args__", None)
            if match_args is None:
                if inst.arg == 1 and cls in _MATCH_SELF:
                    attrs.append(subject)
                else:
                    raise PythonException(TypeError(f"{cls.__name__}() accepts 0 positional sub-patterns "
                                                    f"({inst.arg} given)"))
            elif not isinstance(match_args, tuple) or inst.arg > len(match_args):
                raise PythonException(TypeError(f"{cls.__name__}() accepts {len(match_args)} positional "
                                                f"sub-patterns ({inst.arg} given)"))
            else:
                positional = match_args[:inst.arg]
        for name in (*positional, *names):
            try:
                attrs.append(self.getattr(subject, name))
            except PythonException as e:
                if not isinstance(getattr(e, "exc", None), AttributeError):
                    raise
                self.push(ConstantVariable(None))
                return
        self.push(TupleVariable(attrs))

    def GET_LEN(self, inst):
        self.push(self.stack[-1].call_method(self, "__len__", [], {}))


_MATCH_SELF = (bool, bytearray, bytes, dict, float, frozenset, int, list, set, str, tuple)


def _iterated_for_contains(vt) -> bool:
    """A user object whose class has no ``__contains__`` but iterates (``__iter__`` or ``__getitem__``)."""
    from ember.capture.variables.new_object import NewObjectVariable
    from ember.capture.variables.objects import UserObjectVariable
    if not isinstance(vt, (NewObjectVariable, UserObjectVariable)) or getattr(vt, "items", None) is not None:
        return False
    cls = vt.python_type()
    has = [any(n in k.__dict__ for k in cls.__mro__[:-1]) for n in ("__contains__", "__iter__", "__getitem__")]
    return not has[0] and (has[1] or has[2])


def _plain_sequence(vt) -> bool:
    """A list or tuple (or namedtuple/structseq: they compare as tuples) tracker."""
    return (type(vt) is TupleVariable) or (type(vt) is ListVariable and vt.list_cls is list)


def _dict_base(vt):
    """``dict`` for a dict tracker or a dict subclass's instance made in the frame, else None."""
    if isinstance(vt, DictVariable):
        return dict
    return dict if getattr(vt, "items", None) is not None and getattr(vt, "dict_base", None) is dict else None


def _comparable_by_identity(vt) -> bool:
    """Objects whose == is identity (modules, functions, classes): equality folds to `is`."""
    from ember.capture.variables.builtins import BuiltinVariable
    from ember.capture.variables.functions import NestedFunctionVariable, UserFunctionVariable
    from ember.capture.variables.objects import ClassVariable, NNModuleVariable, PythonModuleVariable
    from ember.capture.variables.torch_fn import TorchFunctionVariable
    if isinstance(vt, (NNModuleVariable, PythonModuleVariable, UserFunctionVariable, NestedFunctionVariable,
                       ClassVariable, BuiltinVariable, TorchFunctionVariable)):
        return True
    # an object whose class keeps object's == (and != ): identity, exact for its tracker
    from ember.capture.variables.new_object import NewObjectVariable
    from ember.capture.variables.objects import UserObjectVariable
    if isinstance(vt, (NewObjectVariable, UserObjectVariable)):
        t = vt.python_type()
        return t.__eq__ is object.__eq__ and t.__ne__ is object.__ne__ and getattr(vt, "items", None) is None
    # a builtin scalar constant: its == with such an object is NotImplemented both ways, so identity
    return vt.is_constant() and type(vt.as_constant()) in (int, float, complex, str, bytes, bool, type(None))


# Arithmetic that cannot raise on ints and floats: an unspecialized scalar argument stays one
# through it (see LazyGuardedConstant); anything else (division, powers) reads the value.
_NON_RAISING = {operator.add, operator.sub, operator.mul, operator.iadd, operator.isub, operator.imul}


def _lazy_arithmetic(fn, a, b):
    if fn not in _NON_RAISING:
        return None
    types_ = {v.python_type() if v.is_constant() else None for v in (a, b)}
    if types_ == {str} and fn in (operator.add, operator.iadd):
        # `"step " + str(step)`: a string built from a scalar argument, rebuilt at run time
        return derived_lazy(operator.add, [a, b], symbols=True)
    if not types_ <= {int, float}:
        return None
    return derived_lazy(_INPLACE_TO_PLAIN.get(fn, fn), [a, b])


def _constant_tuple_as_sequence(v: VariableTracker) -> VariableTracker:
    """A constant plain tuple as a ``TupleVariable`` of its items (for concatenation with tracked
    sequences); anything else unchanged."""
    if isinstance(v, ConstantVariable) and type(v.value) is tuple:
        return TupleVariable([wrap_constant(x) for x in v.value])
    return v


def _type_subscript(obj, index) -> bool:
    """``obj[index]`` makes a typing object: ``obj`` a class whose ``__class_getitem__`` is C code
    (``list``, ``collections.abc.Callable``) or a typing special form / alias, and ``index`` made of
    constants, classes and lists of them."""
    form = _typing_form(obj)
    if form is None and type(obj).__name__ not in ("ConstantVariable", "ClassVariable"):
        return False  # (never as_constant() of anything else: a lazily guarded value would be guarded)
    value = obj.value if form is None else form
    if isinstance(value, type):
        hook = value.__dict__.get("__class_getitem__") if "__class_getitem__" in value.__dict__ else \
            getattr(value, "__class_getitem__", None)
        target = getattr(hook, "__func__", hook)
        if not (isinstance(target, types.BuiltinFunctionType) or (
                isinstance(target, type) and target.__module__ in ("types", "typing", "collections.abc"))):
            return False  # (a Python __class_getitem__ runs the program's code: not folded here)
    elif type(value).__module__ not in ("typing", "types", "typing_extensions"):
        return False
    return _annotation_value(index) is not _NOT_CONSTANT


_NOT_CONSTANT = object()


def _typing_form(vt):
    """The typing object (``typing.Optional``, ``typing.List``) an outside-object tracker holds."""
    from ember.capture.variables.objects import UserObjectVariable
    if type(vt) is UserObjectVariable and type(vt.obj).__module__ in ("typing", "typing_extensions"):
        return vt.obj
    return None


def _annotation_value(vt):
    if isinstance(vt, (ListVariable, TupleVariable)) and type(vt) in (ListVariable, TupleVariable):
        items = [_annotation_value(i) for i in vt.items]
        if any(i is _NOT_CONSTANT for i in items):
            return _NOT_CONSTANT
        return items if isinstance(vt, ListVariable) else tuple(items)
    if isinstance(vt, ConstantVariable) and not holds_symbols(vt) and type(vt).__name__ in (
            "ConstantVariable", "ClassVariable"):
        return vt.as_constant()
    return _NOT_CONSTANT
