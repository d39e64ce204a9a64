"""Sizes that are symbols: ``x.size(0)`` of an input whose first dimension is dynamic.

A `SymNodeVariable` is an int (float, bool) the trace knows only as an expression of
the ShapeEnv's symbols, with the fx node that computes it at run time. Arithmetic and
comparisons on it, and passing it to torch operations (``x.view(b, -1)``), stay
symbolic: they become graph nodes. Everything else that needs its value — a branch,
``range()``, a list index, a dict key, a constant in the residual code — reads
``.value``, which asks the ShapeEnv for the concrete number: the ShapeEnv records
that assumption (a guard such as ``4 <= s0``, or ``s0 == 8`` when the value itself
is needed), so the graph is reused only where the assumption holds. Any code path of
the interpreter that knows nothing about symbols therefore stays correct: it sees a
constant, guarded.
"""
from __future__ import annotations

import functools
import math
import operator

import torch

from ember.capture.variables.base import ConstantVariable, VariableTracker
from ember.capture.variables.containers import ListVariable, TupleVariable
from ember.fake.symbolic import has_symbols, plain


class SymNodeVariable(ConstantVariable):
    __slots__ = ("node", "sym")

    def __init__(self, node, sym) -> None:
        self.node = node
        self.sym = sym
        self.source = None

    @property
    def value(self):
        return plain(self.sym)  # (the ShapeEnv records the value as an assumption)

    def python_type(self):
        return bool if isinstance(self.sym, torch.SymBool) else float if isinstance(self.sym, torch.SymFloat) \
            else int

    def describe(self):
        return f"{type(self.sym).__name__}({self.sym.node.expr})"

    def getattr(self, tx, name):
        if name in _SAME_NUMBER_METHODS.get(self.python_type(), ()) and dynamic_number(self):
            return _SameNumberMethod(self, name)  # n.__index__(), v.__float__(): n, v themselves
        if name in _SAME_NUMBER_ATTRIBUTES.get(self.python_type(), ()) and dynamic_number(self):
            return self  # n.real, n.numerator: n itself
        if name in _FIXED_NUMBER_ATTRIBUTES.get(self.python_type(), {}) and dynamic_number(self):
            return ConstantVariable(_FIXED_NUMBER_ATTRIBUTES[self.python_type()][name])  # n.imag: 0
        if name in ("__str__", "__repr__", "__format__") and dynamic_number(self):
            from ember.capture.variables.base import unsupported
            raise unsupported("EB0036", f"{name} of a dynamic size needs its exact value")  # (as str(n))
        return super().getattr(tx, name)

    def truth(self, tx):
        # (a float's truth is `!= 0`: a guard on that, not on its value)
        return bool(self.sym != 0) if isinstance(self.sym, torch.SymFloat) else bool(self.sym)


# methods of an int / float that return the number itself (for an int, a float's own rounding)
_SAME_NUMBER_METHODS = {int: frozenset({"__index__", "__int__", "__trunc__", "__floor__", "__ceil__", "__round__",
                                        "__pos__", "conjugate"}),
                        float: frozenset({"__float__", "__pos__", "conjugate"})}


# attributes of an int / float that are the number itself, or a fixed value whatever the number
_SAME_NUMBER_ATTRIBUTES = {int: frozenset({"real", "numerator"}), float: frozenset({"real"})}
_FIXED_NUMBER_ATTRIBUTES = {int: {"imag": 0, "denominator": 1}, float: {"imag": 0.0}}


class _SameNumberMethod(VariableTracker):
    """``n.__index__`` (and the like) of a symbolic number: calling it with no argument is ``n``
    (it read, and so fixed, the value)."""

    def __init__(self, number: "SymNodeVariable", name: str):
        self.number, self.name = number, name

    def describe(self):
        return f"{self.number.describe()}.{self.name}"

    def call(self, tx, args, kwargs):
        if args or kwargs:  # (n.__round__(ndigits): on the value, as before)
            return ConstantVariable.getattr(self.number, tx, self.name).call(tx, args, kwargs)
        return self.number


