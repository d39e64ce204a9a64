"""Resume functions: continue a frame from the middle, in a new function.

At a graph break the capture layer compiles everything up to the breaking
instruction into a graph, lets that one instruction run eagerly, and then
needs to *continue the original function from the next instruction* - with
the values that were on the interpreter stack and the locals that are still
needed.  A resume function does exactly that::

    def f(xs):                              def resume_at_24(___stack0, total, x):
        total = 0                               # prologue (generated):
        for x in xs:            break here ->   #   push ___stack0 (the list iterator)
            total += x * 2                      #   jump to offset 24
        return total                            # ... the original body of f, unchanged

The arguments are the stack items, bottom first, then the live locals; a
method's first argument (``self``/``cls``), when passed, stays first, in the
slot zero-argument ``super()`` reads (see ``leading_argument``).  Globals,
closure cells (``__class__`` included), first line and line table are the
original's.  The
body is a copy of the original instructions, so loops that jump back to
before the resume point still work, and the exception table is preserved:
3.11 try blocks cost nothing at run time (they are a static table), so
jumping into the middle of a try body needs no setup at all.

``with`` blocks: inside a ``with`` the bound ``__exit__`` of the context
manager sits on the stack (see ``analysis.active_with_blocks``).  Passing it
as one of the stack items is enough for the block to close correctly when
the resumed function leaves it, normally or by an exception; this is tested.
Re-*entering* a context manager (when the caller cannot hand over the live
``__exit__``, e.g. because the manager was only simulated) is left to the
capture layer: it must rebuild the manager and call ``__enter__`` itself.

Generators: a suspended generator can be rebuilt as a new generator that resumes at
its ``YIELD_VALUE`` (``generator=True``, see ``make_resume_code``). Not supported
(``NotImplementedError``/``ValueError``): a generator frame resumed anywhere else, and
coroutines, resuming inside an
``except`` handler (the thread's "current exception" set by
``PUSH_EXC_INFO`` would be missing), and live locals that are unbound at the
break (the caller must not list them).
"""

from __future__ import annotations

import inspect
import keyword
import sys
import types
from dataclasses import dataclass
from typing import Optional, Sequence

from .analysis import stack_depths
from .assemble import assemble
from .instructions import HAS_LOCAL, Instruction, copy_instructions, create_instruction, decode
from .validate import check_generated
from .versions import jump

__all__ = ["ResumeCode", "make_resume_code", "make_resume_function", "find_offset", "leading_argument",
           "mangle_local", "unmangle_local"]

_LOAD_FAST_TRUSTS_COMPILER = sys.version_info >= (3, 12)
_LOAD_FAST_CHECK = create_instruction("LOAD_FAST_CHECK", argval="x").opcode if _LOAD_FAST_TRUSTS_COMPILER else None

_UNSUPPORTED_FLAGS = (
    inspect.CO_GENERATOR | inspect.CO_COROUTINE | inspect.CO_ASYNC_GENERATOR | inspect.CO_ITERABLE_COROUTINE
)


@dataclass
class ResumeCode:
    """A resume code object and how to call it."""

    code: types.CodeType
    offset: int  # offset in the original code of the first resumed instruction
    stack_args: tuple[str, ...]  # argument names of the stack items that are passed
    null_positions: tuple[int, ...]  # stack positions re-created as NULL, not passed
    live_locals: tuple[str, ...]  # argument names of the live locals
    leading: Optional[str] = None  # a live local passed first, before the stack items
    cell_args: tuple[str, ...] = ()  # live cell variables passed as cell objects (cells_by_reference)

    @property
    def argnames(self) -> tuple[str, ...]:
        """The parameters in order: ``leading`` (if any), the stack items, the other live locals."""
        if self.leading is None:
            return self.stack_args + self.live_locals
        return (self.leading,) + self.stack_args + tuple(n for n in self.live_locals if n != self.leading)


_MANGLED = "___local_"


def mangle_local(name: str) -> str:
    """``name`` if it can be a parameter in Python source, else a reversible identifier for it."""
    if name.isidentifier() and not keyword.iskeyword(name) and not name.startswith(_MANGLED):
        return name
    return _MANGLED + name.encode().hex()


def unmangle_local(name: str) -> str:
    """The original name of a (possibly) mangled local of a resume function."""
    if name.startswith(_MANGLED):
        try:
            return bytes.fromhex(name[len(_MANGLED):]).decode()
        except ValueError:
            return name
    return name


def leading_argument(code: types.CodeType) -> Optional[str]:
    """The local in the frame's first slot when ``code`` takes arguments (``self``, ``cls``).

    CPython's zero-argument ``super()`` reads the first slot of the running frame (and the
    ``__class__`` cell): a resume function of a method must keep the same local first, or
    ``super()`` binds whatever landed there (a stack item)."""
    n = code.co_argcount + code.co_kwonlyargcount
    n += bool(code.co_flags & inspect.CO_VARARGS) + bool(code.co_flags & inspect.CO_VARKEYWORDS)
    return code.co_varnames[0] if n else None


