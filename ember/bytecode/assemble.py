"""Assemble a list of Instructions back into a ``types.CodeType``.

The steps, in order:

1. ``fix_jump_directions`` - 3.11 encodes jumps as unsigned relative
   distances, so the opcode carries the direction (``POP_JUMP_FORWARD_IF_TRUE``
   vs ``POP_JUMP_BACKWARD_IF_TRUE``).  After edits move a target to the other
   side of its jump, the variant must flip.  Direction only depends on list
   order, so this runs once before layout.
2. Resolve table indices from ``argval``: constants, names, locals, cells and
   free variables.  The tables start from the template code object's, so an
   unchanged function keeps identical tables and indices; new values are
   appended.
3. Layout to a fixed point: a jump's argument depends on the byte distance to
   its target, which depends on how many ``EXTENDED_ARG`` prefixes the
   instructions in between need, which depends on their arguments.  Sizes
   only ever grow, so the iteration terminates at the smallest layout, the
   same one CPython's compiler finds.
4. Emit ``co_code`` (prefixes, opcode, CACHE entries), the exception table
   (maximal runs of instructions sharing a handler), the location table (one
   entry per instruction, like CPython 3.11), and ``co_stacksize`` from the
   stack-depth analysis over every path including exception handlers.
"""

from __future__ import annotations

import dis
import math
import opcode as _opcode
import types
from typing import Any, Optional, Sequence

from .analysis import instruction_index, max_stack_depth
from .instructions import (
    CACHE,
    EXTENDED_ARG,
    HAS_COMPARE,
    HAS_CONST,
    HAS_FREE,
    HAS_JABS,
    HAS_JREL,
    HAS_LOCAL,
    HAS_NAME,
    FAST_PAIRS,
    FAST_READS_CELLS,
    NAME_FLAG_SHIFT,
    Instruction,
    compare_arg,
    has_arg,
    inline_cache_entries,
    is_backward_jump,
)
from .tables import encode_exception_table, encode_location_table

__all__ = ["assemble", "fix_jump_directions", "ConstTable", "AssembledLayout", "layout"]


# --------------------------------------------------------------------------
# jump directions
# --------------------------------------------------------------------------

_FLIP = {}
for _name in _opcode.opmap:
    if "FORWARD" in _name and _name.replace("FORWARD", "BACKWARD") in _opcode.opmap:
        _FLIP[_name] = (_name, _name.replace("FORWARD", "BACKWARD"))
        _FLIP[_name.replace("FORWARD", "BACKWARD")] = _FLIP[_name]
# JUMP_BACKWARD_NO_INTERRUPT only skips the eval-breaker check; going forward
# there is nothing to interrupt, so a plain JUMP_FORWARD is equivalent.
if "JUMP_BACKWARD_NO_INTERRUPT" in _opcode.opmap:
    _FLIP["JUMP_BACKWARD_NO_INTERRUPT"] = ("JUMP_FORWARD", "JUMP_BACKWARD_NO_INTERRUPT")


_NEGATED = {
    "POP_JUMP_IF_FALSE": "POP_JUMP_IF_TRUE",
    "POP_JUMP_IF_TRUE": "POP_JUMP_IF_FALSE",
    "POP_JUMP_IF_NONE": "POP_JUMP_IF_NOT_NONE",
    "POP_JUMP_IF_NOT_NONE": "POP_JUMP_IF_NONE",
}


def fix_jump_directions(instructions: Sequence[Instruction]) -> None:
    """Give every relative jump the forward/backward variant matching the
    relative position of its target in the list.  Jumps that exist only in
    one direction (``FOR_ITER``, ``SEND``, ``JUMP_IF_*_OR_POP``) raise if their
    target is behind them: rewrite those with an explicit trampoline.

    3.12+ have only forward conditional jumps: a backward ``POP_JUMP_IF_X t``
    becomes ``POP_JUMP_IF_not_X next; JUMP_BACKWARD t`` (as CPython's compiler
    does), the new ``JUMP_BACKWARD`` inserted into ``instructions`` (which must
    then be a list).  The jump instruction itself stays first, so jumps to it
    still land on the test."""
    index = instruction_index(instructions)
    lowered = []
    for i, instr in enumerate(instructions):
        if instr.opcode not in HAS_JREL:
            continue
        if instr.target is None:
            raise ValueError(f"jump without target: {instr!r}")
        backward = index[id(instr.target)] <= i
        if backward == is_backward_jump(instr.opname):
            continue
        if backward and instr.opname in _NEGATED and "JUMP_BACKWARD" in _opcode.opmap:
            lowered.append(i)
            continue
        if instr.opname not in _FLIP:
            raise ValueError(
                f"{instr.opname} can only jump {'backward' if not backward else 'forward'}, "
                f"but its target {instr.target!r} is {'behind' if backward else 'ahead of'} it"
            )
        fwd, bwd = _FLIP[instr.opname]
        instr.opname = bwd if backward else fwd
        instr.opcode = _opcode.opmap[instr.opname]
    for i in reversed(lowered):
        instr = instructions[i]
        if i + 1 >= len(instructions):
            raise ValueError(f"conditional jump {instr!r} at the end of the code")
        back = Instruction(opname="JUMP_BACKWARD", opcode=_opcode.opmap["JUMP_BACKWARD"],
                           positions=instr.positions, target=instr.target,
                           exn_tab_entry=instr.exn_tab_entry)
        instr.opname = _NEGATED[instr.opname]
        instr.opcode = _opcode.opmap[instr.opname]
        instr.target = instructions[i + 1]
        if not isinstance(instructions, list):
            raise TypeError("lowering a backward conditional jump needs a list of instructions")
        instructions.insert(i + 1, back)


