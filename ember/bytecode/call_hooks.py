"""A copy of a code object whose calls hand their callable to a hook first.

When torch.compile skips a frame (a graph break inside a loop, ``disable(recursive=False)``),
the frame runs as it is, but every function it calls is a new frame that its frame hook
compiles. ember has no frame hook; instead it runs such a frame as this copy of its code, in
which each call site first replaces the callable by ``hook(callable)`` (ember's compiled
version of a Python function, or the callable itself)::

    f(x, k=y)        # NULL, f, x, y  ->  NULL, hook(f), x, y  ->  CALL

Everything else is the original bytecode, so the frame behaves exactly as before.

Which stack slot holds the callable: 3.13 always has it first (``f, NULL|self, args``).
3.11/3.12 have ``NULL, f, args`` or ``f, self, args`` (a method load, a decorator
``dec, func``, a comprehension ``<listcomp>, iterator``, ``__exit__, None``...). A method
load decides at run time which form it pushes, so it becomes ``LOAD_ATTR; PUSH_NULL;
SWAP 2`` (the bound method, called the same way). For the other forms the slot below the
callable is classified by the instruction that pushed it, found by walking back over the
straight-line code of the call expression; where that is not certain (an instruction not
in the table below, a jump into the expression), the call is left as it is: its callee is
then simply not compiled.
"""
from __future__ import annotations

import sys
import types
from typing import Any, Optional

from .analysis import stack_depths
from .assemble import assemble
from .instructions import Instruction, create_instruction, decode
from .validate import check_generated
from . import versions

_V = sys.version_info[:2]

# opname -> number of items popped; the instruction pushes one object (None: see _writes)
_POP_PUSH_ONE = {
    "LOAD_FAST": 0, "LOAD_FAST_CHECK": 0, "LOAD_CONST": 0, "LOAD_DEREF": 0, "LOAD_CLOSURE": 0,
    "LOAD_NAME": 0, "LOAD_CLASSDEREF": 0, "LOAD_BUILD_CLASS": 0, "LOAD_ASSERTION_ERROR": 0,
    "LOAD_FAST_AND_CLEAR": 0, "LOAD_LOCALS": 0,
    "LOAD_FROM_DICT_OR_DEREF": 1, "LOAD_FROM_DICT_OR_GLOBALS": 1,
    "GET_ITER": 1, "GET_LEN": 0, "UNARY_NEGATIVE": 1, "UNARY_NOT": 1, "UNARY_INVERT": 1,
    "UNARY_POSITIVE": 1, "LIST_TO_TUPLE": 1, "CALL_INTRINSIC_1": 1, "TO_BOOL": 1,
    "BINARY_SUBSCR": 2, "BINARY_OP": 2, "COMPARE_OP": 2, "IS_OP": 2, "CONTAINS_OP": 2,
    "CALL_INTRINSIC_2": 2, "BINARY_SLICE": 3,
    "FORMAT_SIMPLE": 1, "CONVERT_VALUE": 1, "FORMAT_WITH_SPEC": 2,
}
# instructions that pop some items and push nothing
_POP_ONLY = {"POP_TOP": 1, "NOP": 0, "KW_NAMES": 0, "EXTENDED_ARG": 0, "RESUME": 0, "CACHE": 0,
             "STORE_FAST": 1, "STORE_NAME": 1, "STORE_GLOBAL": 1, "STORE_DEREF": 1,
             "JUMP_FORWARD": 0, "JUMP": 0, "JUMP_NO_INTERRUPT": 0,
             "POP_JUMP_FORWARD_IF_TRUE": 1, "POP_JUMP_FORWARD_IF_FALSE": 1,
             "POP_JUMP_FORWARD_IF_NONE": 1, "POP_JUMP_FORWARD_IF_NOT_NONE": 1,
             "POP_JUMP_IF_TRUE": 1, "POP_JUMP_IF_FALSE": 1, "POP_JUMP_IF_NONE": 1,
             "POP_JUMP_IF_NOT_NONE": 1, "LIST_APPEND": 1, "SET_ADD": 1, "LIST_EXTEND": 1,
             "SET_UPDATE": 1, "DICT_UPDATE": 1, "DICT_MERGE": 1, "MAP_ADD": 2}