def _strip_prologue(body: list[Instruction], generator: bool = False) -> list[Instruction]:
    """Drop the original ``MAKE_CELL/COPY_FREE_VARS/RESUME 0`` prologue (a generator's has
    ``RETURN_GENERATOR/POP_TOP`` before its ``RESUME``): the resume function emits its own,
    and nothing jumps back into it."""
    strip = ("MAKE_CELL", "COPY_FREE_VARS", "RESUME", "NOP") + (("RETURN_GENERATOR", "POP_TOP") if generator else ())
    targeted = {id(i.target) for i in body if i.target is not None}
    targeted |= {id(i.exn_tab_entry.target) for i in body if i.exn_tab_entry is not None}
    k = 0
    while k < len(body) and body[k].opname in strip:
        if id(body[k]) in targeted:
            break
        done = body[k].opname == "RESUME"
        k += 1
        if done:
            break
    return body[k:]


def make_resume_code(
    code: types.CodeType,
    index: int,
    stack_depth: int,
    live_locals: Sequence[str],
    *,
    null_positions: Sequence[int] = (),
    instructions: Optional[list[Instruction]] = None,
    cells_by_reference: bool = False,
    generator: bool = False,
    reenter: Sequence[int] = (),
) -> ResumeCode:
    """Build ``resume_at_<offset>(stack items..., live locals...)``.

    ``index`` is the position in ``decode(code)`` (or in ``instructions`` if
    given - they must be an unmodified decode of ``code``) of the first
    instruction to run.  ``stack_depth`` must equal the analysed depth there;
    stack positions in ``null_positions`` hold a call's NULL, which cannot be
    passed as an argument and is pushed again by the prologue instead.

    ``cells_by_reference``: live cell variables are passed as the cell objects themselves (the
    prologue skips their ``MAKE_CELL``, so the frame uses the very cell a closure made before the
    break holds); otherwise their values are passed and the prologue makes fresh cells.

    ``generator``: ``code`` is a generator function's and ``index`` is a ``YIELD_VALUE`` it is
    suspended at. The resume code is a generator function too: its prologue (run by the first
    ``next``) pushes the stack items and a ``None`` in place of the value yielded, and jumps to
    that ``YIELD_VALUE``; from then on the generator is suspended where the original was, so
    ``send``/``throw``/``close`` act as on the original (try blocks are the static table).
    ``stack_depth`` counts the yielded value; the stack items passed are the ones below it.

    ``reenter``: stack positions whose item is a context manager the caller left, standing for a
    ``with`` block's ``__exit__``: the prologue enters it again (``BEFORE_WITH``), which puts its
    ``__exit__`` in that slot, as a ``with`` statement at the start of the resumed code would.
    """
    if generator:
        if code.co_flags & (_UNSUPPORTED_FLAGS & ~inspect.CO_GENERATOR) or not code.co_flags & inspect.CO_GENERATOR:
            raise ValueError(f"{code.co_name} is not a generator function")
    elif code.co_flags & _UNSUPPORTED_FLAGS:
        raise NotImplementedError(f"resume functions for generators/coroutines ({code.co_name})")
    original = instructions if instructions is not None else decode(code)
    depths = stack_depths(original)
    if not 0 <= index < len(original):
        raise IndexError(f"instruction index {index} out of range")
    if depths[index] is None:
        raise ValueError(f"instruction {original[index]!r} is unreachable")
    if depths[index] != stack_depth:
        raise ValueError(f"stack depth at {original[index]!r} is {depths[index]}, not {stack_depth}")
    nulls = tuple(sorted(set(null_positions)))
    if any(not 0 <= p < stack_depth for p in nulls):
        raise ValueError(f"null positions {nulls} outside a stack of depth {stack_depth}")
    unknown = [v for v in live_locals if v not in code.co_varnames and v not in code.co_cellvars]
    if unknown:
        raise ValueError(f"not locals of {code.co_name}: {unknown}")
    if len(set(live_locals)) != len(live_locals):
        raise ValueError(f"duplicate live locals: {list(live_locals)}")

    if generator and original[index].opname != "YIELD_VALUE":
        raise ValueError(f"a generator resumes at a YIELD_VALUE, not {original[index]!r}")
    if generator and stack_depth - 1 in nulls:
        raise ValueError("the yielded value cannot be a NULL")

    body = copy_instructions(original)
    target = body[index]
    offset = original[index].offset
    body = _strip_prologue(body, generator)
    if not any(i is target for i in body):  # pragma: no cover - resuming at the prologue
        raise ValueError("cannot resume inside the function prologue")

    taken = set(code.co_varnames) | set(code.co_cellvars) | set(code.co_freevars)
    stack_args = []
    for p in range(stack_depth - 1 if generator else stack_depth):
        if p in nulls:
            continue
        name = f"___stack{p}"
        while name in taken:
            name = "_" + name
        stack_args.append(name)
    live = tuple(live_locals)
    lead = leading_argument(code)
    leading = lead if lead is not None and lead in live else None
    params = ResumeCode(code, 0, tuple(stack_args), nulls, live, leading).argnames
    varnames = list(params)
    varnames += [v for v in code.co_varnames if v not in varnames]
    # Locals that are not identifiers (pytest's assertion rewriting makes `@py_assert1`) cannot be
    # parameters of generated Python source: inside the resume code they get a reversible name.
    varnames = [mangle_local(v) for v in varnames]
    for instr in body:
        if instr.opcode in HAS_LOCAL and isinstance(instr.argval, str):
            instr.argval = mangle_local(instr.argval)
        elif instr.opcode in HAS_LOCAL and isinstance(instr.argval, tuple):  # 3.13's pairs of locals
            instr.argval = tuple(mangle_local(v) for v in instr.argval)
    if _LOAD_FAST_TRUSTS_COMPILER:
        # 3.12+ LOAD_FAST does not check for an unbound local: the compiler proved it bound on
        # every path from the function's start. A resume function starts elsewhere, and a local
        # it was not given (unbound when the frame broke) must raise UnboundLocalError, not crash.
        passed = {mangle_local(p) for p in params}
        for instr in body:
            if instr.opname == "LOAD_FAST" and instr.argval not in passed:
                instr.opname, instr.opcode = "LOAD_FAST_CHECK", _LOAD_FAST_CHECK

    # The prologue takes the target's source position, so a traceback through
    # it (there should be none) points at the resumed line.
    by_reference = set(live) & set(code.co_cellvars) if cells_by_reference else set()
    prologue = [create_instruction("MAKE_CELL", argval=c) for c in code.co_cellvars if c not in by_reference]
    if code.co_freevars:
        prologue.append(create_instruction("COPY_FREE_VARS", arg=len(code.co_freevars)))
    if generator:
        prologue += [create_instruction("RETURN_GENERATOR"), create_instruction("POP_TOP")]
    prologue.append(create_instruction("RESUME", arg=0))
    args = iter(mangle_local(a) for a in stack_args)
    for p in range(stack_depth):
        if p in nulls:
            prologue.append(create_instruction("PUSH_NULL"))
        elif generator and p == stack_depth - 1:
            prologue.append(create_instruction("LOAD_CONST", argval=None))  # "yielded" by the first next()
        else:
            prologue.append(create_instruction("LOAD_FAST", argval=next(args)))
            if p in reenter:
                prologue += [create_instruction("BEFORE_WITH"), create_instruction("POP_TOP")]
    prologue += jump(target)
    for instr in prologue:
        instr.positions = target.positions

    flags = code.co_flags & ~(inspect.CO_VARARGS | inspect.CO_VARKEYWORDS)
    name = f"resume_at_{offset}"
    new_code = assemble(
        prologue + body,
        code,
        varnames=varnames,
        co_name=name,
        co_qualname=f"{code.co_qualname}.{name}",
        co_argcount=len(stack_args) + len(live),
        co_posonlyargcount=0,
        co_kwonlyargcount=0,
        co_flags=flags,
    )
    checked = check_generated(new_code)
    _ORIGIN[checked] = code
    return ResumeCode(checked, offset, tuple(stack_args), nulls, live, leading,
                      tuple(c for c in live if c in by_reference))


#: resume code -> the code of the function it continues (whose variables `locals()` lists)
_ORIGIN: dict = {}


def original_code(code: types.CodeType) -> types.CodeType:
    """The user function's code ``code`` continues, if it is a resume function's; else ``code``."""
    while code in _ORIGIN:
        code = _ORIGIN[code]
    return code


def make_resume_function(fn: types.FunctionType, resume: ResumeCode) -> types.FunctionType:
    """A function object for ``resume.code`` sharing ``fn``'s globals and
    closure cells (free variables stay shared with the original frame).
    ``__ember_cell_args__`` names the parameters that take cell objects."""
    new = types.FunctionType(resume.code, fn.__globals__, resume.code.co_name, None, fn.__closure__)
    new.__ember_cell_args__ = resume.cell_args
    return new


def find_offset(instructions: Sequence[Instruction], offset: int) -> int:
    """Index of the instruction at ``offset`` (as reported by ``dis``)."""
    for k, instr in enumerate(instructions):
        if instr.offset == offset:
            return k
    raise KeyError(f"no instruction at offset {offset}")

