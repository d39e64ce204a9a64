"""Trace one call of a function into a cache entry (graph, guards, generated runner).

`capture` runs the Translator over the function's code with its actual
arguments, asks the backend to compile the resulting graph, and generates
the entry function (see `codegen`).
"""
from __future__ import annotations

import collections
import dis
import dataclasses
import functools
import inspect
import logging
import sys
import types
from typing import Any, Callable

import torch

from ember import metrics
from ember.capture import codegen, trace_hooks, write_snapshots
from ember.capture.variables import random_draws
from ember.capture.assumptions import output_checks, rng_lines
from ember.capture.builder import wrap
from ember.capture.caught_ops import CatchRetry
from ember.capture.dynamic_dims import FrameSizes, StaticRetry
from ember.capture.graph_break import ResumeCache, breakable
from ember.capture.compile_settings import error_on_break
from ember.capture.nested_breaks import nested_path
from ember.capture.residual_call import _branch_on_input_tensor, _residual_call
from ember.capture.guards import GuardSet
from ember.capture.entry_guards import _describe_value, _guard_block, _shape_guard_names
from ember.capture.backend_checks import _bakes_in_symbols, _program_backend
from ember.capture.frame_state import (AUTOCAST_DEVICES, _autocast_state, _autocast_states, _restore_autocast,  # noqa: F401
                                       default_device_state, preserved_rng_state, subclass_torch_function_off,
                                       torch_flags)
from ember.capture.callees import _Rebuilt  # noqa: F401 (_Rebuilt: imported from here)
from ember.capture.provenance import Locator
from ember.capture.rebuilt_values import _with_annotations, _with_attributes, _with_attrs, _with_kwdefaults
from ember.capture.interpreter import Translator
from ember.capture.trace_release import release_trace
from ember.capture.output_graph import OutputGraph
from ember.capture.side_effects import SideEffects
from ember.capture.lazy_arguments import ArgumentLocals, lazy_argument
from ember.capture.sources import AttrSource, CellContentsSource, ConstSource, FreeCellSource, LocalSource, bind, hoist
from ember.capture.variables.autocast_breaks import finish_autocast, restore_tracing_state
from ember.capture.variables.inference_breaks import finish_inference
from ember.capture.variables import saved_hooks, sdpa_kernels
from ember.capture.variables.global_flags import restore_flags
from ember.capture.variables.script_objects import hidden_script_objects
from ember.capture.variables.base import ConstantVariable, LazyGuardedConstant, VariableTracker, unsupported
from ember.capture.variables.containers import DictVariable, ListVariable, SetVariable, TupleVariable
from ember.capture.variables.functions import RealCellVariable
from ember.capture.variables.tensor import TensorVariable
from ember.capture.variables.autograd_function import check_ctx_containers
from ember.exc import (BackendCompilerFailed, InjectedFault, RunEagerly, SpecializeFloats, Unsupported, maybe_inject,
                       without_tracebacks)
from ember.capture.variables.symbolic import SizeVariable, SymNodeVariable
from ember.fake.convert import FakeContext
from ember.fake.symbolic import data_dependent_capture, has_unbacked, one_graph
from ember.fake.quiet import quiet_meta_errors

log = logging.getLogger("ember.graph")
log_code = logging.getLogger("ember.bytecode")


@dataclasses.dataclass
class CacheEntry:
    run: Callable                   # same signature as the user function; returns codegen.MISS on guard failure
    guards: GuardSet
    graph: torch.fx.GraphModule | None
    compiled: Callable | None
    input_sources: list
    check_guards: Callable          # (bound args dict) -> list of failing guard texts
    source: str                     # the generated code, for reports
    break_reason: Any = None        # the Unsupported that made this entry break its graph
    eager_reason: Any = None        # set on an entry that runs the function eagerly (see eager_entry)
    observes_compiling: bool = False  # the trace asked is_compiling(): never skipped for having no graph

    def failing_guards(self, bound: dict) -> list[str]:
        return self.check_guards(bound)


def _without_subclass_torch_function(fn):
    """Run ``fn`` with tensor subclasses' ``__torch_function__`` disabled: the trace converts, checks
    and compiles real tensors, which must not show up as calls to a user's subclass (only the graph,
    at run time, dispatches to it, as eager does)."""
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        with subclass_torch_function_off(), quiet_meta_errors():
            return fn(*args, **kwargs)
    return wrapper


@_without_subclass_torch_function
def capture(fn: types.FunctionType, bound: dict[str, Any], backend: Callable, label: str,
            resumes: "ResumeCache | None" = None, fullgraph: bool = True,
            offset_map: dict | None = None, sizes: FrameSizes | None = None) -> CacheEntry:
    """Trace ``fn`` on ``bound`` arguments; on an unsupported instruction in the frame, break there
    (when ``resumes`` is given and not ``fullgraph``) by tracing again up to that instruction."""
    maybe_inject("capture")
    try:
        return _capture_breaking(fn, bound, backend, label, resumes, fullgraph, offset_map, sizes)
    except CatchRetry as e:
        log.debug("%s; tracing again with a graph break before each op a try may catch", e)
        sizes.catch_breaks = True
    return _capture_breaking(fn, bound, backend, label, resumes, fullgraph, offset_map, sizes)


