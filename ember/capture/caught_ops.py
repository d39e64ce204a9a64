"""Graph operations a ``try/except`` of the program may catch.

An op can raise at run time where the trace could not tell (a matrix that is not positive-definite,
an index out of range, a subclass's ``__torch_function__`` refusing its arguments). The graph then
raises in the middle; the entry runs the frame again eagerly from its start when the partial run
changed nothing (capture/rerun.py), and the eager rerun takes the program's ``except``. A graph
that cannot run again (an in-place write to an input, a tensor subclass input whose Python already
ran) lets the exception propagate as it is: right where nothing in the program catches it, a wrong
answer where an ``except`` around the op would have caught it::

    buf.add_(1)                               # the graph can no longer run again
    try:
        return torch.linalg.cholesky(a)       # raises at run time
    except torch.linalg.LinAlgError:
        return a * 0                          # eager's answer

So when an op is traced under a handler that may catch (``except``, the exit of a ``with`` block
of a context manager ember does not know; not ``finally`` nor ``torch.no_grad()``'s exit, which
re-raise) after the graph wrote inputs, or an input is written after such an op, the graph keeps
both and the entry undoes the writes before it reruns the frame: it copies the written inputs
before each call and puts them back if the graph raises (capture/write_snapshots.py), so the rerun
takes the program's ``except`` from eager's state. Where the writes cannot be undone exactly
(inputs requiring grad, metadata changes, random draws, copies over 1 MiB) the frame is traced
again (``CatchRetry``, remembered for the frame) with a break before each such op (the op then
runs eagerly, inside the program's ``try``) and a break at each such write, as after an assumed
check (capture/assumptions.py). Random draws stay: the entry puts the RNG state
back before a rerun. A ``finally`` body that must run when such a graph raises is seen here too
(``handlers_around``): the entry then undoes the graph's input writes and reruns the frame
(capture/write_snapshots.py).
"""
from __future__ import annotations

import torch

from ember.capture.variables.base import unsupported

_CATCHING = ("CHECK_EXC_MATCH", "CHECK_EG_MATCH")
_SCAN = 16  # instructions from a handler's start to its first match test


def _entry_at(code, offset: int):
    from ember.capture.interpreter import _exception_table
    for entry in _exception_table(code):
        if entry.start <= offset < entry.end:
            return entry
    return None


class CatchRetry(Exception):
    """The graph keeps an op a ``try`` may catch after writing inputs, and the entry cannot undo
    those writes: trace the frame again, breaking before such ops (``FrameSizes.catch_breaks``)."""


def _kind(tx, entry) -> str:
    """What the handler of exception-table ``entry`` is: ``"catch"`` where it may end an exception
    (an ``except`` clause, a bare ``except:``, the exit of a ``with`` block of a context manager
    ember does not know: ``contextlib.suppress`` returns True), ``"finally"`` for a ``finally``
    body (it runs, then passes the exception on), ``""`` for the exit of ember's own context
    managers (``torch.no_grad()``: the entry restores their state) and the compiler's cleanups.
    The last two pass the exception on to the handler that covers their own code."""
    from ember.capture.variables.ctx_managers import _WithExit
    instructions = tx.instructions
    i = tx.index_of.get(entry.target)
    if i is None:
        return "catch"  # (unknown: as if it could)
    if instructions[i].opname != "PUSH_EXC_INFO":
        return ""  # (a cleanup: re-raises)
    nxt = instructions[i + 1].opname if i + 1 < len(instructions) else ""
    if nxt == "POP_TOP":
        return "catch"  # a bare `except:`
    if nxt == "WITH_EXCEPT_START":
        exit_fn = tx.stack[entry.depth - 1] if 0 < entry.depth <= len(tx.stack) else None
        return "" if isinstance(exit_fn, _WithExit) else "catch"
    for inst in instructions[i + 1:i + _SCAN]:
        if inst.opname in _CATCHING:
            return "catch"
        if inst.opname in ("RERAISE", "PUSH_EXC_INFO"):
            break
    return "finally"  # (a `finally` body: the exception goes on after it)


def handlers_around(frame) -> tuple[bool, bool]:
    """For an exception raised where each translator from ``frame`` up to the root is: (whether it
    would reach a handler that may catch it before leaving the frame, whether a ``finally`` body
    would run on the way)."""
    tx, in_finally = frame, False
    while tx is not None:
        if tx.ip > 0:
            offset = tx.instructions[tx.ip - 1].offset
            for _ in range(64):
                entry = _entry_at(tx.code, offset)
                if entry is None:
                    break
                kind = _kind(tx, entry)
                if kind == "catch":
                    return True, in_finally
                in_finally = in_finally or kind == "finally"
                offset = entry.target  # (what covers the handler's own code handles what it re-raises)
        tx = tx.parent
    return False, in_finally


def _subclass_argument(values) -> bool:
    from ember.capture.variables.tensor import TensorVariable
    stack = list(values)
    while stack:
        v = stack.pop()
        if isinstance(v, TensorVariable):
            if v.cls not in (torch.Tensor, torch.nn.Parameter):
                return True
        elif type(v).__name__ in ("ListVariable", "TupleVariable"):
            stack.extend(v.items)
    return False


def check_call(output, args, kwargs, describe: str) -> None:
    """Before a graph call: break if it lies under a catching handler and the graph so far could
    then not run again, or if it runs a subclass's Python after such a call. (A write after one is
    refused with those after an assumed check: ``OutputGraph._call``.)"""
    from ember.capture.rerun import graph_changes_state
    caught = output.__dict__.get("caught_ops", False)
    frame = output.current_frame
    here, in_finally = handlers_around(frame) if frame is not None else (False, False)
    if in_finally:
        output.under_finally = True  # (capture/write_snapshots.py: a failure must run the finally body)
    if not here and not caught:
        return
    subclass = _subclass_argument([*args, *kwargs.values()]) or any(
        isinstance(v, torch.Tensor) and type(v) not in (torch.Tensor, torch.nn.Parameter)
        for v in output.input_values)
    if subclass:
        raise unsupported("EB0016", f"{describe} on a tensor subclass "
                          + ("inside a try block" if here else "after an op the program's try block may catch")
                          + " (if it raises, the program's except must see eager's state)")
    if here and not caught:
        changing, draws_only = graph_changes_state(output.graph)
        if not draws_only:
            sizes = output.frame_sizes
            if sizes is None or sizes.catch_breaks:
                raise unsupported("EB0016", f"{describe} inside a try block, after the graph changed state "
                                  "(if it raises, the program's except must see eager's state)")
            # the entry copies the inputs the graph writes and, if it raises, puts them back and
            # reruns the frame (capture/write_snapshots.py); where it cannot, the frame is traced
            # again with the break here (``CatchRetry``)
            output.undo_required = True
        if changing:
            output.assumed_draws = True  # (the entry puts the RNG state back before a rerun)
        output.caught_ops = True
