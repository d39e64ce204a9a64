"""Nested graph breaks: a break inside an inlined function resumes inside that function.

Without them, a break inside a function ``g`` the trace inlined stops the caller ``f`` at its call
of ``g``: the call runs eagerly, ``g`` is compiled as a frame of its own (graphs for its code before
and after the break), and ``f`` resumes after the call — four graphs for ``f: a; g(); b`` with
``g: c; break; d``. With them (torch's ``nested_graph_breaks``, on in torch's own test suite and
``ember.config.nested_graph_breaks``, on by default), the trace goes on into ``g`` and stops at the
breaking instruction itself, so one graph covers ``a`` and ``c``; then

1. ``g``'s *residual* (``graph_break.build_residual`` for ``g``'s code, at its breaking
   instruction) runs that instruction and calls ``g``'s resume function for ``d``, which returns
   what ``g`` returns;
2. ``f``'s residual is built as if ``f`` broke at its call of ``g``, with that call replaced by a
   call of ``g``'s residual on ``g``'s frame state (its stack and live locals): its result is the
   call's result, and ``f``'s resume function runs ``b``.

Deeper chains compose the same way, innermost first. Each callee's residual and resume functions
belong to its code's closure twin (``bytecode/closure_twin.py``), compiled once per code, so a
closure made anew on every call passes its own cells, never the traced object's.

Which breaks nest: the path from the compiled frame to the breaking instruction is recorded as the
first trace's failure passes up through the inlined frames (``record_nested_frame``). A frame
joins the path only when it is the very callee of its caller's ``CALL`` (``direct_callee_code``:
a function, a nested function or a method, torch's wrapper of a grad-mode decorated function; not a
builtin's callback, a constructor or a hook),
is not a generator, has no ``try``/``with`` block around its breaking instruction, is not inside
a loop, and can be resumed where it stopped; the path ends at the last frame that qualifies (a
break there at its own call of the next, as without nesting). When anything about the nested
break cannot be built, the capture falls back to the plain break at the frame's own instruction.
"""
from __future__ import annotations

import inspect
import os
import types
import weakref

import torch

from ember.bytecode import decode

_CALL_OPS = ("CALL", "CALL_KW", "CALL_FUNCTION_EX")
_NOT_NESTABLE_FLAGS = inspect.CO_GENERATOR | inspect.CO_COROUTINE | inspect.CO_ASYNC_GENERATOR


class NestedBreakStop(BaseException):
    """An inlined frame stopped at a nested break: each caller up the path stops at its call.
    (A BaseException: no tracker's ``except Exception`` may take it for a failure of the call.)"""

    def __init__(self, child):
        super().__init__()
        self.child = child


def direct_callee_code(fn_vt):
    """The code whose frame a call of ``fn_vt`` inlines as the call's own result, or None."""
    from ember.capture.variables.functions import NestedFunctionVariable, UserFunctionVariable, \
        UserMethodVariable
    kind = type(fn_vt)
    if kind is UserFunctionVariable:
        return getattr(fn_vt.fn, "__code__", None)
    if kind is NestedFunctionVariable:
        return fn_vt.code
    if kind is UserMethodVariable and type(fn_vt.func) is UserFunctionVariable:
        return getattr(fn_vt.func.fn, "__code__", None)
    if kind.__name__ == "NNModuleVariable":
        return _forward_code(fn_vt.module)
    if kind.__name__ == "GradModeWrappedFunction" and fn_vt.real_wrapper() is not None:
        from ember.capture.eager_frames import CONTEXT_DECORATOR_CODE
        return CONTEXT_DECORATOR_CODE  # (torch's wrapper, traced: see GradModeWrappedFunction.call)
    if kind.__name__ == "SettingRegionVariable":  # (torch's tracing-setting wrapper: seen through)
        return direct_callee_code(fn_vt.inner)
    return None


def _forward_code(m):
    """``m(...)`` is ``m.forward(...)`` and nothing more (``Module.__call__``, no forward hooks of
    its own or global ones, not lazy): the forward's code, else None."""
    import torch
    from torch.nn.modules import module as nn_module
    if inspect.getattr_static(type(m), "__call__", None) is not torch.nn.Module.__call__:
        return None
    d = m.__dict__
    if d.get("_forward_hooks") or d.get("_forward_pre_hooks") or d.get("_backward_hooks") \
            or d.get("_backward_pre_hooks") or "_initialize_hook" in d:
        return None
    if nn_module._global_forward_hooks or nn_module._global_forward_pre_hooks \
            or nn_module._global_backward_hooks or nn_module._global_backward_pre_hooks:
        return None
    forward = d.get("forward") or inspect.getattr_static(type(m), "forward", None)
    return forward.__code__ if isinstance(forward, types.FunctionType) else None


