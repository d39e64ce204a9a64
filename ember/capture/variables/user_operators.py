"""Operators and ``str``/``repr`` on user objects: their Python dunder methods, inlined.

``v + w`` on objects whose class defines ``__add__`` in Python runs what Python
runs: ``type(v).__add__(v, w)``; if that returns ``NotImplemented`` (or is
missing), ``type(w).__radd__(w, v)``; ``v += w`` tries ``__iadd__`` first. A
right operand that is a proper subclass of the left one's class and overrides
the reflected method goes first, as in Python. The other operand may be another
user object or a number (whose own method returns ``NotImplemented`` for an
object it does not know); a tensor or a container on the other side is left to
the caller (its own method would answer first).
"""
from __future__ import annotations

import operator
import sys
import types

from ember.capture.variables.base import ConstantVariable, VariableTracker, unsupported
from ember.exc import PythonException, Unsupported

_BINARY = {
    operator.add: "add", operator.sub: "sub", operator.mul: "mul", operator.truediv: "truediv",
    operator.floordiv: "floordiv", operator.mod: "mod", operator.pow: "pow", operator.matmul: "matmul",
    operator.and_: "and", operator.or_: "or", operator.xor: "xor", operator.lshift: "lshift",
    operator.rshift: "rshift",
}
_SYMBOLS = {
    "add": "+", "sub": "-", "mul": "*", "truediv": "/", "floordiv": "//", "mod": "%", "pow": "** or pow()",
    "matmul": "@", "and": "&", "or": "|", "xor": "^", "lshift": "<<", "rshift": ">>",
}
_UNARY = {operator.neg: "__neg__", operator.pos: "__pos__", operator.invert: "__invert__", operator.abs: "__abs__"}
_NUMBERS = (int, float, bool, complex)


def _user_class(vt: VariableTracker) -> type | None:
    from ember.capture.variables.new_object import NewObjectVariable
    from ember.capture.variables.objects import UserObjectVariable
    if isinstance(vt, NewObjectVariable):
        return vt.cls
    if type(vt) is UserObjectVariable:
        return type(vt.obj)
    return None


def _python_method(cls: type | None, name: str):
    """``name`` looked up on ``cls``'s MRO if it is a Python function (else None)."""
    if cls is None:
        return None
    for klass in cls.__mro__:
        if name in klass.__dict__:
            attr = klass.__dict__[name]
            return attr if isinstance(attr, types.FunctionType) else None
    return None


def _number(vt: VariableTracker) -> bool:
    return vt.is_constant() and type(vt.as_constant()) in _NUMBERS


def _sequence(vt) -> bool:
    """A str, bytes, list or tuple (what `* n` repeats)."""
    from ember.capture.variables.containers import BaseSequence
    if isinstance(vt, BaseSequence):
        return True
    return vt.is_constant() and type(vt.as_constant()) in (str, bytes, list, tuple)


def _try(tx, vt, name, other):
    result = vt.call_method(tx, name, [other], {})
    if result.is_constant() and result.as_constant() is NotImplemented:
        return None
    return result


