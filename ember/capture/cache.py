"""The per-function code cache: guarded entries, recompiles, the recompile limit, fallbacks.

`FrameCache.__call__` is the hot path: try each entry (each is one generated
function that checks its guards and runs its graph); on a miss, trace again
(up to ``config.recompile_limit`` entries), or run eagerly.

This is also where the safety net is (docs/safety_net.md): an ember-internal
error while compiling, or signalled at run time by ``RunEagerly`` from a point
where nothing observable has happened yet, makes the function run eagerly from
then on, with one warning. The eager call is made outside any ``except`` block,
so a user's exception from it carries no ember exception as its context.
"""
from __future__ import annotations

import collections
import inspect
import logging
import threading
import time
import types
import warnings
import weakref
from typing import Callable

import torch

from ember import metrics
from ember.capture import codegen
from ember.capture.compile_settings import error_on_break
from ember.capture.convert_frame import CacheEntry, capture, eager_entry
from ember.capture.dynamic_dims import FrameSizes, StaticRetry
from ember.capture.graph_break import ResumeCache
from ember.torch_config import fail_on_recompile_limit_hit, recompile_limit
from ember.capture import stance, trace_hooks
from ember import trace_log
from ember.config import config
from ember.locking import compile_lock
from ember.exc import FailOnRecompileLimitHit, InjectedFault, RunEagerly, raised_to_caller, SpecializeFloats, Unsupported, keeping_program_exceptions, maybe_inject, where_raised, without_tracebacks

log_recompiles = logging.getLogger("ember.recompiles")
log_breaks = logging.getLogger("ember.graph_breaks")
log_guards = logging.getLogger("ember.guards")

_ALL_CACHES: "weakref.WeakSet[FrameCache]" = weakref.WeakSet()
_compile_seq = iter(range(1 << 62))  # orders compiles across functions (for reports)
#: compiled resume functions nested in one another (a graph break in a loop: each iteration's
#: resume function is called from the previous one's) before the rest runs eagerly
MAX_RESUME_NESTING = 64
_nesting = threading.local()
# Internal errors already reported (type, message): the same error hit by several frames of
# one program (its resume functions, callees at a break) is one warning. Cleared by ember.reset().
_REPORTED: set = set()
#: callees compiled at a break or from a frame that runs as it is, by (function, backend, dynamic)
_CALLEE_CACHES: "weakref.WeakValueDictionary[tuple, FrameCache]" = weakref.WeakValueDictionary()
#: the most recently used shared caches (of functions compiled by ``ember.compile`` and callees
#: compiled at a break), held strongly: compiled code outlives the compiled wrapper that made it
#: (torch keeps it on the code object until ``reset``), so compiling the same function again
#: reuses it; bounded, so dropped functions' graphs do not accumulate without end
_RECENT: "collections.OrderedDict[tuple, FrameCache]" = collections.OrderedDict()
_RECENT_KEPT = 256


def keep_recent(key: tuple, cache: "FrameCache") -> None:
    fn = cache.fn
    if "<locals>" in getattr(fn, "__qualname__", "") and not hasattr(fn, "__ember_free_cells__"):
        # A function defined in a local scope (a class in a test, a closure): kept as long as the
        # function object lives, not longer. Guards hold what they compare against (a local
        # class, and through its methods' cells whatever they close over); torch's guards do not
        # keep those alive, so a model deleted with its class must be freed.
        try:
            fn.__dict__.setdefault("__ember_kept__", {})[key] = cache
            return
        except (AttributeError, TypeError):
            pass
    _RECENT[key] = cache
    _RECENT.move_to_end(key)
    if len(_RECENT) > _RECENT_KEPT:
        _RECENT.popitem(last=False)
_CALLEE = object()  # _compile_nested's marker: a callee at a break, not a resume function
_GENERATOR_FLAGS = inspect.CO_GENERATOR | inspect.CO_COROUTINE | inspect.CO_ASYNC_GENERATOR


