"""``locals()``, ``vars()`` and ``dir()`` inside a traced frame: read the frame's own variables
(or an object's ``__dict__``), as the builtins would in eager."""
from __future__ import annotations

import sys

from ember.capture.variables.base import ConstantVariable
from ember.capture.variables.containers import ListVariable
from ember.exc import PythonException


def frame_locals(tx, *args, **kwargs):
    """``locals()`` (and ``vars()``): the frame's bound variables as a new dict, in CPython's order
    (parameters and locals, then cells, then free variables; an unbound one is left out). Run after
    a graph break it would read the resume function's own variables: it is traced here instead."""
    if args or kwargs:
        return NotImplemented
    from ember.capture.variables.containers import DictVariable
    from ember.capture.variables.functions import CellVariable
    from ember.bytecode.resume import original_code
    code = original_code(tx.code)  # (in a resume function: the variables of the function it continues)
    names = list(code.co_varnames) + [c for c in code.co_cellvars if c not in code.co_varnames] + \
        list(code.co_freevars)
    # (3.11/3.12: one dict per frame, refreshed in place by every call: `l = locals()` sees later
    # ones; 3.13, PEP 667: a new snapshot per call)
    d = getattr(tx, "_locals_dict", None)
    if d is None or _SNAPSHOTS:
        d = tx._locals_dict = DictVariable({})
    for name in names:
        value = None
        if name in tx.cells:
            cell = tx.cells[name]
            if isinstance(cell, CellVariable):
                value = cell.contents
            else:
                value = tx._read_cell(cell)
        elif name in tx.locals:
            value = tx.locals[name]
        if value is not None:
            d.set_item(ConstantVariable(name), value)
        elif name in d.items:
            del d.items[name], d.keys[name]
    return d


_SNAPSHOTS = sys.version_info >= (3, 13)


def frame_dir(tx, *args, **kwargs):
    if args or kwargs:
        return NotImplemented
    return ListVariable([ConstantVariable(k) for k in sorted(frame_locals(tx).items)])


def frame_vars(tx, *args, **kwargs):
    """``vars(obj)``: its ``__dict__`` (as ``obj.__dict__`` reads it); ``vars()`` reads the frame."""
    if not args and not kwargs:
        return frame_locals(tx)
    if len(args) != 1 or kwargs or args[0].is_constant():
        return NotImplemented
    from ember.capture.variables.objects import MissingAttribute
    try:
        return tx.getattr(args[0], "__dict__")
    except MissingAttribute:
        raise PythonException(TypeError("vars() argument must have __dict__ attribute")) from None


def frame_exc_info(tx, *args, **kwargs):
    """``sys.exc_info()`` where no exception is being handled (guarded): ``(None, None, None)``
    (contextlib.ExitStack.__exit__ reads it). While one is: not modelled (its traceback)."""
    if args or kwargs:
        return NotImplemented
    if tx.current_exception_now() is None:
        return ConstantVariable((None, None, None))
    _exception_reader_break(tx, "sys.exc_info")


def frame_exception(tx, *args, **kwargs):
    """``sys.exception()`` (3.11+): the exception being handled, None outside a handler."""
    if args or kwargs:
        return NotImplemented
    current = tx.current_exception_now()
    if current is None:
        return ConstantVariable(None)
    vt = tx.current_exception_vt
    if vt is not None and getattr(vt, "real_exception", None) is current:
        return vt
    _exception_reader_break(tx, "sys.exception")


def _exception_reader_break(tx, name):
    """As an opaque call of it: a break; inside an except block of an exception the trace raised,
    the whole frame runs eagerly (eager's exception has a traceback through this frame)."""
    from ember.capture.variables.base import unsupported
    from ember.capture.variables.opaque_callables import handling_traced_exception
    e = unsupported("EB0033", f"calling builtin {name}")
    if handling_traced_exception(tx):
        e.whole_frame = True
    raise e