class SymSliceVariable(ConstantVariable):
    """A slice with a symbolic bound (``y[:x.size(0)]``): symbolic in a tensor index, its concrete
    value (guarded) anywhere else."""
    __slots__ = ("parts",)

    def __init__(self, parts: list) -> None:
        self.parts = parts
        self.source = None

    @property
    def value(self):
        return slice(*[p.as_constant() for p in self.parts])

    def python_type(self):
        return slice

    def describe(self):
        return f"slice({', '.join(p.describe() for p in self.parts)})"

    def truth(self, tx):
        return True


def is_number(v: VariableTracker) -> bool:
    """A symbolic size, or a plain int/float/bool constant (what arithmetic with a size takes)."""
    if isinstance(v, SymNodeVariable):
        return True
    # (a LazyGuardedConstant too: used with a size, its value is guarded)
    return isinstance(v, ConstantVariable) and not isinstance(v, SymSliceVariable) \
        and type(v.value) in (int, float, bool)


_NUMERIC_OPS = frozenset({operator.add, operator.sub, operator.mul, operator.truediv, operator.floordiv,
                          operator.mod, operator.pow, operator.lt, operator.le, operator.gt, operator.ge,
                          operator.eq, operator.ne, operator.neg, operator.pos, operator.abs})


# bitwise operations of ints (SymInt has them; torch.compile keeps ``n << 1``, ``n & 1`` symbolic)
_INT_OPS = frozenset({operator.lshift, operator.rshift, operator.and_, operator.or_, operator.xor})


def symbolic_operation(tx, fn, args: list) -> VariableTracker | None:
    """``fn(*args)`` as a graph node when some argument is a symbolic size and the others are
    numbers (None: not such an operation; the caller handles it as a constant)."""
    if fn is operator.invert and len(args) == 1 and isinstance(args[0], SymNodeVariable) \
            and isinstance(args[0].sym, torch.SymInt) and has_symbols(args[0].sym):
        # ~n is -n - 1 (SymInt has no __invert__)
        neg = tx.output.call_function(operator.neg, [args[0]], {})
        return tx.output.call_function(operator.sub, [neg, ConstantVariable(1)], {})
    if fn in _INT_OPS:
        if not all(is_number(a) and a.python_type() is int for a in args):
            return None
    elif fn not in _NUMERIC_OPS:
        return None
    if not any(isinstance(a, SymNodeVariable) and has_symbols(a.sym) for a in args) \
            or not all(is_number(a) for a in args):
        return None  # (a symbol specialised meanwhile is a constant)
    return tx.output.call_function(fn, list(args), {})


def symbolic_conversion(tx, fn, arg: SymNodeVariable) -> VariableTracker | None:
    """``int(s)``, ``float(s)``, ``abs(s)``, ``operator.index(s)``, ``math.sqrt(s)`` etc. of a
    symbolic int or float, kept symbolic (None: anything else, which reads the value)."""
    sym = arg.sym
    if not isinstance(sym, (torch.SymInt, torch.SymFloat)) or not has_symbols(sym):
        return None
    if fn in (math.ceil, math.floor, math.trunc, round):  # (SymFloat.__ceil__ etc.: a SymInt)
        return arg if isinstance(sym, torch.SymInt) else tx.output.call_function(fn, [arg], {})
    sym_math = _SYM_MATH.get(fn)
    if sym_math is not None:
        return tx.output.call_function(sym_math, [arg], {})
    if fn in (math.radians, math.degrees):  # (CPython: x * (pi / 180.0), x * (180.0 / pi))
        return tx.binary_op(operator.mul, tx.output.call_function(torch.sym_float, [arg], {}),
                            ConstantVariable(math.pi / 180.0 if fn is math.radians else 180.0 / math.pi))
    if fn is float:
        return tx.output.call_function(torch.sym_float, [arg], {})
    if fn is abs:
        return tx.output.call_function(operator.abs, [arg], {})
    if fn is int and isinstance(sym, torch.SymFloat):
        return tx.output.call_function(torch.sym_int, [arg], {})  # (truncation, unguarded)
    if not isinstance(sym, torch.SymInt):
        return None
    if fn in (int, operator.index):
        return arg
    return None