def _capture_breaking(fn, bound, backend, label, resumes, fullgraph, offset_map, sizes) -> CacheEntry:
    handled = sys.exc_info()[1]  # the caller's (the re-trace below runs inside an except block)
    if fullgraph:  # (no graph break can follow: fail, or trace .item() as an unbacked symbol)
        with one_graph(True):
            return _capture(fn, bound, backend, label, None, resumes, handled, sizes)
    try:
        return _capture(fn, bound, backend, label, None, resumes, handled, sizes)
    except Unsupported as e:
        if error_on_break(e):  # (error_on_graph_break where it broke: compile_settings.py)
            raise
        first = e
    try:
        return _retrace_loop(fn, bound, backend, label, resumes, fullgraph, offset_map, sizes, handled,
                             _restarted(first) or first)
    finally:
        # The failure's traceback holds this frame, whose local holds the failure: a reference
        # cycle that would keep the arguments (``bound``) alive until a gc pass.
        first = None


def _retrace_loop(fn, bound, backend, label, resumes, fullgraph, offset_map, sizes, handled, e):
    """The first trace failed with ``e``: trace again with a graph break where it failed."""
    try:
        for attempt in range(_MAX_RESTARTS + 1):
            offset = getattr(e, "top_offset", None)
            if fullgraph or resumes is None or offset is None or isinstance(e, _NotBreakable) \
                    or getattr(e, "whole_frame", False):
                raise e
            if resumes.fn is not fn and (offset_map is None or offset not in offset_map):
                raise e
            why_not = breakable(fn.__code__, offset, e.top_opname)
            if why_not is not None:
                e.reason = f"{e.reason} (and no graph break: {why_not})"
                e.args = (e._message(),)
                raise e
            if not getattr(e, "per_call", False) and loops_back(fn.__code__, offset, e.top_opname):
                # As torch.compile: a break inside a loop skips the frame (it runs as it is, every
                # iteration), and the functions it calls are compiled (eager_frames.py).
                e.reason = f"{e.reason} (inside a loop: the frame runs as it is, the functions it calls compiled)"
                e.args = (e._message(),)
                e.skip_frame = True
                raise e
            trace_hooks.graph_break(e)  # (EMBER_TRACE: the break's reason; the re-trace is a new attempt)
            entry = _nested_capture(fn, bound, backend, label, offset, e, offset_map, resumes, handled, sizes)
            if entry is not None:
                metrics.bump("graph_breaks")
                entry.break_reason = without_tracebacks(e)
                return entry
            try:
                entry = _capture(fn, bound, backend, label, (offset, e, offset_map), resumes, handled, sizes)
            except _NotBreakable as refused:
                restart = _restarted(refused, e)
                if restart is not None and restart.skips_frame and not getattr(e, "per_call", False):
                    # A half-run generator live across the break (a break inside its body included):
                    # as torch.compile, the frame runs as it is, the functions it calls compiled.
                    e.reason = f"{e.reason} (a suspended generator is live across the break: the frame runs " \
                               "as it is, the functions it calls compiled)"
                    e.args = (e._message(),)
                    e.skip_frame = True
                    raise e from None
                restart = _restarted(refused, e) if attempt < _MAX_RESTARTS else None
                if restart is not None and restart.top_offset != offset:
                    without_tracebacks(refused)
                    e = restart
                    continue
                # Report the instruction that could not be traced (with its location), and why the
                # frame could not break there instead.
                e.reason = f"{e.reason} (and no graph break: {refused.reason})"
                e.args = (e._message(),)
                raise e from None
            metrics.bump("graph_breaks")
            entry.break_reason = without_tracebacks(e)
            return entry
    finally:
        e = restart = None  # (as in capture: a failure raised from here holds this frame in its traceback)
    raise AssertionError("unreachable")


def _nested_capture(fn, bound, backend, label, offset, e, offset_map, resumes, handled, sizes):
    """The capture of a break inside a function the frame inlined, resuming inside it
    (nested_breaks.py), or None: no such break, or it could not be built (the plain break then)."""
    path = nested_path(fn, e, offset)
    if path is None:
        return None
    try:
        return _capture(fn, bound, backend, label, (offset, e, offset_map, path), resumes, handled, sizes)
    except Unsupported as refused:
        log.debug("nested graph break refused (%s): breaking at the call instead", refused)
        without_tracebacks(refused)
        return None
    except (KeyError, IndexError, ValueError, AttributeError, AssertionError, SyntaxError) as failed:
        from ember.config import config
        if config.strict:
            raise
        log.warning("ember: nested graph break failed (%s: %s): breaking at the call instead",
                    type(failed).__name__, failed)
        return None


def loops_back(code: types.CodeType, offset: int, opname: str) -> bool:
    """A break at ``offset`` is inside a loop: a jump after it, up to the first return, goes back
    before it (torch.compile's heuristic). A break whose rest of the frame runs eagerly
    anyway (``eager_here``) does not count."""
    from ember.capture.graph_break import eager_here
    if eager_here(opname):
        return False
    for inst in dis.get_instructions(code):
        if inst.offset <= offset:  # (from the instruction after the break, as torch looks)
            continue
        if inst.opname in ("RETURN_VALUE", "RETURN_CONST"):
            return False
        if inst.opcode in dis.hasjrel or inst.opcode in dis.hasjabs:
            if isinstance(inst.argval, int) and inst.argval < offset:
                return True
    return False


#: breaks moved earlier (to where a generator live across the break was made) per capture
_MAX_RESTARTS = 4