# --------------------------------------------------------------------------
# tables
# --------------------------------------------------------------------------


def _const_key(value: Any) -> Any:
    """Key under which two constants are interchangeable, as in CPython's
    ``_PyCode_ConstantKey``: ``1``, ``1.0`` and ``True`` stay distinct, as do
    ``0.0`` and ``-0.0``."""
    if isinstance(value, float):
        return (float, value, math.copysign(1.0, value), math.isnan(value))
    if isinstance(value, complex):
        return (complex, _const_key(value.real), _const_key(value.imag))
    if isinstance(value, tuple):
        return (tuple, tuple(_const_key(v) for v in value))
    if isinstance(value, frozenset):
        return (frozenset, frozenset(_const_key(v) for v in value))
    if isinstance(value, (str, bytes, int, bool, type(None), type(Ellipsis))):
        return (type(value), value)
    return (type(value), id(value))  # code objects and anything exotic: identity


class ConstTable:
    """``co_consts`` being built: identity first (so decoded argvals map back
    to their own slot even among equal constants), then value key."""

    def __init__(self, initial: Sequence[Any] = ()):
        self.values = list(initial)
        self._by_id = {}
        self._by_key = {}
        for i, v in enumerate(self.values):
            self._by_id.setdefault(id(v), i)
            try:
                self._by_key.setdefault(_const_key(v), i)
            except TypeError:  # pragma: no cover - unhashable constant
                pass

    def index(self, value: Any) -> int:
        i = self._by_id.get(id(value))
        if i is not None and self.values[i] is value:
            return i
        key = _const_key(value)
        i = self._by_key.get(key)
        if i is None:
            i = len(self.values)
            self.values.append(value)
            self._by_id[id(value)] = i
            self._by_key[key] = i
        return i


class _NameTable:
    def __init__(self, initial: Sequence[str] = ()):
        self.values = list(initial)
        self._index = {}
        for i, v in enumerate(self.values):
            self._index.setdefault(v, i)

    def index(self, name: str) -> int:
        i = self._index.get(name)
        if i is None:
            if not isinstance(name, str):
                raise TypeError(f"name must be a str, got {name!r}")
            i = self._index[name] = len(self.values)
            self.values.append(name)
        return i


def _resolve_args(instructions, consts: ConstTable, names: _NameTable, varnames: _NameTable, cellvars, freevars):
    """Fill ``arg`` of every table-backed instruction from its ``argval``."""
    # Locals first: appending a new local shifts every cell/free index, so
    # the localsplus layout is only known once all locals are in the table.
    for instr in instructions:
        if instr.opcode in HAS_LOCAL:
            for name in (instr.argval if instr.opname in FAST_PAIRS else (instr.argval,)):
                if name in cellvars and name not in varnames.values:
                    if FAST_READS_CELLS:
                        continue
                    raise ValueError(f"{instr.opname} of cell variable {name!r}")
                if name in freevars:
                    if FAST_READS_CELLS:
                        continue
                    raise ValueError(f"{instr.opname} of free variable {name!r}")
                varnames.index(name)
    localsplus = list(varnames.values)
    localsplus += [c for c in cellvars if c not in varnames.values]
    localsplus += list(freevars)
    slot = {}
    for i, name in enumerate(localsplus):
        slot.setdefault(name, i)
    _split_wide_pairs(instructions, slot)
    for instr in instructions:
        op = instr.opcode
        if op is None:
            raise ValueError(f"{instr.opname} does not exist on this Python version")
        if op in HAS_CONST:
            instr.arg = consts.index(instr.argval)
        elif op in HAS_NAME:
            shift = NAME_FLAG_SHIFT.get(instr.opname, 0)
            if shift:
                flags = (instr.arg or 0) & ((1 << shift) - 1)
                instr.arg = (names.index(instr.argval) << shift) | flags
            else:
                instr.arg = names.index(instr.argval)
        elif op in HAS_LOCAL or op in HAS_FREE:
            if instr.opname == "COPY_FREE_VARS":  # pragma: no cover - not in hasfree on 3.11
                continue
            pair = instr.opname in FAST_PAIRS
            for name in (instr.argval if pair else (instr.argval,)):
                if name not in slot:
                    raise ValueError(
                        f"{instr.opname} {name!r}: not a cell or free variable of the code object"
                    )
            if pair:
                first, second = (slot[n] for n in instr.argval)
                if first > 15 or second > 15:
                    raise ValueError(f"{instr.opname} {instr.argval!r}: a slot above 15 cannot be paired")
                instr.arg = first << 4 | second
            else:
                instr.arg = slot[instr.argval]
        elif op in HAS_JREL or op in HAS_JABS:
            pass  # filled in by the layout loop
        elif has_arg(op) and instr.arg is None:
            if op in HAS_COMPARE and isinstance(instr.argval, str):
                instr.arg = compare_arg(instr.argval)
            elif isinstance(instr.argval, int):
                instr.arg = instr.argval
            else:
                raise ValueError(f"{instr.opname} needs an integer arg, got argval {instr.argval!r}")


