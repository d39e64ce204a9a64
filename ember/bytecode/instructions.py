"""Decode a code object into editable :class:`Instruction` objects.

Why not ``dis.get_instructions``?  Its instructions are immutable namedtuples
whose jump targets and exception handlers are *byte offsets*.  Offsets go stale
the moment one instruction is inserted, so every edit would have to renumber
everything.  Here a jump stores ``target``, a reference to the Instruction it
goes to, and every instruction covered by the exception table stores
``exn_tab_entry``, whose ``start``/``end``/``target`` are Instructions too.
Offsets, ``EXTENDED_ARG`` prefixes and inline ``CACHE`` entries are layout
details recomputed by :mod:`ember.bytecode.assemble`, so they are dropped here.

Which field is the truth at assembly time:

* For table-backed opcodes (constants, names, locals, cells/free variables)
  ``argval`` is authoritative and the index in ``arg`` is recomputed.  So an
  edit only has to change ``argval``.  ``LOAD_GLOBAL`` keeps its "push NULL"
  flag in the low bit of ``arg`` (``arg=None`` means no NULL).
* For jumps ``target`` is authoritative; ``arg``/``argval`` are recomputed.
* For every other opcode ``arg`` is authoritative; when it is ``None`` it is
  derived from ``argval`` (``COMPARE_OP`` from the operator string, otherwise
  ``argval`` itself).

Minimal example::

    insts = decode(f.__code__)
    i = next(i for i in insts if i.opname == "RETURN_VALUE")
    insts[insts.index(i):insts.index(i)] = [
        create_instruction("LOAD_CONST", argval=1), create_instruction("BINARY_OP", arg=0)]
    f.__code__ = assemble(insts, f.__code__)   # now returns result + 1
"""

from __future__ import annotations

import dis
import opcode as _opcode
import sys
import types
from dataclasses import dataclass, field
from typing import Any, Optional

__all__ = [
    "Instruction",
    "ExnTabEntry",
    "decode",
    "create_instruction",
    "copy_instructions",
    "insert_instructions",
    "localsplus_names",
    "inline_cache_entries",
    "is_jump",
    "is_backward_jump",
    "HAS_CONST",
    "HAS_NAME",
    "HAS_LOCAL",
    "HAS_FREE",
    "HAS_JREL",
    "HAS_JABS",
    "UNCONDITIONAL_EXITS",
    "NAME_FLAG_SHIFT",
    "GENERIC_JUMPS",
    "has_arg",
    "FAST_PAIRS",
    "FAST_READS_CELLS",
    "compare_arg",
    "COMPARE_SHIFT",
]

_NO_ARGVAL = object()

EXTENDED_ARG = _opcode.opmap["EXTENDED_ARG"]
CACHE = _opcode.opmap.get("CACHE", 0)
HAVE_ARGUMENT = _opcode.HAVE_ARGUMENT
# Opcodes that take an argument: 3.12 added ``opcode.hasarg`` (3.13 renumbered
# the opcodes, so ``op >= HAVE_ARGUMENT`` no longer tells).
_HAS_ARG = frozenset(getattr(_opcode, "hasarg", range(HAVE_ARGUMENT, 256)))


def has_arg(op: int) -> bool:
    """Whether ``op`` reads its oparg (the others ignore the byte after the opcode)."""
    return op in _HAS_ARG

HAS_CONST = frozenset(_opcode.hasconst)
HAS_NAME = frozenset(_opcode.hasname)
HAS_LOCAL = frozenset(_opcode.haslocal)
HAS_FREE = frozenset(_opcode.hasfree)
HAS_JREL = frozenset(_opcode.hasjrel)
HAS_JABS = frozenset(_opcode.hasjabs)
HAS_COMPARE = frozenset(_opcode.hascompare)

# Instructions after which control never falls through to the next one.
UNCONDITIONAL_EXITS = frozenset(
    name
    for name in (
        "RETURN_VALUE",
        "RETURN_CONST",
        "RAISE_VARARGS",
        "RERAISE",
        "JUMP_FORWARD",
        "JUMP_BACKWARD",
        "JUMP_BACKWARD_NO_INTERRUPT",
        "JUMP_ABSOLUTE",
        "JUMP",
        "JUMP_NO_INTERRUPT",
    )
)