def user_binary_op(tx, fn, a: VariableTracker, b: VariableTracker):
    """``fn(a, b)`` through user dunders, or None when neither operand is a user object with them."""
    from ember.capture.opcodes import _INPLACE_TO_PLAIN
    plain = _INPLACE_TO_PLAIN.get(fn, fn)
    op = _BINARY.get(plain)
    if op is None:
        return None
    ca, cb = _user_class(a), _user_class(b)
    if ca is None and cb is None:
        return None
    if (ca is None and not (_number(a) or _plain_operand(a))) or (cb is None and not (_number(b) or _plain_operand(b))):
        return None  # a tensor, say: not modelled here
    fwd, rev, inp = f"__{op}__", f"__r{op}__", f"__i{op}__"
    if fn is not plain and _python_method(ca, inp) is not None:
        result = _try(tx, a, inp, b)
        if result is not None:
            return result
    b_first = cb is not None and ca is not None and cb is not ca and issubclass(cb, ca) and \
        _python_method(cb, rev) is not None and _python_method(cb, rev) is not _python_method(ca, rev)
    if b_first:
        result = _try(tx, b, rev, a)
        if result is not None:
            return result
    if _python_method(ca, fwd) is not None:
        result = _try(tx, a, fwd, b)
        if result is not None:
            return result
    if not b_first and cb is not ca and _python_method(cb, rev) is not None:
        result = _try(tx, b, rev, a)
        if result is not None:
            return result
    if (ca is not None and _defines_builtin(ca, fwd)) or (cb is not None and _defines_builtin(cb, rev)):
        return None  # a C-level slot (a subclass of a builtin type): not modelled here
    if plain is operator.mul:  # `[0] * n` / `"ab" * n` with an object that has __index__: repeats
        for seq, other, cls in ((a, b, cb), (b, a, ca)):
            if cls is not None and _python_method(cls, "__index__") is not None and _sequence(seq):
                n = other.call_method(tx, "__index__", [], {})
                if n.is_constant() and type(n.as_constant()) is int:
                    from ember.capture.variables.base import ConstantVariable
                    args = (seq, ConstantVariable(n.as_constant()))
                    return tx.binary_op(fn, *(args if seq is a else args[::-1]))
    sym = _SYMBOLS[op] + ("=" if fn is not plain else "")
    raise PythonException(TypeError(f"unsupported operand type(s) for {sym}: '{a.python_type().__name__}' "
                                    f"and '{b.python_type().__name__}'"))


def _defines_builtin(cls: type, name: str) -> bool:
    """``cls`` has ``name`` from a builtin base (e.g. an int subclass's ``__add__``)."""
    return hasattr(cls, name) and _python_method(cls, name) is None


def user_unary_op(tx, fn, v: VariableTracker):
    """``-v``, ``+v``, ``~v``, ``abs(v)`` through the user dunder, or None."""
    name = _UNARY.get(fn)
    cls = _user_class(v)
    if name is None or _python_method(cls, name) is None:
        return None
    return v.call_method(tx, name, [], {})


def user_str(tx, kind: str, v: VariableTracker):
    """``str(v)`` / ``repr(v)`` of a user object with a Python ``__str__``/``__repr__`` (or of a plain
    tuple/list of such objects and constants), or None."""
    text = enum_text(tx, v, 2 if kind == "repr" else 1, "")
    if text is not None:
        return text
    cls = _user_class(v)
    if cls is None:
        return _sequence_repr(tx, v)
    name = "__repr__" if kind == "repr" else ("__str__" if _python_method(cls, "__str__") is not None
                                             or hasattr(cls, "__str__") and cls.__str__ is not object.__str__
                                             else "__repr__")
    meth = _python_method(cls, name)
    if meth is None:
        return None
    guarded = _guarded_repr(meth)
    if guarded is not None:
        # a __repr__ inside its recursion guard (thread id, a shared set): the function itself (a
        # self-referencing object recurses in the trace: a break)
        from ember.capture.variables.functions import UserFunctionVariable
        result = UserFunctionVariable(guarded).call(tx, [v], {})
    else:
        result = v.call_method(tx, name, [], {})
    if not (result.is_constant() and isinstance(result.as_constant(), str)):
        raise PythonException(TypeError(f"{name} returned non-string (type {result.python_type().__name__})"))
    return ConstantVariable(result.as_constant())


def enum_text(tx, v: VariableTracker, conversion: int, spec: str):
    """``f"{v!s:spec}"`` (``conversion`` 1; 2 ``!r``, 0 none) of an Enum member whose class (the
    program's, not enum's) defines ``__str__`` / ``__repr__`` / ``__format__`` in Python: inlined as
    eager runs it, on every call (not folded once at trace time), or None. Enum's own
    ``__format__`` formats ``str(self)`` once the class overrides ``__str__``."""
    import enum
    if type(v) is not ConstantVariable or not isinstance(v.value, enum.Enum) or conversion == 3:
        return None
    from ember.capture.variables.functions import UserFunctionVariable

    def own(name):
        for klass in type(v.value).__mro__:
            if name in vars(klass):
                attr = vars(klass)[name]
                return attr if klass.__module__ != "enum" and isinstance(attr, types.FunctionType) else None
        return None
    fmt = own("__format__") if conversion == 0 else None
    name = "__format__" if fmt is not None else "__repr__" if conversion == 2 else "__str__"
    meth = fmt or own(name)
    if meth is None:
        return None
    result = UserFunctionVariable(meth).call(tx, [v, *([ConstantVariable(spec)] if fmt else [])], {})
    if not (result.is_constant() and isinstance(result.as_constant(), str)):
        raise PythonException(TypeError(f"{name} returned non-string (type {result.python_type().__name__})"))
    try:
        return ConstantVariable(result.as_constant() if fmt else format(result.as_constant(), spec))
    except Exception as e:  # (a bad format spec) eager raises this very exception
        raise PythonException(e) from None