# math functions the shape language computes symbolically (others read the value)
_SYM_MATH = {getattr(math, n): getattr(torch, "_sym_" + n) for n in (
    "sqrt", "cos", "cosh", "sin", "sinh", "tan", "tanh", "asin", "acos", "atan", "log2")}


def holds_symbols(v) -> bool:
    """A tuple or list with a symbolic size among its items, or in a tuple or list among them
    (folding it as a constant would fix them)."""
    return isinstance(v, (TupleVariable, ListVariable)) and any(
        isinstance(i, SymNodeVariable) and has_symbols(i.sym) or holds_symbols(i) for i in v.items)


def symbolic_prod(tx, iter_items, args, kwargs):
    """``math.prod(iterable, start=1)``: ``start * item * item ...`` as Python multiplies (a symbolic
    size stays a symbol; folding ``x.shape`` as a constant would fix every size). ``iter_items``:
    the builtins' iteration of a tracked iterable. NotImplemented: a call eager refuses."""
    if len(args) != 1 or set(kwargs) - {"start"}:
        return NotImplemented
    acc = kwargs.get("start", ConstantVariable(1))
    for item in iter_items(tx, args[0]):
        acc = tx.binary_op(operator.mul, acc, item)
    return acc


def _tuple_items(v, lists: bool = False) -> list | None:
    """The items of a tuple (a tracked one, or a constant tuple) — or, with ``lists``, of a list —
    None for anything else."""
    if isinstance(v, TupleVariable) or lists and isinstance(v, ListVariable):
        return list(v.items)
    if type(v) is ConstantVariable and (type(v.value) in (tuple, torch.Size) or lists and type(v.value) is list):
        return [ConstantVariable(i) for i in v.value]
    return None


def _is_list(v) -> bool:
    return isinstance(v, ListVariable) or type(v) is ConstantVariable and type(v.value) is list


def symbolic_sequence_operation(tx, fn, a, b) -> VariableTracker | None:
    """``shape[1:] + (h,)`` and ``x.shape == (2, 9)`` on tuples holding symbolic sizes, item by item
    (folding them as constants would read, and so fix, every size). None: not such an operation."""
    if not (holds_symbols(a) or holds_symbols(b)):
        return None
    if fn in (operator.eq, operator.ne) and (_is_list(a) or _is_list(b)):
        # `list(q.size()) == [t, b, e]`: lists compare item by item too; a list never equals a tuple
        ia, ib = _tuple_items(a, lists=True), _tuple_items(b, lists=True)
        if ia is None or ib is None:
            return None
        if _is_list(a) != _is_list(b):
            return ConstantVariable(fn is operator.ne)
    else:
        ia, ib = _tuple_items(a), _tuple_items(b)
    if ia is None or ib is None:
        return None
    if fn in (operator.add, operator.iadd):
        if isinstance(a, SizeVariable) or isinstance(b, SizeVariable) or \
                torch.Size in (_tuple_type(a), _tuple_type(b)):
            return SizeVariable(ia + ib)  # (torch.Size + tuple is a Size, either way round)
        return TupleVariable(ia + ib)
    if fn in (operator.eq, operator.ne):
        same = len(ia) == len(ib)
        for x, y in zip(ia, ib) if same else ():
            item = symbolic_operation(tx, operator.eq, [x, y])
            if item is None:
                item = ConstantVariable(x.is_constant() and y.is_constant() and x.as_constant() == y.as_constant())
            if not item.truth(tx):  # (a guard on this one item)
                same = False
                break
        return ConstantVariable(same == (fn is operator.eq))
    return None