class FrameCache:
    """Compiled entries for one Python function (a module's forward included)."""

    def __init__(self, fn: types.FunctionType, backend: Callable, fullgraph: bool = False, label: str = "",
                 resumes: "ResumeCache | None" = None, offset_map: dict | None = None, is_resume: bool = False,
                 dynamic: bool | None = None):
        self.fn = fn
        self.dynamic = dynamic
        self.sizes = FrameSizes(dynamic)  # sizes seen per input, for automatic dynamic shapes
        self.backend = backend
        self.fullgraph = fullgraph
        self.label = label or fn.__qualname__
        self.binder = codegen.make_binder(fn)
        self._code = fn.__code__  # what the entries were traced from
        self._defaults = (fn.__defaults__, fn.__kwdefaults__)  # what the binder and entries bind
        # Resume functions share the root function's ResumeCache (offsets mapped to the root's).
        self.root_resumes = resumes
        self.offset_map = offset_map
        self.is_resume = is_resume
        self.resumes = resumes or ResumeCache(fn, self._compile_nested)
        self.break_reasons: list[Unsupported] = []
        self.entries: list[CacheEntry] = []
        self.run_eagerly_reason: str | None = None
        # A skipped frame (a graph break inside a loop): runs as it is, its callees compiled
        # (capture/eager_frames.py); None: a frame that runs eagerly runs plain self.fn.
        self.skipped: Callable | None = None
        self.recompile_reasons: list[str] = []
        self.fallback_reasons: list[Unsupported] = []
        # one dict per compile (for reports): seq, seconds, phases (seconds per metrics phase),
        # recompile reason, entry (the CacheEntry made, or None)
        self.compile_log: list[dict] = []
        self._reason_warned = False
        self.stance_misses = 0  # cache misses under an "..._then_compile" stance
        _ALL_CACHES.add(self)

    def _compile_nested(self, fn, offset_map=_CALLEE):
        """Resume functions (sharing this ResumeCache, offsets mapped to the root's) and callees at
        a break (a cache of their own): compiled like the function itself."""
        is_resume = offset_map is not _CALLEE
        offset_map = offset_map if is_resume else None
        if not is_resume:
            # One cache per callee and backend, whichever frames call it: a recursive function that
            # runs as it is (a break in a loop) calls itself through the same cache, not a new one
            # per level of recursion.
            key = (id(fn), id(self.backend), self.dynamic)
            hit = _CALLEE_CACHES.get(key)
            if hit is None or hit.fn is not fn or hit.backend is not self.backend:
                hit = FrameCache(fn, self.backend, False, label=f"{self.label}:{fn.__code__.co_name}",
                                 dynamic=self.dynamic)
                _CALLEE_CACHES[key] = hit
            keep_recent(("callee", *key), hit)
            return hit
        cls = ResumeFrameCache if is_resume else FrameCache
        return cls(fn, self.backend, False, label=f"{self.label}:{fn.__code__.co_name}",
                   resumes=self.resumes if offset_map is not None else None, offset_map=offset_map,
                   is_resume=is_resume, dynamic=self.dynamic)

    def __del__(self):
        if self.root_resumes is None:  # the owner of its ResumeCache: free what its code holds
            try:
                self.resumes.release()
            except Exception:  # interpreter shutdown: modules already torn down
                pass

    def reset(self) -> None:
        if self.root_resumes is None and getattr(self, "resumes", None) is not None:
            self.resumes.release()
        self.entries = []
        self.run_eagerly_reason = None
        self.skipped = None
        self.recompile_reasons = []
        self.fallback_reasons = []
        self.break_reasons = []
        self.compile_log = []
        self._reason_warned = False
        self.sizes = FrameSizes(self.dynamic)
        self.stance_misses = 0  # cache misses under an "..._then_compile" stance
        self.resumes = self.root_resumes or ResumeCache(self.fn, self._compile_nested)

    def __call__(self, /, *args, **kwargs):
        fn = self.fn
        if (_len_torch_function_stack() and user_function_mode_active()) or \
                (_len_torch_dispatch_stack() and user_dispatch_mode_active()):
            # A mode of the program's sees every torch call (or aten op) the frame makes: eager's,
            # not ember's guard checks and tracing, nor a graph's ops: run as it is (torch.compile
            # skips frames under a dispatch mode too).
            return fn(*args, **kwargs)
        if stance.active and stance.current().stance == "force_eager":
            return fn(*args, **kwargs)
        if _jit_tracing_state() is not None:
            # torch.jit.trace around the call records the ops that run: eager's (ember's fake
            # tensors and guard checks under the JIT tracer crashed the process)
            return fn(*args, **kwargs)
        if fn.__code__ is not self._code:
            self._code_replaced()
        elif fn.__defaults__ is not self._defaults[0] or fn.__kwdefaults__ is not self._defaults[1]:
            self._sync_defaults()
        try:
            for entry in self.entries:
                result = entry.run(*args, **kwargs)
                if result is not codegen.MISS:
                    return result
        except RunEagerly as e:
            # Raised only where the compiled call has not changed anything yet (see RunEagerly).
            failure = e
        else:
            return self._miss(args, kwargs)
        self._give_up(failure.where, failure.cause)
        return self.fn(*args, **kwargs)

    def skip(self, reason: str) -> None:
        """Run the function as it is from now on, with the functions it calls compiled (as
        torch.compile's skipped frames: capture/eager_frames.py)."""
        from ember.capture.eager_frames import SkippedFrame
        self.entries = []
        self.run_eagerly_reason = reason
        self.skipped = SkippedFrame(self.fn, self.resumes.hook)

    def _code_replaced(self) -> None:
        """The program assigned the function's ``__code__``: every entry was traced from the old
        code, so they all go, and the new code is compiled like a new function's."""
        with compile_lock:
            if self.fn.__code__ is self._code:
                return
            log_recompiles.info("recompiling %s: its __code__ was replaced", self.label)
            self._code = self.fn.__code__
            self.reset()
            self.binder = codegen.make_binder(self.fn)
            self._defaults = (self.fn.__defaults__, self.fn.__kwdefaults__)

    def _sync_defaults(self) -> None:
        """The program assigned the function's ``__defaults__`` / ``__kwdefaults__``: the binder and
        every entry (generated with the function's signature and defaults) bind the new ones, so an
        omitted argument takes the new default and the entry's guards on it decide (recompile)."""
        fn = self.fn
        self._defaults = (fn.__defaults__, fn.__kwdefaults__)
        gens = [self.binder] + [e.run for e in self.entries]
        for gen in gens:
            if isinstance(gen, types.FunctionType):
                gen.__defaults__, gen.__kwdefaults__ = self._defaults

    def _miss(self, args, kwargs):
        if config.disable:
            return self.fn(*args, **kwargs)
        if _python_dispatch_excluded(_PYTHON_KEY):
            # Called under `no_dispatch()` (torch._C._DisableTorchDispatch: a resume function after
            # a break at that `with`): fake tensors cannot be made there; this call runs as it is.
            return self.fn(*args, **kwargs)
        if self.run_eagerly_reason is not None:
            return (self.skipped or self.fn)(*args, **kwargs)
        bound = self.binder(*args, **kwargs)  # raises eager's TypeError for bad arguments
        backend = None
        if stance.active:
            stance.check_valid()
            if self._eager_by_stance(bound):
                return self.fn(*args, **kwargs)
            backend = self._stance_backend()
        with compile_lock:  # one compilation at a time (ember/locking.py)
            ready = self._entry_added_meanwhile(bound)
            if ready is None and backend is not None:
                saved, self.backend = self.backend, backend
                try:
                    entry = self._add_entry(bound)
                finally:
                    self.backend = saved
            else:
                entry = ready if ready is not None else self._add_entry(bound)
        if entry is None or entry.eager_reason is not None:
            return (self.skipped or self.fn)(*args, **kwargs) if entry is None else self.fn(*args, **kwargs)
        try:
            result = entry.run(*args, **kwargs)
        except RunEagerly as e:
            failure = e
        else:
            if result is not codegen.MISS:
                return result
            if ready is not None:  # another thread's entry: its guards no longer hold, nothing ran
                return self.fn(*args, **kwargs)
            # Nothing ran: the entry returned before calling its graph.
            raised = entry.guards.scope["___guard_error"].last
            why = f"its guard check raised {raised}" if raised else f"guard {self._recompile_reason(bound)}"
            failure = RunEagerly("evaluating guards", AssertionError(
                f"ember internal error: fresh entry for {self.label} fails its own guards: {why}"))
            if config.strict:
                raise failure.cause
        self._give_up(failure.where, failure.cause)
        return self.fn(*args, **kwargs)

    def _eager_by_stance(self, bound) -> bool:
        """Whether the stance (capture/stance.py) runs this missed call eagerly; raises for
        "fail_on_recompile"."""
        which = stance.current().stance
        if which == "eager_on_recompile":
            return True
        if which == "eager_then_compile":
            self.stance_misses += 1
            if self.stance_misses == 1:
                # The sizes of this call's tensor arguments count as a compile's: the next call
                # makes the dimensions that differ from them symbols (as torch infers dynamism
                # from the first two calls).
                for name, value in bound.items():
                    _record_sizes(self.sizes, f"L[{name!r}]", value)
                self.sizes.traces += 1
                return True
            return False
        if which == "fail_on_recompile" and _holds_tensor(bound.values()):
            code = self.fn.__code__
            message = ("Detected recompile when torch.compile stance is 'fail_on_recompile'. "
                       f"filename: '{code.co_filename}', function name: '{code.co_name}', "
                       f"line number: {code.co_firstlineno}")
            if self.entries:
                message += f"\n    triggered by the following guard failure(s):\n    - {self._recompile_reason(bound)}"
            raise RuntimeError(message)
        return False

    def _stance_backend(self):
        """The backend this miss compiles with when the stance names one (None: the function's)."""
        if stance.current().stance == "aot_eager_then_compile":
            self.stance_misses += 1
            if self.stance_misses == 1:
                from ember.backends.registry import lookup_backend
                return lookup_backend("aot_eager")
            return None
        return stance.forced_backend()

    def _entry_added_meanwhile(self, bound):
        """An entry another thread compiled for these arguments while this one waited for the lock."""
        for entry in self.entries:
            try:
                if not entry.failing_guards(bound):
                    return entry
            except Exception:  # noqa: BLE001 — a guard that cannot be evaluated fails
                continue
        return None

    def _add_entry(self, bound) -> CacheEntry | None:
        """Compile a new entry for ``bound`` (under the compile lock). None: run eagerly."""
        if self.run_eagerly_reason is not None:
            return None
        trace_log.sync(config.trace)
        reason = None
        if self.entries:
            limit = recompile_limit()
            if len(self.entries) >= limit:
                if self.fullgraph or fail_on_recompile_limit_hit():  # (each such call raises)
                    why = "fullgraph=True" if self.fullgraph else "config.fail_on_recompile_limit_hit"
                    raise FailOnRecompileLimitHit(
                        f"Hard failure due to {why}: {self.label} hit config.recompile_limit "
                        f"({limit}); last reason: {self._recompile_reason(bound)}")
                self.run_eagerly_reason = f"recompile limit ({limit}) reached"
                warnings.warn(f"ember: {self.label} hit config.recompile_limit "
                              f"({limit}); running it eagerly from now on. Last reason: "
                              f"{self.recompile_reasons[-1] if self.recompile_reasons else '?'}",
                              stacklevel=4)
                trace_hooks.recompile_limit_hit(self, bound)
                return None
            reason = self._recompile_reason(bound)
            self.recompile_reasons.append(reason)
            metrics.bump("recompiles")
            log_recompiles.info("recompiling %s (entry %d): guard failed: %s", self.label, len(self.entries) + 1, reason)
        metrics.bump("frames")
        phases, start = dict(metrics.phase_seconds), time.perf_counter()
        record = {"seq": next(_compile_seq), "reason": reason, "entry": None}
        self.compile_log.append(record)
        with trace_hooks.compile_frame(self, reason) as traced:
            try:
                with keeping_program_exceptions(bound.values()):
                    entry = self._compile(bound)
            finally:
                record["seconds"] = time.perf_counter() - start
                record["phases"] = {k: v - phases.get(k, 0.0) for k, v in metrics.phase_seconds.items()
                                    if v - phases.get(k, 0.0) > 0}
            record["entry"] = entry
            if traced is not None:
                traced.entry = entry
                if entry is not None:
                    trace_hooks.entry_made(entry, self.label)
        if entry is None:
            return None
        if entry.compiled is None and entry.break_reason is None and entry.eager_reason is None \
                and not entry.observes_compiling \
                and not self.fullgraph:
            # No tensor operation traced (the frame returns its inputs or constants, or only touches
            # Python objects): torch.compile skips such a frame's code from then on, its entries
            # included, and so does ember (a later call runs eagerly: nothing to gain, no recompiles).
            # The functions it calls are still compiled, as torch.compile's frame hook does.
            self.skip("no tensor operations traced: the function runs eagerly from now on")
            log_breaks.info("%s: %s", self.label, self.run_eagerly_reason)
            return None
        self.entries.append(entry)
        if entry.eager_reason is not None:
            return entry
        if entry.break_reason is not None:
            self.break_reasons.append(entry.break_reason)
            log_breaks.info("graph break in %s: %s", self.label, entry.break_reason)
        if log_guards.isEnabledFor(logging.DEBUG):
            # each with the line that made the trace depend on it (capture/provenance.py)
            log_guards.debug("guards for %s:\n  %s", self.label,
                             "\n  ".join(g.with_provenance() for g in entry.guards.ordered()))
        return entry

    def _compile(self, bound) -> CacheEntry | None:
        """A new entry for these arguments: compiled, or one that runs them eagerly (the trace
        failed on what these values made the program do). None: run eagerly from now on."""
        failure = None
        try:
            if self.is_resume:
                maybe_inject("resume")
            if self.fn.__code__.co_flags & _GENERATOR_FLAGS:
                # its body runs when the generator is iterated, not in this call (torch.compile refuses
                # such a frame too): the function runs eagerly (fullgraph: this error)
                raise Unsupported(f"{self.label} is a generator or coroutine function: it cannot be "
                                  "compiled directly (compile the function that iterates it)", id="EB0004")
            return self._capture(bound)
        except Unsupported as e:
            metrics.bump("fallbacks")
            self.fallback_reasons.append(e)
            guards = getattr(e, "guards", None)
            if getattr(e, "per_call", False) and guards is not None:
                # The program raised (or a torch op rejected these inputs) while tracing: this call
                # runs eagerly and raises as in eager; other inputs still compile.
                log_breaks.info("%s runs eagerly for these inputs: %s", self.label, e)
                return eager_entry(self.fn, guards, without_tracebacks(e))
            if self.fullgraph or error_on_break(e):  # (error_on_graph_break: capture/compile_settings.py)
                raise
            without_tracebacks(e)
            self.run_eagerly_reason = f"unsupported: {e.id}: {e.reason}"
            if getattr(e, "skip_frame", False):
                self.skip(self.run_eagerly_reason)
            log_breaks.info("%s runs eagerly: %s", self.label, e)
            return None
        except Exception as e:
            if config.strict or _violates_mark_dynamic(e) or raised_to_caller(e) or \
                    (self.fullgraph and getattr(e, "ember_program_backend", False)):
                # (fullgraph=True: the program's own backend failing is its error, as in torch.compile)
                raise  # (the program marked a dimension dynamic that it specialises: torch raises too)
            failure = e
        self._give_up("compiling" if not self.is_resume else "compiling a resume function", failure)
        return None

    def _capture(self, bound) -> CacheEntry:
        """Trace and compile; a trace with symbolic sizes that fails where a static one may not is
        retried with static shapes (and an internal error there turns symbols off for the frame)."""
        self.sizes.begin(bound)
        try:
            entry = self._trace_floats_or_constants(bound)
            if not self.sizes.agree_with_other_ranks():
                return entry
            # another rank saw other sizes: trace again with the decisions every rank shares
            log_recompiles.info("%s: tracing again with the sizes every rank observed (compiler "
                                "collectives)", self.label)
            self.sizes.begin(bound)
            return self._trace_floats_or_constants(bound)
        except Exception as e:
            if raised_to_caller(e):  # (torch.compile raises it to the caller too)
                raise
            if _violates_mark_dynamic(e):
                return self._relax_marks(bound, e)
            if not self.sizes.symbolic or isinstance(e, InjectedFault) or \
                    (isinstance(e, Unsupported) and not getattr(e, "per_call", False)):
                raise
            if not isinstance(e, (Unsupported, StaticRetry)):
                if config.strict:
                    raise
                self.sizes.static_only = f"{type(e).__name__}: {e}"
            log_recompiles.info("%s: the trace with symbolic sizes failed (%s: %s); tracing with static "
                                "shapes", self.label, type(e).__name__, e)
            without_tracebacks(e)  # (handled: its frames, which hold the arguments, can go)
        self.sizes.symbolic = False
        return capture(self.fn, bound, self.backend, self.label, self.resumes, self.fullgraph,
                       self.offset_map, self.sizes)

    def _trace_floats_or_constants(self, bound) -> CacheEntry:
        """Trace and compile; a trace with symbolic floats that fails — the backend refused them
        (Inductor), or an operation does not take a SymFloat (``torch.arange(0, a, 0.1)``) — is
        traced again with the frame's floats constant (as torch restarts when it cannot tensorify)."""
        self.sizes.float_symbols = 0
        try:
            return capture(self.fn, bound, self.backend, self.label, self.resumes, self.fullgraph,
                           self.offset_map, self.sizes)
        except Exception as e:
            if not (isinstance(e, SpecializeFloats) or self.sizes.float_symbols) \
                    or isinstance(e, InjectedFault) or raised_to_caller(e) or _violates_mark_dynamic(e):
                raise
            log_recompiles.info("%s: %s: %s; tracing again with float arguments as constants",
                                self.label, type(e).__name__, e)
            without_tracebacks(e)
        self.sizes.floats = False
        return capture(self.fn, bound, self.backend, self.label, self.resumes, self.fullgraph,
                       self.offset_map, self.sizes)

    def _relax_marks(self, bound, violation: BaseException) -> CacheEntry:
        """The trace specialised a dimension marked dynamic: under fullgraph (or for torch's own
        marks) the error propagates; a mark from ember.mark_dynamic becomes a hint, with a warning."""
        if self.fullgraph or self.sizes.relaxed_marks:
            raise violation
        self.sizes.relaxed_marks = True
        without_tracebacks(violation)
        self.sizes.begin(bound)
        try:
            entry = capture(self.fn, bound, self.backend, self.label, self.resumes, self.fullgraph,
                            self.offset_map, self.sizes)
        except Exception as e:
            if _violates_mark_dynamic(e):
                raise violation from None  # (a mark torch's mark_dynamic made)
            raise
        warnings.warn(f"ember: {self.label} specialises a dimension marked with ember.mark_dynamic; "
                      f"compiling it static (fullgraph=True raises instead):\n{violation}", stacklevel=4)
        return entry

    def _recompile_reason(self, bound) -> str:
        """The first guard of the newest entry that fails for ``bound`` (diagnostics only: an
        error computing it is reported once and does not stop the recompile)."""
        try:
            failed = self.entries[-1].failing_guards(bound)
        except Exception as e:
            if config.strict:
                raise
            if not self._reason_warned:
                self._reason_warned = True
                warnings.warn(f"ember: could not compute the recompile reason for {self.label} "
                              f"({type(e).__name__}: {e}); recompiling anyway", stacklevel=4)
            return f"guards failed (reason unavailable: {type(e).__name__})"
        return failed[0] if failed else "guards failed"

    def _give_up(self, where: str, cause: BaseException) -> None:
        """An ember-internal error: this function runs eagerly from now on, with one warning."""
        metrics.bump("fallbacks")
        self.entries = []
        self.skipped = None
        self.run_eagerly_reason = f"internal error {where}: {type(cause).__name__}: {cause}"
        self.internal_error = (type(cause).__name__, self.run_eagerly_reason)  # (for EMBER_TRACE's metrics)
        at = f" ({where_raised(cause)})" if cause.__traceback__ is not None else ""
        key = (type(cause).__name__, str(cause))
        if key in _REPORTED:
            log_breaks.info("%s runs eagerly: internal error %s%s: %s", self.label, where, at, cause)
            return
        _REPORTED.add(key)
        warnings.warn(f"ember: internal error {where} for {self.label}{at}: "
                      f"{type(cause).__name__}: {cause}; running it eagerly from now on "
                      f"(set EMBER_STRICT=1 to raise)", stacklevel=4)


