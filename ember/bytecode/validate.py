"""Check that a code object is one CPython can run, debug and report on safely.

CPython trusts the code objects it is given: a generated function whose frame
lacks ``COPY_FREE_VARS`` reads garbage from its free-variable slots (and
``frame.f_locals`` -- which debuggers and pytest's failure report read --
segfaults), a too-small ``co_stacksize`` overflows the frame, and a malformed
line or position table crashes ``traceback`` only when something finally
fails.  :func:`validate_code` checks every property the interpreter relies on:

* the bytecode decodes (with ``dis`` and with :func:`decode`), every jump and
  exception-table target is the start of an instruction, and decoding then
  re-assembling reproduces the same ``co_code`` and tables;
* ``co_stacksize`` covers the deepest stack on every path (exception handlers
  included) and no path underflows or reaches an instruction at two depths;
* the exception table agrees with ``dis._parse_exception_table``: entries in
  range and ordered, handler depth within the stack at the covered code;
* the frame prologue binds what the frame needs: ``MAKE_CELL`` for each cell,
  ``COPY_FREE_VARS len(co_freevars)`` when there are free variables, then
  ``RESUME``; every local index within the frame;
* ``co_positions()`` has one entry per code unit, ``co_lines()`` covers the
  code and agrees with it, positions are ordered (``end`` not before start),
  and a ``traceback.StackSummary`` with every instruction's position formats.

It is the standard library only, costs about a millisecond per function, and
runs on every code object ember generates when :data:`enabled` is true (the
test suite sets it; ``EMBER_VALIDATE_CODE=1`` does too).
"""

from __future__ import annotations

import dis
import os
import traceback
import types

__all__ = ["CodeValidationError", "validate_code", "enabled", "check_generated"]

# Validate every generated code object (see check_generated).
enabled = os.environ.get("EMBER_VALIDATE_CODE", "") not in ("", "0")


class CodeValidationError(AssertionError):
    """A generated code object violates an invariant of the interpreter."""


def check_generated(code: types.CodeType, *, from_source: bool = False) -> types.CodeType:
    """Validate ``code`` when :data:`enabled`; return it (for chaining).  ``from_source``: CPython
    compiled it from generated source text, so only the frame and positions need checking."""
    if enabled:
        validate_code(code, from_source=from_source)
    return code


def validate_code(code: types.CodeType, *, recursive: bool = True, from_source: bool = False) -> None:
    """Raise :class:`CodeValidationError` listing every problem found in ``code``
    (and, with ``recursive``, in the code objects among its constants)."""
    problems = _problems(code, from_source)
    if problems:
        listing = _disassembly(code)
        raise CodeValidationError(
            f"invalid code object {code.co_qualname} ({code.co_filename}):\n  - "
            + "\n  - ".join(problems) + "\n" + listing
        )
    if recursive:
        for const in code.co_consts:
            if isinstance(const, types.CodeType):
                validate_code(const, from_source=from_source)


def _disassembly(code) -> str:
    import io
    buf = io.StringIO()
    try:
        dis.dis(code, file=buf, depth=0)
    except Exception as e:  # the listing is only a courtesy
        return f"(dis failed: {type(e).__name__}: {e})"
    return buf.getvalue()


def _problems(code: types.CodeType, from_source: bool) -> list[str]:
    from .analysis import stack_depths, stack_effect
    from .instructions import decode

    problems: list[str] = []
    n_units = len(code.co_code) // 2
    if len(code.co_code) % 2:
        return ["co_code has an odd length"]
    if from_source:
        # CPython's compiler made the tables; only the frame could have been spoilt (by replace()).
        prologue = []
        for i in dis.get_instructions(code):
            prologue.append(i)
            if i.opname not in ("MAKE_CELL", "COPY_FREE_VARS", "NOP", "RETURN_GENERATOR", "POP_TOP"):
                break
        return _frame_problems(code, prologue)
    try:
        dis_insts = list(dis.get_instructions(code))
    except Exception as e:
        return [f"dis.get_instructions failed: {type(e).__name__}: {e}"]
    starts = {i.offset for i in dis_insts}
    for i in dis_insts:
        if i.opcode in dis.hasjrel or i.opcode in dis.hasjabs:
            if i.argval not in starts:
                problems.append(f"jump at {i.offset} to {i.argval}: not an instruction")

    problems += _frame_problems(code, dis_insts)
    problems += _exception_table_problems(code, starts, n_units)
    problems += _position_problems(code, dis_insts, n_units)
    if problems:
        return problems

    try:
        insts = decode(code)
    except Exception as e:
        return [f"decode failed: {type(e).__name__}: {e}"]
    try:
        depths = stack_depths(insts)
    except ValueError as e:
        return [f"stack: {e}"]
    need = 0
    for instr, depth in zip(insts, depths):
        if depth is not None:
            after = [depth + stack_effect(instr, jump=j) for j in ((True, False) if instr.target else (None,))]
            need = max(need, depth, *after)
    if code.co_stacksize < need:
        problems.append(f"co_stacksize {code.co_stacksize} < deepest stack {need}")
    for instr, depth in zip(insts, depths):
        e = instr.exn_tab_entry
        if depth is not None and e is not None and e.depth > depth:
            problems.append(f"handler depth {e.depth} above the stack ({depth}) at {instr.offset}")
    problems += _roundtrip_problems(code, insts)
    return problems