NULL, OBJ = "null", "obj"


def _writes(instr: Instruction, depth: int, made_null: set) -> Optional[tuple[int, list]]:
    """``(lowest slot written, kinds pushed from there)`` for an instruction run at ``depth``,
    or None when this module does not know its stack effect."""
    name = instr.opname
    if id(instr) in made_null:  # the SWAP 2 of a converted method load: NULL below the attribute
        return depth - 2, [NULL, OBJ]
    if name in _POP_PUSH_ONE:
        return depth - _POP_PUSH_ONE[name], [OBJ]
    if name in _POP_ONLY:
        return depth - _POP_ONLY[name], []
    if name == "PUSH_NULL":
        return depth, [NULL]
    if name == "LOAD_GLOBAL":
        if _V >= (3, 13):
            return depth, [OBJ, NULL] if (instr.arg or 0) & 1 else [OBJ]
        return depth, [NULL, OBJ] if (instr.arg or 0) & 1 else [OBJ]
    if name == "LOAD_ATTR":
        if (instr.arg or 0) & 1 and _V >= (3, 12):
            return None  # a method load (converted away before this runs, on 3.12)
        return depth - 1, [OBJ]
    if name == "MAKE_FUNCTION":
        return depth - 1 - bin((instr.arg or 0) & 0x0F).count("1"), [OBJ]
    if name == "SET_FUNCTION_ATTRIBUTE":
        return depth - 2, [OBJ]
    if name in ("BUILD_TUPLE", "BUILD_LIST", "BUILD_SET", "BUILD_STRING", "BUILD_SLICE"):
        return depth - (instr.arg or 0), [OBJ]
    if name == "BUILD_MAP":
        return depth - 2 * (instr.arg or 0), [OBJ]
    if name == "BUILD_CONST_KEY_MAP":
        return depth - (instr.arg or 0) - 1, [OBJ]
    if name == "FORMAT_VALUE":
        return depth - (2 if (instr.arg or 0) & 0x04 else 1), [OBJ]
    if name == "PRECALL":  # (3.11) counted by dis as popping the arguments; CALL pops the rest
        return depth - (instr.arg or 0), []
    if name == "CALL":
        if _V < (3, 12):
            return depth - 2, [OBJ]
        return depth - (instr.arg or 0) - 2, [OBJ]
    if name == "CALL_KW":
        return depth - (instr.arg or 0) - 3, [OBJ]
    if name == "CALL_FUNCTION_EX":
        return depth - 3 - ((instr.arg or 0) & 1), [OBJ]
    return None


def _slot_kind(ins: list, depths: list, end: int, slot: int, made_null: set, sources: dict,
               handlers: set) -> Optional[str]:
    """What the instruction that last wrote ``slot`` before ``ins[end]`` pushed there (NULL or an
    object), walking back over straight-line code; None if unsure."""
    j = end - 1
    while j >= 0:
        instr, depth = ins[j], depths[j]
        if depth is None:
            return None
        written = _writes(instr, depth, made_null)
        if written is None:
            return None
        lo, kinds = written
        if lo <= slot:
            if slot >= lo + len(kinds):
                return None  # it popped the slot and pushed nothing there: not a call expression
            kind = kinds[slot - lo]
            # Every path into the call expression must start before this instruction.
            for k in range(j + 1, end + 1):
                if ins[k] in handlers:
                    return None
                for src in sources.get(id(ins[k]), ()):
                    if not (j <= src <= end):
                        return None
            return kind
        j -= 1
    return None


def _hook_sequence(hook: Any, depth: int, slot: int) -> list:
    """Replace stack slot ``slot`` (of ``depth`` items) by ``hook(value)``."""
    k = depth - slot
    swap = [create_instruction("SWAP", arg=k)] if k > 1 else []
    call = [create_instruction("LOAD_CONST", argval=hook), create_instruction("SWAP", arg=2)]
    # ``hook, value`` is a method-style call with no arguments (3.11/3.12), and ``callable,
    # self`` on 3.13: either way ``hook(value)``.
    call += versions.call(0)
    return swap + call + [create_instruction("SWAP", arg=k) for _ in swap]


