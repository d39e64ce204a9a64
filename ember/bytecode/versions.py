"""The per-Python-version layer for *emitting* code sequences.

Calls are the part of the bytecode that changed most between 3.11 and 3.13,
and code generation (residual code after a graph break, resume functions,
guards that call helpers) emits calls everywhere.  Everything above this
module says *what* to call and never *how*; the how is here:

===========  ===============================  ===============================  ==============================
             3.11                             3.12                             3.13
===========  ===============================  ===============================  ==============================
NULL slot    below the callable:              below the callable               above the callable:
             ``PUSH_NULL; <callable>``                                         ``<callable>; PUSH_NULL``
global+NULL  ``LOAD_GLOBAL (i<<1)|1``         same                             same bit, NULL pushed after
method load  ``LOAD_METHOD name``             ``LOAD_ATTR (i<<1)|1``           ``LOAD_ATTR (i<<1)|1``
call         ``PRECALL n; CALL n``            ``CALL n``                       ``CALL n``
keywords     ``KW_NAMES c`` before PRECALL    ``KW_NAMES c`` before CALL       ``LOAD_CONST names; CALL_KW n``
return None  ``LOAD_CONST None; RETURN_VALUE``  ``RETURN_CONST None``          ``RETURN_CONST None``
===========  ===============================  ===============================  ==============================

``n`` counts positional *and* keyword arguments (not the callable, not NULL).
Stack before the call, 3.11/3.12: ``NULL, callable, args..., kwargs values``
(or ``method, self, args...`` after a method load).

Only the running version can be assembled.  The other branches are kept
explicit so porting is a matter of running the tests on that version; they
can be unit-tested on 3.11 by setting :data:`PY_VERSION`, in which case
instructions whose opcode does not exist here get ``opcode=None`` (the
assembler refuses them).
"""

from __future__ import annotations

import opcode as _opcode
import sys
from typing import Any, Optional, Sequence

from .instructions import Instruction, create_instruction

__all__ = [
    "PY_VERSION",
    "null_before_callable",
    "push_null_and_callable",
    "load_global",
    "load_method",
    "call",
    "call_function",
    "call_global",
    "call_method",
    "return_value",
    "return_const",
    "conditional_jump",
    "jump",
]

# The version code is generated for.  Tests patch this to exercise the other
# branches; nothing else should.
PY_VERSION: tuple[int, int] = sys.version_info[:2]
_RUNNING = sys.version_info[:2]


def _insn(opname: str, arg: Optional[int] = None, argval: Any = None, target=None) -> Instruction:
    """create_instruction for the running version, a placeholder otherwise."""
    if PY_VERSION == _RUNNING:
        if argval is None and arg is not None:
            return create_instruction(opname, arg=arg, target=target)
        return create_instruction(opname, arg=arg, argval=argval, target=target)
    return Instruction(
        opname=opname,
        opcode=None,
        arg=arg,
        argval=arg if argval is None else argval,
        target=target,
    )


def null_before_callable() -> bool:
    """Where the NULL of a call sequence sits: below the callable before 3.13."""
    return PY_VERSION < (3, 13)


def push_null_and_callable(load_callable: Sequence[Instruction]) -> list[Instruction]:
    """``load_callable`` (instructions pushing one callable) plus the NULL that
    a plain (non-method) call needs, in the order this version wants."""
    null = _insn("PUSH_NULL")
    if null_before_callable():
        return [null, *load_callable]
    return [*load_callable, null]


def load_global(name: str, push_null: bool = False) -> list[Instruction]:
    """Push global ``name``; with ``push_null`` also the call NULL (3.11+
    fold it into LOAD_GLOBAL's low bit; 3.13 pushes it after the global)."""
    return [_insn("LOAD_GLOBAL", arg=int(push_null), argval=name)]


