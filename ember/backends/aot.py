"""Backends built on ember's AOT autograd: ``aot_eager``, ``inductor``, ``aot_autograd(...)``.

Each has the backend contract ``backend(gm, example_inputs) -> callable`` and works
both under ``ember.compile`` and as a backend of torch's own compiler::

    backend = ember.lookup_backend("aot_eager")      # or "inductor"
    my_backend = ember.backends.aot_autograd(fw_compiler=my_compiler)
"""
from __future__ import annotations

import contextlib
import functools
import itertools
import logging
from typing import Callable

import torch
import torch.fx

from ember.aot.compile import GraphAsIsCallable, aot_compile, nop
from ember.aot.errors import AOTCompileError
from ember.aot.mincut import min_cut_partition
from ember.aot.partition import default_partition, strip_live_markers
from ember.backends.registry import register_backend
from ember.config import config
from ember.locking import compile_lock
from ember.exc import BackendCompilerFailed, SpecializeFloats

log = logging.getLogger("ember.backends")


def aot_autograd(*, fw_compiler: Callable = nop, bw_compiler: Callable | None = None,
                 inference_compiler: Callable | None = None, partition_fn: Callable = default_partition,
                 decompositions: dict | None = None, keep_inference_input_mutations: bool = False) -> Callable:
    """A backend from forward/backward compilers (like torch's own ``aot_autograd`` helper).

    ``fw_compiler(gm, example_inputs)`` compiles the forward graph (and the
    inference graph unless ``inference_compiler`` is given), ``bw_compiler``
    the backward (default: ``fw_compiler``), lazily at the first backward.
    ``partition_fn(joint, num_primals=, num_fw_returns=)`` returns a
    ``PartitionResult``. ``decompositions`` is a decomposition table for tracing.
    """
    def backend(gm: torch.fx.GraphModule, example_inputs: list, **_options):
        return _compile(gm, example_inputs, fw_compiler=fw_compiler, bw_compiler=bw_compiler,
                        inference_compiler=inference_compiler, partition_fn=partition_fn,
                        decompositions=decompositions,
                        keep_inference_input_mutations=keep_inference_input_mutations)
    return backend


def _compile(gm, example_inputs, **kwargs):
    kwargs.setdefault("backward_pass_autocast", config.backward_pass_autocast)
    try:
        with compile_lock:
            compiled = aot_compile(gm, example_inputs, **kwargs)
        # Input mutations happen after the whole graph ran (not inside it): a graph that raises
        # half-way changed nothing (see ember/capture/rerun.py).
        if not isinstance(compiled, GraphAsIsCallable):
            compiled.mutations_after_graph = not kwargs.get("keep_inference_input_mutations", False)
        return compiled
    except BackendCompilerFailed:
        raise
    except Exception as e:  # noqa: BLE001 — every compile failure reaches the caller as one type
        raise AOTCompileError(f"{type(e).__name__}: {e}") from e


def partitioner(name: str) -> Callable:
    """``"default"`` (save what the backward needs) or ``"min_cut"`` (recompute cheap ops)."""
    if name == "default":
        return default_partition
    if name == "min_cut":
        return min_cut_partition
    raise BackendCompilerFailed(f"unknown partitioner {name!r} (expected 'default' or 'min_cut')")


@register_backend("aot_eager")
def aot_eager(gm: torch.fx.GraphModule, example_inputs: list, **_options):
    """Functionalize, trace forward/backward, partition, and run the graphs as fx code.

    The partitioner is ``ember.config.aot_eager_partitioner`` (``"default"`` or ``"min_cut"``).
    """
    return _compile(gm, example_inputs, fw_compiler=nop, keep_inference_input_mutations=False,
                    partition_fn=partitioner(config.aot_eager_partitioner))


@register_backend("aot_eager_decomp_partition")
def aot_eager_decomp_partition(gm: torch.fx.GraphModule, example_inputs: list, **_options):
    """``aot_eager`` with Inductor's decompositions and the min-cut partitioner: the graphs
    Inductor would get, run as fx code (for telling an Inductor bug from a tracing bug)."""
    return _compile(gm, example_inputs, fw_compiler=nop, keep_inference_input_mutations=False,
                    partition_fn=min_cut_partition, decompositions=_inductor_decompositions())


# ---------------------------------------------------------------------------
# inductor

_inductor_graph_ids = itertools.count()