# Name opcodes whose oparg carries flag bits below the co_names index
# (``arg = index << shift | flags``).  3.11: LOAD_GLOBAL's bit 0 means "also
# push NULL".  3.12 adds LOAD_ATTR (bit 0: method load) and LOAD_SUPER_ATTR
# (two bits).  The emit-side helpers for these live in versions.py.
NAME_FLAG_SHIFT = {"LOAD_GLOBAL": 1}
if sys.version_info >= (3, 12):
    NAME_FLAG_SHIFT.update({"LOAD_ATTR": 1, "LOAD_SUPER_ATTR": 2})

# 3.13 superinstructions on two locals: oparg = first << 4 | second, ``argval``
# the pair of names (as dis shows it).
FAST_PAIRS = frozenset({"LOAD_FAST_LOAD_FAST", "STORE_FAST_STORE_FAST", "STORE_FAST_LOAD_FAST"})
# 3.13 lowers LOAD_CLOSURE to LOAD_FAST: a "fast" opcode may name a cell or free variable.
FAST_READS_CELLS = sys.version_info >= (3, 13)

# COMPARE_OP's oparg: 3.11 is the index into ``cmp_op``; 3.12 shifts it left
# by 4 over a mask of the outcomes that mean True (read by the specialised
# int/float/str comparisons, so it must be right); 3.13 by 5, bit 4 meaning
# "convert the result to bool".
COMPARE_SHIFT = {(3, 11): 0, (3, 12): 4}.get(sys.version_info[:2], 5)


def _compare_args() -> dict:
    """cmp_op string -> the oparg this Python's compiler emits for it (mask included)."""
    out = {}
    for symbol in _opcode.cmp_op:
        code = compile(f"a {symbol} b", "<cmp>", "eval")
        out[symbol] = next(i.arg for i in dis.get_instructions(code) if i.opname == "COMPARE_OP")
    return out


_COMPARE_ARGS = _compare_args()


def compare_arg(symbol: str) -> int:
    """COMPARE_OP's oparg for the operator ``symbol`` (``"<"``, ``"=="``...)."""
    return _COMPARE_ARGS[symbol]


def inline_cache_entries(op: int) -> int:
    """Number of 2-byte CACHE code units that follow ``op`` in co_code."""
    table = getattr(_opcode, "_inline_cache_entries", None)
    if table is None:  # pragma: no cover - 3.13 moved it to dis
        table = dis._inline_cache_entries
    if isinstance(table, dict):  # pragma: no cover - 3.13 keys by opname
        return table.get(_opcode.opname[op], 0)
    return table[op]


def is_jump(instr: "Instruction") -> bool:
    return instr.opcode in HAS_JREL or instr.opcode in HAS_JABS


def is_backward_jump(opname: str) -> bool:
    return "BACKWARD" in opname


@dataclass(eq=False)
class ExnTabEntry:
    """One exception-table entry, with Instructions instead of offsets.

    ``start`` and ``end`` (inclusive) record the range at decode time and are
    informational: assembly uses only which instructions point at this entry
    through ``Instruction.exn_tab_entry``, so inserting an instruction into the
    middle of a try block needs nothing but copying the neighbour's entry.
    ``depth`` is the stack depth the handler unwinds to; ``lasti`` says whether
    the offset of the raising instruction is pushed too (cleanup handlers).
    """

    start: "Instruction"
    end: "Instruction"
    target: "Instruction"
    depth: int
    lasti: bool

    def __repr__(self) -> str:
        return (
            f"ExnTabEntry({_short(self.start)} to {_short(self.end)} -> "
            f"{_short(self.target)}, depth={self.depth}, lasti={self.lasti})"
        )


def _short(instr: Optional["Instruction"]) -> str:
    if instr is None:
        return "None"
    where = f"@{instr.offset}" if instr.offset is not None else "@new"
    return f"{instr.opname}{where}"