def user_number(tx, kind: type, v: VariableTracker):
    """``int(v)`` / ``float(v)`` / ``operator.index(v)`` (``kind`` None) of a user object whose class
    defines the conversion in Python (``__int__``, ``__float__``, ``__index__``), or None. The result's
    type is checked as CPython checks it (a strict subclass is accepted, as its value)."""
    cls = _user_class(v)
    if cls is None:
        return None
    order = {int: ("__int__", "__index__"), float: ("__float__", "__index__"), None: ("__index__",)}[kind]
    for name in order:
        if _python_method(cls, name) is not None:
            break
        if getattr(cls, name, None) is not None:
            return None  # defined another way (a builtin base): not modelled here
    else:
        return None
    from ember.capture.variables.symbolic import dynamic_number
    result = v.call_method(tx, name, [], {})
    want = float if name == "__float__" else int
    if dynamic_number(result) and result.python_type() is want and not (kind is float and want is int):
        return result  # (a dynamic size the method returned stays a symbol, not pinned to its value)
    value = result.as_constant() if result.is_constant() else None
    if not isinstance(value, want) or isinstance(value, bool) and want is float:
        got = result.python_type().__name__
        if name == "__float__":
            raise PythonException(TypeError(f"{cls.__name__}.__float__ returned non-float (type {got})"))
        raise PythonException(TypeError(f"{name} returned non-int (type {got})"))
    if kind is float and name == "__index__":
        return ConstantVariable(float(value))
    return ConstantVariable(want(value))


def user_hash(tx, v: VariableTracker):
    """``hash(v)`` of a user object whose class defines ``__hash__`` in Python (a frozen dataclass),
    or None. As CPython: the result must be an int; kept if it fits a Py_ssize_t (-1 becomes -2), else
    reduced like ``hash(int)``."""
    cls = _user_class(v)
    if cls is None or _python_method(cls, "__hash__") is None:
        return None
    result = v.call_method(tx, "__hash__", [], {})
    value = result.as_constant() if result.is_constant() else None
    if not isinstance(value, int):
        raise PythonException(TypeError("__hash__ method should return an integer"))
    if -sys.maxsize - 1 <= value <= sys.maxsize:  # kept as is when it fits a Py_ssize_t
        return ConstantVariable(-2 if value == -1 else value)
    return ConstantVariable(hash(value))


_COMPARE = {operator.eq: ("__eq__", "__eq__"), operator.ne: ("__ne__", "__ne__"), operator.lt: ("__lt__", "__gt__"),
            operator.le: ("__le__", "__ge__"), operator.gt: ("__gt__", "__lt__"), operator.ge: ("__ge__", "__le__")}


def _plain_operand(v: VariableTracker) -> bool:
    """A constant number/str/None or a builtin container tracker: its own comparison with an
    instance of a user class is NotImplemented, so the user class's method decides."""
    from ember.capture.variables.containers import BaseSequence, DictVariable, SetVariable
    if isinstance(v, (BaseSequence, DictVariable, SetVariable)):
        return type(v.python_type()) is type and v.python_type() in (list, tuple, dict, set, frozenset)
    return v.is_constant() and type(v.as_constant()) in (*_NUMBERS, str, bytes, type(None), tuple, frozenset)