def record_nested_frame(tx, e, inst) -> None:
    """An inlined frame's instruction failed with ``e``: note where (innermost first)."""
    if inst.opname == "PRECALL":  # (3.11) the CALL that follows is where the call happens
        inst = tx.instructions[tx.ip]
    frames = e.__dict__.setdefault("nested_frames", [])
    frames.append((tx.depth, tx.code, inst.offset, inst.opname, tx.direct_call,
                   _grad_mode_wrapper(getattr(tx, "fn_object", None))))


def arm_nested_child(parent, child) -> None:
    """``child`` was just inlined by ``parent``, a frame on a nested break's path: if it is the
    path's next frame, it joins the path (and stops at the break if it is the last)."""
    path, level = parent.nested_path
    if level + 1 >= len(path) or not child.direct_call or child.code is not path[level + 1][0]:
        return
    if parent.instructions[parent.ip - 1].offset != path[level][1]:
        return
    child.nested_path = (path, level + 1)
    if level + 2 == len(path):
        child.break_at = path[-1][1]


def nested_path(fn, e, offset: int):
    """The path of a nested break for failure ``e`` of ``fn``'s frame at ``offset``: ``[(code,
    offset), ...]`` from the frame down to the innermost frame that stops, or None (no nesting)."""
    from ember.capture.compile_settings import setting
    frames = getattr(e, "nested_frames", None)
    if not frames or not setting(e, "nested_graph_breaks") or getattr(e, "top_opname", None) not in _CALL_OPS:
        return None
    if [f[0] for f in frames] != list(range(len(frames), 0, -1)):
        return None  # (not one chain of frames: a failure wrapped or re-raised on the way up)
    from ember.capture.convert_frame import loops_back
    from ember.capture.graph_break import breakable
    path = [(fn.__code__, offset)]
    for k, (_, code, off, opname, direct, grad_wrapper) in enumerate(reversed(frames)):
        last = k == len(frames) - 1
        if not direct or code.co_flags & _NOT_NESTABLE_FLAGS or breakable(code, off, opname) is not None \
                or loops_back(code, off, opname) or (_library_code(code) and not grad_wrapper):
            break
        path.append((code, off))
        if not last and opname not in _CALL_OPS:
            break
    return path if len(path) > 1 else None


_LIBRARY_DIRS = (os.path.dirname(torch.__file__) + os.sep,  # (torch's own Python, and ember's)
                 os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep)


def _library_code(code) -> bool:
    """torch's own Python (``nn.Module.register_forward_hook``, containers' ``append``) and
    ember's: a break inside it stops at the program's call of it, as without nesting (their rests
    would be traced over module internals the program cannot see)."""
    return code.co_filename.startswith(_LIBRARY_DIRS)


def _grad_mode_wrapper(fn) -> bool:
    """``fn`` is torch's wrapper of a ``@torch.no_grad()`` / ``enable_grad()`` /
    ``set_grad_enabled(b)`` decorated function: a break inside the function nests through it (its
    rest is the grad-mode block around the function's rest; not an inference-mode one, whose block
    the graph keeps: see ``_block_kept_by_the_graph``)."""
    from ember.capture.eager_frames import CONTEXT_DECORATOR_CODE
    if type(fn) is not types.FunctionType:
        return False
    if fn.__code__.co_filename == CONTEXT_DECORATOR_CODE.co_filename \
            and getattr(fn, "__ember_owner__", None) is not None:
        return True  # (a resume function of that wrapper, made for a break that nested through it)
    if fn.__code__ is not CONTEXT_DECORATOR_CODE:
        return False
    cells = dict(zip(fn.__code__.co_freevars, fn.__closure__ or ()))
    try:
        owner = getattr(cells["ctx_factory"].cell_contents, "__self__", None)
    except (KeyError, ValueError):
        return False
    return type(owner) in (torch.no_grad, torch.enable_grad, torch.set_grad_enabled)


