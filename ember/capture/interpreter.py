"""The symbolic bytecode interpreter (Python 3.11 and 3.12), one small method per opcode.

`Translator` runs a code object over VariableTrackers instead of values: the
stack and locals hold trackers; tensor operations append nodes to the shared
`OutputGraph`; reading anything from outside the frame goes through
`builder.wrap`, which installs guards. Calls to Python functions are inlined
by a child Translator sharing the graph and guards. Anything the interpreter
cannot model raises `Unsupported`, located at the innermost instruction.

Opcode families live in mixins: load/store and calls here; stack, build,
operators and jumps in `ember.capture.opcodes`; opcodes added by 3.12 in
`ember.capture.opcodes_py312`. Instructions come from
`ember.bytecode.normalize.interpreter_instructions`, which folds the spellings that differ
between versions, so handlers test no version.
"""
from __future__ import annotations

import dis
import inspect
import linecache
import sys
import types

from ember.capture.builder import wrap
from ember.capture.node_meta import name_node_after
from ember.bytecode.normalize import NULL_BEFORE_CALLABLE, interpreter_instructions
from ember.capture.skipfiles import scheduler_file
from ember.capture.exception_state import ExceptionStateMixin
from ember.capture.opcodes import OpcodeMixin
from ember.capture.opcodes_py312 import Py312OpcodeMixin
from ember.capture.sources import AttrSource, ConstSource, GlobalSource
from ember.capture.variables.base import (NULL, ConstantVariable, NullVariable, VariableTracker, is_none,
                                          unpinned_number, unsupported)
from ember.capture.variables.builtins import BuiltinVariable
from ember.capture.variables.containers import DictVariable, TupleVariable
from ember.capture.variables.functions import (CellVariable, NestedFunctionVariable, RealCellVariable,
                                               UserFunctionVariable, bind_arguments, passed_cell_argument)
from ember.capture.variables.objects import ClassVariable
from ember.exc import ForbiddenCallable, PythonException, Unsupported, forbidden_to_trace, raise_to_caller
from ember.fake.symbolic import data_dependent_reason, is_data_dependent_guard

MAX_INLINE_DEPTH = 64

from ember.capture.nested_breaks import (NestedBreakStop, arm_nested_child, direct_callee_code,  # noqa: E402
                                         record_nested_frame)

_SINGLETONS = (None, True, False, Ellipsis, NotImplemented)