def user_compare(tx, fn, a: VariableTracker, b: VariableTracker):
    """``a < b``, ``a == b``, ... through a user class's Python comparison methods, or None (the
    caller's identity rules apply) when neither side's class defines the one Python would call."""
    names = _COMPARE.get(fn)
    ca, cb = _user_class(a), _user_class(b)
    if names is None or (ca is None and cb is None):
        return None
    if (ca is None and not _plain_operand(a)) or (cb is None and not _plain_operand(b)):
        return None
    fwd, rev = names
    if fn is operator.ne and _python_method(ca, "__ne__") is None and _python_method(cb, "__ne__") is None:
        # object.__ne__ inverts __eq__ (unless that is NotImplemented)
        eq = user_compare(tx, operator.eq, a, b)
        if eq is None or not eq.is_constant():
            return None
        return ConstantVariable(not eq.as_constant())
    if _python_method(ca, fwd) is None and _python_method(cb, rev) is None:
        builtin = (ca is not None and _defines_builtin_compare(ca, fwd)) or \
            (cb is not None and _defines_builtin_compare(cb, rev))
        if fn in (operator.eq, operator.ne) or builtin or ca is None or cb is None:
            return None  # identity (the caller's rule), or a C-level comparison: not modelled here
        raise PythonException(TypeError(f"'{_SYMBOL_CMP[fn]}' not supported between instances of "
                                        f"'{a.python_type().__name__}' and '{b.python_type().__name__}'"))
    b_first = cb is not None and ca is not None and cb is not ca and issubclass(cb, ca) and \
        _python_method(cb, rev) is not None
    order = [(b, rev, a), (a, fwd, b)] if b_first else [(a, fwd, b), (b, rev, a)]
    for obj, name, other in order:
        cls = _user_class(obj)
        if _python_method(cls, name) is not None:
            result = _try(tx, obj, name, other)
            if result is not None:
                return result
        elif cls is not None and _defines_builtin_compare(cls, name):
            return None  # a C-level comparison (a builtin base): not modelled here
    if fn in (operator.eq, operator.ne):
        from ember.capture.variables.new_object import NewObjectVariable
        if isinstance(a, NewObjectVariable) or isinstance(b, NewObjectVariable):
            # both NotImplemented: identity, exact for an object made in the frame (its tracker)
            return ConstantVariable((a is b) == (fn is operator.eq))
        return None  # both NotImplemented: identity (the caller's rule)
    raise PythonException(TypeError(f"'{_SYMBOL_CMP[fn]}' not supported between instances of "
                                    f"'{a.python_type().__name__}' and '{b.python_type().__name__}'"))


_SYMBOL_CMP = {operator.lt: "<", operator.le: "<=", operator.gt: ">", operator.ge: ">="}


def _defines_builtin_compare(cls: type, name: str) -> bool:
    return getattr(cls, name, None) is not getattr(object, name, None) and _python_method(cls, name) is None


def checked_truth(method: str, result) -> bool:
    """``bool(obj)`` from what its ``__bool__`` / ``__len__`` returned, with CPython's checks:
    ``__bool__`` must return a bool, ``__len__`` a non-negative int (else eager's TypeError /
    ValueError)."""
    if not result.is_constant():
        if method == "__bool__" and type(result).__name__ == "TensorVariable":
            raise PythonException(TypeError("__bool__ should return bool, returned Tensor"))
        raise unsupported("EB0038", f"{method} returned {result.describe()}")
    value = result.as_constant()
    if method == "__bool__":
        if type(value) is not bool:
            raise PythonException(TypeError(f"__bool__ should return bool, returned {type(value).__name__}"))
        return value
    if not isinstance(value, int):
        raise PythonException(TypeError(f"'{type(value).__name__}' object cannot be interpreted as an integer"))
    if value < 0:
        raise PythonException(ValueError("__len__() should return >= 0"))
    return value > 0