def _restarted(failure: BaseException, original: Unsupported | None = None) -> Unsupported | None:
    """A suspended generator that must outlive the trace (live across a graph break, or returned)
    cannot be rebuilt: break instead at the frame's instruction that made it, so that instruction
    runs eagerly and the generator is a real one from then on (as torch.compile restarts). None if
    ``failure`` is not that."""
    cause, seen = failure, 0
    while cause is not None and seen < 8 and getattr(cause, "restart_at", None) is None:
        cause, seen = cause.__cause__ or cause.__context__, seen + 1
    made_at = getattr(cause, "restart_at", None) if cause is not None else None
    if made_at is None:
        return None
    why = original.reason if original is not None else cause.reason
    e = Unsupported(f"{cause.reason}: the call that makes it runs eagerly ({why})", id=cause.id)
    e.top_offset, e.top_opname = made_at
    # (a half-run generator live across a break skips the frame instead; an exception object made
    # in the frame, exception_objects.py, does not)
    e.skips_frame = getattr(cause, "restart_skips_frame", True)
    return e


class _NotBreakable(Unsupported):
    pass


def _capture(fn, bound, backend, label, break_at, resumes, handled=None, sizes=None) -> CacheEntry:
    made: list = []  # the root translator, once made
    try:
        return _capture_frame(fn, bound, backend, label, break_at, resumes, handled, sizes, made)
    finally:
        if made:
            release_trace(made[0])


