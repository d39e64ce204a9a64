"""Generators and lazy iterators: run step by step, as the program consumes them.

A call to a generator function does not run its body: it makes a
`GeneratorVariable` holding a suspended child `Translator`. Each ``next`` /
``send`` / ``throw`` resumes that translator until its next ``YIELD_VALUE``
(or its return), so the body's side effects happen exactly when eager would
run them::

    def gen(x):
        for i in range(5):
            log.append(i)      # eager: once per item actually consumed
            yield x + i

    next(gen(x))               # appends 0 only, as in eager

``zip``, ``enumerate``, ``map`` and ``filter`` are lazy the same way
(`ZipIterator` and friends pull one item at a time from their inputs), and
``any`` / ``all`` stop at the first decisive item.

Closing: CPython closes a suspended generator when its last reference dies,
running its ``finally`` blocks / ``with`` exits then (``for v in gen(): break``
runs them at the ``break``). `close_unreachable` reproduces that: at the points
where a reference can die (a pop, a store, a call's arguments, a frame's exit)
it closes the suspended generators with pending handlers that nothing live
refers to any more. Generators that would close with no effect are never
tracked.

A generator leaving the frame (returned, or live across a graph break) is
rebuilt: one not started by calling its function again with the same
arguments; one suspended at a ``yield`` and returned, as a copy of its frame
resumed there (variables/generator_resume.py); one suspended and live across a
break makes the capture break where it is made instead (a real generator).
"""
from __future__ import annotations

import operator

from ember.capture.variables.base import is_none, ConstantVariable, VariableTracker, unsupported
from ember.exc import PythonException, Unsupported

_MAX_ITEMS = 100_000


def each_item(tx, iterable):
    """The items of ``iterable`` one at a time, each produced only when the previous one has
    been used: ``list.extend(gen)`` / ``deque.extend(gen)`` add an item before the generator
    makes the next (it may read the container). Iterators ember cannot step are unpacked."""
    it = iterable.iter(tx)
    if not isinstance(it, IteratorBase):
        yield from it.unpack(tx)
        return
    while (item := it.next(tx)) is not None:
        yield item


class IteratorBase(VariableTracker):
    """Protocol: ``next(tx)`` gives the next item, or None when exhausted."""

    def next(self, tx):
        raise NotImplementedError

    def iter(self, tx):
        return self

    def truth(self, tx):
        return True

    def unpack(self, tx):
        items = []
        while True:
            item = self.next(tx)
            if item is None:
                return items
            items.append(item)
            if len(items) > _MAX_ITEMS:
                raise unsupported("EB0007", "iterator produced too many items (infinite iterator?)")

    def getattr(self, tx, name):
        if name in ("__next__", "__iter__"):
            from ember.capture.variables.functions import BoundMethodVariable
            return BoundMethodVariable(self, name)
        return super().getattr(tx, name)

    def remaining(self):
        """The items left, if they can be known without running anything (else None)."""
        return None

    def _reconstruct_items(self, plan, typed: bool = False):
        """A tuple iterator over the remaining items (which the resumed frame can trace), or None.
        ``typed``: a builtin iterator type the program can see (zip, enumerate), kept as that type
        where the value is returned rather than handed to a break (see _typed_items)."""
        if typed and not plan.at_break:
            return None
        rest = self.remaining()
        if rest is None:
            return None
        return f"{_bind(plan, iter, 'iter')}(({''.join(plan.expr(i) + ', ' for i in rest)}))"

    def stop_iteration(self) -> PythonException:
        """The StopIteration ``next()`` raises once this iterator is exhausted."""
        return PythonException(StopIteration())

    def call_method(self, tx, name, args, kwargs):
        if name == "__next__" and not args and not kwargs:
            item = self.next(tx)
            if item is None:
                raise self.stop_iteration()
            return item
        if name == "__iter__":
            return self
        if name == "__contains__":
            # `x in iterator` consumes items up to the first equal one, like Python.
            needle = args[0]
            while True:
                item = self.next(tx)
                if item is None:
                    return ConstantVariable(False)
                if not (item.is_constant() and needle.is_constant()):
                    raise unsupported("EB0016", f"`in` over {self.describe()} comparing non-constant values")
                if item.as_constant() is needle.as_constant() or item.as_constant() == needle.as_constant():
                    return ConstantVariable(True)
        return super().call_method(tx, name, args, kwargs)


