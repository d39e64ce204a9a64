"""Compiled autograd's entry points: ``torch.autograd.backward`` / ``grad`` while enabled.

Per backward: walk the autograd graph (``walk``: the engine's schedule and the key), look the key
up in the cache; on a miss trace the graph while running this backward (``tracer``), compile it
with the backend and keep it; on a hit gather the inputs, call the compiled graph, and assign its
outputs to ``.grad``. What it cannot
handle runs through the autograd engine with one warning (``Unsupported``).
"""
from __future__ import annotations

import threading
import warnings
from dataclasses import dataclass
from typing import Callable

import torch

from ember.autograd import ops
from ember.autograd.hooks import install as install_hook_tracking
from ember.autograd.hooks import node_hooks_live
from ember.autograd.tracer import Traced, Tracer
from ember.autograd.walk import ACC, AOT, RELEASED, SECOND_BACKWARD, SecondBackward, Unsupported, walk

_orig_backward = torch.autograd.backward
_orig_grad = torch.autograd.grad


@dataclass
class Counters:
    backwards: int = 0        # backwards run by compiled autograd
    traced: int = 0           # graphs traced (cache misses)
    cache_hits: int = 0       # backwards that reused a compiled graph
    fallbacks: int = 0        # backwards run eagerly (unsupported)
    inlined_aot: int = 0      # AOT backwards copied into traced graphs
    opaque_nodes: int = 0     # Nodes called opaquely in traced graphs


counters = Counters()


@dataclass
class _Entry:
    traced: Traced
    compiled: Callable
    boxed: bool


class _State:
    def __init__(self):
        self.compiler: Callable | None = None
        self.depth = 0
        self.caches: dict = {}   # backend -> {key: _Entry}
        self.lock = threading.RLock()
        self.warned: set = set()


state = _State()


def push(compiler: Callable) -> tuple:
    """Enable with ``compiler`` (a backend callable); returns what ``pop`` restores."""
    install_hook_tracking()
    with state.lock:
        prev = (state.compiler, state.depth)
        state.compiler = compiler
        state.depth += 1
        torch.autograd.backward = backward
        torch.autograd.grad = grad
    return prev


def pop(prev: tuple) -> None:
    with state.lock:
        state.compiler, state.depth = prev
        if state.compiler is None:
            torch.autograd.backward = _orig_backward
            torch.autograd.grad = _orig_grad


def reset() -> None:
    """Forget compiled graphs and zero the counters."""
    with state.lock:
        state.caches = {}
        state.warned = set()
    counters.__init__()


def _fallback(reason: str) -> None:
    counters.fallbacks += 1
    if reason not in state.warned:
        state.warned.add(reason)
        warnings.warn(f"ember compiled autograd: running this backward eagerly: {reason}", stacklevel=3)


def _fallback_once(message: str) -> None:
    if message not in state.warned:
        state.warned.add(message)
        warnings.warn(f"ember compiled autograd: {message}", stacklevel=4)


def _eager_only(create_graph: bool, tensors) -> str | None:
    if state.compiler is None or _tracing():
        return ""  # (ember's own AOT tracing differentiates fake tensors: not a backward to compile)
    for t in tensors:
        if type(t) not in _PLAIN:
            return "" if isinstance(t, torch.Tensor) and _subclass_silent(t) else "a tensor subclass"
    if create_graph:
        return "create_graph=True (double backward) is not supported"
    if torch.distributed.is_available() and torch.distributed.is_initialized():
        # DDP / FSDP register their gradient hooks on AccumulateGrad Nodes in C++, where Python
        # cannot see them: a compiled backward would skip the gradient all-reduce.
        return "torch.distributed is initialized (hooks on autograd Nodes, e.g. DDP's, are not visible)"
    if torch._C._is_any_autocast_enabled():
        return "backward under autocast"
    if node_hooks_live():
        return ("a hook registered on an autograd Node is live (grad_fn.register_hook / register_prehook, "
                "or a module backward hook)")
    for t in tensors:
        if not isinstance(t, torch.Tensor):
            return "a GradientEdge root or input"
        if not t.requires_grad:
            return ""  # (eager's error)
    return None


_PLAIN = (torch.Tensor, torch.nn.Parameter)


def _tracing() -> bool:
    from torch.utils._python_dispatch import _get_current_dispatch_mode
    if _get_current_dispatch_mode() is not None:
        return True
    return torch._C._functorch.maybe_current_level() is not None


def _subclass_silent(t) -> bool:
    from torch._subclasses.fake_tensor import FakeTensor
    from torch._subclasses.functional_tensor import FunctionalTensor
    return isinstance(t, (FakeTensor, FunctionalTensor))