class Translator(ExceptionStateMixin, OpcodeMixin, Py312OpcodeMixin):
    def __init__(self, code: types.CodeType, globals_dict: dict, local_vts: dict, cells: dict,
                 output, guards, parent: "Translator | None" = None, top_globals: dict | None = None,
                 side_effects=None):
        self.code = code
        self.side_effects = side_effects if side_effects is not None else parent.side_effects
        self.globals = globals_dict
        self.top_globals = top_globals if top_globals is not None else globals_dict
        self.output = output
        self.guards = guards
        self.parent = parent
        self.depth = 0 if parent is None else parent.depth + 1
        self.instructions = _decode(code)
        self.index_of = {inst.offset: i for i, inst in enumerate(self.instructions)}
        self.stack: list[VariableTracker] = []
        self.locals: dict[str, VariableTracker] = dict(local_vts)
        self.cells: dict[str, VariableTracker] = dict(cells)
        self.ip = 0
        self.lineno = code.co_firstlineno
        self.kw_names: tuple | None = None
        self.result: VariableTracker | None = None
        self.current_exception = None  # the exception being handled (sys.exc_info() of the frame)
        self.exc_inherited = True  # ... unless the trace changed it, the one current at its start
        self.current_exception_vt = None  # its tracker, once the trace changed it
        self.exc_at_entry = None  # sys.exc_info()[1] when the traced call was made (set by capture)
        self.exc_at_entry_is_ours = False  # ... set by a graph break's residual (a resume function)
        self.break_at: int | None = None     # offset to stop at (a graph break): the top frame, or
        self.reached_break = None            # the innermost frame of a nested break (nested_breaks.py)
        self.nested_path = None  # (path, level): this frame is level `level` of a nested break's path
        self.direct_call = False  # inlined as the very callee of the caller's CALL (its result is the call's)
        self._direct_code = None  # the code of the callee the CALL running now inlines directly
        self.fn_object = None  # the function object inlined, when there is one
        # A generator body stops at each YIELD_VALUE (see variables/generators.py).
        self.yielding = False
        self.yield_value: VariableTracker | None = None
        self.yield_inst = None
        self.trace = parent.trace if parent is not None else _TraceState()
        self.trace.translators.append(self)

    # -- running ----------------------------------------------------------------
    def run(self) -> VariableTracker:
        """Run until the frame returns (the result) or, in a generator body, yields (None)."""
        frames = self.trace.running_frames
        frames.append(self)
        try:
            self._run_loop()
        finally:
            frames.pop()
        if self.result is not None and self.parent is None and self.trace.generators:
            # The frame ends: generators only its locals held are closed (inlined frames: at the
            # caller's next release point, where no tracker is held only by Python temporaries).
            from ember.capture.variables.generators import close_unreachable
            close_unreachable(self, extra_roots=[self.result], dying=self)
        return self.result

    def _run_loop(self) -> None:
        instructions = self.instructions
        while self.result is None and not self.yielding:
            inst = instructions[self.ip]
            if inst.offset == self.break_at:
                from ember.capture.graph_break import BreakPoint
                self.reached_break = BreakPoint(inst, list(self.stack), self.kw_names)
                self.ip += 1
                return
            self.ip += 1
            if inst.starts_line is not None:
                self.lineno = inst.starts_line
                self.output.current_location = self.location()
                self.output.current_frame = self
            handler = getattr(self, inst.opname, None)
            try:
                if handler is None:
                    raise unsupported("EB0001", f"opcode {inst.opname} is not supported")
                try:
                    handler(inst)
                except PythonException as e:
                    if not is_data_dependent_guard(e.exc):  # (a builtin given an unbacked value raised it)
                        raise
                    raise unsupported("EB0018", data_dependent_reason(e.exc)) from None
                except Unsupported:
                    raise
                except Exception as e:
                    if not is_data_dependent_guard(e):
                        raise
                    if _no_data_dependent_graph_break():
                        raise raise_to_caller(e)  # (torch's strict mode: fail, do not break)
                    raise unsupported("EB0018", data_dependent_reason(e)) from None
            except PythonException as e:
                self.chain_exception(e)
                if not self.handle_exception(inst, e):
                    made_at = getattr(getattr(e, "tracker", None), "made_at", None)
                    if self.parent is None and getattr(e, "top_offset", None) is None and \
                            (getattr(e, "replayable", False) or made_at is not None):
                        # Uncaught in the frame: break at the instruction that raised (the graph
                        # runs what came before; the instruction, run eagerly, raises for real), as
                        # torch.compile does. Only for the program's own `raise` and a call's
                        # argument mismatch: an error of a builtin may come from state a rebuilt
                        # object does not carry (a deque's mutation count), so that frame runs eagerly.
                        e.top_offset, e.top_opname = inst.offset, inst.opname
                        if made_at is not None:  # (eager makes it again: exception_objects.py)
                            e.top_offset, e.top_opname = made_at
                    raise e.located(self.location(), self.source_line(), self.user_stack())
            except NestedBreakStop as stop:
                # an inlined callee stopped at the break (nested_breaks.py): this frame stops at its call
                from ember.capture.graph_break import BreakPoint
                self.reached_break = BreakPoint(inst, list(self.stack), None)
                self.reached_break.inner = stop.child
                return
            except Unsupported as e:
                if self.trace.settings:  # (a `with torch._dynamo.error_on_graph_break(b):` block)
                    from ember.capture.compile_settings import mark
                    mark(e, self.trace)
                if self.parent is not None and getattr(e, "top_offset", None) is None:
                    record_nested_frame(self, e, inst)
                if self.parent is None and getattr(e, "top_offset", None) is None:
                    e.top_offset, e.top_opname = inst.offset, inst.opname
                    if inst.opname == "PRECALL":  # the CALL that follows is where the call happens
                        nxt = instructions[self.ip]
                        e.top_offset, e.top_opname = nxt.offset, nxt.opname
                raise e.located(self.location(), self.source_line(), self.user_stack())

    def release_references(self, *dropped) -> None:
        """``dropped`` lost a reference: close the generators nothing refers to any more."""
        trace = self.trace
        if trace.generators:
            from ember.capture.variables.generators import close_unreachable
            if trace.dead_values:
                dropped, trace.dead_values = (*dropped, *trace.dead_values), []
            close_unreachable(self, dropped=dropped)

    def handle_exception(self, inst, exc: PythonException) -> bool:
        """Jump to this frame's handler for an exception raised at ``inst``, if one covers it."""
        for entry in _exception_table(self.code):
            if entry.start <= inst.offset < entry.end:
                del self.stack[entry.depth:]
                if entry.lasti:
                    self.push(ConstantVariable(inst.offset))
                self.push(getattr(exc, "tracker", None) or ConstantVariable(exc.exc))
                self.jump_to(entry.target)
                return True
        return False

    def location(self) -> str:
        return f"{self.code.co_filename}:{self.lineno}"

    def source_line(self) -> str:
        return linecache.getline(self.code.co_filename, self.lineno).rstrip()

    def user_stack(self) -> list[str]:
        frames, tx = [], self
        while tx is not None:
            frames.append(f"{tx.location()} in {tx.code.co_name}")
            tx = tx.parent
        return frames[::-1]

    def jump_to(self, offset: int) -> None:
        self.ip = self.index_of[offset]

    def push(self, vt: VariableTracker) -> None:
        self.stack.append(vt)

    def pop(self) -> VariableTracker:
        return self.stack.pop()

    def popn(self, n: int) -> list[VariableTracker]:
        if n == 0:
            return []
        items = self.stack[-n:]
        del self.stack[-n:]
        return items

    # -- helpers the trackers call back into ---------------------------------------
    def getattr(self, obj: VariableTracker, name: str) -> VariableTracker:
        if name == "__class__" and (type(obj).__name__ in _CLASS_FROM_TYPE or type(obj).__name__ in _LAZY_BUILTINS):
            from ember.capture.variables.objects import ClassVariable
            return ClassVariable(obj.python_type())  # (not a bound method named __class__)
        return obj.getattr(self, name)

    def inline_call(self, code, globals_dict, name, defaults, kwdefaults, closure, args, kwargs, fn_vt=None):
        if code.co_flags & (inspect.CO_COROUTINE | inspect.CO_ASYNC_GENERATOR):
            raise unsupported("EB0004", f"calling coroutine function {name}()")
        if self.depth >= MAX_INLINE_DEPTH:
            raise unsupported("EB0003", f"inlining depth limit reached at {name}() (recursion?)")
        if scheduler_file(code.co_filename):  # (runs as it is, its callees compiled: capture/skipfiles.py)
            raise unsupported("EB0033", f"{code.co_qualname}() of torch's lr_scheduler runs as it is")
        qualname = getattr(getattr(fn_vt, "fn", None), "__qualname__", None)  # (error messages name it)
        bound = bind_arguments(code, name, tuple(defaults), kwdefaults, list(args), dict(kwargs),
                               qualname=qualname if isinstance(qualname, str) else None)
        cells = {}
        for i, free in enumerate(code.co_freevars):
            cells[free] = closure[i]
        fn_object = getattr(fn_vt, "fn", None)
        for name in getattr(fn_object, "__ember_cell_args__", ()):
            # a resume function's cells, passed as the cell objects (make_resume_code): a nested
            # break's chain inlines it (nested_breaks.py)
            if name in bound:
                cells[name] = passed_cell_argument(bound.pop(name), name)
        child = Translator(code, globals_dict, bound, cells, self.output, self.guards, parent=self,
                           top_globals=self.top_globals)
        child.direct_call = self._direct_code is code
        child.fn_object = fn_object
        self._direct_code = None
        if self.nested_path is not None:
            arm_nested_child(self, child)
        # A function called inside an except block runs with that exception current.
        child.current_exception, child.current_exception_vt = self.current_exception, self.current_exception_vt
        child.exc_inherited, child.exc_at_entry = self.exc_inherited, self.exc_at_entry
        child.exc_at_entry_is_ours = self.exc_at_entry_is_ours
        if code.co_flags & inspect.CO_GENERATOR:
            # Calling a generator function runs nothing: the body runs as the generator is consumed.
            from ember.capture.variables.generators import GeneratorVariable
            gen = GeneratorVariable(child, fn_vt, args, kwargs)
            root = self
            while root.parent is not None:
                root = root.parent
            if root.ip > 0:  # the frame's instruction that made it (a break there makes it eagerly)
                made_at = root.instructions[root.ip - 1]
                gen.made_at = (made_at.offset, made_at.opname)
            return gen
        result = child.run()
        if child.reached_break is not None:
            raise NestedBreakStop(child)
        if self.trace.generators:  # its locals died: checked at the next release point
            self.trace.dead_values.extend([*child.locals.values(), *child.cells.values(), *child.stack])
        if self.lineno is not None:
            self.output.current_location = self.location()
            self.output.current_frame = self
        return result

    def make_super(self, args):
        from ember.capture.variables.super_ import SuperVariable
        if args:
            return SuperVariable(args[0].as_constant(), args[1])
        cls_cell = self.cells.get("__class__")
        if not self.code.co_argcount:  # eager's own errors, in eager's order
            raise PythonException(RuntimeError("super(): no arguments"))
        if cls_cell is None:
            raise PythonException(RuntimeError("super(): __class__ cell not found"))
        cls = self._read_cell(cls_cell).as_constant()
        first = self.code.co_varnames[0]
        obj = self.locals.get(first)
        if obj is None and first in self.cells:
            obj = self._read_cell(self.cells[first])
        return SuperVariable(cls, obj)

    def compare_identity(self, a, b, negate: bool) -> VariableTracker:
        from ember.capture.builder import pin_identity
        from ember.capture.variables.tensor import TensorVariable
        singleton = any(type(v) is ConstantVariable and any(v.value is c for c in _SINGLETONS) for v in (a, b))
        for v in (a, b):  # identity observed: functions are otherwise guarded by code, not identity
            if singleton:
                break  # `obj is None`: the other's type (guarded already) decides, not its identity
            if isinstance(v, UserFunctionVariable) and v.source is not None:
                self.guards.id_match(v.source, v.fn)
            pin_identity(self, v)  # (modules and objects are otherwise guarded by type)
        result = _same_object(a, b)
        if not result and isinstance(a, TensorVariable) and isinstance(b, TensorVariable) and \
                a.source is not None and b.source is not None:
            self.guards.distinct_objects(a.source, b.source)  # `x is y` was False: keep it so
        return ConstantVariable(result != negate)

    # -- load / store ------------------------------------------------------------------
    def LOAD_FAST(self, inst):
        try:
            self.push(self.locals[inst.argval])
        except KeyError:
            raise unsupported("EB0002", f"local variable {inst.argval!r} referenced before assignment "
                              f"(UnboundLocalError)") from None

    LOAD_FAST_CHECK = LOAD_FAST

    def STORE_FAST(self, inst):
        old = dict.get(self.locals, inst.argval)  # (an argument overwritten unread stays unread: lazy_arguments)
        value = self.pop()
        name_node_after(value, inst.argval)
        if isinstance(value, NullVariable):  # 3.12+: restoring a name an inlined comprehension saved unbound
            self.locals.pop(inst.argval, None)
        else:
            self.locals[inst.argval] = value
        if old is not None:
            self.release_references(old)

    def DELETE_FAST(self, inst):
        self.release_references(dict.pop(self.locals, inst.argval, None))

    def LOAD_CONST(self, inst):
        value = inst.argval
        self.push(ConstantVariable(value))

    def LOAD_GLOBAL(self, inst):
        if inst.arg & 1:
            self.push_callable(self.load_global(inst.argval))
        else:
            self.push(self.load_global(inst.argval))

    def push_callable(self, fn: VariableTracker) -> None:
        """Push ``fn`` with the NULL of a plain call, where this Python puts it (normalize)."""
        if NULL_BEFORE_CALLABLE:
            self.push(NULL)
            self.push(fn)
        else:
            self.push(fn)
            self.push(NULL)

    def load_global(self, name: str) -> VariableTracker:
        g = self.globals
        pending = self.side_effects.load_global(g, name)
        if pending is not None:
            return pending
        if name in g:
            return wrap(self, g[name], GlobalSource(g, name, top=g is self.top_globals))
        b = g.get("__builtins__", __builtins__)
        b = b.__dict__ if isinstance(b, types.ModuleType) else b
        # a global of that name defined later shadows the builtin (or ends the NameError below)
        self.guards.not_in_dict(ConstSource(g, f"<globals of {g.get('__name__', '?')}>"), name)
        if name in b:  # ... and the builtin itself may be monkeypatched (`builtins.isinstance = patched`)
            self.guards.id_match(GlobalSource(b, name, top=False), b[name])
            return wrap(self, b[name], None)
        self.guards.not_in_dict(ConstSource(b, "<builtins>"), name)
        raise _raised(PythonException(NameError(f"name {name!r} is not defined", name=name)), replayable=True)

    def STORE_GLOBAL(self, inst):
        g = self.globals
        self.side_effects.store_global(g, inst.argval, self.pop(),
                                       GlobalSource(g, inst.argval, top=g is self.top_globals))

    def DELETE_GLOBAL(self, inst):
        raise unsupported("EB0008", f"deleting global {inst.argval!r}")

    def LOAD_ATTR(self, inst):
        obj = self.pop()
        self.push(self.getattr(obj, inst.argval))

    def LOAD_METHOD(self, inst):
        obj = self.pop()
        self.push_callable(self.getattr(obj, inst.argval))

    def STORE_ATTR(self, inst):
        obj = self.pop()
        value = self.pop()
        obj.setattr(self, inst.argval, value)

    def DELETE_ATTR(self, inst):
        obj = self.pop()
        delattr_ = getattr(obj, "delattr", None)
        if delattr_ is None:
            raise unsupported("EB0008", f"deleting attribute {inst.argval!r} of {obj.describe()}")
        delattr_(self, inst.argval)

    # cells: MAKE_CELL turns a local into a cell; COPY_FREE_VARS is a no-op (cells are set up front)
    def MAKE_CELL(self, inst):
        name = inst.argval
        if name not in self.cells or not isinstance(self.cells[name], CellVariable):
            self.cells[name] = CellVariable(self.locals.pop(name, None))

    def COPY_FREE_VARS(self, inst):
        pass

    def LOAD_CLOSURE(self, inst):
        self.push(self.cells[inst.argval])

    def _read_cell(self, cell) -> VariableTracker:
        if isinstance(cell, CellVariable):
            if cell.contents is None:
                raise unsupported("EB0002", "free variable referenced before assignment (NameError)")
            return cell.contents
        if isinstance(cell, RealCellVariable):
            pending = self.side_effects.load_attr(cell.cell, "cell_contents")
            if pending is not None:
                return pending
            try:
                value = cell.cell.cell_contents
            except ValueError:
                raise unsupported("EB0002", "empty closure cell (NameError)") from None
            source = cell.source or AttrSource(ConstSource(cell.cell, "<cell>"), "cell_contents")
            return wrap(self, value, source)
        raise unsupported("EB0009", f"unknown cell {cell!r}")

    def LOAD_DEREF(self, inst):
        self.push(self._read_cell(self.cells[inst.argval]))

    def LOAD_CLASSDEREF(self, inst):
        raise unsupported("EB0001", "LOAD_CLASSDEREF (class bodies)")

    def STORE_DEREF(self, inst):
        cell = self.cells.get(inst.argval)
        if isinstance(cell, CellVariable):
            cell.contents = self.pop()
            name_node_after(cell.contents, inst.argval)
            return
        if isinstance(cell, RealCellVariable):
            holder = _CellHolder(cell.cell, getattr(cell, "cell_source", None))
            self.side_effects.store_attr(holder, cell.cell, "cell_contents", self.pop())
            return
        raise unsupported("EB0009", f"assigning nonlocal {inst.argval!r}")

    def DELETE_DEREF(self, inst):
        cell = self.cells.get(inst.argval)
        if isinstance(cell, CellVariable):
            cell.contents = None
            return
        raise unsupported("EB0008", "deleting a nonlocal")

    def IMPORT_NAME(self, inst):
        import sys
        fromlist = self.pop().as_constant()
        level = self.pop().as_constant()
        name = inst.argval
        if level != 0 or name not in sys.modules:
            raise unsupported("EB0010", f"import of {name!r} inside the compiled region")
        key = name if fromlist else name.partition(".")[0]
        # read through sys.modules, as the import does each call: its attributes are guarded
        from ember.capture.sources import ItemSource
        self.push(wrap(self, sys.modules[key], ItemSource(ConstSource(sys.modules, "sys.modules"), key)))

    def IMPORT_FROM(self, inst):
        self.push(self.getattr(self.stack[-1], inst.argval))

    # -- calls -----------------------------------------------------------------------------
    def PRECALL(self, inst):
        pass

    def KW_NAMES(self, inst):
        self.kw_names = self.code.co_consts[inst.arg]

    def PUSH_NULL(self, inst):
        self.push(NULL)

    def CALL(self, inst):
        argc = inst.arg
        args = self.popn(argc)
        kw_names = self.kw_names or ()
        self.kw_names = None
        kwargs = {}
        if kw_names:
            kwargs = dict(zip(kw_names, args[len(args) - len(kw_names):]))
            args = args[:len(args) - len(kw_names)]
        fn = self.pop()
        below = self.pop()
        if isinstance(fn, NullVariable):  # 3.13: [callable, NULL, args...]
            fn = below
        elif not isinstance(below, NullVariable):
            # [method, self, args...] layout from LOAD_METHOD on a plain function attribute
            fn, args = below, [fn, *args]
        self.push(self.call(fn, args, kwargs))
        self.release_references(fn, args, kwargs)  # the arguments' references died with the call

    def CALL_FUNCTION_EX(self, inst):
        kwargs_vt = self.pop() if inst.arg & 1 else None
        args_vt = self.pop()
        fn = self.pop()
        if isinstance(fn, NullVariable):  # 3.13: [callable, NULL, args]
            fn = self.pop()
        elif self.stack and isinstance(self.stack[-1], NullVariable):
            self.pop()
        args = list(args_vt.unpack(self)) if not isinstance(args_vt, TupleVariable) else list(args_vt.items)
        kwargs = {}
        if kwargs_vt is not None:
            if not isinstance(kwargs_vt, DictVariable):
                raise unsupported("EB0038", "** with a non-dict")
            kwargs_vt._observe_order(self)  # the callee's **kwargs gets this order
            kwargs = {k: v for k, v in kwargs_vt.items.items()}
        self.push(self.call(fn, args, kwargs))
        self.release_references(fn, args_vt, kwargs_vt)

    def call(self, fn: VariableTracker, args: list, kwargs: dict) -> VariableTracker:
        target = getattr(fn, "fn", None)
        if target is None:
            target = getattr(fn, "value", None)
        if isinstance(target, types.FunctionType) and forbidden_to_trace(target):
            raise ForbiddenCallable(f"Attempt to trace forbidden callable {target}")
        self._direct_code = direct_callee_code(fn)
        try:
            return fn.call(self, args, kwargs)
        finally:
            self._direct_code = None

    def MAKE_FUNCTION(self, inst):
        code = self.pop().as_constant()
        flags = inst.arg or 0  # (3.13: no flags; SET_FUNCTION_ATTRIBUTE follows)
        closure = self.pop().items if flags & 0x08 else ()
        annotations = tuple(self.pop().unpack(self)) if flags & 0x04 else ()  # name, value, name, value ...
        kwdefaults = self.pop().items if flags & 0x02 else {}
        defaults = tuple(self.pop().unpack(self)) if flags & 0x01 else ()  # a constant tuple, often
        fn = NestedFunctionVariable(code, code.co_name, self.globals, defaults, kwdefaults, closure,
                                    qualname=code.co_qualname)
        fn.annotations = annotations
        self.push(fn)

    def RETURN_VALUE(self, inst):
        self.result = self.pop()

    # -- generators: the body runs step by step (variables/generators.py) -------------------------
    def RETURN_GENERATOR(self, inst):
        self.push(ConstantVariable(None))  # popped by the POP_TOP that follows (the first send)

    def YIELD_VALUE(self, inst):
        self.yield_value = self.pop()
        self.yield_inst = inst
        self.yielding = True  # the generator's resume() pushes the value sent back in

    def GET_YIELD_FROM_ITER(self, inst):
        self.push(self.pop().iter(self))

    def SEND(self, inst):
        # `yield from it`: stack is [it, sent]; forward the next item, or finish at the target with
        # the sub-iterator's return value.
        from ember.capture.variables.generators import GeneratorVariable, IteratorBase
        sent = self.pop()
        it = self.stack[-1]
        if isinstance(it, GeneratorVariable):
            kind, value = it.resume(self, send=sent)
            if kind == "return":
                self.stack[-1] = value
                self.jump_to(inst.argval)
            else:
                self.push(value)
            return
        if not isinstance(it, IteratorBase):
            raise unsupported("EB0005", f"yield from {it.describe()}")
        if not is_none(sent):
            raise unsupported("EB0005", f"send() into a `yield from` over {it.describe()}")
        item = it.next(self)
        if item is None:
            self.stack[-1] = ConstantVariable(None)
            self.jump_to(inst.argval)
        else:
            self.push(item)

    # -- exception handling (exceptions raised by traced Python code) ----------------------------
    def PUSH_EXC_INFO(self, inst):
        exc = self.pop()
        if self.exc_inherited:
            # The exception current when the trace started is unknown to it (a caller's, or the
            # one a resume function's handler is handling): this item stands for it (graph_break.py).
            prev = ConstantVariable(None)
            prev.exc_info_at_entry = True
        else:
            prev = self.current_exception_vt or ConstantVariable(self.current_exception)
        self.exc_inherited = False
        self.push(prev)
        self.current_exception = _exception_value(exc)
        self.current_exception_vt = exc
        self.push(exc)

    def POP_EXCEPT(self, inst):
        prev = self.pop()
        self.exc_inherited = getattr(prev, "exc_info_at_entry", False)
        self.current_exception = None if self.exc_inherited else _exception_value(prev)
        self.current_exception_vt = None if self.exc_inherited else prev

    def CHECK_EXC_MATCH(self, inst):
        kind = self.pop().as_constant()
        exc = _exception_value(self.stack[-1])  # a real one when a resume function starts in a handler
        self.push(ConstantVariable(isinstance(exc, kind)))

    def RERAISE(self, inst):
        # CPython only peeks at the lasti below (oparg): the handler's unwinding pops the rest.
        raise _reraised(self.pop())

    def RAISE_VARARGS(self, inst):
        args = self.popn(inst.arg)
        if not args:
            current = self.current_exception_now()
            if current is None:
                raise PythonException(RuntimeError("No active exception to reraise"))
            vt = self.current_exception_vt
            if vt is not None and getattr(vt, "real_exception", None) is current:
                raise _reraised(vt)
            raise PythonException(current)
        exc = args[0]
        if isinstance(exc, ClassVariable) and issubclass(exc.value, BaseException):
            exc = exc.call(self, [], {})
        if type(exc).__name__ == "ExceptionObjectVariable" or len(args) == 2 and \
                type(args[1]).__name__ == "ExceptionObjectVariable":
            from ember.capture.variables.exception_objects import raise_tracked
            raise_tracked(exc, args[1:])  # (one holding traced values: exception_objects.py)
        value = exc.as_constant() if exc.is_constant() else None
        if not isinstance(value, BaseException):
            raise unsupported("EB0011", f"raise {exc.describe()}")
        if len(args) == 2:  # raise ... from cause
            cause = args[1]
            if isinstance(cause, ClassVariable) and issubclass(cause.value, BaseException):
                cause = cause.call(self, [], {})
            if not cause.is_constant():  # (eager's TypeError for a non-exception, or an object made here)
                raise unsupported("EB0011", f"raise ... from {args[1].describe()}")
            cause = cause.as_constant()
            if cause is not None and not isinstance(cause, BaseException):
                raise unsupported("EB0011", f"raise ... from {args[1].describe()}")
            value.__cause__ = cause
            value.__suppress_context__ = True
        init = next((k.__dict__["__init__"] for k in type(value).__mro__ if "__init__" in k.__dict__), None)
        # The program's own `raise` of an exception class with a Python __init__: run again
        # eagerly, it raises again; torch.compile breaks the graph at making such an exception
        # (the graph keeps what came before). One made by a builtin __init__: the frame runs
        # eagerly, as torch.compile skips it. (Raised without a local naming it: see _raised.)
        raise _raised(PythonException(value), replayable=isinstance(init, types.FunctionType))

    def WITH_EXCEPT_START(self, inst):
        # stack: [__exit__, lasti, previous exception, exception]
        from ember.capture.variables.builtins import wrap_constant
        exit_fn = self.stack[-4]
        exc = _exception_value(self.stack[-1])
        exc_vt = self.stack[-1] if getattr(self.stack[-1], "real_exception", None) is exc else ConstantVariable(exc)
        args = [wrap_constant(type(exc)), exc_vt, ConstantVariable(exc.__traceback__)]
        self.push(exit_fn.call(self, args, {}))

    # -- with blocks (variables/ctx_managers.py) --------------------------------------------------
    def BEFORE_WITH(self, inst):
        from ember.capture.variables.ctx_managers import enter_with
        exit_fn, enter = enter_with(self, self.pop())
        self.push(exit_fn)  # on the stack while __enter__ runs, as in CPython
        self.push(enter.call(self, [], {}))