_SINGLES = {"LOAD_FAST_LOAD_FAST": ("LOAD_FAST", "LOAD_FAST"),
            "STORE_FAST_STORE_FAST": ("STORE_FAST", "STORE_FAST"),
            "STORE_FAST_LOAD_FAST": ("STORE_FAST", "LOAD_FAST")}


def _split_wide_pairs(instructions, slot) -> None:
    """3.13's two-local superinstructions hold 4-bit slots: a pair naming a slot above 15 (a
    resume function's extra parameters shift every local) becomes its two plain instructions,
    the first keeping the instruction's identity (jumps to it, its exception entry)."""
    k = 0
    while k < len(instructions):
        instr = instructions[k]
        if instr.opname in FAST_PAIRS and any(slot.get(n, 0) > 15 for n in instr.argval):
            if not isinstance(instructions, list):
                raise TypeError("splitting a wide LOAD_FAST_LOAD_FAST-style pair needs a list of instructions")
            first, second = _SINGLES[instr.opname]
            a, b = instr.argval
            instr.opname, instr.opcode, instr.argval, instr.arg = first, _opcode.opmap[first], a, None
            instructions.insert(k + 1, Instruction(
                opname=second, opcode=_opcode.opmap[second], argval=b, positions=instr.positions,
                exn_tab_entry=instr.exn_tab_entry))
            k += 1
        k += 1


# --------------------------------------------------------------------------
# layout
# --------------------------------------------------------------------------


def _ext_count(arg: Optional[int]) -> int:
    if not arg or arg <= 0xFF:
        return 0
    if arg <= 0xFFFF:
        return 1
    if arg <= 0xFFFFFF:
        return 2
    return 3


class AssembledLayout:
    """Where each instruction ended up: ``start`` (its first code unit,
    including EXTENDED_ARG prefixes), ``offset`` (the opcode itself, what
    ``dis`` reports) and ``size`` in code units."""

    def __init__(self, starts, offsets, sizes):
        self.starts = starts
        self.offsets = offsets
        self.sizes = sizes


def layout(instructions: Sequence[Instruction]) -> AssembledLayout:
    """Compute jump arguments and instruction sizes to a fixed point."""
    index = instruction_index(instructions)
    caches = [inline_cache_entries(i.opcode) for i in instructions]
    # A jump starts from the prefix count of its decoded arg (0 for a new one): the distance is a
    # fixed point with or without a prefix near 255, and CPython's assembler (which starts from
    # placeholder args) sometimes settles on the larger one (3.13: torch/_inductor/runtime/
    # runtime_utils.py); starting there reproduces it. Either is valid bytecode.
    ext = [_ext_count(i.arg) for i in instructions]
    while True:
        starts, offsets = [], []
        pos = 0
        for k in range(len(instructions)):
            starts.append(pos)
            offsets.append(pos + 2 * ext[k])
            pos += 2 * (ext[k] + 1 + caches[k])
        changed = False
        for k, instr in enumerate(instructions):
            if instr.opcode in HAS_JREL:
                target_start = starts[index[id(instr.target)]]
                next_offset = offsets[k] + 2 + 2 * caches[k]
                if is_backward_jump(instr.opname):
                    arg = (next_offset - target_start) // 2
                else:
                    arg = (target_start - next_offset) // 2
                if arg < 0:  # pragma: no cover - fix_jump_directions prevents it
                    raise ValueError(f"jump {instr!r} has the wrong direction")
            elif instr.opcode in HAS_JABS:  # pragma: no cover - no absolute jumps on 3.11+
                arg = starts[index[id(instr.target)]] // 2
            else:
                continue
            instr.arg = arg
            instr.argval = starts[index[id(instr.target)]]
            instr.argrepr = f"to {instr.argval}"
            need = _ext_count(arg)
            if need > ext[k]:
                ext[k] = need
                changed = True
        if not changed:
            sizes = [ext[k] + 1 + caches[k] for k in range(len(instructions))]
            return AssembledLayout(starts, offsets, sizes)