def _capture_frame(fn, bound, backend, label, break_at, resumes, handled, sizes, made: list) -> CacheEntry:
    code = fn.__code__
    # a ShapeEnv for symbolic sizes, or for the unbacked symbols of data-dependent values
    fake = FakeContext(static_shapes=(sizes is None or not sizes.symbolic) and not data_dependent_capture())
    guards = GuardSet()
    output = OutputGraph(fake, guards)
    output.backend = backend  # (TorchScript objects: whether the backend runs the graph as it is)
    output.frame_sizes = sizes
    grad_mode = torch.is_grad_enabled()
    guards.grad_mode(grad_mode)
    # under inference mode (grad mode off, as under no_grad) an enable_grad region makes no graph
    # history and torch.is_inference_mode_enabled() answers True: a graph traced under no_grad must
    # not be reused there, nor the other way round
    guards.global_state("inference_mode", torch.is_inference_mode_enabled, torch.is_inference_mode_enabled(),
                        "torch.is_inference_mode_enabled()")
    guards.global_state("default_device", default_device_state, default_device_state(),
                        "the default device (None: the CPU)")
    guards.global_state("autocast", _autocast_state, _autocast_state(),
                        f"autocast state ({', '.join(AUTOCAST_DEVICES)})")
    # what kernels (and so a backend's choices) depend on, beyond grad mode: as torch's global
    # state guard, a change recompiles rather than reuse a graph made under the other setting
    guards.global_state("torch_flags", torch_flags, torch_flags(), "deterministic algorithms, cuBLAS "
                        "reduced-precision flags, number of threads")
    # factories and Python-scalar promotion read it without the frame naming it
    guards.global_state("default_dtype", torch.get_default_dtype, torch.get_default_dtype(),
                        "torch.get_default_dtype()")
    cells = {}
    fn_source = ConstSource(fn, "FN")
    for i, (name, cell) in enumerate(zip(code.co_freevars, fn.__closure__ or ())):
        cells[name] = RealCellVariable(cell, CellContentsSource(fn_source, i, name))
    side_effects = SideEffects()
    tx = Translator(code, fn.__globals__, {}, cells, output, guards, side_effects=side_effects)
    made.append(tx)
    guards.set_locator(Locator(tx))  # each guard records the traced line that made it (capture/provenance.py)
    if fake.shape_env is not None:
        fake.shape_env.ember_locate = guards.locate
    tx.break_at = break_at[0] if break_at else None
    if break_at is not None and len(break_at) > 3:  # a nested break: the innermost frame stops
        tx.break_at, tx.nested_path = None, (break_at[3], 0)
    tx.exc_at_entry = handled  # the exception being handled when the frame was called
    tx.exc_at_entry_is_ours = getattr(fn, "__ember_cell_args__", None) is not None  # a resume function
    residual_call = None
    try:
        with metrics.timed("capture"):
            names = codegen.parameter_names(code)
            cell_args = getattr(fn, "__ember_cell_args__", ())
            free_cells = getattr(fn, "__ember_free_cells__", ())
            unread = codegen.unread_parameters(code)
            tx.locals = ArgumentLocals(tx)  # (arguments wrapped, so guarded, when first read)
            cell_values = getattr(fn, "__ember_cell_values__", ())
            for name in names:
                if name in unread:  # never read: not wrapped, so not guarded
                    continue
                if name in cell_values:  # a nested break's chain: a cell it passes on (nested_breaks.py)
                    tx.locals[name] = _passed_cell(bound[name], name)
                elif name in cell_args:  # a resume function's cell, passed as the cell object
                    tx.cells[name] = _passed_cell(bound[name], name)
                elif name in free_cells:  # a closure twin's: a free variable of the function
                    tx.cells[name] = _passed_cell(bound[name], name, free=True)
                else:
                    tx.locals[name] = lazy_argument(tx, bound[name], LocalSource(name))
            if code.co_flags & inspect.CO_VARKEYWORDS and names[-1] in tx.locals:
                # **kwargs is a fresh dict each call: the frame may mutate it freely.
                kwargs_vt = tx.locals[names[-1]]
                if getattr(kwargs_vt, "lazy", False):
                    kwargs_vt.items  # (wrapped whole, its keys guarded: rebuilt from its items, not read)
                kwargs_vt.source = None
            result = tx.run()
            check_ctx_containers(tx, tx.reached_break is not None)
            # inference-mode blocks open at a break: the graph leaves them (variables/inference_breaks.py)
            if output.active_inference and tx.reached_break is None:
                raise _NotBreakable("torch.inference_mode entered and not exited by the end of the frame", id="EB0014")
            outside_inference = finish_inference(output)
            if isinstance(outside_inference, str):
                raise _NotBreakable(outside_inference, id="EB0013")
            frame_grad = torch.is_grad_enabled() if outside_inference is None else outside_inference
            block_grad_mode = None
            if frame_grad != grad_mode:
                # The frame leaves grad mode changed: a break inside `with torch.no_grad():`, or a
                # resume function that leaves such a block. Graphs stay balanced (the graph restores
                # the entry mode at its end); the entry function sets the new mode after the graph.
                block_grad_mode = frame_grad
                output.graph.call_function(torch._C._set_grad_enabled, (grad_mode,))
            if output.active_contexts and tx.reached_break is None:
                raise _NotBreakable("autocast entered and not exited by the end of the frame", id="EB0014")
            if len(output.active_contexts) != len(output.active_autocasts) + len(output.active_inference):
                raise _NotBreakable("graph break inside an autocast block entered another way", id="EB0013")
            after_graph = finish_autocast(output, tx.reached_break is not None)
            saved_hooks.finish(output, side_effects)
            sdpa_kernels.finish(output, side_effects)
            plan = _ReturnPlan(guards.scope)
            plan.at_break = tx.reached_break is not None
            side_effects.register_hooks(plan)  # (tensor hooks: registered first, in program order)
            if tx.reached_break is not None:
                residual_call = _residual_call(fn, tx, plan, resumes, break_at[2])
                ret_expr = residual_call
            else:
                ret_expr = plan.expr(result)
            effect_lines = side_effects.codegen(plan, guards.scope)
            assumed = output_checks(output, plan)  # (capture/assumptions.py: tested after the graph)
            branch_graph = _branch_on_input_tensor(tx.reached_break, output, plan)
            gm, example_inputs, input_sources = output.finish(plan.output_nodes)
    except Unsupported as e:
        if break_at is not None and not isinstance(e, _NotBreakable):
            raise _NotBreakable(f"{e.reason} (while re-tracing for a graph break)", id=e.id) from e
        if getattr(e, "guards", None) is None:
            e.guards = guards  # what the trace had assumed when it failed (for a guarded eager entry)
        raise
    finally:
        # (contexts first: leaving an inference-mode guard puts back the grad mode it found)
        restore_tracing_state(output)  # a trace that stopped inside `with autocast` (or left one)
        torch._C._set_grad_enabled(grad_mode)
        restore_flags(output)  # (flags the frame set: see variables/global_flags.py)

    compiled = None
    if assumed is not None and not output.has_compute():  # (no graph, nothing to test the check after)
        raise _NotBreakable("a data-dependent check on an input with no graph to test it after", id="EB0016")
    write_snapshots.check_undoable(gm, example_inputs, output, label)  # (before compiling the graph)
    if output.has_compute() or branch_graph:
        trace_hooks.output_graph(gm)
        with metrics.timed("backend"):
            autocast_before = _autocast_states(("cpu", "cuda"))
            try:
                maybe_inject("backend")
                with hidden_script_objects(example_inputs), preserved_rng_state():
                    compiled = backend(gm, list(example_inputs))
            except Exception as e:
                if isinstance(e, (BackendCompilerFailed, SpecializeFloats)):
                    raise
                failed = BackendCompilerFailed(f"backend {getattr(backend, '__name__', backend)!r} failed: "
                                               f"{type(e).__name__}: {e}")
                if not isinstance(e, InjectedFault) and _program_backend(backend):
                    # the program's own backend raised: under fullgraph=True the error goes to the
                    # caller, as torch.compile raises BackendCompilerFailed (cache.py); otherwise
                    # the frame runs eagerly with one warning (a backend checking its graph or
                    # inputs may see ember's differ from torch.compile's). One of ember's backends
                    # (or torch's, given ember's graph) failing is always an internal error.
                    failed.ember_program_backend = True
                raise failed from e
            finally:
                # a backend that failed half-way through tracing a region may leave grad mode or
                # autocast as that region set them: the frame (now running eagerly) needs the caller's
                torch._C._set_grad_enabled(grad_mode)
                _restore_autocast(autocast_before)
        guards.refresh_global_state("abc_token")
        log.debug("graph for %s:\n%s", label, gm.code)
        if _bakes_in_symbols(backend, gm, compiled):
            # A backend of ember's own takes the ShapeEnv along; one that runs the graph as it is
            # needs none. Any other (torch's aot_autograd-based ones, a user's) traces the graph
            # again in a fake mode of its own, where a symbolic int, float or size is its example
            # value, and no guard says so: the frame is traced again with them constant.
            if any(isinstance(n.meta.get("example_value"), torch.SymFloat) for n in gm.graph.find_nodes(op="placeholder")):
                raise SpecializeFloats(f"backend {getattr(backend, '__name__', type(backend).__name__)!r} "
                                       "compiles the graph itself (float inputs as constants)")
            raise StaticRetry(f"backend {getattr(backend, '__name__', type(backend).__name__)!r} compiles the "
                              "graph itself (symbolic sizes and ints as constants)")

    if output.symbolic_inputs:
        output.install_shape_guards(_shape_guard_names(guards.scope, codegen.parameter_names(code)))
    if compiled is not None:
        metrics.bump("graphs")  # (counted once its guards hold: a trace retried counts once)
    scope = guards.scope
    args = ", ".join(src.expr(scope) for src in input_sources)
    body = _guard_block(guards)
    draw_lines, restore_draws = random_draws.entry_lines(output, scope)  # (after the guards, before the graph)
    rng_save, rng_restore = rng_lines(output, scope)  # (capture/assumptions.py)
    body += draw_lines + rng_save
    restore_draws += rng_restore
    if compiled is not None:
        scope["___compiled"] = compiled
        from ember.capture.rerun import rerun_safe, runs_subclass_code, user_callbacks_active
        # a graph that changes grad mode and raises half-way leaves it changed: the entry's (guarded)
        # mode is restored before the error propagates or the frame reruns
        toggles = any(n.target is torch._C._set_grad_enabled for n in gm.graph.nodes)
        scope["___set_grad"] = torch._C._set_grad_enabled
        restore = [f"    ___set_grad({grad_mode})"] if toggles else []
        autocast_devices = sorted({n.args[0] for n in gm.graph.nodes if n.target is torch.amp._enter_autocast
                                   and n.args and isinstance(n.args[0], str)})
        if autocast_devices:  # (and autocast blocks the graph entered: their state as at entry)
            scope["___autocast_states"] = functools.partial(_autocast_states, tuple(autocast_devices))
            scope["___restore_autocast"] = _restore_autocast
            body.append("___ac = ___autocast_states()")
            restore.append("    ___restore_autocast(___ac)")
            toggles = True
        subclass_code = runs_subclass_code(example_inputs)
        rerunnable = rerun_safe(gm, compiled, bool(rng_save), full_run=assumed is not None) and not subclass_code
        if not rerunnable and not subclass_code and (effect_lines or output.under_finally or output.undo_required):
            rerunnable = write_snapshots.entry_lines(gm, compiled, example_inputs, input_sources, output, label,
                                                     scope, body, restore_draws, bool(rng_save))
        if assumed is not None and not rerunnable:
            raise _NotBreakable("a data-dependent check assumed by a graph that cannot run again", id="EB0016")
        if rerunnable:
            # a graph that raises: the frame again, eagerly (ember/capture/rerun.py); ember's own
            # errors go to the safety net; the rerun happens outside the handler (no __context__)
            scope["___eager_rerun"], scope["___ours"] = fn, (RunEagerly, InjectedFault)
            scope["___hooks_ran"] = user_callbacks_active
            restore_draws = [f"    {line}" for line in restore_draws]
            if assumed:  # (a check after a full run with hooks active would rerun them: eager from the start)
                body += ["if ___hooks_ran():", *restore_draws, f"    return ___eager_rerun({forward_call(fn.__code__)})"]
            body += ["___failed = False", "try:", f"    ___o = ___compiled({args})", "except ___ours:", *restore,
                     *restore_draws, "    raise", "except Exception as ___e:", *restore,
                     "    if getattr(___e, 'ember_internal', False) or ___hooks_ran():", "        raise",
                     "    ___failed = True", *([f"if not ___failed and not ({assumed}):", "    ___failed = True"]
                                                   if assumed else []), "if ___failed:", *restore_draws,
                     f"    return ___eager_rerun({forward_call(fn.__code__)})"]
        elif toggles:
            body += ["try:", f"    ___o = ___compiled({args})", "except BaseException:", *restore, "    raise"]
        else:
            body.append(f"___o = ___compiled({args})")
    body.extend(plan.prelude)
    body.extend(effect_lines)
    body.extend(plan.after_effects)
    if block_grad_mode is not None:
        scope["___set_grad"] = torch._C._set_grad_enabled
        body.append(f"___set_grad({block_grad_mode})")
    for i, action in enumerate(after_graph):  # autocast blocks a break cut (variables/autocast_breaks.py)
        scope[f"___autocast_{i}"] = action
        body.append(f"___autocast_{i}()")
    if residual_call is not None and block_grad_mode is not None:
        body += ["try:", f"    return {ret_expr}", "except BaseException:", f"    ___set_grad({grad_mode})",
                 "    raise"]
    else:
        body.append(f"return {ret_expr}")
    scope["___iter"] = iter
    maybe_inject("codegen")
    run = codegen.make_function(fn, body, scope, "entry")
    log_code.debug("generated entry for %s:\n%s", label, run.__ember_source__)
    entry = CacheEntry(run, guards, gm if compiled is not None else None, compiled, input_sources,
                       _reasons_function(fn, guards), run.__ember_source__)
    entry.observes_compiling = output.observes_compiling
    return entry