@functools.lru_cache(None)
def _inductor_decompositions() -> dict:
    # Some of Inductor's decompositions read torch._inductor.lowering (max_pool2d_with_indices asks
    # it whether to fall back) without importing it: it must be loaded before tracing with them.
    import torch._inductor.lowering  # noqa: F401
    from torch._inductor.decomposition import select_decomp_table
    return select_decomp_table()


def _mark_user_visible_outputs(gm: torch.fx.GraphModule, start: int, count: int) -> None:
    """Tell Inductor which outputs the user sees (it keeps their eager strides)."""
    out = next(n for n in reversed(gm.graph.nodes) if n.op == "output")
    vals = out.args[0]
    out.meta["user_visible_output_idxs"] = [i for i in range(start, min(start + count, len(vals)))
                                            if isinstance(vals[i], torch.fx.Node)]


def _inductor_config(mode: str | None, options: dict | None):
    import torch._inductor.config as inductor_config
    patch = {}
    if mode and mode != "default":
        from torch._inductor import list_mode_options
        patch.update(list_mode_options(mode))
        patch.pop("triton.cudagraphs", None)  # cudagraphs need the cudagraph tree machinery: not yet
    patch.update(options or {})
    return inductor_config.patch(patch) if patch else contextlib.nullcontext()


@contextlib.contextmanager
def _inductor_context(example_inputs, enter_fake_mode: bool = True, gm=None):
    """Inductor takes its fake mode from the ambient TracingContext (a frontend may
    have installed one for a different mode): give it the one we traced with.
    Its graph passes also build replacement graphs with factory ops, which must
    produce fake tensors: enter the fake mode for those."""
    from torch._dispatch.python import enable_python_dispatcher
    from torch._guards import TracingContext, tracing
    from torch._subclasses.fake_tensor import FakeTensor
    fake_mode = next((x.fake_mode for x in example_inputs if isinstance(x, FakeTensor)), None)
    if fake_mode is None and gm is not None:
        # a graph without tensor inputs (`torch.rand(2)` alone): its values carry the fake mode
        fake_mode = next((v.fake_mode for n in gm.graph.nodes
                          if isinstance(v := n.meta.get("val"), FakeTensor)), None)
    if fake_mode is None:
        yield
        return
    from torch._inductor.virtualized import V
    with contextlib.ExitStack() as stack:
        stack.enter_context(tracing(TracingContext(fake_mode)))
        stack.enter_context(V.set_fake_mode(fake_mode))  # (passes such as the seed fusion read V.fake_mode)
        if enter_fake_mode:
            stack.enter_context(fake_mode)
            stack.enter_context(enable_python_dispatcher())
        yield


def _distinct_returns(compiled, apart: list):
    """Inductor lowers alias ops (``t.detach()``) to their input: two returns of different graph
    nodes came back as one tensor object, and a later ``requires_grad_`` on the alias changed the
    other too (fuzz seed 4400009). Such a repeat is returned as a new alias of it, as eager's is."""
    boxed = getattr(compiled, "_boxed_call", False)

    def run(*args):
        outs = compiled(*args)
        if any(outs[i] is outs[j] for i, j in apart):
            outs = list(outs)
            for i, j in apart:
                if outs[i] is outs[j] and isinstance(outs[j], torch.Tensor):
                    outs[j] = outs[j].detach() if not outs[j].requires_grad else outs[j].view_as(outs[j])
        return outs
    run._boxed_call = boxed
    return run