def _emit_code(instructions, lay: AssembledLayout) -> bytes:
    out = bytearray()
    for instr, size in zip(instructions, lay.sizes):
        arg = instr.arg if has_arg(instr.opcode) and instr.arg is not None else 0
        caches = inline_cache_entries(instr.opcode)
        n_ext = size - 1 - caches
        for shift in range(n_ext, 0, -1):
            out += bytes((EXTENDED_ARG, (arg >> (8 * shift)) & 0xFF))
        out += bytes((instr.opcode, arg & 0xFF))
        out += bytes((CACHE, 0)) * caches
    return bytes(out)


def _exception_entries(instructions, lay: AssembledLayout, index):
    """Maximal runs of consecutive instructions with the same handler."""
    entries = []
    run = None  # [start, end, key, entry]
    for k, instr in enumerate(instructions):
        e = instr.exn_tab_entry
        key = None if e is None else (id(e.target), e.depth, bool(e.lasti))
        if run is not None and key == run[2]:
            run[1] = lay.starts[k] + 2 * lay.sizes[k]
            continue
        if run is not None:
            entries.append(run)
            run = None
        if key is not None:
            run = [lay.starts[k], lay.starts[k] + 2 * lay.sizes[k], key, e]
    if run is not None:
        entries.append(run)
    return [
        (start, end, lay.starts[index[id(e.target)]], e.depth, e.lasti)
        for start, end, _, e in entries
    ]


def _locations(instructions):
    """Source location per instruction; new ones (``positions is None``)
    inherit the previous instruction's, so a raise in generated code points
    at the user's line it was generated for."""
    locs = []
    prev = None
    for instr in instructions:
        pos = instr.positions
        if pos is None and instr.starts_line is not None:
            pos = dis.Positions(instr.starts_line, instr.starts_line, None, None)
        if pos is None:
            pos = prev
        locs.append(tuple(pos) if pos is not None else None)
        prev = pos
    return locs


# --------------------------------------------------------------------------
# entry point
# --------------------------------------------------------------------------


def assemble(
    instructions: Sequence[Instruction],
    template: types.CodeType,
    *,
    consts: Optional[Sequence[Any]] = None,
    names: Optional[Sequence[str]] = None,
    varnames: Optional[Sequence[str]] = None,
    cellvars: Optional[Sequence[str]] = None,
    freevars: Optional[Sequence[str]] = None,
    **replace: Any,
) -> types.CodeType:
    """Build a code object from ``instructions``, taking everything else
    (name, flags, argument counts, first line...) from ``template``.

    ``consts``/``names``/``varnames`` seed the tables (default: the
    template's); values referenced by instructions but missing are appended.
    ``cellvars``/``freevars`` are taken as given: a cell cannot be invented by
    reference alone, it also needs ``MAKE_CELL``.  Other keyword arguments are
    passed to ``CodeType.replace`` (``co_name=...``, ``co_argcount=...``).

    Instructions are updated in place: table indices and jump arguments in
    ``arg``, jump direction variants in ``opname``/``opcode``.
    """
    if not instructions:
        raise ValueError("cannot assemble an empty instruction list")
    fix_jump_directions(instructions)
    cellvars = tuple(template.co_cellvars if cellvars is None else cellvars)
    freevars = tuple(template.co_freevars if freevars is None else freevars)
    const_table = ConstTable(template.co_consts if consts is None else consts)
    name_table = _NameTable(template.co_names if names is None else names)
    var_table = _NameTable(template.co_varnames if varnames is None else varnames)
    _resolve_args(instructions, const_table, name_table, var_table, cellvars, freevars)

    lay = layout(instructions)
    index = instruction_index(instructions)
    co_code = _emit_code(instructions, lay)
    exception_table = encode_exception_table(_exception_entries(instructions, lay, index))
    firstlineno = replace.get("co_firstlineno", template.co_firstlineno)
    linetable = encode_location_table(firstlineno, list(zip(_locations(instructions), lay.sizes)))
    stacksize = max_stack_depth(instructions)

    fields = dict(
        co_code=co_code,
        co_consts=tuple(const_table.values),
        co_names=tuple(name_table.values),
        co_varnames=tuple(var_table.values),
        co_cellvars=cellvars,
        co_freevars=freevars,
        co_nlocals=len(var_table.values),
        co_stacksize=stacksize,
        co_exceptiontable=exception_table,
        co_linetable=linetable,
    )
    fields.update(replace)
    return template.replace(**fields)