def nested_residual(root, plan, resumes, offset_map) -> str:
    """The expression that runs the innermost frame's breaking instruction and then, as one
    compiled function (the *chain*), the rest of every frame on the path::

        def chain(<the leaf's resume arguments>, <the callers' state>):
            def rest_of_leaf(*_, **__): return leaf_resumed_after_break(...)
            def rest_of_f1(*_, **__):   return f1_resumed_at_its_call(..., rest_of_leaf, None, ...)
            return root_resumed_at_its_call(..., rest_of_f1, None, ...)

    Each caller resumes *at* its call instruction, with the callee's rest in the callable's slot
    (the call's arguments are dummies it ignores): the rest runs inside the caller's ``try`` and
    ``with`` blocks, as in eager. Each rest is a plain resume function
    (``ResumeCache.resume(..., eager=True)``) of the frame's owner (the compiled function for the
    root, the code's closure twin for an inlined function); the chain is compiled as a frame of its
    own and inlines them all, so everything after the break is one graph (as torch's nested breaks
    give). A break inside one of them is a nested break of the chain's frame in turn."""
    from ember.capture.callees import _compiled_callee
    from ember.capture.residual_call import _read_only_receiver, break_shape
    from ember.capture.graph_break import _CALLS, _covering_handler, build_residual, callee_position, eager_here
    from ember.capture.variables.base import unsupported
    frames, tx = [], root
    while tx is not None:
        if not tx.exc_inherited:
            raise unsupported("EB0012", "nested graph break inside an except block")
        if any(_block_kept_by_the_graph(v) for v in tx.reached_break.stack):
            raise unsupported("EB0012", "nested graph break inside an inference-mode, autocast or sdpa_kernel block")
        frames.append(tx)
        tx = getattr(tx.reached_break, "inner", None)
    if _glue(frames[-1].code):
        raise unsupported("EB0012", "nested graph break at a call of a chain's own code")
    root_owner = (resumes, _Identity() if offset_map is None else offset_map)
    # A chain's own code (``___chain``, its ``___c`` closures) only passes results on: a break in
    # the frames a chain runs is a nested break of the original frames, the chain's rests made
    # anew from their owners (never resume functions of a chain, which would nest without end).
    owners = [root_owner if k == 0 else _owner(t, resumes) for k, t in enumerate(frames)
              if not _glue(t.code)]
    frames = [t for t in frames if not _glue(t.code)]
    outer = _Outer()
    rests = []
    callers_handle = False
    for k, (t, (owner, to_owner)) in enumerate(zip(frames[:-1], owners[:-1])):
        rests.append(_rest_at_call(k, t, owner, to_owner, outer))
        callers_handle |= _covering_handler(owner.fn.__code__, to_owner[t.reached_break.offset]) is not None
    leaf = frames[-1]
    owner, to_owner = owners[-1]
    bp = leaf.reached_break
    if eager_here(bp.opname):
        raise unsupported("EB0012", f"nested graph break at {bp.opname}, which runs the rest eagerly")
    consumed, after = break_shape(leaf, bp)
    stack = list(bp.stack)
    if bp.opname in _CALLS and len(stack) >= consumed:
        pos = callee_position(stack, consumed)
        stack[pos] = _read_only_receiver(root, _compiled_callee(stack[pos], owner, leaf), consumed)
    bp.offset = to_owner[bp.offset]
    after = [to_owner[a] for a in after]
    values = _frame_values(leaf, owner)
    chains = _ChainResumes(owner, resumes, rests, outer)
    raise_to = chains.raise_chain() if callers_handle else None
    residual, positions, live = build_residual(owner.fn, bp, chains, consumed, after, set(values), False,
                                               outer=tuple(outer.names), raise_to=raise_to)
    args = [plan.expr(stack[p]) for p in positions] + [plan.expr(values[n]) for n in live]
    args += [plan.expr(v) for v in outer.vts]
    from ember.capture.sources import bind
    return f"{bind(plan.scope, residual, 'residual')}({', '.join(args)})"


_GLUE_FILE = "<ember glue "


def _glue(code) -> bool:
    """A nested break's chain or one of its closures (generated here, in a file of that name)."""
    return code.co_filename.startswith(_GLUE_FILE)