def _as_tuple(x):
    if x is None:
        return None
    if isinstance(x, (torch.Tensor, torch.autograd.graph.GradientEdge)):
        return (x,)
    return tuple(x)


def backward(tensors, grad_tensors=None, retain_graph=None, create_graph=False, grad_variables=None,
             inputs=None):
    if grad_variables is not None or state.compiler is None:
        return _orig_backward(tensors, grad_tensors, retain_graph, create_graph, grad_variables, inputs=inputs)
    roots = _as_tuple(tensors)
    ins = _as_tuple(inputs)
    reason = _eager_only(create_graph, roots + (ins or ()))
    if reason is None and ins is not None and any(t.grad_fn is not None for t in ins):
        reason = "backward(inputs=...) with a non-leaf input"
    if reason is None and ins is not None and not ins:
        reason = ""
    if reason is not None:
        if reason:
            _fallback(reason)
        return _orig_backward(tensors, grad_tensors, retain_graph, create_graph, inputs=inputs)
    grads = _make_grads(roots, _as_tuple(grad_tensors))
    accumulate = None
    if ins is not None:
        accumulate = {id(torch.autograd.graph.get_gradient_edge(t).node) for t in ins}
    done = _run(roots, grads, retain_graph, None, accumulate)
    if done is None:
        return _orig_backward(tensors, grad_tensors, retain_graph, create_graph, inputs=inputs)
    return None


def grad(outputs, inputs, grad_outputs=None, retain_graph=None, create_graph=False, only_inputs=True,
         allow_unused=None, is_grads_batched=False, materialize_grads=False):
    def eager():
        return _orig_grad(outputs, inputs, grad_outputs, retain_graph, create_graph, only_inputs, allow_unused,
                          is_grads_batched, materialize_grads)
    if state.compiler is None:
        return eager()
    roots = _as_tuple(outputs)
    ins = _as_tuple(inputs)
    reason = _eager_only(create_graph, roots + ins)
    if reason is None and is_grads_batched:
        reason = "is_grads_batched=True"
    if reason is None and (not ins or materialize_grads and allow_unused is False):
        reason = ""
    if reason is not None:
        if reason:
            _fallback(reason)
        return eager()
    grads = _make_grads(roots, _as_tuple(grad_outputs))
    targets = [tuple(torch.autograd.graph.get_gradient_edge(t))[:2] for t in ins]
    result = _run(roots, grads, retain_graph, targets, None)
    if result is None:
        return eager()
    allow_unused = materialize_grads if allow_unused is None else allow_unused
    out = []
    for t, g in zip(ins, result):
        if g is None:
            if not allow_unused:
                raise RuntimeError("One of the differentiated Tensors appears to not have been used in the graph. "
                                   "Set allow_unused=True if this is the desired behavior.")
            if materialize_grads:
                g = torch.zeros_like(t)
        out.append(g)
    return tuple(out)


def _make_grads(roots, grads):
    if grads is None:
        grads = (None,) * len(roots)
    if len(grads) != len(roots):
        raise RuntimeError(f"got {len(roots)} tensors and {len(grads)} gradients")
    return list(torch.autograd._make_grads(roots, grads, is_grads_batched=False))


def _run(roots, grads, retain_graph, targets, accumulate) -> list | bool | None:
    """Run one backward; None: it must run eagerly (warned). For ``grad``: the gradients."""
    edges = [tuple(torch.autograd.graph.get_gradient_edge(t))[:2] for t in roots]
    try:
        w = walk(edges, grads, targets, accumulate)
    except Unsupported as e:
        if not getattr(e, "silent", False):
            _fallback(str(e))
        return None
    except SecondBackward:
        raise RuntimeError(SECOND_BACKWARD) from None
    except RuntimeError:
        return None  # (reading a saved tensor failed: the engine raises eager's error)
    counters.backwards += 1
    cache = state.caches.setdefault(state.compiler, {})
    entry = cache.get(w.key)
    if entry is None:
        result = _trace_and_compile(w, grads, cache)
    else:
        counters.cache_hits += 1
        result = _run_compiled(entry, w, grads)
    if not retain_graph:
        for node, runs, kind in zip(w.order, w.runs, w.kinds):
            if runs and kind != ACC:
                node.metadata[RELEASED] = True
                if kind == AOT and getattr(node, "deferred_mode", False):
                    node.deferred = None  # (as its own backward does: frees what it kept)
    if targets is not None:
        return [result.get(j) for j in range(len(targets))]
    return True


