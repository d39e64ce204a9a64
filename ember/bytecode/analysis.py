"""Data-flow facts about an instruction list: control flow, stack depth,
liveness of locals, and the exception blocks active at an instruction.

All analyses work on the instruction-level control-flow graph: an edge to the
next instruction unless the instruction never falls through (return, raise,
unconditional jump), an edge to ``target`` for jumps, and an edge to the
handler of ``exn_tab_entry`` for every covered instruction (any instruction
inside a try block may raise).

Why the capture layer needs these:

* ``stack_depths`` - at a graph break the interpreter must know how many
  values are on the stack, to pass them to the resume function; the assembler
  also uses it to compute ``co_stacksize`` the way CPython's compiler does.
* ``live_locals`` - a resume function should take only the locals that are
  read later before being overwritten; passing dead ones keeps tensors alive
  and adds guards for nothing.
* ``active_exception_entries`` / ``active_with_blocks`` - a graph break inside
  a ``with`` block needs to know which context managers are open.
"""

from __future__ import annotations

import dis
import sys
import collections.abc
from typing import Iterable, Optional, Sequence

from .instructions import (
    HAS_FREE,
    UNCONDITIONAL_EXITS,
    ExnTabEntry,
    Instruction,
    has_arg,
    is_jump,
)

__all__ = [
    "instruction_index",
    "successors",
    "reachable",
    "stack_effect",
    "stack_depths",
    "max_stack_depth",
    "live_locals",
    "live_locals_at_all",
    "active_exception_entries",
    "active_with_blocks",
]


def instruction_index(instructions: Sequence[Instruction]) -> dict[int, int]:
    """``id(instruction) -> position``: Instructions compare by identity."""
    return {id(instr): i for i, instr in enumerate(instructions)}


def _handler_depth(entry: ExnTabEntry) -> int:
    # The unwinder pops to ``depth``, pushes lasti if asked, then the exception.
    return entry.depth + int(entry.lasti) + 1


def successors(
    instructions: Sequence[Instruction], index: Optional[dict[int, int]] = None
) -> list[list[tuple[int, str]]]:
    """Per instruction, ``(successor index, kind)`` with kind in
    ``"next"``, ``"jump"``, ``"exception"``."""
    index = index if index is not None else instruction_index(instructions)
    n = len(instructions)
    result = []
    for i, instr in enumerate(instructions):
        succ = []
        if instr.opname not in UNCONDITIONAL_EXITS and i + 1 < n:
            succ.append((i + 1, "next"))
        if instr.target is not None and is_jump(instr):
            succ.append((index[id(instr.target)], "jump"))
        if instr.exn_tab_entry is not None:
            succ.append((index[id(instr.exn_tab_entry.target)], "exception"))
        result.append(succ)
    return result


def reachable(instructions: Sequence[Instruction], start: int = 0) -> list[bool]:
    """Which instructions can execute when entering at ``start``."""
    succ = successors(instructions)
    seen = [False] * len(instructions)
    work = [start] if instructions else []
    while work:
        i = work.pop()
        if seen[i]:
            continue
        seen[i] = True
        work.extend(j for j, _ in succ[i] if not seen[j])
    return seen


def stack_effect(instr: Instruction, jump: Optional[bool] = None) -> int:
    """``dis.stack_effect`` for an Instruction whose table index may be unresolved.

    For table-backed opcodes the effect does not depend on the index, so 0 is
    used while it is unknown; ``LOAD_GLOBAL``'s NULL bit lives in ``arg``.
    """
    if instr.opcode is None:
        raise ValueError(f"{instr.opname} does not exist on this Python version")
    if instr.opname == "RETURN_GENERATOR":
        # 3.11's dis says 0, but when the generator first resumes the sent
        # value (None) is on the stack, and the next instruction pops it.
        return 1
    if not has_arg(instr.opcode):
        return dis.stack_effect(instr.opcode, jump=jump)
    return dis.stack_effect(instr.opcode, instr.arg or 0, jump=jump)