class _InductorCompilers:
    """fw/bw/inference compilers for one graph, sharing graph_id and the forward device box."""

    def __init__(self, mode=None, options=None):
        from torch._inductor.cudagraph_utils import BoxedDeviceIndex
        from torch._inductor.utils import BoxedBool
        self.graph_id = next(_inductor_graph_ids)
        self.device_box = BoxedDeviceIndex(None)
        self.cudagraphs = BoxedBool(False)
        self.mode, self.options = mode, options
        self.num_user_outputs = 0
        self.num_mutated_returns = 0
        self.static_input_indices: list[int] = []

    def _inner(self, gm, example_inputs, **kw):
        from torch._inductor.compile_fx import compile_fx_inner
        with _inductor_config(self.mode, self.options), _inductor_context(example_inputs, enter_fake_mode=False,
                                                                          gm=gm):
            return compile_fx_inner(gm, example_inputs, cudagraphs=self.cudagraphs, graph_id=self.graph_id,
                                    boxed_forward_device_index=self.device_box, **kw)

    def forward(self, gm, example_inputs):
        _mark_user_visible_outputs(gm, self.num_mutated_returns, self.num_user_outputs)
        return self._inner(gm, example_inputs, static_input_idxs=self.static_input_indices,
                           is_backward=False, is_inference=False)

    def inference(self, gm, example_inputs):
        from torch._inductor.fx_passes.joint_graph import joint_graph_passes
        returned = next(n for n in reversed(gm.graph.nodes) if n.op == "output").args[0]
        apart = [(i, j) for j, b in enumerate(returned) for i, a in enumerate(returned[:j])
                 if isinstance(a, torch.fx.Node) and isinstance(b, torch.fx.Node) and a is not b]
        with _inductor_config(self.mode, self.options), _inductor_context(example_inputs, gm=gm):
            gm = joint_graph_passes(gm)
        _mark_user_visible_outputs(gm, self.num_mutated_returns, self.num_user_outputs)
        compiled = self._inner(gm, example_inputs, static_input_idxs=self.static_input_indices,
                               is_backward=False, is_inference=True)
        return _distinct_returns(compiled, apart) if apart else compiled

    def backward(self, gm, example_inputs):
        out = next(n for n in reversed(gm.graph.nodes) if n.op == "output")
        out.meta["user_visible_output_idxs"] = [i for i, v in enumerate(out.args[0]) if isinstance(v, torch.fx.Node)]
        num_saved = sum(1 for n in gm.graph.nodes if n.op == "placeholder" and n.meta.get("ember_role") != "tangent")
        return self._inner(gm, example_inputs, static_input_idxs=list(range(num_saved)), is_backward=True)

    def partition(self, joint, *, num_primals, num_fw_returns):
        from torch._inductor.fx_passes.joint_graph import joint_graph_passes
        vals = [n.meta.get("val") for n in joint.graph.nodes if n.op == "placeholder"]
        with _inductor_config(self.mode, self.options), _inductor_context(vals):
            strip_live_markers(joint)  # (before the passes: they would drop the markers as no-op views)
            joint = joint_graph_passes(joint)
        return min_cut_partition(joint, num_primals=num_primals, num_fw_returns=num_fw_returns)


def _warm_compile_workers() -> None:
    """Start Inductor's pool of kernel-compiling worker processes now, before the AOT trace and
    the lowering, as torch's own inductor backend does: a pool first asked for at the first kernel
    is not ready yet, and the graph's Triton kernels then compile one by one in this process (the
    cold compile of a GPU model took seconds longer). Inductor decides whether a pool is used at
    all (Triton installed, more than one compile thread); a failure here only loses the head start."""
    try:
        from torch._inductor.async_compile import maybe_warm_pool
        maybe_warm_pool()
    except Exception as e:  # noqa: BLE001 - an optimisation: compiling goes on without the pool
        log.debug("Inductor's compile workers were not started early: %s", e)


@register_backend("inductor")
def inductor(gm: torch.fx.GraphModule, example_inputs: list, *, mode: str | None = None,
             options: dict | None = None, **_ignored):
    """ember's AOT autograd with Inductor's decompositions, compiled by ``compile_fx_inner``."""
    if any(isinstance(v, torch.SymFloat) and v.node.expr.free_symbols
           for v in (n.meta.get("example_value") for n in gm.graph.find_nodes(op="placeholder"))):
        # (Inductor's kernels would reference the float's symbol without taking it as an argument)
        raise SpecializeFloats("Inductor takes no symbolic float inputs")
    _warm_compile_workers()
    compilers = _InductorCompilers(mode, options)

    def fw_compiler(fw_gm, fw_inputs):
        return compilers.forward(fw_gm, fw_inputs)

    def on_metadata(meta, static_input_indices):
        compilers.num_mutated_returns = meta.num_mutated_inputs
        compilers.num_user_outputs = meta.num_outputs
        compilers.static_input_indices = list(static_input_indices)

    return _compile(gm, example_inputs, fw_compiler=fw_compiler, bw_compiler=compilers.backward,
                    inference_compiler=compilers.inference, partition_fn=compilers.partition,
                    decompositions=_inductor_decompositions(), keep_inference_input_mutations=True,
                    on_metadata=on_metadata)