def forward_call(code: types.CodeType) -> str:
    """Argument text that passes a function's own parameters on to a function of the same
    signature: ``a, b, *args, k=k, **kw``."""
    names = code.co_varnames
    argc, kwonly = code.co_argcount, code.co_kwonlyargcount
    parts = list(names[:argc])
    i = argc + kwonly
    if code.co_flags & inspect.CO_VARARGS:
        parts.append("*" + names[i])
        i += 1
    parts.extend(f"{n}={n}" for n in names[argc:argc + kwonly])
    if code.co_flags & inspect.CO_VARKEYWORDS:
        parts.append("**" + names[i])
    return ", ".join(parts)


def eager_entry(fn: types.FunctionType, guards: GuardSet, reason: Unsupported) -> CacheEntry:
    """An entry that runs ``fn`` eagerly whenever the guards of a failed trace hold.

    A trace that failed on what this call's values made the program do (it raised, or a torch
    op rejected these shapes) fails the same way for every call that satisfies the guards it
    had installed by then; other calls still compile."""
    scope = guards.scope
    scope["___eager"] = fn
    body = _guard_block(guards) + [f"return ___eager({forward_call(fn.__code__)})"]
    run = codegen.make_function(fn, body, scope, "eager entry")
    return CacheEntry(run, guards, None, None, [], _reasons_function(fn, guards), run.__ember_source__,
                      eager_reason=reason)


