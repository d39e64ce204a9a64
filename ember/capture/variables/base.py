"""The VariableTracker base class and the simplest trackers.

A VariableTracker (VT) stands for one Python value during symbolic
interpretation: a constant, a tensor (fake tensor + fx node), a container of
other VTs, a function, a module. Most VTs are immutable; containers built in
the frame (list, dict, set) and iterators hold their contents by identity, so
that aliasing between names in the frame behaves as in Python.

Every VT can answer the interpreter's questions (`getattr`, `call`, `truth`,
`unpack`); anything it cannot answer raises `Unsupported` with a reason.
"""
from __future__ import annotations

import types
from typing import TYPE_CHECKING, Any

from ember.exc import Unsupported

if TYPE_CHECKING:
    from ember.capture.interpreter import Translator


def unsupported(id: str, detail: str | None = None) -> "Unsupported":
    """The error for something ember cannot put in a graph: ``id`` names its class in the graph-break
    registry (``ember/capture/break_registry.py``: explanation and hint), ``detail`` says what
    happened (the values involved). ``raise unsupported("EB0016", f"truth value of {x}")``."""
    if detail is None:  # (an older call with only a reason: reported as unclassified)
        return Unsupported(id, id="EB0000")
    return Unsupported(detail, id=id)


def bind_call_arguments(names: tuple, required: int, args: list, kwargs: dict) -> "dict | str":
    """Bind a traced call's arguments to ``names`` as Python would (positional first, then keywords);
    the first ``required`` names must be given. Returns the bound dict, or what Python would reject
    (too many, an unknown or twice-given keyword, a missing required argument) as a phrase for the
    caller's graph break, so the call runs eagerly and raises there exactly as eager does."""
    if len(args) > len(names) or any(k not in names for k in kwargs):
        return "with unexpected arguments"
    bound = dict(zip(names, args))
    for k, v in kwargs.items():
        if k in bound:
            return "with an argument given twice"
        bound[k] = v
    if any(n not in bound for n in names[:required]):
        return f"without {', '.join(names[:required])}"
    return bound


class VariableTracker:
    source = None  # where the value came from (a Source), if it came from outside the frame

    # -- what it is -----------------------------------------------------------
    def python_type(self) -> type:
        raise unsupported("EB0036", f"type of {self!r} is unknown")

    def is_constant(self) -> bool:
        return False

    def as_constant(self) -> Any:
        raise unsupported("EB0036", f"{self.describe()} is not a Python constant")

    def describe(self) -> str:
        return type(self).__name__

    def __repr__(self) -> str:
        return self.describe()

    # -- what the interpreter asks ---------------------------------------------
    def getattr(self, tx: "Translator", name: str) -> "VariableTracker":
        try:
            t = self.python_type()
        except Exception:
            t = None
        if isinstance(t, type) and name == "__class__":
            from ember.capture.variables.objects import ClassVariable
            return ClassVariable(t)
        if isinstance(t, type) and t.__module__ == "builtins" and t.__dictoffset__ == 0 and not hasattr(t, name):
            # an instance of a builtin type without an instance dict has only its type's attributes
            from ember.capture.variables.objects import MissingAttribute
            raise MissingAttribute(f"'{t.__name__}' object has no attribute '{name}'")
        raise unsupported("EB0031", f"attribute {name!r} of {self.describe()}")

    def setattr(self, tx: "Translator", name: str, value: "VariableTracker") -> None:
        raise unsupported("EB0032", f"setting attribute {name!r} on {self.describe()} (side effects are not captured yet)")

    def call(self, tx: "Translator", args: list, kwargs: dict) -> "VariableTracker":
        raise unsupported("EB0033", f"calling {self.describe()}")

    def call_method(self, tx: "Translator", name: str, args: list, kwargs: dict) -> "VariableTracker":
        from ember.capture.variables.objects import MissingAttribute
        try:
            method = self.getattr(tx, name)
        except MissingAttribute:
            if name[:2] == "__" == name[-2:]:
                # `obj[k]`, `len(obj)`, ...: Python looks the method up on the type, and without one
                # raises TypeError (a class subscripts through `__class_getitem__`), never the
                # AttributeError of this lookup on the object itself
                raise unsupported("EB0038", f"{name} of {self.describe()}") from None
            raise
        return method.call(tx, args, kwargs)

    def truth(self, tx: "Translator") -> bool:
        raise unsupported("EB0034", f"truth value of {self.describe()}")

    def unpack(self, tx: "Translator") -> list["VariableTracker"]:
        raise unsupported("EB0034", f"iterating over {self.describe()}")

    def iter(self, tx: "Translator") -> "VariableTracker":
        from ember.capture.variables.containers import IteratorVariable
        if type(self) is ConstantVariable and type(self.value) is range:  # (not a lazily guarded one)
            from ember.capture.variables.iterators import RangeIterator
            return RangeIterator(self.as_constant())  # (returned: a range iterator still)
        return IteratorVariable(self.unpack(tx))

    def hash_key(self) -> Any:
        """A Python key for using this value as a dict key or set element."""
        if self.is_constant():
            return self.as_constant()
        raise unsupported("EB0035", f"{self.describe()} as a dict key")