def stack_depths(
    instructions: Sequence[Instruction], start: int = 0, start_depth: int = 0
) -> list[Optional[int]]:
    """Stack depth on entry to each instruction; ``None`` where unreachable.

    Raises ``ValueError`` if two paths reach an instruction with different
    depths or the stack underflows: that is invalid bytecode, and catching it
    here gives a far better message than a crash of the generated code.
    """
    index = instruction_index(instructions)
    succ = successors(instructions, index)
    depths: list[Optional[int]] = [None] * len(instructions)
    if not instructions:
        return depths
    depths[start] = start_depth
    work = [start]
    while work:
        i = work.pop()
        instr = instructions[i]
        depth = depths[i]
        for j, kind in succ[i]:
            if kind == "exception":
                new = _handler_depth(instr.exn_tab_entry)
            elif kind == "jump":
                new = depth + stack_effect(instr, jump=True)
            else:
                new = depth + stack_effect(instr, jump=False if is_jump(instr) else None)
            if new < 0:
                raise ValueError(f"stack underflow after {instr!r} (index {i})")
            if depths[j] is None:
                depths[j] = new
                work.append(j)
            elif depths[j] != new:
                raise ValueError(
                    f"inconsistent stack depth at {instructions[j]!r} (index {j}): "
                    f"{depths[j]} vs {new} via {instr!r} (index {i})"
                )
    return depths


# 3.13's compiler sizes the stack before it folds LOAD_CONST + RETURN_VALUE into
# RETURN_CONST, so the constant counts as pushed (3.12 folds first).
_RETURN_CONST_PUSHES = sys.version_info >= (3, 13)


def max_stack_depth(instructions: Sequence[Instruction]) -> int:
    """What ``co_stacksize`` must be: the deepest stack on any path, including
    the transient depth after an instruction that ends its path (a return)."""
    depths = stack_depths(instructions)
    best = 0
    for instr, depth in zip(instructions, depths):
        if depth is None:
            continue
        best = max(best, depth)
        if _RETURN_CONST_PUSHES and instr.opname == "RETURN_CONST":
            best = max(best, depth + 1)
        if is_jump(instr):
            best = max(best, depth + stack_effect(instr, jump=True), depth + stack_effect(instr, jump=False))
        else:
            best = max(best, depth + stack_effect(instr))
    return best


# --------------------------------------------------------------------------
# liveness
# --------------------------------------------------------------------------

_LOCAL_READS = {"LOAD_FAST", "LOAD_FAST_CHECK", "LOAD_FAST_AND_CLEAR", "DELETE_FAST"}
_LOCAL_WRITES = {"STORE_FAST"}


def _uses_defs(instr: Instruction, freevars: frozenset) -> tuple[tuple, tuple]:
    name = instr.opname
    if name in _LOCAL_READS:
        # DELETE_FAST counts as a read: deleting an unbound local raises, so
        # the resume function must receive the binding to keep that behaviour.
        return (instr.argval,), ()
    if name in _LOCAL_WRITES:
        return (), (instr.argval,)
    if name in ("LOAD_FAST_LOAD_FAST",):  # pragma: no cover - 3.13
        return tuple(instr.argval), ()
    if name in ("STORE_FAST_STORE_FAST",):  # pragma: no cover - 3.13
        return (), tuple(instr.argval)
    if name == "STORE_FAST_LOAD_FAST":  # pragma: no cover - 3.13
        return (instr.argval[1],), (instr.argval[0],)
    if instr.opcode in HAS_FREE and instr.argval not in freevars:
        # Cell variables: the *value* is what a resume function receives (it
        # makes a fresh cell), so STORE_DEREF kills like STORE_FAST, and
        # every other access (LOAD_DEREF, LOAD_CLOSURE - a closure will read
        # it -, DELETE_DEREF, MAKE_CELL of an argument) reads it.
        if name == "STORE_DEREF":
            return (), (instr.argval,)
        return (instr.argval,), ()
    return (), ()