@dataclass(eq=False)
class Instruction:
    """A mutable bytecode instruction; compared by identity (jumps refer to it)."""

    opname: str
    opcode: Optional[int]
    arg: Optional[int] = None
    argval: Any = None
    argrepr: str = ""
    offset: Optional[int] = None
    starts_line: Optional[int] = None
    positions: Optional[dis.Positions] = None
    target: Optional["Instruction"] = None
    exn_tab_entry: Optional[ExnTabEntry] = None

    def __repr__(self) -> str:
        parts = [self.opname]
        if self.target is not None:
            parts.append(f"-> {_short(self.target)}")
        elif self.argval is not None or self.arg is not None:
            parts.append(repr(self.argval if self.argval is not None else self.arg))
        where = f"@{self.offset}" if self.offset is not None else "@new"
        return f"<{' '.join(parts)} {where}>"

    @property
    def is_jump(self) -> bool:
        return is_jump(self)


def localsplus_names(code: types.CodeType) -> list[str]:
    """Names indexed by LOAD_FAST/LOAD_DEREF opargs (3.11+ "fast locals plus").

    Locals come first, then cell variables that are not also arguments (a cell
    for an argument shares the argument's slot), then free variables.
    """
    names = list(code.co_varnames)
    names += [c for c in code.co_cellvars if c not in code.co_varnames]
    names += list(code.co_freevars)
    return names


def _describe(op: int, arg: Optional[int], code, localsplus, target_offset):
    """(argval, argrepr) for an opcode, mirroring dis so outputs compare equal."""
    if arg is None:
        return None, ""
    if op in HAS_CONST:
        value = code.co_consts[arg]
        return value, repr(value)
    if op in HAS_NAME:
        shift = NAME_FLAG_SHIFT.get(_opcode.opname[op], 0)
        if shift:
            name = code.co_names[arg >> shift]
            if _opcode.opname[op] == "LOAD_GLOBAL" and arg & 1:
                return name, "NULL + " + name
            return name, name
        name = code.co_names[arg]
        return name, name
    if op in HAS_JREL or op in HAS_JABS:
        return target_offset, f"to {target_offset}"
    if op in HAS_LOCAL or op in HAS_FREE:
        if _opcode.opname[op] in FAST_PAIRS:
            pair = (localsplus[arg >> 4], localsplus[arg & 15])
            return pair, f"{pair[0]}, {pair[1]}"
        name = localsplus[arg]
        return name, name
    if op in HAS_COMPARE:
        symbol = _opcode.cmp_op[arg >> COMPARE_SHIFT]
        return symbol, symbol
    if _opcode.opname[op] == "BINARY_OP":
        return arg, dis._nb_ops[arg][1]
    return arg, ""