class ConstantVariable(VariableTracker):
    """A Python constant: int, float, bool, str, None, dtype, device, torch.Size, ..."""

    __slots__ = ("value", "source")

    def __init__(self, value: Any, source=None) -> None:
        self.value = value
        self.source = source

    def python_type(self):
        return type(self.value)

    def is_constant(self):
        return True

    def as_constant(self):
        return self.value

    def describe(self):
        return f"Constant({self.value!r})"

    def truth(self, tx):
        return bool(self.value)

    def call(self, tx, args, kwargs):
        origin = getattr(self.value, "__origin__", None) if type(self.value) is types.GenericAlias else None
        if origin in (dict, list, set, frozenset, tuple):
            # `dict[str, Any]()` (torch's flex_attention): the alias calls its class; the
            # `__orig_class__` it then tries to set does not fit a builtin container (ignored)
            from ember.capture.variables.builtins import construct
            return construct(tx, origin, args, kwargs)
        return super().call(tx, args, kwargs)

    def getattr(self, tx, name):
        from ember.capture.variables.builtins import constant_attribute
        if unpinned_number(self) and not hasattr(self.python_type(), name):
            from ember.capture.variables.objects import MissingAttribute  # (`getattr(n, "shape", None)`)
            raise MissingAttribute(f"'{self.python_type().__name__}' object has no attribute '{name}'")
        if name == "__traceback__" and isinstance(self.value, BaseException):
            # an exception the trace raised has no frames to show (eager's has a traceback)
            # (no graph break can help: the frame must raise it eagerly, so the frame runs eagerly)
            e = unsupported("EB0011", "reading the __traceback__ of an exception raised in the compiled frame")
            e.whole_frame = True
            raise e
        if isinstance(self.value, BaseException) and getattr(self.value, "_ember_traced_value", False):
            # (a StopIteration whose value only its own tracker shows, reached another way)
            raise unsupported("EB0005", f"{name} of a StopIteration carrying a non-constant value")
        return constant_attribute(tx, self, name)

    def setattr(self, tx, name, value):
        if name == "__traceback__" and isinstance(self.value, BaseException) and value.is_constant() \
                and value.as_constant() is None:
            # `exc.__traceback__ = tb` from a context manager's __exit__ (contextlib's, re-raising
            # what the with block raised): the trace's exceptions carry no traceback (``tb`` is None
            # there), so there is nothing to set
            return
        super().setattr(tx, name, value)

    def unpack(self, tx):
        if isinstance(self.value, (tuple, list, str, range, bytes, frozenset, set, dict)):
            return [ConstantVariable(v) for v in self.value]
        if type(self.value) in (int, float, bool, complex, type(None)):
            from ember.exc import PythonException
            raise PythonException(TypeError(f"'{type(self.value).__name__}' object is not iterable"))
        return super().unpack(tx)