def _tuple_type(v):
    return type(v.value) if type(v) is ConstantVariable else getattr(v, "tuple_type", None)


class SizeVariable(TupleVariable):
    """``x.shape`` / ``x.size()`` with symbolic entries: a tuple of sizes (``torch.Size``)."""

    def __init__(self, items) -> None:
        super().__init__(items, tuple_type=torch.Size)

    def _new(self, items):
        return SizeVariable(items)  # x.shape[1:] is a torch.Size

    def as_constant(self):
        return torch.Size(tuple(i.as_constant() for i in self.items))  # (specialises the symbols)

    def getattr(self, tx, name):
        if name == "numel":  # (torch.Size's own method; the tuple ones as any tuple's)
            from ember.capture.variables.functions import BoundMethodVariable
            return BoundMethodVariable(self, name)
        return super().getattr(tx, name)

    def call_method(self, tx, name, args, kwargs):
        if name == "numel" and not args and not kwargs:
            result: VariableTracker = ConstantVariable(1)
            for item in self.items:
                result = tx.binary_op(operator.mul, result, item)
            return result
        if name in ("__getitem__", "__len__", "__iter__", "__contains__", "index", "count"):
            return super().call_method(tx, name, args, kwargs)
        # Anything else (``__eq__`` against a Size, ``__add__``, ...): on the concrete sizes.
        return ConstantVariable(torch.Size(item.as_constant() for item in self.items)).call_method(
            tx, name, args, kwargs)


def symbolic_tensor_literal(output, arg, kwargs) -> VariableTracker | None:
    """``torch.tensor([a, 2 * a])`` of a (nested) list or tuple holding symbolic numbers: one
    ``scalar_tensor`` per item, stacked and shaped like the literal, so the numbers stay symbolic
    (folding the list would read, and so fix, them). None: not such a literal."""
    from ember.capture.variables.containers import ListVariable
    if set(kwargs) - {"dtype", "device"}:
        return None
    flat: list = []

    def walk(v):
        if isinstance(v, (ListVariable, TupleVariable)):
            shapes = [walk(i) for i in v.items]
            if any(sh is None for sh in shapes) or len(set(shapes)) > 1:
                return None  # ragged: torch.tensor raises; let it
            return (len(shapes), *(shapes[0] if shapes else ()))
        if isinstance(v, SymNodeVariable) or (type(v) is ConstantVariable and type(v.value) in (int, float, bool)):
            flat.append(v)
            return ()
        return None

    shape = walk(arg)
    if shape is None or not shape or not any(isinstance(i, SymNodeVariable) and has_symbols(i.sym) for i in flat):
        return None
    kinds = {i.python_type() for i in flat}
    dtype_vt = kwargs.get("dtype")
    dtype = dtype_vt.as_constant() if dtype_vt is not None else (
        torch.get_default_dtype() if float in kinds else torch.int64 if int in kinds else torch.bool)
    extra = {"dtype": ConstantVariable(dtype)}
    if "device" in kwargs:
        extra["device"] = kwargs["device"]
    parts = [output.call_function(torch.scalar_tensor, [i], dict(extra)) for i in flat]
    stacked = output.call_function(torch.stack, [ListVariable(parts)], {})
    return output.call_method("reshape", [stacked, TupleVariable([ConstantVariable(d) for d in shape])], {})