def _frame_problems(code, dis_insts) -> list[str]:
    problems = []
    if code.co_nlocals != len(code.co_varnames):
        problems.append(f"co_nlocals {code.co_nlocals} != {len(code.co_varnames)} varnames")
    n_args = code.co_argcount + code.co_kwonlyargcount
    n_args += bool(code.co_flags & 0x04) + bool(code.co_flags & 0x08)
    if n_args > len(code.co_varnames):
        problems.append(f"{n_args} arguments but only {len(code.co_varnames)} varnames")
    # The prologue, as CPython emits it: MAKE_CELL*, COPY_FREE_VARS?, RESUME 0.
    made, copied, resumed = set(), None, False
    for i in dis_insts:
        if i.opname == "MAKE_CELL":
            made.add(i.argval)
        elif i.opname == "COPY_FREE_VARS":
            copied = i.arg
        elif i.opname in ("NOP", "EXTENDED_ARG", "RETURN_GENERATOR", "POP_TOP"):
            continue  # a generator's prologue: RETURN_GENERATOR; POP_TOP; RESUME
        elif i.opname == "RESUME":
            resumed = i.arg == 0
            break
        else:
            break
    if not resumed:
        problems.append("no RESUME 0 in the prologue")
    params = code.co_varnames[:n_args]
    # A cell that is a parameter may be passed in as the cell object itself (resume functions share
    # a closure's cell that way), so it needs no MAKE_CELL; any other cell does.
    missing = [c for c in code.co_cellvars if c not in made and c not in params]
    if missing:
        problems.append(f"cell variables without MAKE_CELL in the prologue: {missing}")
    if code.co_freevars and copied != len(code.co_freevars):
        problems.append(f"{len(code.co_freevars)} free variables but prologue COPY_FREE_VARS is {copied}")
    if not code.co_freevars and copied:
        problems.append("COPY_FREE_VARS without free variables")
    n_plus = len(code.co_varnames) + len([c for c in code.co_cellvars if c not in code.co_varnames])
    n_plus += len(code.co_freevars)
    from .instructions import FAST_PAIRS
    for i in dis_insts:
        if (i.opcode in dis.haslocal or i.opcode in dis.hasfree) and i.arg is not None:
            slots = (i.arg >> 4, i.arg & 15) if i.opname in FAST_PAIRS else (i.arg,)
            for slot in slots:
                if slot >= n_plus:
                    problems.append(f"{i.opname} at {i.offset}: slot {slot} outside the frame ({n_plus} slots)")
    return problems


def _exception_table_problems(code, starts, n_units) -> list[str]:
    problems = []
    try:
        entries = dis._parse_exception_table(code)
    except Exception as e:
        return [f"exception table does not parse: {type(e).__name__}: {e}"]
    end_of_code = 2 * n_units
    prev_end = 0
    for e in entries:
        if not (0 <= e.start < e.end <= end_of_code):
            problems.append(f"exception entry {e} outside the code")
        if e.start < prev_end:
            problems.append(f"exception entry {e} overlaps the previous one")
        prev_end = e.end
        if e.target not in starts:
            problems.append(f"exception entry {e}: handler is not an instruction")
        if e.depth < 0:
            problems.append(f"exception entry {e}: negative depth")
    return problems


def _position_problems(code, dis_insts, n_units) -> list[str]:
    problems = []
    try:
        positions = list(code.co_positions())
        lines = list(code.co_lines())
    except Exception as e:
        return [f"location table does not parse: {type(e).__name__}: {e}"]
    if len(positions) != n_units:
        return [f"co_positions() has {len(positions)} entries for {n_units} code units"]
    covered = 0
    for start, end, line in lines:
        if start != covered or end <= start:
            problems.append(f"co_lines() range {(start, end)} does not follow {covered}")
            break
        covered = end
        for unit in range(start // 2, end // 2):
            if positions[unit][0] != line:
                problems.append(f"co_lines() says line {line} at {2 * unit}, co_positions() {positions[unit]}")
                break
    if covered != 2 * n_units and not problems:
        problems.append(f"co_lines() covers {covered} of {2 * n_units} bytes")
    for unit, (line, end_line, col, end_col) in enumerate(positions):
        where = f"position at {2 * unit}: {(line, end_line, col, end_col)}"
        if line is None:
            if end_line is not None:
                problems.append(f"{where}: an end line without a line")
            continue
        if line < 0 or (end_line is not None and end_line < line):
            problems.append(f"{where}: end before start")
        if (col is None) != (end_col is None):
            problems.append(f"{where}: half a column range")
        elif col is not None and (col < 0 or end_col < 0 or (end_line == line and end_col < col)):
            problems.append(f"{where}: bad column range")
    if problems:
        return problems
    # What a traceback shows for each instruction: the frame summary with its columns.
    frames = []
    for pos in set(positions[i.offset // 2] for i in dis_insts):
        line, end_line, col, end_col = pos
        frames.append(traceback.FrameSummary(code.co_filename, line, code.co_name, lookup_line=True,
                                             end_lineno=end_line, colno=col, end_colno=end_col))
    try:
        "".join(traceback.StackSummary.from_list(frames).format())
    except Exception as e:
        problems.append(f"traceback cannot format a position: {type(e).__name__}: {e}")
    return problems


def _roundtrip_problems(code, insts) -> list[str]:
    from .assemble import assemble
    try:
        again = assemble(insts, code)
    except Exception as e:
        return [f"re-assembling the decoded code failed: {type(e).__name__}: {e}"]
    problems = []
    for field in ("co_code", "co_exceptiontable"):
        if getattr(again, field) != getattr(code, field):
            problems.append(f"decode + assemble changes {field}")
    if list(again.co_positions()) != list(code.co_positions()):
        problems.append("decode + assemble changes co_positions()")
    return problems
