"""Python's own error for an operation the trace decides without running it (unpacking a list into
too many names), made by running the same operation on placeholders, so its type and message are
eager's exactly. Raised as a `PythonException`: a handler in the frame catches it; uncaught, the
frame breaks at the instruction, which eager runs again and which raises it again (``replayable``).
"""
from __future__ import annotations

from ember.capture.variables.base import unsupported
from ember.exc import PythonException


def unpack_error(seq, n_items: int, before: int, after: int | None) -> Exception:
    """``a, b = seq`` (``after`` None: ``before`` names) or ``a, *m, b = seq`` (``before`` names, a
    starred one, ``after`` names) with ``n_items`` items that do not fit. Only for a list, tuple or
    constant: unpacking an iterator stops at the first item too many (what it consumed differs)."""
    from ember.capture.variables.containers import BaseSequence
    names = [f"_{i}" for i in range(before)]
    if after is not None:
        names += ["*_m"] + [f"_{before + i}" for i in range(after)]
    if isinstance(seq, BaseSequence) or seq.is_constant():
        try:
            exec(f"{', '.join(names)}, = [None] * {n_items}", {})
        except ValueError as e:
            failure = PythonException(e)
            failure.replayable = True
            return failure
    return unsupported("EB0002", f"unpacking {n_items} values into {len(names)} names (ValueError)")