def symbolic_new_tensor(output, args, kwargs) -> VariableTracker | None:
    """``x.new_tensor([n, 1])`` / ``x.new_tensor(n)`` holding symbolic numbers: as ``torch.tensor``
    (symbolic_tensor_literal), with ``x``'s dtype and device unless given (None: not such a call)."""
    from ember.capture.variables.tensor import TensorVariable
    if len(args) != 2 or not isinstance(args[0], TensorVariable) or args[0].cls is not torch.Tensor \
            or set(kwargs) - {"dtype", "device"}:
        return None
    fake = args[0].fake
    meta = {"dtype": ConstantVariable(fake.dtype), "device": ConstantVariable(fake.device), **kwargs}
    if isinstance(args[1], SymNodeVariable) and has_symbols(args[1].sym):
        return output.call_function(torch.scalar_tensor, [args[1]], meta)
    return symbolic_tensor_literal(output, args[1], meta)


def dynamic_number(v) -> bool:
    """A symbolic int/float whose value the ShapeEnv would have to pin to use it (a dynamic size)."""
    return isinstance(v, SymNodeVariable) and isinstance(v.sym, (torch.SymInt, torch.SymFloat)) \
        and has_symbols(v.sym)


def symbolic_equal(tx, a, b):
    """``a == b`` for a dynamic size and a number (or two sizes): a guard on that relation, not on
    the size's value (None: not such a pair)."""
    if not (dynamic_number(a) or dynamic_number(b)):
        return None
    if not all(dynamic_number(v) or type(v) is ConstantVariable and type(v.value) in (int, float, bool)
               for v in (a, b)):
        return None
    result = symbolic_operation(tx, operator.eq, [a, b])
    return None if result is None else bool(result.truth(tx))


def symbolic_contains(tx, item, values, negate=False) -> VariableTracker | None:
    """``n in values`` (``negate``: ``not in``) for a dynamic size ``n`` and a constant tuple/list/set
    of numbers (a symbolic bool, as ``n == 4`` is: guarded only where its value is needed) or a range
    (a guard per comparison made, ``0 <= n < 100``), never on the size's value (None: not such a pair)."""
    found = _contains(tx, item, values)
    if isinstance(found, VariableTracker):
        return tx.output.call_function(torch.sym_not, [found], {}) if negate else found
    return None if found is None else ConstantVariable(found != bool(negate))


def _contains(tx, item, values):
    if not dynamic_number(item):
        return None
    def op(fn, a, b):
        return symbolic_operation(tx, fn, [a, ConstantVariable(b)] if not isinstance(a, int) else [ConstantVariable(a), b])
    if type(values) in (tuple, list, set, frozenset) and all(type(v) in (int, float, bool) for v in values):
        found = []
        for v in values:
            eq = op(operator.eq, item, v)
            if not isinstance(eq, SymNodeVariable) or not has_symbols(eq.sym):
                if eq.truth(tx):
                    return True
                continue
            found.append(eq)
        if not found:
            return False
        return functools.reduce(lambda a, b: tx.output.call_function(operator.or_, [a, b], {}), found)
    if type(values) is range and item.python_type() is int:
        r = values
        lo, hi = (r.start, r.stop) if r.step > 0 else (r.stop, r.start)
        inside = op(operator.lt, lo, item).truth(tx) if r.step < 0 else op(operator.le, lo, item).truth(tx)
        inside = inside and (op(operator.le, item, hi).truth(tx) if r.step < 0 else op(operator.lt, item, hi).truth(tx))
        if inside and abs(r.step) != 1:
            inside = op(operator.eq, op(operator.mod, op(operator.sub, item, r.start), abs(r.step)), 0).truth(tx)
        return inside
    return None


# Builtins whose answer needs the exact value of a number (text, number theory). On a dynamic
# size torch.compile breaks the graph there (its value stays unguarded, the call runs after the
# graph); reading `.value` instead pinned the size, one recompile per size. (Not f-strings, `%s` of
# a tuple, math.log/exp/pow, hash, indexing: torch.compile specialises those too.)
VALUE_TEXT_BUILTINS = frozenset({str, repr, ascii, format, hex, oct, bin, math.gcd, math.lcm, math.factorial,
                                 math.isqrt, math.comb, math.perm, math.isclose, math.isfinite, math.isinf,
                                 math.isnan})