class GeneratorVariable(IteratorBase):
    """A generator object made in the frame: a suspended child Translator."""

    rebuilt_once = True  # handed over once per tracker: every reference names the same generator

    def __init__(self, child, fn_vt=None, args=(), kwargs=None):
        self.child = child
        self.state = "created"          # created / suspended / running / done
        self.fn_vt = fn_vt              # to rebuild an unstarted generator (fn(*args, **kwargs))
        self.args = list(args)
        self.kwargs = dict(kwargs or {})
        self.yield_inst = None          # the YIELD_VALUE it is suspended at
        self.return_value = None        # what its `return` gave (the StopIteration value)
        self.made_at = None             # (offset, opname) of the frame's instruction that made it
        child.trace.generators.append(self)

    def python_type(self):
        import types
        return types.GeneratorType

    def describe(self):
        return f"generator {self.child.code.co_qualname} ({self.state})"

    # -- running ----------------------------------------------------------------
    def resume(self, tx, send=None, throw: BaseException | None = None):
        """Run to the next yield: ("yield", value) or ("return", value). Raises what the body raises."""
        if self.state == "running":
            raise PythonException(ValueError("generator already executing"))
        if self.state == "done":
            if throw is not None:
                raise PythonException(throw)
            return "return", ConstantVariable(None)
        child = self.child
        if self.state == "created":
            if throw is not None:
                self.state = "done"
                raise PythonException(throw)
            if send is not None and not is_none(send):
                raise PythonException(TypeError("can't send non-None value to a just-started generator"))
            child.ip = 0
        elif throw is not None:
            delegate = self._delegate()
            if delegate is not None:
                # Suspended inside `yield from`: the sub-iterator gets the exception first.
                try:
                    if isinstance(throw, GeneratorExit):
                        delegate.close(tx)
                        raise PythonException(throw)
                    kind, value = delegate.resume(tx, throw=throw)
                except PythonException as e:
                    if isinstance(e.exc, StopIteration):
                        child.stack[-1] = stop_value(e)  # the `yield from` result
                        child.jump_to(self._send_target())
                        return self._run(tx)
                    return self._run(tx, raised=e)
                if kind == "yield":
                    return "yield", value
                child.stack[-1] = value
                child.jump_to(self._send_target())
                return self._run(tx)
            return self._run(tx, raised=PythonException(throw))
        else:
            child.push(send if send is not None else ConstantVariable(None))
        return self._run(tx)

    def _run(self, tx, raised: PythonException | None = None):
        child = self.child
        self.state = "running"
        try:
            if raised is not None:
                # As CPython: resuming pushes the value sent, None for a throw, and the exception
                # unwinds from there (3.12's `yield from` handler, CLEANUP_THROW, reads it).
                child.push(ConstantVariable(None))
                if not child.handle_exception(self.yield_inst, raised):
                    raise raised
            child.yielding = False
            result = child.run()
        except PythonException as e:
            self.state = "done"
            if isinstance(e.exc, StopIteration) or e.exc is StopIteration:
                # PEP 479: a StopIteration escaping a generator body becomes a RuntimeError.
                err = RuntimeError("generator raised StopIteration")
                err.__cause__ = e.exc if isinstance(e.exc, BaseException) else StopIteration()
                raise PythonException(err) from None
            raise
        except Unsupported:
            self.state = "done"
            raise
        if child.yielding:
            child.yielding = False
            self.state = "suspended"
            self.yield_inst = child.yield_inst
            return "yield", child.yield_value
        self.state = "done"
        self.return_value = result
        return "return", result

    def _delegate(self):
        """The sub-iterator of a `yield from` this generator is suspended in, if any."""
        inst = self.yield_inst
        if inst is None or not self.child.stack:
            return None
        i = self.child.index_of[inst.offset]
        if i > 0 and self.child.instructions[i - 1].opname == "SEND":
            sub = self.child.stack[-1]
            return sub if isinstance(sub, GeneratorVariable) else None
        return None

    def _send_target(self):
        i = self.child.index_of[self.yield_inst.offset]
        return self.child.instructions[i - 1].argval

    # -- the iterator/generator protocol ------------------------------------------------
    def next(self, tx):
        kind, value = self.resume(tx)
        if kind == "return":
            self._stop_value = value
            return None
        return value

    def stop_iteration(self) -> PythonException:
        value, self._stop_value = getattr(self, "_stop_value", None), None
        return _stop_iteration(value) if value is not None else PythonException(StopIteration())

    def getattr(self, tx, name):
        from ember.capture.variables.functions import BoundMethodVariable
        if name in ("send", "throw", "close", "__next__", "__iter__", "__contains__"):
            return BoundMethodVariable(self, name)
        if name in ("gi_running",):
            return ConstantVariable(self.state == "running")
        return super().getattr(tx, name)

    def call_method(self, tx, name, args, kwargs):
        if name == "send":
            kind, value = self.resume(tx, send=args[0])
            if kind == "return":
                raise _stop_iteration(value)
            return value
        if name == "throw":
            exc = _exception_of(tx, args)
            kind, value = self.resume(tx, throw=exc)
            if kind == "return":  # (a `return` in its except / finally block: StopIteration(value))
                raise _stop_iteration(value)
            return value
        if name == "close":
            self.close(tx)
            return ConstantVariable(None)
        return super().call_method(tx, name, args, kwargs)

    def close(self, tx):
        if self.state in ("created", "done"):
            self.state = "done"
            return
        try:
            kind, _ = self.resume(tx, throw=GeneratorExit())
        except PythonException as e:
            if isinstance(e.exc, (GeneratorExit, StopIteration)) or e.exc in (GeneratorExit, StopIteration):
                return
            raise
        if kind == "yield":
            raise PythonException(RuntimeError("generator ignored GeneratorExit"))

    def needs_close(self) -> bool:
        """Closing it now would run code (a finally block, a with exit)."""
        if self.state != "suspended":
            return False
        delegate = self._delegate()
        if delegate is not None and delegate.needs_close():
            return True
        from ember.capture.interpreter import _exception_table
        offset = self.yield_inst.offset
        return any(e.start <= offset < e.end for e in _exception_table(self.child.code))

    def _closes_silently(self) -> bool:
        """Closing it (when its last reference dies) runs no code: no handler anywhere in its body
        and no delegation. Only such a generator may become a real one made at a graph break: the
        compiled code holds references a little longer than eager's frame, so a ``finally`` / ``with``
        exit would run later than in eager."""
        import dis
        from ember.bytecode.normalize import program_handlers
        code = self.child.code
        return not program_handlers(code) and not any(
            i.opname in ("SEND", "YIELD_FROM", "GET_YIELD_FROM_ITER") for i in dis.get_instructions(code))

    def reconstruct(self, plan) -> str:
        if self.state == "done":  # a finished generator only ever raises StopIteration
            return f"{_bind(plan, iter, 'iter')}(())"
        if self.state == "suspended":
            from ember.capture.variables.generator_resume import rebuild_suspended
            rebuilt = rebuild_suspended(self, plan)
            if rebuilt is not None:
                return rebuilt
        if self.state != "created" or self.fn_vt is None:
            e = unsupported("EB0006", f"a {self.describe()} escapes the frame (or is live across a graph break)")
            if self._closes_silently():
                e.restart_at = self.made_at  # capture breaks there instead: the generator is then a real one
            raise e
        parts = [plan.expr(a) for a in self.args] + [f"{k}={plan.expr(v)}" for k, v in self.kwargs.items()]
        return f"{plan.expr(self.fn_vt)}({', '.join(parts)})"