def _violates_mark_dynamic(e: BaseException) -> bool:
    return type(e).__name__ == "ConstraintViolationError"


def reset_all() -> None:
    _REPORTED.clear()
    _RECENT.clear()
    for cache in list(_ALL_CACHES):
        cache.reset()


def live_caches() -> list[FrameCache]:
    """Every live FrameCache (for reports)."""
    return list(_ALL_CACHES)


_len_torch_function_stack = torch._C._len_torch_function_stack
_python_dispatch_excluded = torch._C._dispatch_tls_is_dispatch_key_excluded
_PYTHON_KEY = torch._C.DispatchKey.Python


def _record_sizes(sizes, name: str, value, depth: int = 0) -> None:
    """An eagerly run first call (eager_then_compile) seen as a compile's: the sizes of its tensors
    and the values of its ints, at the arguments and one container level below (``z[0]``)."""
    if isinstance(value, torch.Tensor):
        sizes.dims(name, value)
    elif type(value) is int:
        sizes.int_is_dynamic(name, value)
    elif depth == 0 and type(value) in (list, tuple):
        for i, item in enumerate(value):
            _record_sizes(sizes, f"{name}[{i!r}]", item, 1)
    elif depth == 0 and type(value) is dict:
        for k, item in value.items():
            if type(k) in (int, str):
                _record_sizes(sizes, f"{name}[{k!r}]", item, 1)


