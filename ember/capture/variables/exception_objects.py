"""User exceptions made in the frame holding values only the trace has (``raise Err("bad", x * 2)``).

An exception class whose construction only stores its arguments is built at trace time when
they are constants (constructors.py). Given a tensor, it becomes an `ExceptionObjectVariable`:
a `NewObjectVariable` whose ``__init__`` is inlined (``self.t = t`` goes into ``attrs``,
``super().__init__(msg)`` sets ``args``), plus a real instance of the class made without running
``__init__`` (``real_exception``) that ``except`` clauses match against, as `RaisedStopIteration`
does. A handler in the frame reads the tracker (``e.t + 1`` stays in the graph), as torch.compile's
one graph does.

What the trace cannot hand to eager is refused: the object never leaves the frame (returned,
stored, live across a break: EB0015), and raised out of the frame it is made again by eager
(`made_at`: the break moves to the instruction of the outermost frame that made it, which runs
as it is and makes and raises the real one).
"""
from __future__ import annotations

import types

from ember.capture.variables.base import ConstantVariable, VariableTracker, unsupported
from ember.capture.variables.new_object import NewObjectVariable, _lookup

# builtin bases whose __init__ only sets ``args`` (BaseException_init); others (OSError's errno,
# ImportError's name=, KeyError's str) keep the constant-only path
ARGS_ONLY_BASES = frozenset({BaseException, Exception, ArithmeticError, AssertionError, LookupError, IndexError,
                              NotImplementedError, RuntimeError, TypeError, ValueError, ZeroDivisionError,
                              OverflowError, BufferError, EOFError, MemoryError, ReferenceError})

# what a handler may read of the real object (the rest of an exception's C state is its traceback,
# which eager's has and the trace's has not)
_REAL_READS = ("__cause__", "__context__", "__suppress_context__")


def traced_exception_class(cls) -> bool:
    """A user exception class the trace can build around non-constant arguments: the builtin part
    of its MRO only sets ``args``, and its own Python part has no ``__new__``, ``__setattr__``,
    ``__getattribute__``, ``__getattr__``, slots, or metaclass ``__call__``."""
    if not (isinstance(cls, type) and issubclass(cls, BaseException)) or type(cls).__call__ is not type.__call__:
        return False
    for klass in cls.__mro__:
        if klass is object:
            continue
        if klass.__module__ == "builtins":
            if klass not in ARGS_ONLY_BASES:
                return False
            continue
        d = klass.__dict__
        if any(n in d for n in ("__new__", "__setattr__", "__getattribute__", "__getattr__", "__slots__",
                                "__delattr__")):
            return False
        init = d.get("__init__")
        if init is not None and not isinstance(init, types.FunctionType):
            return False
    return True


def _root(tx):
    while tx.parent is not None:
        tx = tx.parent
    return tx