def load_method(name: str) -> list[Instruction]:
    """With an object on the stack, push what ``call(n)`` needs to call its
    method ``name``: ``meth, self`` or ``NULL, attr`` (3.11/3.12 order)."""
    if PY_VERSION < (3, 12):
        return [_insn("LOAD_METHOD", argval=name)]
    # 3.12+: LOAD_ATTR with the low "method" bit; arg carries only the flag,
    # the name index is filled in from argval at assembly.
    return [_insn("LOAD_ATTR", arg=1, argval=name)]


def call(nargs: int, kw_names: Optional[Sequence[str]] = None) -> list[Instruction]:
    """Call with ``nargs`` arguments on the stack above callable+NULL (or
    method+self), of which the last ``len(kw_names)`` are keyword values."""
    kw = tuple(kw_names or ())
    if len(kw) > nargs:
        raise ValueError(f"{len(kw)} keyword names but only {nargs} arguments")
    out = []
    if PY_VERSION < (3, 12):
        if kw:
            out.append(_insn("KW_NAMES", argval=kw))
        out.append(_insn("PRECALL", arg=nargs))
        out.append(_insn("CALL", arg=nargs))
    elif PY_VERSION < (3, 13):
        if kw:
            out.append(_insn("KW_NAMES", argval=kw))
        out.append(_insn("CALL", arg=nargs))
    else:
        if kw:
            out.append(_insn("LOAD_CONST", argval=kw))
            out.append(_insn("CALL_KW", arg=nargs))
        else:
            out.append(_insn("CALL", arg=nargs))
    return out


def call_function(
    load_callable: Sequence[Instruction],
    args: Sequence[Sequence[Instruction]] = (),
    kwargs: Optional[dict[str, Sequence[Instruction]]] = None,
) -> list[Instruction]:
    """``callable(*args, **kwargs)``: each argument is a list of instructions
    that pushes exactly one value.  Leaves the result on the stack."""
    kwargs = kwargs or {}
    out = push_null_and_callable(load_callable)
    for a in args:
        out += a
    for v in kwargs.values():
        out += v
    return out + call(len(args) + len(kwargs), tuple(kwargs))


def call_global(name: str, args=(), kwargs=None) -> list[Instruction]:
    """``name(*args, **kwargs)`` for a global: the NULL rides on LOAD_GLOBAL."""
    kwargs = kwargs or {}
    out = load_global(name, push_null=True)
    for a in args:
        out += a
    for v in kwargs.values():
        out += v
    return out + call(len(args) + len(kwargs), tuple(kwargs))


def call_method(
    load_obj: Sequence[Instruction],
    name: str,
    args: Sequence[Sequence[Instruction]] = (),
    kwargs: Optional[dict[str, Sequence[Instruction]]] = None,
) -> list[Instruction]:
    """``obj.name(*args, **kwargs)`` using the method-call fast path."""
    kwargs = kwargs or {}
    out = [*load_obj, *load_method(name)]
    for a in args:
        out += a
    for v in kwargs.values():
        out += v
    return out + call(len(args) + len(kwargs), tuple(kwargs))


def return_value() -> list[Instruction]:
    """Return the value on top of the stack."""
    return [_insn("RETURN_VALUE")]


def return_const(value: Any) -> list[Instruction]:
    """``return <constant>``; a single instruction on 3.12+."""
    if PY_VERSION < (3, 12):
        return [_insn("LOAD_CONST", argval=value), _insn("RETURN_VALUE")]
    return [_insn("RETURN_CONST", argval=value)]


def conditional_jump(opname: str, target: Instruction) -> list[Instruction]:
    """``POP_JUMP_IF_TRUE``/``FALSE`` (generic names) on any value: 3.13's conditional jumps take
    an exact bool, so the value goes through ``TO_BOOL`` first."""
    out = [_insn("TO_BOOL")] if PY_VERSION >= (3, 13) else []
    return out + [_insn(opname, target=target)]


def jump(target: Instruction) -> list[Instruction]:
    """Unconditional jump; the assembler picks forward or backward."""
    return [_insn("JUMP", target=target)]