def _reasons_function(fn: types.FunctionType, guards: GuardSet) -> Callable:
    """``check(bound_args) -> [failing guard texts]``: one guard at a time, for recompile reasons
    (only run on a miss)."""
    scope = guards.scope
    hoists = scope.get("___hoists", [])
    guard_list = guards.ordered()
    code = fn.__code__
    reason_body = ["___failed = []"]
    for hname, hcode in hoists:
        reason_body += ["try:", f"    {hname} = {hcode}", "except Exception:", f"    {hname} = None"]
    for i, g in enumerate(guard_list):
        # the guard's text, and where the trace made it depend on it (capture/provenance.py)
        scope[f"___text{i}"] = g.text
        scope[f"___prov{i}"] = f" — guard from {g.provenance}" if g.provenance is not None else ""
        now = g.now or (f"___describe({g.source.expr(scope)})" if g.source is not None else "None")
        reason_body += ["try:", f"    if not ({g.code}): ___failed.append(___with_value(___text{i}, {now}) + ___prov{i})",
                        "except Exception:", f"    ___failed.append(___text{i} + ___prov{i})"]
    reason_body.append("return ___failed")
    scope["___describe"] = _describe_value
    scope["___with_value"] = lambda text, now: text if now is None else f"{text} (now: {now})"
    reasons_fn = codegen.make_function(fn, reason_body, scope, "guard check")

    def check_guards(bound_args: dict) -> list[str]:
        return codegen.call_bound(reasons_fn, code, bound_args)

    return check_guards


def _passed_cell(cell, name, free: bool = False):
    """The tracker of a cell a resume function (see make_resume_code) or a closure twin (``free``)
    receives as an argument."""
    if not isinstance(cell, types.CellType):
        raise TypeError(f"resume function argument {name!r} should be a cell, got {type(cell).__name__}")
    vt = RealCellVariable(cell, (FreeCellSource if free else AttrSource)(LocalSource(name), "cell_contents"))
    vt.cell_source = LocalSource(name)
    return vt


def _made_in_frame(vt) -> bool:
    """A value the frame created whose identity the program can observe (see _ReturnPlan.expr)."""
    from ember.capture.variables.new_object import NewObjectVariable
    if isinstance(vt, (ListVariable, DictVariable, SetVariable, TupleVariable)):
        return vt.source is None
    if isinstance(vt, NewObjectVariable) or getattr(vt, "rebuilt_once", False) or getattr(vt, "created_in_frame", False):
        return True
    if type(vt).__name__ == "DequeVariable":
        return vt.source is None
    from ember.capture.variables.containers import IteratorVariable
    if isinstance(vt, IteratorVariable) or type(vt).__name__ == "NestedFunctionVariable":
        return vt.source is None
    return False


