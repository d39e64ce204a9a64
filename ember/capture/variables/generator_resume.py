"""A generator suspended in the frame, handed over as a real generator suspended at the same point.

A generator the frame has started and not finished can leave the frame: returned (here), or
live across a graph break only when a ``contextlib.contextmanager`` block drives it (the
block's exit runs it to its end; any other is made real by restarting the capture with the
break where it is made, see GeneratorVariable.reconstruct). Eager hands over the very generator object, suspended at its ``yield``;
the rest of its body runs only as the caller consumes it. ember rebuilds that object: a new
generator function whose code is a copy of the original's (``make_resume_code(generator=True)``)
with a prologue that restores the suspended frame's stack and live locals and jumps to the
``YIELD_VALUE`` it stopped at. The residual code calls it and runs it once (the prologue only:
no program code runs), so it is suspended at that ``yield``::

    def whoo(t):                        gen = whoo(t); next(gen); return gen     # compiled
        yield t + 1            ->       returns resume_at_12(t) advanced once: its next()
        yield t + 2                     runs `yield t + 2` (eagerly), as eager's generator would
        yield t + 3

The later ``next`` / ``send`` / ``throw`` / ``close`` act on the rebuilt frame, so the body's
side effects, exceptions and ``finally`` blocks happen when eager's would. A generator inside
``yield from`` passes its sub-iterator as a stack item (rebuilt the same way when it is a
generator). Not rebuilt (the caller keeps its graph break): a generator with cell variables
of its own (a closure made before the yield may share them), one suspended inside a ``with``
block (its ``__exit__`` would have to be a real bound method) or inside an ``except`` handler
(the exception being handled is part of the frame's state).
"""
from __future__ import annotations

import types

_CACHE: dict = {}


def _resume_generator(code, globals_dict, closure, args, name, qualname):
    """The rebuilt generator, suspended at the yield (runs the generated prologue only)."""
    fn = types.FunctionType(code, globals_dict, name, None, closure or None)
    fn.__qualname__ = qualname
    gen = fn(*args)
    next(gen)
    return gen


def _handler_free(instructions, index) -> bool:
    """The yield is in no ``with`` block and no ``except`` handler (try bodies are fine).

    The chain of handlers from the yield outwards (as ``analysis.active_exception_entries``): a
    try body's handler starts with ``PUSH_EXC_INFO`` and is itself covered by a cleanup entry
    (``COPY; POP_EXCEPT; RERAISE``); a cleanup entry reached directly means the yield is inside
    a handler."""
    from ember.bytecode.analysis import instruction_index
    pos = instruction_index(instructions)
    entry = instructions[index].exn_tab_entry
    after_handler = False
    seen = set()
    while entry is not None and id(entry) not in seen:
        seen.add(id(entry))
        target = entry.target
        if target.opname == "PUSH_EXC_INFO":
            t = pos[id(target)]
            if t + 1 < len(instructions) and instructions[t + 1].opname == "WITH_EXCEPT_START":
                return False
            after_handler = True
        elif target.opname == "CALL_INTRINSIC_1":  # 3.12+: a generator's StopIteration -> RuntimeError
            after_handler = False
        elif not after_handler:
            return False  # a handler's cleanup: the yield is inside an except block
        else:
            after_handler = False
        entry = target.exn_tab_entry
    return True


def _analysed(code):
    """(instructions, live locals before each) of ``code``, decoded once."""
    hit = _CACHE.get(code)
    if hit is None:
        from ember.bytecode.analysis import live_locals_at_all
        from ember.bytecode.instructions import decode
        instructions = decode(code)
        hit = _CACHE[code] = (instructions, live_locals_at_all(instructions, code.co_freevars))
    return hit


def _resume_code(code, offset, depth, live, nulls):
    """The ResumeCode for the yield at ``offset``, or None if the code cannot be rebuilt there."""
    key = (code, offset, depth, live, nulls)
    if key in _CACHE:
        return _CACHE[key]
    from ember.bytecode.resume import find_offset, make_resume_code
    result = None
    instructions = _analysed(code)[0]
    index = find_offset(instructions, offset)
    if _handler_free(instructions, index):
        try:
            result = make_resume_code(code, index, depth, live, null_positions=nulls, generator=True,
                                      instructions=instructions)
        except (ValueError, NotImplementedError):
            result = None
    _CACHE[key] = result
    return result


def rebuild_suspended(gen, plan) -> str | None:
    """Source text making a real generator suspended where ``gen`` is, or None if it cannot be."""
    from ember.capture.sources import bind
    from ember.capture.variables.base import NullVariable
    child = gen.child
    code = child.code
    if gen.state != "suspended" or gen.yield_inst is None or code.co_cellvars:
        return None
    if plan.at_break and not getattr(gen, "managed_by_with", False):
        # Live across a graph break: the capture restarts with a break where the generator is made
        # (a real generator from the start, its body run eagerly), as torch.compile gives up on it.
        return None
    if any(type(child.cells.get(f)).__name__ not in ("CellVariable", "RealCellVariable") for f in code.co_freevars):
        return None
    from ember.bytecode.resume import find_offset
    instructions, live_at = _analysed(code)
    live_here = live_at[find_offset(instructions, gen.yield_inst.offset)]
    live = tuple(n for n in code.co_varnames if n in live_here and n in child.locals)
    stack = list(child.stack)
    from ember.capture.variables.inference_breaks import reentered_at_resume
    if any(reentered_at_resume(v) for v in stack):
        return None  # (an inference-mode block open in the generator: not handed over)
    nulls = tuple(p for p, v in enumerate(stack) if isinstance(v, NullVariable))
    rc = _resume_code(code, gen.yield_inst.offset, len(stack) + 1, live, nulls)
    if rc is None:
        return None
    passed = [v for v in stack if not isinstance(v, NullVariable)]
    values = dict(zip(rc.stack_args, passed))
    values.update((n, child.locals[n]) for n in live)
    args = "".join(plan.expr(values[n]) + ", " for n in rc.argnames)
    cells = "".join(plan.expr(child.cells[f]) + ", " for f in code.co_freevars)
    return (f"{bind(plan.scope, _resume_generator, 'resume_generator')}({bind(plan.scope, rc.code, 'code')}, "
            f"{bind(plan.scope, child.globals, 'globals')}, ({cells}), ({args}), {code.co_name!r}, "
            f"{code.co_qualname!r})")