class _TraceState:
    """Shared by all translators of one trace: frames being run, generators made."""

    def __init__(self):
        self.running_frames: list = []
        self.generators: list = []
        self.dead_values: list = []     # locals of inlined frames that returned (see release_references)
        self.catch_warnings_depth = 0   # inside `with warnings.catch_warnings()` blocks
        self.settings: list = []        # regions of torch's tracing settings (compile_settings.py)
        self.checkpoints: list = []     # open speculation checkpoints (see capture/speculation.py)
        self.translators: list = []     # every frame traced (see trace_release.py)
        self.transform_depth = 0        # inside torch.func transforms' functions (functorch_calls.py)
        self.transform_names: list = []  # those transforms, outermost first ("torch.func.grad", ...)


class _CellHolder(VariableTracker):
    """Names a real closure cell for replaying a ``nonlocal`` write."""

    def __init__(self, cell, source=None):
        # A resume function's cell arrives as an argument (a new one per call): name it by source.
        self.source = source if source is not None else ConstSource(cell, "<cell>")


def _raised(failure: BaseException, **attributes) -> BaseException:
    """``failure`` with ``attributes`` set, to raise: a handler that binds the exception it raises
    to a local makes a reference cycle (its traceback holds the frame, the frame the exception)
    that keeps the trace's frames, and the arguments they hold, alive until a gc pass."""
    for name, value in attributes.items():
        if value:
            setattr(failure, name, value)
    return failure