def decode(code: types.CodeType) -> list[Instruction]:
    """Decode ``code`` into Instructions with resolved jump targets and handlers.

    EXTENDED_ARG prefixes are folded into the following instruction's ``arg``
    and CACHE entries are skipped; both come back at assembly.  Jumps and
    exception-table offsets that point at an EXTENDED_ARG prefix are resolved
    to the instruction the prefix belongs to.
    """
    co_code = code.co_code
    positions = list(code.co_positions())
    linestarts = dict(dis.findlinestarts(code))
    localsplus = localsplus_names(code)

    # Pass 1: split into instructions, remembering each one's byte span.
    raw = []  # (prefix_start, op_offset, op, arg)
    owner_of_unit = {}  # code-unit offset -> index into raw
    i = 0
    ext = 0
    prefix_start = 0
    n = len(co_code)
    while i < n:
        op = co_code[i]
        oparg = co_code[i + 1]
        if op == EXTENDED_ARG:
            ext = (ext << 8) | oparg
            i += 2
            continue
        arg = ((ext << 8) | oparg) if has_arg(op) else None
        ext = 0
        end = i + 2 + 2 * inline_cache_entries(op)
        for unit in range(prefix_start, end, 2):
            owner_of_unit[unit] = len(raw)
        raw.append((prefix_start, i, op, arg))
        i = end
        prefix_start = end

    # Pass 2: build the Instruction objects.
    instructions: list[Instruction] = []
    jump_targets: list[Optional[int]] = []
    for prefix_start, offset, op, arg in raw:
        target_offset = None
        if arg is not None and op in HAS_JREL:
            back = is_backward_jump(_opcode.opname[op])
            next_offset = offset + 2 + 2 * inline_cache_entries(op)
            target_offset = next_offset + (-2 * arg if back else 2 * arg)
        elif arg is not None and op in HAS_JABS:  # pragma: no cover - none on 3.11+
            target_offset = 2 * arg
        argval, argrepr = _describe(op, arg, code, localsplus, target_offset)
        starts_line = None
        for unit in range(prefix_start, offset + 2, 2):
            if unit in linestarts:
                starts_line = linestarts[unit]
                break
        pos = positions[offset // 2] if offset // 2 < len(positions) else None
        instructions.append(
            Instruction(
                opname=_opcode.opname[op],
                opcode=op,
                arg=arg,
                argval=argval,
                argrepr=argrepr,
                offset=offset,
                starts_line=starts_line,
                positions=dis.Positions(*pos) if pos is not None else None,
            )
        )
        jump_targets.append(target_offset)

    for instr, target_offset in zip(instructions, jump_targets):
        if target_offset is not None:
            instr.target = instructions[owner_of_unit[target_offset]]

    # Pass 3: attach exception-table entries.
    for entry in dis._parse_exception_table(code):
        first = owner_of_unit[entry.start]
        last = owner_of_unit[entry.end - 2]
        shared = ExnTabEntry(
            start=instructions[first],
            end=instructions[last],
            target=instructions[owner_of_unit[entry.target]],
            depth=entry.depth,
            lasti=bool(entry.lasti),
        )
        for k in range(first, last + 1):
            instructions[k].exn_tab_entry = shared
    return instructions


def _opcode_of(opname: str) -> int:
    op = _opcode.opmap.get(opname)
    if op is None or op > 255:  # (3.12+ list pseudo-instructions, >= 256, in opmap)
        raise ValueError(
            f"unknown opcode {opname!r} on Python {sys.version_info[0]}.{sys.version_info[1]}"
        )
    return op


# Generic jump names accepted on every version; the assembler picks the
# direction-specific variant that exists on the running Python.  3.11 spells
# the direction in the name of every relative jump; 3.12+ have one forward-only
# POP_JUMP_IF_* each (a backward conditional jump is lowered by the assembler)
# and list JUMP as a pseudo-instruction.  The 3.11 spellings are accepted on
# 3.12+ too, so code written against either reads the same.
if sys.version_info >= (3, 12):
    GENERIC_JUMPS = {"JUMP": "JUMP_FORWARD", "JUMP_NO_INTERRUPT": "JUMP_FORWARD"}
    for _cond in ("FALSE", "TRUE", "NONE", "NOT_NONE"):
        GENERIC_JUMPS[f"POP_JUMP_FORWARD_IF_{_cond}"] = f"POP_JUMP_IF_{_cond}"
        GENERIC_JUMPS[f"POP_JUMP_BACKWARD_IF_{_cond}"] = f"POP_JUMP_IF_{_cond}"
else:
    GENERIC_JUMPS = {
        "JUMP": "JUMP_FORWARD",
        "POP_JUMP_IF_FALSE": "POP_JUMP_FORWARD_IF_FALSE",
        "POP_JUMP_IF_TRUE": "POP_JUMP_FORWARD_IF_TRUE",
        "POP_JUMP_IF_NONE": "POP_JUMP_FORWARD_IF_NONE",
        "POP_JUMP_IF_NOT_NONE": "POP_JUMP_FORWARD_IF_NOT_NONE",
    }

# Other names create_instruction lowers to what the running Python executes:
# name -> (real opname, flag bits below the table index).  3.12 folded
# LOAD_METHOD into LOAD_ATTR's low bit; STORE_FAST_MAYBE_NULL (3.12+) and
# LOAD_CLOSURE (3.13) are pseudo-instructions the compiler lowers likewise.
PSEUDO_OPS: dict[str, tuple[str, int]] = {}
if sys.version_info >= (3, 12):
    PSEUDO_OPS.update({"LOAD_METHOD": ("LOAD_ATTR", 1), "STORE_FAST_MAYBE_NULL": ("STORE_FAST", 0)})
if sys.version_info >= (3, 13):
    PSEUDO_OPS["LOAD_CLOSURE"] = ("LOAD_FAST", 0)


def create_instruction(
    opname: str,
    arg: Optional[int] = None,
    argval: Any = _NO_ARGVAL,
    target: Optional[Instruction] = None,
    *,
    positions: Optional[dis.Positions] = None,
    exn_tab_entry: Optional[ExnTabEntry] = None,
) -> Instruction:
    """Make a new instruction for code generation.

    Give ``argval`` for table-backed opcodes (``LOAD_CONST`` value, a name),
    ``arg`` for counts/flags (``BUILD_TUPLE 3``, ``BINARY_OP 0``) and
    ``target`` for jumps.  Jump names without a direction (``JUMP``,
    ``POP_JUMP_IF_FALSE``...) are accepted; the assembler picks forward or
    backward.  ``positions=None`` means "inherit the previous instruction's
    source location" at assembly.
    """
    name = GENERIC_JUMPS.get(opname, opname)
    if name in PSEUDO_OPS:
        name, flags = PSEUDO_OPS[name]
        if flags:
            arg = (arg or 0) | flags
    op = _opcode_of(name)
    if argval is _NO_ARGVAL:
        argval = None
        if arg is not None and not (op in HAS_CONST or op in HAS_NAME or op in HAS_LOCAL or op in HAS_FREE):
            argval = arg
            if op in HAS_COMPARE:
                argval = _opcode.cmp_op[arg >> COMPARE_SHIFT]
    if (op in HAS_JREL or op in HAS_JABS) and target is None:
        raise ValueError(f"{opname} needs a target instruction")
    if op in HAS_CONST or op in HAS_NAME or op in HAS_LOCAL or op in HAS_FREE:
        if argval is None and op not in HAS_CONST:
            raise ValueError(f"{opname} needs argval (a name)")
    return Instruction(
        opname=name,
        opcode=op,
        arg=arg,
        argval=argval,
        argrepr="" if argval is None else repr(argval),
        positions=positions,
        target=target,
        exn_tab_entry=exn_tab_entry,
    )


def copy_instructions(instructions: list[Instruction]) -> list[Instruction]:
    """Deep-copy a list, remapping jump targets and exception entries to the copies.

    References to instructions outside the list (there should be none) raise.
    """
    mapping = {}
    copies = []
    for instr in instructions:
        new = Instruction(
            opname=instr.opname,
            opcode=instr.opcode,
            arg=instr.arg,
            argval=instr.argval,
            argrepr=instr.argrepr,
            offset=instr.offset,
            starts_line=instr.starts_line,
            positions=instr.positions,
        )
        mapping[id(instr)] = new
        copies.append(new)
    entries = {}
    for old, new in zip(instructions, copies):
        if old.target is not None:
            new.target = mapping[id(old.target)]
        e = old.exn_tab_entry
        if e is not None:
            if id(e) not in entries:
                entries[id(e)] = ExnTabEntry(
                    start=mapping.get(id(e.start), new),
                    end=mapping.get(id(e.end), new),
                    target=mapping[id(e.target)],
                    depth=e.depth,
                    lasti=e.lasti,
                )
            new.exn_tab_entry = entries[id(e)]
    return copies


def insert_instructions(
    instructions: list[Instruction],
    index: int,
    new: list[Instruction],
    *,
    redirect_jumps: bool = False,
) -> None:
    """Insert ``new`` before ``instructions[index]``, in place.

    New instructions without an exception entry join the anchor's try block
    (``exn_tab_entry`` of ``instructions[index]``): code inserted into a try
    body must be protected by it, or an exception it raises would skip the
    handler.  With ``redirect_jumps`` every jump to the anchor now lands on
    ``new[0]`` (the inserted code runs on every path into the anchor);
    without it only the fall-through path runs it.  Exception handler
    targets are never redirected: a handler's entry depth is fixed.
    """
    if not new:
        return
    anchor = instructions[index] if index < len(instructions) else None
    if anchor is not None:
        for instr in new:
            if instr.exn_tab_entry is None:
                instr.exn_tab_entry = anchor.exn_tab_entry
        if redirect_jumps:
            for instr in instructions:
                if instr.target is anchor:
                    instr.target = new[0]
    instructions[index:index] = new