class ExceptionObjectVariable(NewObjectVariable):
    def __init__(self, tx, cls: type):
        super().__init__(cls)
        self.real_exception = cls.__new__(cls)  # (BaseException.__new__: args (), no __init__ run)
        from ember.capture.variables.containers import TupleVariable
        self.args_vt = TupleVariable([])
        root = _root(tx)
        made_at = root.instructions[root.ip - 1]  # the outermost frame's instruction making it (ip is past it)
        self.made_at = (made_at.offset, made_at.opname)

    def describe(self):
        return f"new {self.cls.__qualname__} exception"

    def set_args(self, args: list) -> None:
        from ember.capture.variables.containers import TupleVariable
        self.args_vt = TupleVariable(list(args))
        if all(a.is_constant() for a in args):  # str(e) / repr(e) of the real one then read them
            self.real_exception.args = tuple(a.as_constant() for a in args)

    def getattr(self, tx, name):
        if name == "args" and "args" not in self.attrs:
            return self.args_vt
        if name in _REAL_READS:
            from ember.capture.variables.builtins import wrap_constant
            return wrap_constant(getattr(self.real_exception, name))
        if name in ("__traceback__", "with_traceback", "__notes__", "add_note"):
            raise unsupported("EB0011", f"{name} of {self.describe()}")
        if name in ("__str__", "__repr__") and not isinstance(_lookup(self.cls, name), types.FunctionType):
            if not all(a.is_constant() for a in self.args_vt.items):
                raise unsupported("EB0011", f"{name} of {self.describe()} whose args hold traced values")
            return _RealMethod(getattr(self.real_exception, name))
        return super().getattr(tx, name)

    def builtin_text(self, kind: str):
        """``str(e)`` / ``repr(e)`` through BaseException's (from ``args``), or None where the class
        has its own in Python (inlined as any user object's)."""
        name = "__repr__" if kind == "repr" else "__str__"
        if isinstance(_lookup(self.cls, name), types.FunctionType):
            return None
        if not all(a.is_constant() for a in self.args_vt.items):
            raise unsupported("EB0040", f"{kind}() of {self.describe()} whose args hold traced values")
        return ConstantVariable(str(self.real_exception) if kind == "str" else repr(self.real_exception))

    def object_setattr(self, name, value):
        if name == "args":
            raise unsupported("EB0032", f"assigning args of {self.describe()}")
        super().object_setattr(name, value)

    def reconstruct(self, plan):
        e = unsupported("EB0015", f"{self.describe()} leaves the frame or is live across a graph break")
        e.restart_at = self.made_at  # capture breaks there instead: eager makes the real one
        e.restart_skips_frame = False  # (as a generator's would)
        raise e


class _RealMethod(VariableTracker):
    """``e.__str__`` of an exception whose ``args`` are constants: the real object's answer."""

    def __init__(self, method):
        self.method = method

    def describe(self):
        return f"{self.method.__qualname__}"

    def call(self, tx, args, kwargs):
        if args or kwargs:
            raise unsupported("EB0037", f"{self.describe()} with arguments")
        return ConstantVariable(self.method())


class ExceptionInitFunction(VariableTracker):
    """``super().__init__(*args)`` (BaseException's) inside the class's ``__init__``: sets ``args``."""

    def __init__(self, obj: ExceptionObjectVariable):
        self.obj = obj

    def describe(self):
        return "BaseException.__init__"

    def call(self, tx, args, kwargs):
        if kwargs:
            raise unsupported("EB0037", f"{self.describe()} with keyword arguments")
        self.obj.set_args(args)
        return ConstantVariable(None)


def construct_exception(tx, cls: type, args: list, kwargs: dict) -> ExceptionObjectVariable:
    """``cls(*args, **kwargs)``: BaseException.__new__ keeps the arguments as ``args``, then the
    class's ``__init__`` runs inlined (BaseException's sets ``args`` again)."""
    from ember.capture.variables.functions import UserFunctionVariable
    obj = ExceptionObjectVariable(tx, cls)
    init = _lookup(cls, "__init__")
    if isinstance(init, types.FunctionType):
        obj.set_args(args)  # (what __new__ stored, read if __init__ does not call its base's)
        UserFunctionVariable(init).call(tx, [obj, *args], kwargs)
    else:
        if kwargs:
            raise unsupported("EB0002", f"{cls.__name__}() takes no keyword arguments (TypeError)")
        obj.set_args(args)
    return obj


def raise_tracked(exc, cause: list):
    """``raise exc [from cause]`` where either is an `ExceptionObjectVariable`: the real exception
    raised with its tracker (what a handler in the frame binds); a cause made in the frame is
    refused (eager makes it: the break moves to where it was made)."""
    from ember.exc import PythonException
    if cause:
        tracked = cause[0] if isinstance(cause[0], ExceptionObjectVariable) else exc
        e = unsupported("EB0011", f"raise {exc.describe()} from {cause[0].describe()}")
        e.restart_at, e.restart_skips_frame = tracked.made_at, False
        raise e
    failure = PythonException(exc.real_exception)
    failure.tracker = exc
    failure.replayable = True
    raise failure
