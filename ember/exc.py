"""Exceptions ember raises to users and uses internally."""
from __future__ import annotations


class Unsupported(RuntimeError):
    """The program does something ember cannot put in a graph.

    Under ``fullgraph=True`` this reaches the user, naming the construct and the
    ``file:line`` with its source line. Otherwise the interpreter turns it into
    a graph break (or, before graph breaks exist, runs the frame eagerly).
    """

    def __init__(self, reason: str, *, where: str | None = None, source_line: str | None = None,
                 user_stack: list[str] | None = None):
        self.reason = reason
        self.where = where
        self.source_line = source_line
        self.user_stack = list(user_stack or [])
        super().__init__(self._message())

    def _message(self) -> str:
        msg = self.reason
        if self.where:
            msg += f"\n  at {self.where}"
            if self.source_line:
                msg += f"\n    {self.source_line.strip()}"
        if len(self.user_stack) > 1:
            msg += "\n  user stack (outermost first):\n" + "\n".join("    " + s for s in self.user_stack)
        return msg

    def located(self, where: str, source_line: str | None, user_stack: list[str] | None = None) -> "Unsupported":
        """Attach the location once (the innermost frame that saw it wins)."""
        if self.where is None:
            self.where = where
            self.source_line = source_line
            if user_stack is not None:
                self.user_stack = list(user_stack)
            self.args = (self._message(),)
        return self


class BackendCompilerFailed(RuntimeError):
    """A backend raised while compiling a graph."""



class PythonException(Unsupported):
    """Traced code raises a Python exception (``IndexError`` from a list, ``raise`` in user code).

    The interpreter looks for a handler in the traced frames' exception tables;
    if none catches it, it is unsupported (the frame runs eagerly and raises there).
    """

    def __init__(self, exc: BaseException | type, reason: str | None = None):
        self.exc = exc
        name = exc.__name__ if isinstance(exc, type) else type(exc).__name__
        super().__init__(reason or f"uncaught {name}: {exc}")
