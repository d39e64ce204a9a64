"""Exceptions ember raises to users and uses internally."""
from __future__ import annotations

import types

import contextlib
import sys
import threading


class Unsupported(RuntimeError):
    """The program does something ember cannot put in a graph.

    Under ``fullgraph=True`` this reaches the user, naming the construct and the
    ``file:line`` with its source line. Otherwise the interpreter turns it into
    a graph break (or, before graph breaks exist, runs the frame eagerly).
    """

    #: True when the failure depends on this call's values (the traced program raised, or a torch
    #: op rejected these inputs): only calls that pass the guards installed so far run eagerly.
    per_call = False

    #: the registry id when none is given (``ember/capture/break_registry.py``)
    default_id = "EB0000"

    def __init__(self, reason: str, *, id: str | None = None, where: str | None = None,
                 source_line: str | None = None, user_stack: list[str] | None = None):
        self.reason = reason  # what happened (the values involved); the id says what kind of break
        self.id = id or self.default_id
        self.where = where
        self.source_line = source_line
        self.user_stack = list(user_stack or [])
        super().__init__(self._message())

    @property
    def kind(self):
        """This break's entry in the graph-break registry (id, title, explanation, hint)."""
        from ember.capture.break_registry import lookup
        return lookup(self.id)

    @property
    def explanation(self) -> str:
        return self.kind.explanation

    @property
    def hint(self) -> str:
        return self.kind.hint

    def _message(self) -> str:
        msg = f"{self.id}: {self.reason} — hint: {self.hint}"
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


class ForbiddenCallable(AssertionError):
    """The traced program called a function marked never to be traced (``forbid_in_graph``: the
    compiler's own ``mark_dynamic``, ``mark_unbacked``, ``maybe_mark_dynamic``, ...). As in
    torch.compile, the call propagates this error to the caller rather than breaking the graph:
    marking an input inside the region that compiles it cannot take effect."""


def raise_to_caller(e: BaseException) -> BaseException:
    """Mark an error met while tracing as the program's own, raised to the compiled function's
    caller as torch.compile raises it (rather than a fallback to eager): a forbidden callable, a
    branch on a data-dependent value under ``no_data_dependent_graph_break``."""
    try:
        e.ember_raise_to_caller = True
    except AttributeError:
        pass
    return e


def raised_to_caller(e: BaseException) -> bool:
    return isinstance(e, ForbiddenCallable) or getattr(e, "ember_raise_to_caller", False) is True


def forbidden_to_trace(fn) -> bool:
    """Whether ``fn`` carries the ``forbid_in_graph`` mark (read without running descriptors)."""
    import inspect
    try:
        return bool(inspect.getattr_static(fn, "_dynamo_forbidden", False))
    except Exception:  # noqa: BLE001 — an object whose attribute lookup itself fails is not marked
        return False


class BackendCompilerFailed(RuntimeError):
    """A backend raised while compiling a graph."""



class PythonException(Unsupported):
    """Traced code raises a Python exception (``IndexError`` from a list, ``raise`` in user code).

    The interpreter looks for a handler in the traced frames' exception tables;
    if none catches it, it is unsupported (the frame runs eagerly and raises there).
    """

    per_call = True
    default_id = "EB0002"

    def __init__(self, exc: BaseException | type, reason: str | None = None):
        self.exc = exc
        if isinstance(exc, BaseException):
            # Raised by an operation the trace ran (``1 / 0``, ``d[k]``), its traceback holds the
            # trace's own frames, and through them the call's arguments; the program may keep the
            # exception (``except E as e: self.err = e``), and the entry its constant: drop them.
            # (Not the program's own exception given to the frame: see keeping_program_exceptions.)
            without_tracebacks(exc)
        name = exc.__name__ if isinstance(exc, type) else type(exc).__name__
        super().__init__(reason or f"uncaught {name}: {_exception_text(exc)}")


def _exception_text(exc) -> str:
    """``str(exc)`` without running the program's own ``__str__`` (its Python, at trace time, may
    read attributes the traced ``__init__`` set only on the trace's copy, or have side effects)."""
    if isinstance(exc, type):
        return ""
    text = type(exc).__str__
    try:
        if isinstance(text, types.FunctionType):
            return BaseException.__str__(exc)
        return str(exc)
    except Exception:  # noqa: BLE001 — a broken __str__ of a builtin subclass: the message only
        return "<unprintable>"


class SpecializeFloats(Exception):
    """Raised by a backend given a graph with symbolic float inputs it cannot compile (Inductor's
    kernels take no float symbols): the frame is traced again with its floats as constants."""