def _rest_at_call(k, t, owner, to_owner, outer):
    """Frame ``t`` (level ``k`` of the path, stopped at its call of the next frame) resumed at that
    call: (its plain resume function, the argument expressions of the chain's call of it, where
    ``{cont}`` names the callee's rest)."""
    from ember.bytecode.normalize import NULL_BEFORE_CALLABLE
    from ember.bytecode.resume import mangle_local
    from ember.capture.residual_call import _read_only_receiver, break_shape
    from ember.capture.variables.base import NullVariable
    bp = t.reached_break
    remaining = list(bp.stack)
    consumed, _ = break_shape(t, bp)
    at = bp.offset
    before = t.instructions[t.index_of[at] - 1]
    if before.opname == "PRECALL":  # (3.11: the call's arguments are counted off at PRECALL)
        at = before.offset
    at = to_owner[at]
    values = _frame_values(t, owner)
    # the call's operands: the callable (the callee's rest) and its NULL, then dummies it ignores
    n = len(remaining)
    if bp.opname == "CALL_FUNCTION_EX":
        operands = ["NULL", "{cont}"] if NULL_BEFORE_CALLABLE else ["{cont}", "NULL"]
        operands += ["()"] + (["{}"] if consumed == 4 else [])
    else:
        operands = ["NULL", "{cont}"] if NULL_BEFORE_CALLABLE else ["{cont}", "NULL"]
        operands += ["None"] * (consumed - 2 - (bp.opname == "CALL_KW"))
        if bp.opname == "CALL_KW":
            operands.append("()")  # (3.13: no keyword names: the dummies are positional)
    nulls = tuple(p for p, v in enumerate(remaining) if isinstance(v, NullVariable))
    nulls += tuple(n + i for i, o in enumerate(operands) if o == "NULL")
    live = [name for name in owner.live_at(at) if name in values]
    rest, rc = _plain_rest(owner, at, n + len(operands), live, nulls)
    by_param = {}
    passed = [p for p in range(n + len(operands)) if p not in nulls]
    for p, param in zip(passed, rc.stack_args):
        by_param[param] = operands[p - n] if p >= n else outer.add(f"___stack_f{k}_{p}", remaining[p])
    for name in rc.argnames:
        if name not in by_param:
            by_param[name] = outer.add(f"___live_f{k}_{mangle_local(name)}", values[name])
    return rest, [by_param[name] for name in rc.argnames]


def _block_kept_by_the_graph(vt) -> bool:
    """A ``with`` block's exit on a frame's stack other than a grad-mode block's (inference mode,
    autocast, sdpa_kernel: the entry and the residual leave and re-enter those around the
    breaking instruction, which the chain's frames would not): no nesting there."""
    if type(vt).__name__ != "_WithExit":
        return False
    from ember.capture.compile_settings import SettingContextVariable
    from ember.capture.variables.grad_modes import GradModeVariable
    # (a tracing-setting block does nothing at run time: compile_settings.py)
    return not isinstance(vt.ctx, (GradModeVariable, SettingContextVariable))


def _plain_rest(owner, offset, stack_depth, live, nulls):
    """The owner's plain resume function at ``offset`` (the one a chain inlines) and its ResumeCode:
    ``resume(eager=True)`` gives it wrapped to run as a skipped frame; the chain wants the function."""
    from ember.capture.eager_frames import SkippedFrame
    run, rc = owner.resume(offset, stack_depth, live, nulls, eager=True)
    return (run.fn if isinstance(run, SkippedFrame) else run), rc


class _Outer:
    """The callers' state the chain receives: parameter names, their trackers, which are cells."""

    def __init__(self):
        self.names, self.vts, self.cells = [], [], []

    def add(self, name, vt) -> str:
        self.names.append(name)
        self.vts.append(vt)
        if type(vt).__name__ in ("CellVariable", "RealCellVariable"):
            self.cells.append(name)
            _with_cell_source(vt)
        return name


def _frame_values(tx, owner) -> dict:
    """A frame's locals by their names in the owner's code, and its cells (the cell trackers)."""
    from ember.capture.residual_call import frame_values
    values = frame_values(tx, owner.fn.__code__.co_cellvars)
    for name, cell in values.items():
        if type(cell).__name__ in ("CellVariable", "RealCellVariable"):
            _with_cell_source(cell)
    return values