class _ReturnPlan:
    """Builds the return expression; collects the graph outputs it needs."""

    def __init__(self, scope: dict):
        self.scope = scope
        self.output_nodes: list = []
        self.prelude: list[str] = []        # statements building new objects before the return
        self.after_effects: list[str] = []  # ... finishing them once side effects are replayed
        self._later: dict[int, list[str]] = {}
        # id(tracker) -> the entry's local holding the object built for it (None while building).
        # The trackers are kept alive here: a temporary one must not free its id for another.
        self.built: dict[int, str | None] = {}
        self._keep: list = []
        self._names = 0
        self.at_break = False  # the values are handed to a graph break's residual (not returned)

    def _nested_function(self, vt) -> str:
        """A function made in the frame, rebuilt after the graph (e.g. a lambda live across a break).

        Its closure holds the real cells: the frame's own cells are built once (see ``_cell``) and
        the resume function receives the same cell objects, so writes on either side are seen."""
        cells = [self.expr(cell) for cell in vt.closure_cells]
        defaults = "(" + "".join(f"{self.expr(d)}, " for d in vt.defaults_vts) + ")" if vt.defaults_vts else "None"
        fn = f"{bind(self.scope, types.FunctionType, 'FunctionType')}({bind(self.scope, vt.code, 'code')}, " \
             f"{bind(self.scope, vt.globals, 'globals')}, {vt.name!r}, {defaults}, " \
             f"({''.join(c + ', ' for c in cells)}){'' if cells else ''})"
        if vt.kwdefaults_vts:
            kw = "{" + ", ".join(f"{k!r}: {self.expr(v)}" for k, v in vt.kwdefaults_vts.items()) + "}"
            fn = f"{bind(self.scope, _with_kwdefaults, 'with_kwdefaults')}({fn}, {kw})"
        if vt.annotations:
            flat = "(" + "".join(f"{self.expr(v)}, " for v in vt.annotations) + ")"
            fn = f"{bind(self.scope, _with_annotations, 'with_annotations')}({fn}, {flat})"
        assigned = {**vt.special, **vt.attrs}
        if assigned:  # (functools.wraps: __name__, __doc__, __wrapped__ ...)
            kv = "{" + ", ".join(f"{k!r}: {self.expr(v)}" for k, v in assigned.items()) + "}"
            fn = f"{bind(self.scope, _with_attributes, 'with_attributes')}({fn}, {kv})"
        return fn

    def finish_later(self, vt, step: str) -> None:
        """Run ``step.format(<vt's local>)`` after the side effects (see ListIteratorVariable)."""
        self._later.setdefault(id(vt), []).append(step)

    def _fresh(self, prefix: str) -> str:
        self._names += 1
        return f"{prefix}{self._names}"

    def _cell(self, vt) -> str:
        """A closure cell: a real cell from outside by its source (or itself); a cell of the frame
        built once, empty first (its contents may be a function that closes over it)."""
        from ember.capture.variables.functions import CellVariable
        if not isinstance(vt, CellVariable):
            source = getattr(vt, "cell_source", None)
            return source.expr(self.scope) if source is not None else bind(self.scope, vt.cell, "cell")
        key = id(vt)
        if key in self.built:
            return self.built[key]
        self._keep.append(vt)
        name = self._fresh("___cell")
        self.built[key] = name
        self.prelude.append(f"{name} = {bind(self.scope, types.CellType, 'CellType')}()")
        if vt.contents is not None:
            if _made_in_frame(vt.contents) and id(vt.contents) in self.built and self.built[id(vt.contents)] is None:
                # being built right now: a function whose closure holds this very cell (a recursive
                # nested function); the cell is filled once the function exists
                self.finish_later(vt.contents, f"{name}.cell_contents = {{}}")
                return name
            value = self.expr(vt.contents)
            self.prelude.append(f"{name}.cell_contents = {value}")
        return name

    def _out(self, node) -> str:
        if node not in self.output_nodes:
            self.output_nodes.append(node)
        return f"___o[{self.output_nodes.index(node)}]"

    def expr(self, vt: VariableTracker) -> str:
        """Source text rebuilding ``vt`` after the graph (containers from outside keep identity).

        A mutable value made in the frame (list, dict, set, iterator, object, function) is built
        once, into a local of the entry, and every reference to it — the return value, side
        effects, the stack and locals handed to a graph break's residual — names that one object:
        what the breaking call does to it (`next(it)`, `lst.append`) the rest of the frame sees."""
        if type(vt).__name__ in ("CellVariable", "RealCellVariable"):
            return self._cell(vt)
        if not _made_in_frame(vt):
            return self._build(vt)
        key = id(vt)
        if key in self.built:
            if self.built[key] is None:
                raise unsupported("EB0015", "returning an object that refers to itself")
            return self.built[key]
        self.built[key] = None
        self._keep.append(vt)
        text = self._build(vt)
        name = self._fresh("___new")
        self.prelude.append(f"{name} = {text}")
        self.after_effects += [step.format(name) for step in self._later.pop(key, [])]
        self.built[key] = name
        return name

    def _read(self, source) -> str:
        """The object a source gave when the frame was entered: read with the guards (hoisted),
        before the graph and the frame's own writes (``old = G; G = new; return old``) run."""
        e = source.expr(self.scope)
        return e if e.isidentifier() else hoist(self.scope, e)

    def _build(self, vt: VariableTracker) -> str:
        s = self.scope
        if isinstance(vt, TensorVariable):
            # returned, stored by a side effect, or on the stack at a graph break: guarded, as
            # torch.compile's graph outputs are (an argument handed on unchanged is not: `pass_on`)
            vt.use()
            if vt.reads_input():
                return self._read(vt.source)
            return self._out(vt.node)
        if isinstance(vt, LazyGuardedConstant) and not vt.specialized:
            return self._read(vt.source)  # unused by the trace: passed on as it is, not guarded by value
        if isinstance(vt, SymNodeVariable) and vt.node.op == "placeholder" and vt.source is not None:
            return self._read(vt.source)  # an int argument passed on as it is
        if isinstance(vt, SymNodeVariable) and (isinstance(vt.sym, (torch.SymInt, torch.SymFloat, torch.SymBool))
                                                or has_unbacked(vt.sym)):
            # a size, float or data-dependent value returned or passed on: the graph computes it
            return self._out(vt.node)
        if isinstance(vt, ConstantVariable):
            return codegen.literal(vt.value, s, bind)
        if isinstance(vt, SizeVariable):
            return f"{bind(s, torch.Size, 'Size')}(({''.join(self.expr(i) + ', ' for i in vt.items)}))"
        if (isinstance(vt, (ListVariable, TupleVariable, DictVariable, SetVariable))
                or type(vt).__name__ == "DequeVariable") and vt.source is not None:
            return self._read(vt.source)  # the caller's own container, unchanged: keep its identity
        if getattr(vt, "view_of", None) is not None:  # a read-only view of an object's dict: the real one
            owner, attr = vt.view_of
            return f"{self.expr(owner)}.{attr}"
        if isinstance(vt, TupleVariable):
            inner = ", ".join(self.expr(i) for i in vt.items)
            inner = f"({inner},)" if vt.items else "()"
            t = vt.tuple_type
            if t is None or t is tuple:
                return inner
            name = bind(s, t, "tuple_type")
            return f"{name}(*{inner})" if hasattr(t, "_fields") else f"{name}({inner})"  # (a namedtuple's fields)
        if isinstance(vt, ListVariable):
            inner = "[" + ", ".join(self.expr(i) for i in vt.items) + "]"
            return inner if vt.list_cls is list else f"{bind(s, vt.list_cls, 'list_type')}({inner})"
        if isinstance(vt, SetVariable):
            inner = "{" + ", ".join(self.expr(i) for i in vt.items.values()) + "}" if vt.items else "()"
            if vt.set_cls is set:
                return inner if vt.items else "set()"
            return f"{bind(s, vt.set_cls, 'set_type')}({inner})"  # frozenset, or a subclass made in the frame
        if isinstance(vt, DictVariable):
            # (a key tracker, not its hash key: an object's key is ('__object__', id), not the object)
            parts = [f"{self.expr(vt.keys[k]) if k in vt.keys else codegen.literal(k, s, bind)}: {self.expr(v)}"
                     for k, v in vt.items.items()]
            inner = "{" + ", ".join(parts) + "}"
            if vt.dict_cls is dict:
                return inner
            if issubclass(vt.dict_cls, collections.defaultdict):  # (its first argument is the factory)
                factory = self.expr(vt.default_factory) if vt.default_factory is not None else "None"
                made = f"{bind(s, vt.dict_cls, 'dict_type')}({factory}, {inner})"
            else:
                made = f"{bind(s, vt.dict_cls, 'dict_type')}({inner})"
            if vt.attr_dict is not None and vt.attr_dict.items:  # its instance attributes (`_metadata`)
                attrs = "{" + ", ".join(f"{k!r}: {self.expr(v)}" for k, v in vt.attr_dict.items.items()) + "}"
                return f"{bind(s, _with_attrs, 'with_attrs')}({made}, {attrs})"
            return made
        from ember.capture.variables.new_object import NewObjectVariable, rebuild
        if callable(getattr(vt, "reconstruct", None)):  # trackers that know how to rebuild themselves
            return vt.reconstruct(self)
        if isinstance(vt, _Rebuilt):
            fn = bind(s, vt.value, "callee")
            if vt.bound_to is None:
                return fn
            return f"{bind(s, types.MethodType, 'MethodType')}({fn}, {self.expr(vt.bound_to)})"
        if type(vt).__name__ == "NestedFunctionVariable":
            return self._nested_function(vt)
        if type(vt).__name__ == "_WithExit":
            from ember.capture.graph_break import GradModeExit
            from ember.capture.variables.grad_modes import GradModeVariable
            if isinstance(vt.ctx, GradModeVariable):
                return bind(s, GradModeExit(vt.ctx.prior), "grad_exit")
            raise unsupported("EB0013", f"graph break inside `with {vt.ctx.describe()}`")
        if type(vt).__name__ == "UserMethodVariable" and type(vt.func).__name__ == "UserFunctionVariable":
            # A method bound to an object (e.g. `__exit__` of a context manager made in the frame,
            # on the stack inside its `with` block): the same function bound to the same object.
            return f"{bind(s, types.MethodType, 'MethodType')}({self.expr(vt.func)}, {self.expr(vt.obj)})"
        if type(vt).__name__ == "TensorMethodVariable":
            return f"___getattr({self.expr(vt.tensor)}, {vt.name!r})"
        if type(vt).__name__ == "IteratorVariable" and vt.source is None:
            return f"___iter(({', '.join(self.expr(i) for i in vt.items[vt.pos:])}{',' if vt.items[vt.pos:] else ''}))"
        if type(vt).__name__ == "BoundMethodVariable" and vt.obj.source is not None:
            return f"___getattr({self.expr(vt.obj)}, {vt.name!r})"
        if isinstance(vt, NewObjectVariable):
            attrs = "{" + ", ".join(f"{k!r}: {self.expr(v)}" for k, v in vt.attrs.items()) + "}"
            items = "None"
            if vt.items is not None:
                items = "[" + ", ".join(f"({self.expr(vt.items.keys[k])}, {self.expr(v)})"
                                        for k, v in vt.items.items.items()) + "]"
            return f"{bind(s, rebuild, 'rebuild')}({bind(s, vt.cls, 'cls')}, {attrs}, {items})"
        if vt.source is not None:
            return self._read(vt.source)
        from ember.capture.variables.builtins import BuiltinVariable
        from ember.capture.variables.functions import UserFunctionVariable
        from ember.capture.variables.objects import (ClassVariable, NNModuleVariable, PythonModuleVariable,
                                                     UserObjectVariable)
        from ember.capture.variables.torch_fn import TorchFunctionVariable
        from ember.capture.builder import OpaqueCallableVariable
        # Real objects from outside the frame, reached without a source: hand over the object itself.
        real = {TorchFunctionVariable: "fn", BuiltinVariable: "fn", UserFunctionVariable: "fn",
                OpaqueCallableVariable: "value", ClassVariable: "value", PythonModuleVariable: "module",
                NNModuleVariable: "module", UserObjectVariable: "obj"}.get(type(vt))
        if real is not None:
            if getattr(vt, "created_in_frame", False):
                if getattr(vt, "constructor", None) is None:
                    raise unsupported("EB0015", f"a {type(vt.module).__name__} built in the frame escapes it")
                cls, cargs, ckwargs = vt.constructor  # a stateless torch module from constants: a new one
                parts = [codegen.literal(a, s, bind) for a in cargs] + \
                    [f"{k}={codegen.literal(v, s, bind)}" for k, v in ckwargs.items()]
                return f"{bind(s, cls, 'module_cls')}({', '.join(parts)})"
            return bind(s, getattr(vt, real), "value")
        raise unsupported("EB0015", f"returning {vt.describe()} from the compiled frame")