class LazyGuardedConstant(ConstantVariable):
    """An int or float from outside the frame whose value is guarded only once the trace uses it.

    Its type is guarded when it is read; its value only when something reads ``.value`` (a branch,
    a shape, a tensor op that bakes it into the graph, Python arithmetic). A value that only flows
    on as data — returned, stored, appended to a list, handed to the next resume function — is
    rebuilt from its source instead, so a new value (``loss.item()`` each training step) does not
    recompile."""

    __slots__ = ("_install",)

    def __init__(self, value: Any, source, install) -> None:
        ConstantVariable.value.__set__(self, value)
        self.source = source
        self._install = install

    @property
    def value(self):
        install = self._install
        if install is not None:
            self._install = None
            install()
        return ConstantVariable.value.__get__(self)

    @property
    def specialized(self) -> bool:
        """Whether the value has been used (and is now guarded)."""
        return self._install is None

    def python_type(self):
        return type(ConstantVariable.value.__get__(self))  # the type is guarded already

    def describe(self):
        return f"Constant({type(ConstantVariable.value.__get__(self)).__name__} from {self.source.name()})"


def is_none(vt: VariableTracker) -> bool:
    """``vt is None``, without pinning a number's value: a dynamic size or a lazily guarded int is
    known by its (guarded) type never to be None (``if bsz is not None:`` must not guard the size)."""
    if isinstance(vt, ConstantVariable):
        return vt.python_type() is type(None)
    if not vt.is_constant():
        return False
    try:
        # a container is known by its type not to be None: its items' values (a lazily guarded
        # float among them) are not read, or `if kwargs is not None:` pinned each of them
        return vt.python_type() is type(None)
    except Unsupported:
        return vt.as_constant() is None


def unpinned_number(vt: VariableTracker) -> bool:
    """An int or float whose value reading would pin it (a dynamic size, a lazily guarded argument):
    what depends only on its type (``n is None``, ``n == None``, ``callable(n)``, ``hasattr(n, "shape")``)
    is answered from the type."""
    return isinstance(vt, ConstantVariable) and type(vt) is not ConstantVariable \
        and vt.python_type() in (int, float)


def format_value(value, conversion: int, spec: str) -> str:
    """What FORMAT_VALUE computes (conversion 1: str, 2: repr, 3: ascii)."""
    value = str(value) if conversion == 1 else repr(value) if conversion == 2 else ascii(value) \
        if conversion == 3 else value
    return format(value, spec)


def concat_strings(*parts) -> str:
    return "".join(parts)


def _input_symbol(p) -> bool:
    """A symbolic int/float graph input read from the frame (``SymNodeVariable`` with its source)."""
    import torch
    sym = getattr(p, "sym", None)
    if sym is None or getattr(p, "source", None) is None or not isinstance(sym, (torch.SymInt, torch.SymFloat)):
        return False
    from ember.fake.symbolic import has_symbols
    return has_symbols(sym) and sym.node.hint is not None


def derived_lazy(fn, parts: list, symbols: bool = False) -> "LazyGuardedConstant | None":
    """``fn(*parts)`` as a new unspecialized constant when some part is an unspecialized
    LazyGuardedConstant and the rest are constants (None otherwise): computed now for the trace,
    rebuilt from the parts' sources at run time, and only guarded if its own value gets used.
    ``symbols``: a symbolic scalar input (an int or float argument that changed, see
    OutputGraph.symbolic_int) counts as such a part too (``f"{lr:.3f}"``: formatted from the
    argument at run time, as torch.compile's lazily formatted strings, not a guard per value)."""
    def unspecialized(p):
        return (isinstance(p, LazyGuardedConstant) and not p.specialized) or (symbols and _input_symbol(p))
    lazy = [p for p in parts if unspecialized(p)]
    if not lazy or not all(p.is_constant() for p in parts):
        return None
    from ember.capture.sources import ApplySource
    raw = [ConstantVariable.value.__get__(p) if isinstance(p, LazyGuardedConstant) else
           p.sym.node.hint if any(p is q for q in lazy) else p.as_constant() for p in parts]
    src = ApplySource(fn, tuple(p.source if any(p is q for q in lazy) else r for p, r in zip(parts, raw)))

    def install():
        for p in lazy:
            p.value  # noqa: B018 — reading the value installs its guard
    return LazyGuardedConstant(fn(*raw), src, install)


class NullVariable(VariableTracker):
    """The NULL that 3.11 pushes next to a callable (PUSH_NULL / LOAD_GLOBAL flag)."""

    def describe(self):
        return "NULL"


NULL = NullVariable()


def const(value: Any) -> ConstantVariable:
    return ConstantVariable(value)