def _stop_iteration(value) -> PythonException:
    if not value.is_constant():
        # (a value made in the frame: the exception a handler gets is `RaisedStopIteration`)
        exc = StopIteration(_UNREADABLE)
        exc._ember_traced_value = True  # (a plain tracker of it refuses to show its value)
        failure = PythonException(exc)
        failure.tracker = RaisedStopIteration(exc, value)
        return failure
    return PythonException(StopIteration(value.as_constant()) if value.as_constant() is not None
                           else StopIteration())


class _Unreadable:
    """The argument of the real StopIteration behind a `RaisedStopIteration` (never read)."""

    def __repr__(self):
        return "<a value traced by ember>"


_UNREADABLE = _Unreadable()


class RaisedStopIteration(VariableTracker):
    """A StopIteration the trace raised with a value made in the frame (``gen.send``/``throw``
    whose generator returned ``Foo(3)`` or a tensor): the exception an ``except`` block gets, whose
    ``value`` and ``args`` are that tracker. The real exception object (for matching) carries a
    stand-in: anything else that would read it is refused."""

    def __init__(self, exc: StopIteration, value: VariableTracker):
        self.real_exception = exc
        self.value = value

    def describe(self):
        return f"StopIteration({self.value.describe()})"

    def python_type(self):
        return StopIteration

    def getattr(self, tx, name):
        from ember.capture.variables.builtins import wrap_constant
        from ember.capture.variables.containers import TupleVariable
        from ember.capture.variables.objects import ClassVariable
        if name == "value":
            return self.value
        if name == "args":
            return TupleVariable([self.value])
        if name == "__class__":
            return ClassVariable(StopIteration)
        if name in ("__context__", "__cause__", "__suppress_context__"):
            return wrap_constant(getattr(self.real_exception, name))
        raise unsupported("EB0005", f"{name} of a StopIteration carrying a non-constant value")