def live_locals_at_all(
    instructions: Sequence[Instruction], freevars: Iterable[str] = ()
) -> Sequence[frozenset]:
    """Live-in sets for every instruction (backward data flow to a fixed point)."""
    freevars = frozenset(freevars)
    n = len(instructions)
    succ = successors(instructions)
    names: dict[str, int] = {}
    use = [0] * n
    kill = [0] * n
    for i, instr in enumerate(instructions):
        u, d = _uses_defs(instr, freevars)
        for v in u:
            use[i] |= 1 << names.setdefault(v, len(names))
        for v in d:
            kill[i] |= 1 << names.setdefault(v, len(names))
    live_in = [0] * n
    changed = True
    while changed:
        changed = False
        for i in range(n - 1, -1, -1):
            out = 0
            for j, _ in succ[i]:
                out |= live_in[j]
            new = use[i] | (out & ~kill[i])
            if new != live_in[i]:
                live_in[i] = new
                changed = True
    return _LiveSets(sorted(names, key=names.__getitem__), live_in)


class _LiveSets(collections.abc.Sequence):
    """The live-in set of each instruction, made from its bit set when first asked for (a resume
    function needs a few of them, not one per instruction)."""

    def __init__(self, by_bit: list[str], bits: list[int]):
        self._by_bit, self._bits, self._made = by_bit, bits, {}

    def __len__(self) -> int:
        return len(self._bits)

    def __getitem__(self, index):
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(len(self)))]
        index = range(len(self._bits))[index]  # (negative indices, IndexError)
        hit = self._made.get(index)
        if hit is None:
            bits, by_bit = self._bits[index], self._by_bit
            hit = self._made[index] = frozenset(by_bit[k] for k in range(bits.bit_length()) if bits >> k & 1)
        return hit


def live_locals(
    instructions: Sequence[Instruction], index: int, freevars: Iterable[str] = ()
) -> frozenset:
    """Locals (and cell variables) whose current value may be read at or after
    ``instructions[index]`` before being overwritten.  Free variables are not
    locals of this frame; pass ``code.co_freevars`` to exclude them."""
    return live_locals_at_all(instructions, freevars)[index]


# --------------------------------------------------------------------------
# exception blocks
# --------------------------------------------------------------------------


def active_exception_entries(instructions: Sequence[Instruction], index: int) -> list[ExnTabEntry]:
    """Exception-table entries that would handle an exception raised at
    ``instructions[index]``, innermost first.

    3.11 stores only the innermost handler per instruction.  The enclosing
    ones are found by following the chain: the handler's own instructions are
    covered by the entry of the next enclosing block (possibly via a
    "cleanup" handler that re-raises).
    """
    result = []
    seen = set()
    entry = instructions[index].exn_tab_entry
    while entry is not None and id(entry) not in seen:
        seen.add(id(entry))
        result.append(entry)
        entry = entry.target.exn_tab_entry
    return result


def active_with_blocks(instructions: Sequence[Instruction], index: int) -> list[ExnTabEntry]:
    """The subset of :func:`active_exception_entries` that are ``with`` (or
    ``async with``) blocks, innermost first: their handler starts with
    ``PUSH_EXC_INFO; WITH_EXCEPT_START``.  At the instruction the bound
    ``__exit__`` of each is on the stack at position ``entry.depth - 1``."""
    pos = instruction_index(instructions)
    blocks = []
    for entry in active_exception_entries(instructions, index):
        t = pos[id(entry.target)]
        if (
            entry.target.opname == "PUSH_EXC_INFO"
            and t + 1 < len(instructions)
            and instructions[t + 1].opname == "WITH_EXCEPT_START"
        ):
            blocks.append(entry)
    return blocks