def _owner(tx, resumes):
    """(the ResumeCache whose resume functions continue inlined frame ``tx``, offsets of ``tx``'s
    code -> offsets in that cache's function): the plain resume function's own maker when ``tx``
    runs one (a chain's), else the closure twin of its code."""
    from ember.capture.variables.base import unsupported
    made_by = getattr(tx.fn_object, "__ember_owner__", None)
    if made_by is not None:
        owner = made_by()
        mapping = owner._offset_map(tx.code) if owner is not None else None
        if mapping is None:
            raise unsupported("EB0012", "nested graph break inside a resume function that cannot be mapped")
        return owner, mapping
    owner = _twin_cache(tx, resumes).resumes
    return owner, _twin_offsets(tx.code, owner.fn.__code__)


class _ChainResumes:
    """The leaf frame's ResumeCache as ``build_residual`` sees it, except that where the residual
    goes on it calls a chain (see ``nested_residual``) instead of the leaf's own resume function."""

    def __init__(self, owner, root_resumes, rests, outer):
        self._owner = owner
        self._root = root_resumes
        self._rests = rests  # (plain resume function, its argument expressions), the root's first
        self._outer = outer

    def __getattr__(self, name):
        return getattr(self._owner, name)

    def resume(self, offset, stack_depth, live, nulls=(), eager=False, reenter=()):
        from ember.capture.variables.base import unsupported
        if reenter:
            raise unsupported("EB0012", "nested graph break whose rest re-enters a block")
        if eager:  # (step_unsupported(): the leaf's rest runs as it is, the callers' rests compiled)
            return self._eager_leaf(offset, stack_depth, live, nulls)
        rest, rc = _plain_rest(self._owner, offset, stack_depth, live, nulls)
        # one chain per place (kept by the compiled function's ResumeCache, released with it), so
        # what its compiles learn (sizes that vary) carries over to the frame's next entries
        key = ("nested rest", rest, self._key())
        hit = self._root._resume.get(key)
        if hit is None:
            from ember.bytecode.resume import mangle_local
            params = list(self._outer.names) + list(rc.argnames)  # (outermost first: ResumeFrameCache)
            own = [mangle_local(a) for a in rc.argnames]  # (in the chain's source: a pytest-rewritten
            # assert's `@py_assert1` local is no identifier; passed by position, as named in `params`)
            chain = self._chain(list(self._outer.names) + own, f"return ___leaf({', '.join(own)})", rest,
                                f"nested_rest_at_{offset}")
            chain.__ember_cell_values__ = tuple(mangle_local(a) for a in rc.cell_args) + tuple(self._outer.cells)
            code = _ChainCode(rc.stack_args, tuple(params), rc.code)
            # (compiled as a resume function: fault injection, nesting limit, exits closed on failure)
            hit = self._root._resume[key] = (self._root.make_compiled(chain, None), code)
        return hit

    def _eager_leaf(self, offset, stack_depth, live, nulls):
        """The leaf's rest run as it is (``step_unsupported()``), then, compiled, the callers' rests
        with its result in the callee's place (an exception of it: raised through the callers'
        rests, run as they are, as an exception of the breaking instruction is). The leaf's rest
        runs where the break left the process state: inside the callers' blocks, as in eager."""
        from ember.bytecode.resume import mangle_local
        leaf, rc = self._owner.resume(offset, stack_depth, live, nulls, eager=True)
        key = ("nested eager rest", leaf, self._key())
        hit = self._root._resume.get(key)
        if hit is None:
            outer = list(self._outer.names)
            chain = self._chain(outer + ["___r"], "return ___r", None, f"nested_rest_after_{offset}")
            chain.__ember_cell_values__ = tuple(self._outer.cells)
            run = _EagerLeafThenChain(leaf, self._root.make_compiled(chain, None), self.raise_chain(), len(outer))
            code = _ChainCode(rc.stack_args, tuple(outer + list(rc.argnames)), rc.code)
            hit = self._root._resume[key] = (run, code)
        return hit

    def raise_chain(self):
        """The chain for an exception of the breaking instruction: raised in place of the leaf's
        rest (run as it is: no graph for a failure)."""
        key = ("nested raise", self._key())
        hit = self._root._resume.get(key)
        if hit is None:
            chain = self._chain(["___exc"] + list(self._outer.names), "raise ___exc", None, "nested_raise")
            hit = self._root._resume[key] = (chain, None)
        return hit[0]

    def _key(self):
        return tuple((fn, tuple(args)) for fn, args in self._rests), tuple(self._outer.names)

    def _chain(self, params, leaf_body, leaf, name):
        n = len(self._rests)
        scope = {"___leaf": leaf}
        lines = [f"def ___chain({', '.join(params)}):"]
        lines += [f"    def ___c{n}(*___a, **___k):", f"        {leaf_body}"] if n else [f"    {leaf_body}"]
        for i in range(n - 1, -1, -1):  # (the innermost caller first; each calls the rest of its callee)
            fn, args = self._rests[i]
            scope[f"___rest{i}"] = fn
            call = f"___rest{i}({', '.join(a.replace('{cont}', f'___c{i + 1}') for a in args)})"
            lines += [f"    def ___c{i}(*___a, **___k):", f"        return {call}"] if i else [f"    return {call}"]
        qualname = f"{self._owner.fn.__code__.co_qualname}.{name}"
        exec(compile("\n".join(lines), f"{_GLUE_FILE}{qualname}>", "exec"), scope)
        chain = scope["___chain"]
        chain.__qualname__ = qualname
        return chain