def format_objects(tx, template: str, args, kwargs) -> VariableTracker:
    """``template.format(...)`` where some arguments are user objects whose class formats through
    its Python ``__str__``/``__repr__``: the real ``str.format`` runs on stand-ins that answer with
    the traced text (fields reading attributes or items of them are not modelled)."""
    import string
    try:
        fields = [f for _, f, _, _ in string.Formatter().parse(template) if f is not None]
    except ValueError as e:
        raise PythonException(e) from None
    if any("." in f or "[" in f for f in fields):
        raise unsupported("EB0036", "str.format with non-constant arguments and attribute/index fields")

    class _Text:
        def __init__(self, vt):
            self.vt = vt

        def _text(self, kind):
            out = user_str(tx, kind, self.vt)
            if out is None:
                raise unsupported("EB0040", f"str.format of {self.vt.describe()}")
            return out.as_constant()

        def __str__(self):
            return self._text("str")

        def __repr__(self):
            return self._text("repr")

        def __format__(self, spec):
            t = self.vt.python_type()
            if t.__format__ is not object.__format__:
                raise unsupported("EB0040", f"str.format of {self.vt.describe()} (its own __format__)")
            if spec:
                raise TypeError(f"unsupported format string passed to {t.__name__}.__format__")
            return self._text("str")

    def stand_in(vt):
        if vt.is_constant():
            return vt.as_constant()
        if type(vt).__name__ == "TensorVariable":
            raise unsupported("EB0017", "str.format of a tensor reads its data")
        return _Text(vt)

    try:
        text = template.format(*[stand_in(a) for a in args], **{k: stand_in(v) for k, v in kwargs.items()})
    except Unsupported:
        raise
    except Exception as e:
        raise PythonException(e) from None  # eager raises this very exception
    return ConstantVariable(text)


def _sequence_repr(tx, v: VariableTracker):
    """``repr`` of a plain tuple or list (``str`` is the same) whose items are constants or user
    objects with a Python ``__repr__``: the items' reprs, as tuple/list's own repr joins them (a
    pytree path of frozen dataclasses in an f-string). None for anything else."""
    from ember.capture.variables.containers import ListVariable, TupleVariable
    if type(v) is TupleVariable and v.tuple_type in (None, tuple):
        opening, closing = "(", ",)" if len(v.items) == 1 else ")"
    elif type(v) is ListVariable and v.list_cls is list:
        opening, closing = "[", "]"
    else:
        return None
    parts = []
    for item in v.items:
        if item.is_constant() and type(item.as_constant()) in (int, float, bool, str, bytes, complex, type(None)):
            parts.append(repr(item.as_constant()))
            continue
        text = user_str(tx, "repr", item) if _user_class(item) is not None else _sequence_repr(tx, item)
        if text is None:
            return None
        parts.append(text.as_constant())
    return ConstantVariable(opening + ", ".join(parts) + closing)


def _guarded_repr(fn):
    """The ``__repr__`` that ``fn`` wraps in a recursion guard (thread id, a shared set), or None:
    dataclasses' ``_recursive_repr`` (3.11, 3.12) or ``reprlib.recursive_repr`` (dataclasses on
    3.13+, and any class that decorates its own ``__repr__`` with it; 3.11's sets no ``__wrapped__``,
    the closure holds it)."""
    import dataclasses
    import reprlib
    if not isinstance(fn, types.FunctionType) or fn.__code__.co_name != "wrapper" or \
            fn.__code__.co_filename not in (dataclasses.__file__, reprlib.__file__):
        return None
    wrapped = getattr(fn, "__wrapped__", None)
    if wrapped is None and "user_function" in fn.__code__.co_freevars:
        wrapped = fn.__closure__[fn.__code__.co_freevars.index("user_function")].cell_contents
    return wrapped if isinstance(wrapped, types.FunctionType) else None


# -- the hash() / str() / repr() builtins' handlers (variables/builtins.py) --------------------

def _user_hash(tx, args, kwargs):
    """``hash(obj)`` of a user object with a Python ``__hash__`` (e.g. a frozen dataclass)."""
    if len(args) != 1 or kwargs:
        return NotImplemented
    result = user_hash(tx, args[0])
    return NotImplemented if result is None else result


def _user_text(tx, kind, args, kwargs):
    """``str(obj)`` / ``repr(obj)`` of a user object with its own ``__str__``/``__repr__``."""
    if len(args) != 1 or kwargs:
        return NotImplemented
    fn_vt = args[0]
    if type(fn_vt).__name__ == "UserFunctionVariable" and fn_vt.source is not None:
        # `str(fn)`: "<function f at 0x...>" names the very object: pinned by identity
        tx.guards.id_match(fn_vt.source, fn_vt.fn)
        return ConstantVariable(str(fn_vt.fn) if kind == "str" else repr(fn_vt.fn))
    builtin_text = getattr(fn_vt, "builtin_text", None)  # (an exception made in the frame: its args)
    if builtin_text is not None and builtin_text(kind) is not None:
        return builtin_text(kind)
    result = user_str(tx, kind, args[0])
    return NotImplemented if result is None else result
