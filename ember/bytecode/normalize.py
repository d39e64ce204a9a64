"""The interpreter's view of a code object: one instruction form for 3.11, 3.12 and 3.13.

:func:`decode` is exact (it must re-assemble byte for byte), so it keeps each
version's spelling.  The symbolic interpreter only needs the *meaning* of an
instruction, and most version differences are spellings of the same meaning.
:func:`interpreter_instructions` folds them here, so opcode handlers are
written once (keyed by ``opname``) with no version tests:

==========================================  ===============================================
what the running Python has                 what the interpreter sees (``opname``)
==========================================  ===============================================
``POP_JUMP_FORWARD_IF_X`` (3.11),           ``POP_JUMP_IF_X`` (X: TRUE, FALSE, NONE,
``POP_JUMP_BACKWARD_IF_X``,                 NOT_NONE); ``argval`` is the target offset
``POP_JUMP_IF_X`` (3.12+)
``LOAD_ATTR`` with the low bit (3.12+)      ``LOAD_METHOD`` (pushes ``NULL, attr`` or
                                            ``meth, self`` as 3.11's did)
``FOR_ITER`` (jumps to ``END_FOR``, which   ``FOR_ITER`` whose ``argval`` is where an
the interpreter skips: 3.12 one, 3.13 two   exhausted loop goes on, the iterator popped
instructions)
``SEND`` (3.12+: to an ``END_SEND``)        ``SEND`` whose ``argval`` is past the ``END_SEND``
``CALL_INTRINSIC_1 n`` (3.12+)              ``UNARY_POSITIVE``, ``LIST_TO_TUPLE`` (the 3.11
                                            opcodes), else ``INTRINSIC_<NAME>``
``CALL_INTRINSIC_2 n``                      ``PREP_RERAISE_STAR`` or ``INTRINSIC_<NAME>``
``COMPARE_OP`` (3.12 shifts the operator    ``argval`` is the operator string on every version
by 4, 3.13 by 5)
``TO_BOOL`` before a conditional jump       ``NOP`` (3.13; the jump tests truth as before)
(3.13)
``FORMAT_SIMPLE``, ``FORMAT_WITH_SPEC``,    ``FORMAT_VALUE`` with 3.11's flags in ``arg``
``CONVERT_VALUE`` (3.13)
``LOAD_FAST`` of a cell (3.13)              ``LOAD_CLOSURE``
==========================================  ===============================================

Opcodes that exist on one version only (``RETURN_CONST``, ``BINARY_SLICE``,
``LOAD_SUPER_ATTR``, ``LOAD_FAST_AND_CLEAR``, ``END_FOR``...) keep their name:
a handler for them is no version branch, it just never runs elsewhere.

Each instruction also keeps ``real_opname`` and ``arg`` (the raw oparg), so code
that re-emits the instruction (a graph break's residual) emits what this
Python runs, and ``starts_line`` is the line number where a new line starts
(3.13's ``dis`` reports a bool there).
"""

from __future__ import annotations

import dis
import opcode as _opcode
import sys
import types

from .instructions import FAST_READS_CELLS

__all__ = ["InterpInst", "interpreter_instructions", "CONDITIONAL_JUMPS", "INTRINSIC_NAMES",
           "NULL_BEFORE_CALLABLE", "program_handlers"]

#: Where a call's NULL sits: below the callable before 3.13 (``NULL, f``), above it from 3.13 on
#: (``f, NULL``). A method load gives ``meth, self`` on every version.
NULL_BEFORE_CALLABLE = sys.version_info < (3, 13)

CONDITIONAL_JUMPS = ("POP_JUMP_IF_TRUE", "POP_JUMP_IF_FALSE", "POP_JUMP_IF_NONE", "POP_JUMP_IF_NOT_NONE")

_GENERIC = {}
for _cond in ("TRUE", "FALSE", "NONE", "NOT_NONE"):
    for _dir in ("FORWARD_", "BACKWARD_", ""):
        _GENERIC[f"POP_JUMP_{_dir}IF_{_cond}"] = f"POP_JUMP_IF_{_cond}"

# The intrinsics with a 3.11 opcode of their own are given that name.
_INTRINSIC_AS_OPCODE = {"INTRINSIC_UNARY_POSITIVE": "UNARY_POSITIVE", "INTRINSIC_LIST_TO_TUPLE": "LIST_TO_TUPLE",
                        "INTRINSIC_PREP_RERAISE_STAR": "PREP_RERAISE_STAR"}
INTRINSIC_NAMES = {
    "CALL_INTRINSIC_1": tuple(getattr(_opcode, "_intrinsic_1_descs", ())),
    "CALL_INTRINSIC_2": tuple(getattr(_opcode, "_intrinsic_2_descs", ())),
}

_END_FOR = _opcode.opmap.get("END_FOR")