class _EagerLeafThenChain:
    """``run(*callers' state, *leaf's arguments)``: see ``_ChainResumes._eager_leaf``."""

    def __init__(self, leaf, chain, raise_chain, n_outer):
        self.leaf, self.chain, self.raise_chain, self.n_outer = leaf, chain, raise_chain, n_outer

    def __call__(self, *args):
        outer = args[:self.n_outer]
        try:
            result = self.leaf(*args[self.n_outer:])
        except BaseException as e:  # noqa: BLE001 — the program's own: raised where the callee was
            return self.raise_chain(e, *outer)
        return self.chain(*outer, result)


class _ChainCode:
    """What ``build_residual`` reads of a ResumeCode: the chain's parameters."""

    def __init__(self, stack_args, argnames, code):
        self.stack_args = stack_args
        self.argnames = argnames
        self.code = code  # (the leaf's rest: where a handler's lasti is looked up)


def _twin_cache(tx, resumes):
    """The compiled cache of the closure twin of ``tx``'s code (one per code and globals): its
    ResumeCache makes the callee's residual's resume functions."""
    from ember.capture.callees import ClosureCall
    from ember.capture.variables.base import unsupported
    code = tx.code
    closure = tuple(types.CellType() for _ in code.co_freevars) or None
    stand_in = types.FunctionType(code, tx.globals, code.co_name, None, closure)
    from ember.capture.eager_frames import CONTEXT_DECORATOR_CODE
    if code is CONTEXT_DECORATOR_CODE:  # (torch's grad-mode decorator wrapper on the path: _grad_mode_wrapper)
        call = resumes._closure_twin(stand_in)
    else:
        call = resumes.compiled_function(stand_in, twin=True)
    if type(call) is not ClosureCall:
        raise unsupported("EB0012", f"nested graph break inside {code.co_name}(), which cannot be resumed")
    return call.compiled


_TWIN_OFFSETS: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()  # code -> offsets in its twin


def _twin_offsets(code, twin) -> dict:
    """Offsets of ``code``'s instructions -> the same instructions' in its closure twin."""
    if twin is code:
        return _Identity()
    hit = _TWIN_OFFSETS.get(code)  # (a code's twin is one code: bytecode/closure_twin.py)
    if hit is None:
        mine, theirs = decode(code), decode(twin)
        mine = mine[next(i for i, ins in enumerate(mine) if ins.opname == "RESUME") + 1:]
        theirs = theirs[next(i for i, ins in enumerate(theirs) if ins.opname == "RESUME") + 1:]
        if len(mine) != len(theirs) or any(a.opname != b.opname for a, b in zip(mine, theirs)):
            from ember.capture.variables.base import unsupported
            raise unsupported("EB0012", f"nested graph break: {code.co_name}'s twin does not match its code")
        hit = _TWIN_OFFSETS[code] = {a.offset: b.offset for a, b in zip(mine, theirs)}
    return hit


class _Identity(dict):
    def __missing__(self, key):
        return key


def _with_cell_source(cell):
    """A closure cell of an inlined function, rebuilt at run time from the function object the
    frame reads (a closure guarded by its code only may be another object each call), not bound as
    the traced object's cell."""
    from ember.capture.sources import CellContentsSource, ClosureCellSource
    from ember.capture.variables.functions import RealCellVariable
    if type(cell) is RealCellVariable and getattr(cell, "cell_source", None) is None \
            and isinstance(cell.source, CellContentsSource):
        cell.cell_source = ClosureCellSource(cell.source.base, cell.source.index)
    return cell