_len_torch_dispatch_stack = torch._C._len_torch_dispatch_stack
_jit_tracing_state = torch._C._get_tracing_state


def user_dispatch_mode_active() -> bool:
    """Whether a TorchDispatchMode other than an infrastructure one (fake tensors, functionalization,
    proxy tracing) is active."""
    from torch.utils._python_dispatch import is_in_torch_dispatch_mode
    return is_in_torch_dispatch_mode(include_infra_modes=False)


def user_function_mode_active() -> bool:
    """Whether the torch function mode stack holds a mode other than ``torch.device(...)``'s
    (whose only effect is the default device of factory calls, which graphs carry)."""
    from torch.overrides import _get_current_function_mode_stack
    from torch.utils._device import DeviceContext
    return any(type(m) is not DeviceContext and not type(m).__module__.startswith("ember.")
               for m in _get_current_function_mode_stack())


def _holds_tensor(values, depth: int = 0) -> bool:
    """Whether a frame's arguments hold a tensor (in containers, or a module's parameters)."""
    for v in values:
        if isinstance(v, torch.Tensor):
            return True
        if isinstance(v, torch.nn.Module):
            if next(iter(v.parameters()), None) is not None or next(iter(v.buffers()), None) is not None:
                return True
        elif depth < 4 and isinstance(v, (list, tuple)):
            if _holds_tensor(v, depth + 1):
                return True
        elif depth < 4 and isinstance(v, dict):
            if _holds_tensor(list(v.values()), depth + 1):
                return True
    return False


