"""Guard provenance: the user's line, and the operation, that made a trace depend on a guard.

Every guard records where the interpreter was when the guard was installed: the code object and
line of the innermost frame being traced (an inlined callee's own line), the instruction it was
running (``COMPARE_OP >``, ``LOAD_ATTR shape``), the source line's text, and the user stack::

    L['x'].size()[0] == 4   ←   test.py:12 (COMPARE_OP ==): if x.shape[0] == 4:

It is compile-time metadata only (the guard function never reads it). The ShapeEnv's symbolic
guards get theirs through ``EmberShapeEnv`` (``ember/fake/symbolic.py``), which asks the same
locator whenever torch records a guard's location. Guards installed before the first instruction
(the frame's arguments' tensor, type and global-state guards) point at the ``def`` line, with
the operation naming the argument.
"""
from __future__ import annotations

import dataclasses
import linecache
import weakref

#: the operation of a guard installed while the frame's arguments were read (before any instruction)
ENTRY = "frame entry"
#: ... and of one installed after the trace ended (while the graph compiled, or by the guard set itself)
AFTER_TRACE = "after the trace"


@dataclasses.dataclass(frozen=True)
class Provenance:
    filename: str
    lineno: int
    function: str          # the code object's qualified name
    operation: str         # the instruction being traced ("COMPARE_OP >"), or ENTRY / AFTER_TRACE
    source_line: str       # the line's text, stripped ("" when the file cannot be read)
    stack: tuple = ()      # "file:line in function", outermost first (several for an inlined callee)

    @property
    def where(self) -> str:
        return f"{self.filename}:{self.lineno}"

    def __str__(self) -> str:
        text = f"{self.where} in {self.function} ({self.operation})"
        return text + (f": {self.source_line}" if self.source_line else "")

    def as_dict(self) -> dict:
        """Plain data, for structured traces and reports."""
        return {"file": self.filename, "line": self.lineno, "function": self.function,
                "operation": self.operation, "source_line": self.source_line, "stack": list(self.stack)}

    def with_operation(self, operation: str) -> "Provenance":
        return dataclasses.replace(self, operation=operation)


def _library_dirs() -> tuple:
    import os
    import torch
    import ember
    return tuple(os.path.dirname(m.__file__) + os.sep for m in (torch, ember))


_LIBRARY_DIRS = _library_dirs()


def _operation(inst) -> str:
    """``COMPARE_OP >``, ``LOAD_ATTR shape``, ``CALL``: the instruction, with its name/operator argument."""
    arg = inst.argval
    if isinstance(arg, str) and inst.opname != "LOAD_CONST":
        return f"{inst.opname} {arg}"
    return inst.opname


class Locator:
    """``locator()`` -> the `Provenance` of the instruction being traced now (compile time only).

    One per trace: it reads the translators' shared stack of running frames; with none running it
    names the root frame's ``def`` line (before the first instruction: ``ENTRY``; after the last:
    ``AFTER_TRACE``). It holds the root translator weakly (guard sets outlive the trace, in the
    cache); once that is gone it answers None."""

    __slots__ = ("_root", "_entry", "_lines")

    def __init__(self, root) -> None:
        self._root = weakref.ref(root)
        self._entry: dict = {}
        self._lines: dict = {}  # (file, line) -> its text (linecache stats a file it has not read)

    def _line(self, filename: str, lineno: int) -> str:
        key = (filename, lineno)
        text = self._lines.get(key)
        if text is None:
            text = self._lines[key] = linecache.getline(filename, lineno).strip()
        return text

    def __call__(self) -> Provenance | None:
        root = self._root()
        if root is None:
            return None
        frames = root.trace.running_frames
        if not frames:
            done = root.result is not None or root.reached_break is not None
            operation = AFTER_TRACE if done else ENTRY
            hit = self._entry.get(operation)
            if hit is None:
                code = root.code
                line = self._line(code.co_filename, code.co_firstlineno)
                where = f"{code.co_filename}:{code.co_firstlineno} in {code.co_name}"
                hit = self._entry[operation] = Provenance(code.co_filename, code.co_firstlineno,
                                                          code.co_qualname, operation, line, (where,))
            return hit
        inner = frames[-1]
        # the innermost frame of the user's own code: torch's Python (nn.Module internals) and
        # ember's polyfills are named in the operation, the user's line is the one shown
        tx = next((f for f in reversed(frames) if not f.code.co_filename.startswith(_LIBRARY_DIRS)), inner)
        code = tx.code
        inst = tx.instructions[tx.ip - 1] if tx.ip > 0 else None
        operation = _operation(inst) if inst is not None else ENTRY
        if tx is not inner:
            inner_inst = inner.instructions[inner.ip - 1] if inner.ip > 0 else None
            operation += f" → {inner.code.co_qualname}" + (f" ({_operation(inner_inst)})" if inner_inst else "")
        lineno = tx.lineno or code.co_firstlineno
        return Provenance(code.co_filename, lineno, code.co_qualname, operation,
                          self._line(code.co_filename, lineno), tuple(inner.user_stack()))