def _reraised(vt: VariableTracker) -> PythonException:
    """The exception ``vt`` stands for, raised again (with its tracker, see `RaisedStopIteration`)."""
    failure = PythonException(_exception_value(vt))
    if getattr(vt, "real_exception", None) is not None:
        failure.tracker = vt
    return failure


def _exception_value(vt: VariableTracker):
    """The exception (or None) a tracker on the exception stack stands for."""
    real = getattr(vt, "real_exception", None)
    if real is not None:
        return real
    if vt.is_constant():
        return vt.as_constant()
    real = _real_object(vt)
    if real is None:
        raise unsupported("EB0011", f"{vt.describe()} as the exception being handled")
    return real


# trackers of builtin-typed values whose python_type() is exactly type(value)
_CLASS_FROM_TYPE = frozenset({"ListVariable", "TupleVariable", "DictVariable", "SetVariable", "ConstantVariable",
                              "DequeVariable", "ListIteratorVariable", "DictViewVariable", "RangeVariable",
                              "SliceVariable", "NestedFunctionVariable"})


_LAZY_BUILTINS = frozenset({"LazyListVariable", "LazyDictVariable"})


def _real_object(vt: VariableTracker):
    """The outside object a tracker stands for, or None for values made in the frame."""
    from ember.capture.variables.objects import ClassVariable, NNModuleVariable, UserObjectVariable
    from ember.capture.variables.torch_fn import TorchFunctionVariable
    if isinstance(vt, NNModuleVariable):
        return vt.module
    if isinstance(vt, ClassVariable):
        return vt.value
    if isinstance(vt, UserObjectVariable):
        return vt.obj
    if isinstance(vt, (UserFunctionVariable, TorchFunctionVariable, BuiltinVariable)):
        return vt.fn
    return None