class FailOnRecompileLimitHit(RuntimeError):
    """A function compiled with ``fullgraph=True`` (or under ``config.fail_on_recompile_limit_hit``)
    needs a new compile past ``config.recompile_limit``: an error, as torch.compile's of that name,
    instead of running eagerly (which fullgraph=True promises not to do)."""


class RunEagerly(Exception):
    """An ember-internal error at a point where nothing observable has happened yet.

    Raised (never seen by users) by call-time code that can still hand the
    frame back: the cache entry's caller (``FrameCache``) catches it, warns
    once, stops using compiled code for that function and runs the frame
    eagerly. Code may raise it only while no input, global, RNG state or
    Python object has been changed by the compiled call (see
    docs/safety_net.md for the safe points).
    """

    def __init__(self, where: str, cause: BaseException):
        self.where = where
        self.cause = cause
        super().__init__(f"{where}: {type(cause).__name__}: {cause}")


class InjectedFault(RuntimeError):
    """Raised at a fault-injection point (``ember.config.inject_fault``), for tests."""


FAULT_POINTS = ("guard", "capture", "codegen", "resume", "backend", "epilogue")


def maybe_inject(point: str) -> None:
    """Raise ``InjectedFault`` if ``ember.config.inject_fault`` names ``point``."""
    from ember.config import config
    if config.inject_fault == point:
        raise InjectedFault(f"fault injected at {point!r} (ember.config.inject_fault)")


def internal_error(where: str, cause: BaseException) -> BaseException:
    """What call-time code raises for an ember-internal error at a safe point: the error itself
    in strict mode (``ember.config.strict``), else ``RunEagerly`` (the frame runs eagerly)."""
    from ember.config import config
    if config.strict:
        try:
            cause.ember_internal = True  # (so a compiled entry does not take it for the program's)
        except AttributeError:
            pass
        return cause
    return RunEagerly(where, cause)


def where_raised(exc: BaseException) -> str:
    """``file:line in function`` of the innermost frame of an exception's traceback."""
    while exc.__cause__ is not None:  # a wrapped error (BackendCompilerFailed): where it began
        exc = exc.__cause__
    tb = exc.__traceback__
    if tb is None:
        return "unknown location"
    while tb.tb_next is not None:
        tb = tb.tb_next
    return f"{tb.tb_frame.f_code.co_filename}:{tb.tb_lineno} in {tb.tb_frame.f_code.co_name}"


def without_tracebacks(exc: BaseException) -> BaseException:
    """``exc`` with its traceback, and those of its ``__cause__``/``__context__`` chain, dropped,
    for an exception ember keeps (a break or fallback reason). A traceback holds its frames,
    and each frame its caller: kept, it would keep the program's frames alive with their locals
    (the user's tensors, objects with weakref callbacks) for as long as the cache lives.
    The program's exceptions being handled where the frame was called are left as they are
    (see ``keeping_program_exceptions``)."""
    kept = getattr(_handled, "ids", frozenset())
    todo, seen = [exc], set(kept)
    while todo:
        e = todo.pop()
        if e is None or id(e) in seen:
            continue
        seen.add(id(e))
        e.__traceback__ = None
        # (a reason ember keeps lets go of the program's exception, which keeps its frames; the
        # chain links stay: an exception the trace made may be one the program gets)
        if isinstance(e, PythonException) and id(e.exc) in kept:
            e.exc = type(e.exc)
        todo += [e.__cause__, e.__context__]
    return exc


_handled = threading.local()


@contextlib.contextmanager
def keeping_program_exceptions(arguments):
    """While compiling a frame, the program's own exceptions keep their tracebacks: those among
    the frame's ``arguments`` (a resume function that starts in a ``with`` block's cleanup or an
    ``except`` block gets the exception in flight, and re-raises it) and the one being handled
    where the frame was called (every exception raised in the compiler chains to it through
    ``__context__``). Dropping them would cut eager's traceback off the program's exception,
    which then reaches the caller without the frames that raised it."""
    todo = [a for a in arguments if isinstance(a, BaseException)]
    todo.append(sys.exc_info()[1])
    ids: set = set()
    while todo:
        e = todo.pop()
        if e is None or id(e) in ids:
            continue
        ids.add(id(e))
        todo += [e.__cause__, e.__context__]
    if not ids:
        yield
        return
    previous = getattr(_handled, "ids", frozenset())
    _handled.ids = previous | ids
    try:
        yield
    finally:
        _handled.ids = previous