# 3.13 splits FORMAT_VALUE: the interpreter sees FORMAT_VALUE with 3.11's flags (conversion in the
# low two bits, 4: a spec on the stack), which is also what a graph break needs to count operands.
_FORMAT_AS = {"FORMAT_SIMPLE": lambda arg: 0, "FORMAT_WITH_SPEC": lambda arg: 4, "CONVERT_VALUE": lambda arg: arg}


class InterpInst:
    """One instruction as the interpreter sees it (see the module docstring)."""

    __slots__ = ("opname", "opcode", "arg", "argval", "offset", "starts_line", "real_opname")

    def __init__(self, opname, opcode, arg, argval, offset, starts_line, real_opname):
        self.opname, self.opcode, self.arg, self.argval = opname, opcode, arg, argval
        self.offset, self.starts_line, self.real_opname = offset, starts_line, real_opname

    def __repr__(self) -> str:
        return f"<{self.opname} {self.argval!r} @{self.offset}>"


def _line_start(i: dis.Instruction):
    if sys.version_info >= (3, 13):
        return i.line_number if i.starts_line else None
    return i.starts_line


def interpreter_instructions(code: types.CodeType) -> list[InterpInst]:
    """``dis.get_instructions(code)`` in the interpreter's version-independent form."""
    raw = list(dis.get_instructions(code))
    out = []
    for k, i in enumerate(raw):
        name, argval = i.opname, i.argval
        if name in _GENERIC:
            name = _GENERIC[name]
        elif name == "LOAD_ATTR" and sys.version_info >= (3, 12) and i.arg & 1:
            name = "LOAD_METHOD"
        elif name == "FOR_ITER" and _END_FOR is not None:
            argval = _for_iter_exit(raw, argval)
        elif name == "SEND":
            argval = _send_exit(raw, argval)
        elif name == "TO_BOOL" and k + 1 < len(raw) and raw[k + 1].opname in ("POP_JUMP_IF_TRUE", "POP_JUMP_IF_FALSE"):
            name = "NOP"  # (3.13) the jump that follows decides truth itself, as 3.11's did
        elif name in _FORMAT_AS:
            name, arg = "FORMAT_VALUE", _FORMAT_AS[name](i.arg)
            out.append(InterpInst(name, i.opcode, arg, argval, i.offset, _line_start(i), i.opname))
            continue
        elif name == "LOAD_FAST" and FAST_READS_CELLS and (argval in code.co_cellvars or argval in code.co_freevars):
            name = "LOAD_CLOSURE"  # (3.13 lowers LOAD_CLOSURE to LOAD_FAST of the cell's slot)
        elif name in INTRINSIC_NAMES:
            descs = INTRINSIC_NAMES[name]
            intrinsic = descs[i.arg] if i.arg < len(descs) else f"INTRINSIC_{i.arg}"
            name = _INTRINSIC_AS_OPCODE.get(intrinsic, intrinsic)
        out.append(InterpInst(name, i.opcode, i.arg, argval, i.offset, _line_start(i), i.opname))
    return out


def program_handlers(code: types.CodeType) -> list:
    """``dis._parse_exception_table(code)`` without the handler 3.12+ wrap around a whole generator
    body (``CALL_INTRINSIC_1 STOPITERATION_ERROR; RERAISE``: PEP 479's StopIteration -> RuntimeError),
    which the program did not write: what is left are its ``try``/``with``/``async with`` blocks."""
    entries = dis._parse_exception_table(code)
    if not entries or sys.version_info < (3, 12):
        return list(entries)
    by_offset = {i.offset: i for i in dis.get_instructions(code)}
    out = []
    for e in entries:
        h = by_offset.get(e.target)
        if h is not None and h.opname == "CALL_INTRINSIC_1" and \
                INTRINSIC_NAMES["CALL_INTRINSIC_1"][h.arg] == "INTRINSIC_STOPITERATION_ERROR":
            continue
        out.append(e)
    return out


def _send_exit(raw: list, target: int) -> int:
    """Where ``SEND`` goes when the sub-iterator returns, its value replacing the sub-iterator:
    3.11's target; 3.12+ jump to an ``END_SEND`` that does that replacing, so past it."""
    at = next(k for k, i in enumerate(raw) if i.offset == target)
    if raw[at].opname == "END_SEND" and at + 1 < len(raw):
        return raw[at + 1].offset
    return target


def _for_iter_exit(raw: list, target: int) -> int:
    """Where an exhausted ``FOR_ITER`` continues: past the ``END_FOR`` it targets (3.12), and the
    ``POP_TOP`` after it (3.13: END_FOR pops the value, POP_TOP the iterator)."""
    at = next(k for k, i in enumerate(raw) if i.offset == target)
    k = at
    popped = 0
    while popped < 2 and k < len(raw):
        name = raw[k].opname
        if name == "END_FOR":
            popped -= dis.stack_effect(raw[k].opcode)
        elif name == "POP_TOP" and k > at:
            popped += 1
        else:
            break
        k += 1
    return raw[k].offset if k < len(raw) else target