def _same_object(a: VariableTracker, b: VariableTracker) -> bool:
    """``a is b`` for two trackers."""
    from ember.capture.variables.tensor import TensorVariable
    if a is b:
        return True
    if isinstance(a, TensorVariable) or isinstance(b, TensorVariable):
        return isinstance(a, TensorVariable) and isinstance(b, TensorVariable) and a.fake is b.fake
    if is_none(a) or is_none(b):
        # `n is None` of a dynamic size, a lazily guarded number or a container holding one: by its
        # type, not its value
        return is_none(a) and is_none(b)
    (known_a, ra), (known_b, rb) = _object_of(a), _object_of(b)
    if known_a and known_b:
        # (an outside object and a constant made from it at trace time compare by the object:
        # `OrderedSet[T].__args__[0] is T`)
        return ra is rb
    return False  # one was made in the frame: one tracker per object (a bound method is new at each access)


def _object_of(vt: VariableTracker) -> tuple[bool, object]:
    """(known, the object): an outside object's tracker, or a constant's value."""
    real = _real_object(vt)
    if real is not None:
        return True, real
    if vt.is_constant():
        return True, vt.as_constant()
    return False, None


_EXC_TABLES: dict = {}


def _exception_table(code):
    hit = _EXC_TABLES.get(code)
    if hit is None:
        hit = _EXC_TABLES[code] = dis._parse_exception_table(code)
    return hit


_DECODED: dict = {}


def _decode(code):
    hit = _DECODED.get(code)
    if hit is None:
        hit = interpreter_instructions(code)
        if len(_DECODED) > 4096:
            _DECODED.clear()
        _DECODED[code] = hit
    return hit


def _no_data_dependent_graph_break() -> bool:
    """torch.fx.experimental's debug flag: a branch on a data-dependent value fails the compile
    (torch.compile raises the ShapeEnv's error) instead of breaking the graph."""
    cfg = sys.modules.get("torch.fx.experimental._config")
    return bool(getattr(cfg, "no_data_dependent_graph_break", False))
