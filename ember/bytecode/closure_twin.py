"""Closure twins: one code object per closure *code*, taking its cells as arguments.

A function made in a frame (``def inner(a): ...`` inside ``f``) is a new function object on
every call of ``f``, with new cells, but always the same code. torch.compile keeps compiled code
on the code object, and reads a closure's free variables from the frame, so one compile serves
every function object of that code. ember compiles per function object (the function's cells are
part of what its guards read); the twin makes one compile serve them all::

    def inner(a):            # free: y               def inner(y, /, a):      # y: a cell argument
        return a * y + 2                                 return a * y + 2     # (same body)

The twin takes the cells of the closure, themselves (not their contents), as leading
positional-only parameters; its prologue skips their ``MAKE_CELL``, so ``LOAD_DEREF`` /
``STORE_DEREF`` read and write the very cells the closure holds (a ``nonlocal`` write reaches
the defining frame). Name, qualified name, first line, line table and globals are the original's,
so tracebacks read the same. ``twin(*fn.__closure__, *args, **kwargs)`` runs as ``fn(*args,
**kwargs)`` does, the defaults given the twin's function object being ``fn``'s.

A code without free variables is its own twin. Not made (``None``) for generators and coroutines, and for code that reads ``__class__`` (a
method defined in a class body: zero-argument ``super()`` finds that cell among the free
variables only).
"""
from __future__ import annotations

import types
import weakref
from typing import Optional

from .assemble import assemble
from .instructions import create_instruction, decode
from .resume import _UNSUPPORTED_FLAGS, _strip_prologue
from .validate import check_generated

__all__ = ["closure_twin_code", "closure_twin"]


_TWINS: "weakref.WeakKeyDictionary[types.CodeType, Optional[types.CodeType]]" = weakref.WeakKeyDictionary()


def closure_twin_code(code: types.CodeType) -> Optional[types.CodeType]:
    """The twin of ``code`` (made once per code object), or None where none can be made."""
    if code in _TWINS:
        return _TWINS[code]
    twin = None
    free = code.co_freevars
    if not free:
        twin = None if code.co_flags & _UNSUPPORTED_FLAGS else code  # (no cells: its own twin)
    elif "__class__" not in free and not code.co_flags & _UNSUPPORTED_FLAGS:
        body = _strip_prologue(decode(code))
        prologue = [create_instruction("MAKE_CELL", argval=c) for c in code.co_cellvars]
        prologue.append(create_instruction("RESUME", arg=0))
        first = body[0].positions if body else None
        for instr in prologue:
            instr.positions = first
        twin = check_generated(assemble(
            prologue + body, code,
            varnames=list(free) + list(code.co_varnames),
            cellvars=tuple(code.co_cellvars) + tuple(free),
            freevars=(),
            co_argcount=len(free) + code.co_argcount,
            co_posonlyargcount=len(free) + code.co_posonlyargcount,
        ))
    _TWINS[code] = twin
    return twin


#: (code, id(globals)) -> the twin function of that code, while something (a cache) uses it
_TWIN_FUNCTIONS: "weakref.WeakValueDictionary[tuple, types.FunctionType]" = weakref.WeakValueDictionary()


def closure_twin(fn: types.FunctionType) -> Optional[types.FunctionType]:
    """The function object of ``fn``'s twin code (``fn``'s globals, name, qualified name, defaults
    when made), one per code and globals while it is in use, or None. ``__ember_free_cells__``
    names its cell parameters."""
    key = (fn.__code__, id(fn.__globals__))
    twin = _TWIN_FUNCTIONS.get(key)
    if twin is not None and twin.__globals__ is fn.__globals__:
        return twin
    code = closure_twin_code(fn.__code__)
    if code is None:
        return None
    twin = types.FunctionType(code, fn.__globals__, fn.__name__, fn.__defaults__, None)
    twin.__kwdefaults__ = fn.__kwdefaults__
    twin.__qualname__ = fn.__qualname__
    twin.__module__ = fn.__module__
    twin.__ember_free_cells__ = fn.__code__.co_freevars
    for marker in ("__ember_cell_args__", "__ember_owner__"):  # (a resume function's: see resume.py)
        if marker in fn.__dict__:
            setattr(twin, marker, fn.__dict__[marker])
    _TWIN_FUNCTIONS[key] = twin
    return twin