def stop_value(e: PythonException):
    """The tracker of the value a StopIteration the trace raised carries."""
    tracker = getattr(e, "tracker", None)
    return tracker.value if isinstance(tracker, RaisedStopIteration) else ConstantVariable(e.exc.value)


def _bind(plan, value, name) -> str:
    from ember.capture.sources import bind
    return bind(plan.scope, value, name)


def _exception_of(tx, args) -> BaseException:
    exc = args[-2] if len(args) == 3 else args[0]
    if len(args) == 3 and args[1].is_constant() and isinstance(args[1].as_constant(), BaseException):
        exc = args[1]
    from ember.capture.variables.objects import ClassVariable
    if isinstance(exc, ClassVariable) and issubclass(exc.value, BaseException):
        exc = exc.call(tx, [], {})
    value = exc.as_constant() if exc.is_constant() else None
    if isinstance(value, type) and issubclass(value, BaseException):
        value = value()
    if not isinstance(value, BaseException):
        raise unsupported("EB0005", f"throwing {exc.describe()} into a generator")
    return value


# -- lazy builtin iterators -----------------------------------------------------------------

class ZipIterator(IteratorBase):
    def __init__(self, iterators, strict: bool = False):
        self.iterators = list(iterators)
        self.strict = strict
        self.done = False

    def describe(self):
        return "zip iterator"

    def python_type(self):
        return zip

    def next(self, tx):
        from ember.capture.variables.containers import TupleVariable
        if self.done or not self.iterators:
            return None
        items = []
        for i, it in enumerate(self.iterators):
            item = it.next(tx)
            if item is None:
                self.done = True
                if self.strict:
                    if i > 0:
                        raise PythonException(ValueError(f"zip() argument {i + 1} is shorter than argument 1"))
                    for j, rest in enumerate(self.iterators[1:], start=2):
                        if rest.next(tx) is not None:
                            raise PythonException(ValueError(f"zip() argument {j} is longer than argument 1"))
                return None
            items.append(item)
        return TupleVariable(items)

    def remaining(self):
        from ember.capture.variables.containers import TupleVariable
        if self.done:
            return []
        rests = [it.remaining() for it in self.iterators]
        if any(r is None for r in rests) or (self.strict and len({len(r) for r in rests}) > 1):
            return None
        return [TupleVariable(list(t)) for t in zip(*rests)]

    def reconstruct(self, plan) -> str:
        items = self._reconstruct_items(plan, typed=True)
        if items is not None:
            return items
        inner = ", ".join(plan.expr(i) for i in self.iterators)
        return f"{_bind(plan, zip, 'zip')}({inner}{', strict=True' if self.strict else ''})"


class EnumerateIterator(IteratorBase):
    def __init__(self, iterator, start=0):
        self.iterator = iterator
        # an int, or the tracker of a dynamic int (`enumerate(lst, start=n)` keeps n a symbol, each
        # index `n + k` a node, as torch.compile: no recompile per value of n)
        self.count = start

    def describe(self):
        return "enumerate iterator"

    def python_type(self):
        return enumerate

    def next(self, tx):
        from ember.capture.variables.containers import TupleVariable
        item = self.iterator.next(tx)
        if item is None:
            return None
        index = self.count
        if isinstance(index, int):
            self.count += 1
            return TupleVariable([ConstantVariable(index), item])
        self.count = tx.binary_op(operator.add, index, ConstantVariable(1))
        return TupleVariable([index, item])

    def remaining(self):
        from ember.capture.variables.containers import TupleVariable
        rest = self.iterator.remaining()
        if rest is None or not isinstance(self.count, int):
            return None  # (a dynamic count: no node can be made here; the residual enumerates on)
        return [TupleVariable([ConstantVariable(self.count + i), v]) for i, v in enumerate(rest)]

    def reconstruct(self, plan) -> str:
        items = self._reconstruct_items(plan, typed=True)
        if items is not None:
            return items
        count = self.count if isinstance(self.count, int) else plan.expr(self.count)
        return f"{_bind(plan, enumerate, 'enumerate')}({plan.expr(self.iterator)}, {count})"