def _convert_method_loads(ins: list) -> set:
    """``LOAD_METHOD`` (and the method forms of 3.12's ``LOAD_ATTR``/``LOAD_SUPER_ATTR``) become
    a plain attribute load with a NULL below it. Returns ids of the SWAPs that place the NULLs."""
    made_null: set = set()
    if _V >= (3, 13):
        return made_null  # the callable is always the first slot: nothing to convert
    k = 0
    while k < len(ins):
        instr = ins[k]
        method = (instr.opname == "LOAD_METHOD" or
                  (instr.opname in ("LOAD_ATTR", "LOAD_SUPER_ATTR") and _V >= (3, 12) and (instr.arg or 0) & 1))
        if method:
            if instr.opname == "LOAD_METHOD":
                plain = create_instruction("LOAD_ATTR", argval=instr.argval)
                instr.opname, instr.opcode, instr.arg = plain.opname, plain.opcode, plain.arg
            else:
                instr.arg = (instr.arg or 0) & ~1
            extra = [create_instruction("PUSH_NULL"), create_instruction("SWAP", arg=2)]
            for e in extra:
                e.exn_tab_entry, e.positions = instr.exn_tab_entry, instr.positions
            made_null.add(id(extra[1]))
            ins[k + 1:k + 1] = extra
            k += 2
        k += 1
    return made_null


def hook_calls(code: types.CodeType, hook: Any) -> types.CodeType:
    """A copy of ``code`` in which every call it can place calls ``hook(callable)`` first and
    calls what that returns (see the module docstring). Nested code objects are not changed."""
    ins = decode(code)
    made_null = _convert_method_loads(ins)
    depths = stack_depths(ins)
    index = {id(x): i for i, x in enumerate(ins)}
    sources: dict = {}
    for i, x in enumerate(ins):
        if x.target is not None:
            sources.setdefault(id(x.target), []).append(i)
    handlers = {x.exn_tab_entry.target for x in ins if x.exn_tab_entry is not None}
    plans = []  # (insert before index, depth there, slot to hook)
    for i, instr in enumerate(ins):
        d = depths[i]
        if d is None:
            continue
        name = instr.opname
        if name == "CALL_FUNCTION_EX":
            callee = d - 2 - ((instr.arg or 0) & 1) - (1 if _V >= (3, 13) else 0)
            plans.append((i, d, callee))
            continue
        if _V >= (3, 13):
            if name in ("CALL", "CALL_KW"):
                n = (instr.arg or 0) + (1 if name == "CALL_KW" else 0)
                plans.append((i, d, d - n - 2))
            continue
        start = "PRECALL" if _V < (3, 12) else "CALL"
        if name != start:
            continue
        n = instr.arg or 0
        at = i - 1 if i > 0 and ins[i - 1].opname == "KW_NAMES" else i
        below = d - n - 2
        kind = _slot_kind(ins, depths, at, below, made_null, sources, handlers)
        if kind == NULL:
            plans.append((at, d, below + 1))
        elif kind == OBJ:
            plans.append((at, d, below))
    for at, d, slot in reversed(plans):
        anchor = ins[at]
        new = _hook_sequence(hook, d, slot)
        for e in new:
            e.exn_tab_entry, e.positions = anchor.exn_tab_entry, anchor.positions
        for x in ins:
            if x.target is anchor:
                x.target = new[0]
        ins[at:at] = new
    del index
    return check_generated(assemble(ins, code))


def hooked_function(fn: types.FunctionType, code: types.CodeType) -> types.FunctionType:
    """``fn`` with ``code`` (from ``hook_calls``): same globals, closure, defaults, name."""
    new = types.FunctionType(code, fn.__globals__, fn.__name__, fn.__defaults__, fn.__closure__)
    new.__kwdefaults__ = fn.__kwdefaults__
    new.__qualname__ = fn.__qualname__
    return new