class ResumeFrameCache(FrameCache):
    """A resume function's cache. A graph break inside a loop resumes in a function whose own
    break calls the next resume function from inside it: the Python stack grows by a few frames
    per iteration, and a long loop would exhaust the recursion limit. Past ``MAX_RESUME_NESTING``
    nested resume calls, the resume function runs as it is (eagerly: its loop then iterates in
    one frame, as torch.compile runs a frame with a break in a loop)."""

    def __call__(self, /, *args, **kwargs):
        depth = getattr(_nesting, "depth", 0)
        if depth >= MAX_RESUME_NESTING:
            return self.fn(*args, **kwargs)
        _nesting.depth = depth + 1
        try:
            return FrameCache.__call__(self, *args, **kwargs)
        finally:
            _nesting.depth = depth

    def _add_entry(self, bound):
        """As FrameCache's; a compile error that reaches the caller first closes the ``with`` blocks
        whose ``__exit__`` the resume function was handed, innermost first, as the resume function
        would have on an exception at its first instruction (else an autocast or no_grad block the
        caller's residual entered stays entered after the error)."""
        try:
            return FrameCache._add_entry(self, bound)
        except Exception as e:
            exits = [v for k, v in bound.items() if k.startswith("___stack") and _is_with_exit(v)]
            for exit_ in reversed(exits):
                exit_(type(e), e, e.__traceback__)
            raise


def _is_with_exit(value) -> bool:
    from ember.capture.graph_break import GradModeExit
    from ember.capture.variables.autocast_breaks import AutocastExit
    from ember.capture.variables.inference_breaks import InferenceBlock
    from ember.capture.variables.sdpa_kernels import SdpaExit
    return isinstance(value, (GradModeExit, AutocastExit, InferenceBlock, SdpaExit)) or (
        isinstance(value, (types.MethodType, types.BuiltinMethodType)) and value.__name__ == "__exit__")