def _trace_and_compile(w, grads, cache: dict) -> dict:
    tracer = Tracer(w, grads)
    with torch.no_grad():
        traced = tracer.run()
    counters.traced += 1
    counters.inlined_aot += traced.inlined
    counters.opaque_nodes += traced.opaque
    compiler = state.compiler
    if traced.mutating_hooks and not getattr(compiler, "_ember_keeps_order", False):
        # Post-accumulate hooks (an optimizer step in backward) change tensors the rest of the
        # backward may read; only a backend that runs the graph in order keeps eager's answer
        # (Inductor orders opaque calls by data dependencies only): run the graph as it is.
        _fallback_once("post-accumulate-grad hooks: the backward graph runs uncompiled (in order) with a "
                       "backend that may reorder it")
        cache[w.key] = _Entry(traced, traced.gm.forward, False)
        traced.example_inputs = None
        return traced.captured
    try:
        compiled = compiler(traced.gm, list(traced.example_inputs))
    except Exception as e:  # noqa: BLE001 — the graph itself is correct; run it uncompiled
        from ember.config import config
        if config.strict:
            raise
        warnings.warn(f"ember compiled autograd: compiling the backward graph failed ({type(e).__name__}: {e}); "
                      "running it uncompiled")
        compiled = traced.gm.forward
    traced.example_inputs = None
    cache[w.key] = _Entry(traced, compiled, bool(getattr(compiled, "_boxed_call", False)))
    return traced.captured


def _gather(traced: Traced, w, grads) -> list:
    args = []
    for plan in traced.inputs:
        kind, pos = plan[0], plan[1]
        if kind == "root":
            v = grads[pos]
        elif kind == "saved":
            v = w.saved[pos][plan[2]]
        elif kind == "unversioned":
            v = w.order[pos].unversioned[plan[2]]
        elif kind == "grad":
            v = w.order[pos].variable.grad
        else:  # retained
            v = w.hooked[pos][plan[2]].grad
        args.append(v.detach() if v.requires_grad else v)
    return args


def _run_compiled(entry: _Entry, w, grads) -> dict:
    traced = entry.traced
    args = _gather(traced, w, grads)
    # Bind everything the outputs go to BEFORE the call: a boxed graph may clear its input list
    # (and with it the only references the runtime had to those tensors).
    taken = list(args)
    targets = []
    for plan in traced.outputs:
        if plan[0] == "grad":
            targets.append(w.order[plan[1]].variable)
        elif plan[0] == "retain":
            targets.append(w.hooked[plan[1]][plan[2]])
        elif plan[0] == "done":
            targets.append(None)
        else:
            targets.append(plan[1])
    hooks = []
    for pos, t_idx, h_idx in traced.hooks:
        t = w.order[pos].variable if t_idx is None else w.hooked[pos][t_idx]
        hooks.append(list(t._backward_hooks.values())[h_idx])
    with ops.running(ops.RunContext(w.order, hooks)), torch.no_grad():
        outs = entry.compiled(args) if entry.boxed else entry.compiled(*args)
        del args
        captured = {}
        for plan, target, g in zip(traced.outputs, targets, outs):
            if plan[0] == "grad":
                assign_new_grad(target, g, taken)
            elif plan[0] == "retain":
                if g is not None and _shares(g, taken):
                    g = g.clone(memory_format=torch.contiguous_format)
                target.grad = g
                taken.append(g)
            elif plan[0] == "capture":
                captured[target] = g
    return captured


def _shares(g: torch.Tensor, taken: list) -> bool:
    if not g.numel():
        return False
    ptr = g.untyped_storage().data_ptr()
    return any(isinstance(t, torch.Tensor) and t.untyped_storage().data_ptr() == ptr for t in taken)


def _obeys_layout_contract(var: torch.Tensor, g: torch.Tensor) -> bool:
    if var.is_contiguous():
        return g.is_contiguous()
    from torch._prims_common import is_non_overlapping_and_dense_or_false as is_non_overlapping_and_dense
    if is_non_overlapping_and_dense(var):
        return all(gs == vs for size, gs, vs in zip(g.shape, g.stride(), var.stride()) if size != 1)
    return g.is_contiguous()


def assign_new_grad(var: torch.Tensor, g, taken: list) -> None:
    """``var.grad = g`` for a leaf whose ``.grad`` was None, as AccumulateGrad does: ``g`` is used as
    is when nothing else holds it and its layout follows the leaf's (eager "steals" it), else a copy
    with the leaf's strides."""
    if g is None:
        return
    if g.shape != var.shape or _shares(g, taken) or not _obeys_layout_contract(var, g):
        new = ops.empty_like_leaf(var, g)
        new.copy_(g)
        g = new
    with torch.no_grad():
        var.grad = g
    taken.append(g)