class MapIterator(IteratorBase):
    def __init__(self, fn, iterators):
        self.fn = fn
        self.iterators = list(iterators)
        self.done = False

    def describe(self):
        return "map iterator"

    def python_type(self):
        return map

    def next(self, tx):
        if self.done:
            return None
        args = []
        for it in self.iterators:
            item = it.next(tx)
            if item is None:
                self.done = True
                return None
            args.append(item)
        return self.fn.call(tx, args, {})

    def reconstruct(self, plan) -> str:
        inner = ", ".join(plan.expr(i) for i in self.iterators)
        return f"{_bind(plan, map, 'map')}({plan.expr(self.fn)}, {inner})"


class FilterIterator(IteratorBase):
    def __init__(self, fn, iterator):
        self.fn = fn  # None: truthiness
        self.iterator = iterator

    def describe(self):
        return "filter iterator"

    def python_type(self):
        return filter

    def next(self, tx):
        while True:
            item = self.iterator.next(tx)
            if item is None:
                return None
            keep = item.truth(tx) if self.fn is None else self.fn.call(tx, [item], {}).truth(tx)
            if keep:
                return item

    def reconstruct(self, plan) -> str:
        fn = "None" if self.fn is None else plan.expr(self.fn)
        return f"{_bind(plan, filter, 'filter')}({fn}, {plan.expr(self.iterator)})"


# -- closing generators whose last reference died ---------------------------------------------

def close_unreachable(tx, extra_roots=(), dying=None, dropped=None) -> None:
    """Close suspended generators (with pending finally/with handlers) nothing live refers to.

    Roots: the frames being run (stacks, locals, cells) except ``dying`` (a frame that is
    returning), values recorded as side effects, and ``extra_roots`` (a return value).
    ``dropped``: the values whose references just died (a pop, a store, a call's arguments);
    only generators reachable from them can have become unreachable, so when none is, the
    walk over everything live is skipped."""
    trace = tx.trace
    trace.generators = [g for g in trace.generators if g.state != "done"]
    pending = [g for g in trace.generators if g.needs_close()]
    if not pending:
        return
    if dropped is not None:
        candidates = _reached(dropped)
        pending = [g for g in pending if id(g) in candidates]
        if not pending:
            return
    roots: list = list(extra_roots)
    for frame in trace.running_frames:
        if frame is dying:
            continue
        roots.extend(frame.stack)
        roots.extend(dict.values(frame.locals))  # (an argument not read yet is no tracker: skipped)
        roots.extend(frame.cells.values())
    roots.extend(tx.side_effects.live_values())
    reached = _reached(roots)
    for g in reversed(pending):
        if id(g) not in reached and g.state == "suspended":
            what = g.describe()
            try:
                g.close(tx)
            except PythonException as e:
                # Eager closes it in the garbage collector: an exception there is printed
                # ("Exception ignored in ...") and the program goes on; it raises nothing.
                name = e.exc.__name__ if isinstance(e.exc, type) else type(e.exc).__name__
                raise unsupported("EB0005", f"closing {what} when its last reference dies raises {name} "
                                            f"(eager reports it as unraisable)") from None


def _reached(roots) -> set[int]:
    """The ids of the generators reachable from ``roots`` (through trackers and their containers)."""
    seen: set[int] = set()
    work: list = list(roots)
    reached: set[int] = set()
    while work:
        v = work.pop()
        if id(v) in seen:
            continue
        seen.add(id(v))
        if isinstance(v, (list, tuple, set, frozenset)):
            work.extend(v)
            continue
        if isinstance(v, dict):
            work.extend(v.values())
            continue
        if not isinstance(v, VariableTracker):
            continue
        if isinstance(v, GeneratorVariable):
            reached.add(id(v))
            if v.state != "running":  # a running frame is already a root
                work.extend(v.child.stack)
                work.extend(v.child.locals.values())
                work.extend(v.child.cells.values())
            work.extend(v.args)
            work.extend(v.kwargs.values())
            continue
        d = getattr(v, "__dict__", None)
        if d:
            work.extend(x for x in d.values() if isinstance(x, (VariableTracker, list, tuple, dict, set)))
        for slot in getattr(type(v), "__slots__", ()):
            x = getattr(v, slot, None)
            if isinstance(x, (VariableTracker, list, tuple, dict)):
                work.append(x)
    return reached
