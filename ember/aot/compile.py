"""The AOT autograd pipeline: graph in, callable with eager semantics out.

    compiled = aot_compile(gm, example_inputs, fw_compiler=nop)
    outs = compiled(*inputs)

1. ``flatten_program``: lift the module's params/buffers into inputs, pick fake inputs.
2. ``collect_metadata``: one functionalized run → ``ViewAndMutationMeta``.
3. training (grad enabled and some input requires grad): ``trace_joint``, partition,
   compile the forward now and the backward at the first ``backward()``;
   inference: ``trace_inference`` and compile it.
4. wrap in ``CompiledGraph`` (autograd.Function + epilogue).

Compilers have the backend contract ``compiler(gm, example_inputs) -> callable``;
a callable with ``_boxed_call = True`` takes one list of inputs (which it may clear).
"""
from __future__ import annotations

import contextlib
import logging

import dataclasses
import operator

import itertools
from typing import Callable

import torch
import torch.fx
import torch.utils._pytree as pytree
from torch._subclasses.fake_tensor import FakeTensor

from ember import metrics, trace_log
from ember.locking import compile_lock
from ember.aot.aliasing import InputLayout, compute_layout, inner_fake_args, wrap_program
from ember.aot.autocast import parse_backward_pass_autocast
from ember.aot.errors import UnsupportedAliasedMutation
from ember.aot.inputs import flatten_program
from ember.aot.meta import collect_metadata
from ember.aot.partition import default_partition
from ember.aot.saved import plan_saved
from ember.aot.schemas import OutputKind
from ember.aot.runtime import CompiledGraph, LazyBackward, _draws_random_numbers, boxed, make_autograd_function
from ember.exc import internal_error
from ember.aot.grad_mode import graph_enables_grad, graph_in_inference_mode, inference_region_outputs
from ember.aot.overlap import check_self_overlapping_writes
from ember.aot.trace import trace_inference, trace_joint

_graph_ids = itertools.count()
log_graphs = logging.getLogger("ember.aot_graphs")


def nop(gm: torch.fx.GraphModule, example_inputs: list):
    """A compiler that runs the graph as is (the ``aot_eager`` compiler), except that ``view``
    becomes ``reshape``: the same view wherever the real strides allow one, a copy where a real
    kernel returned other strides than its fake twin said (CPU ``batch_norm`` in eval mode on a
    transposed input returns a contiguous tensor; ``view`` then raised)."""
    changed = False
    for node in gm.graph.nodes:
        if node.op == "call_function" and node.target is torch.ops.aten.view.default:
            node.target = torch.ops.aten.reshape.default
            changed = True
    if changed:
        gm.recompile()
    return gm.forward


def _placeholder_vals(gm: torch.fx.GraphModule) -> list:
    return [n.meta.get("val") for n in gm.graph.nodes if n.op == "placeholder"]


from ember.aot.trace_patches import tracing_patches  # noqa: E402
from ember.aot.errors import AOTCompileError, EagerBackwardFails, eager_autograd_refusal  # noqa: E402
from ember.aot.version_check import eager_backward_check  # noqa: E402


def aot_compile(gm: torch.fx.GraphModule, example_inputs: list, *,
                fw_compiler: Callable = nop,
                bw_compiler: Callable | None = None,
                inference_compiler: Callable | None = None,
                partition_fn: Callable = default_partition,
                decompositions: dict | None = None,
                keep_inference_input_mutations: bool = False,
                on_metadata: Callable | None = None,
                backward_pass_autocast="same_as_forward") -> "AOTCallable":
    """Compile ``gm`` (called with ``example_inputs``) through functionalization and autograd.

    ``on_metadata(meta, static_input_indices)`` is called once the metadata is
    known, before any compiler runs (backends use it to learn the output layout).
    The result compiles further variants on demand when a call's inputs alias
    each other differently (see ``ember.aot.aliasing``).
    """
    options = dict(fw_compiler=fw_compiler, bw_compiler=bw_compiler or fw_compiler,
                   inference_compiler=inference_compiler or fw_compiler, partition_fn=partition_fn,
                   decompositions=decompositions, keep_inference_input_mutations=keep_inference_input_mutations,
                   on_metadata=on_metadata,
                   backward_pass_autocast=parse_backward_pass_autocast(backward_pass_autocast))
    if any(isinstance(a, torch.Tensor) and (_user_torch_function(type(a)) or _functorch_wrapped(a))
           for a in example_inputs):
        return GraphAsIsCallable(gm)
    with metrics.timed("aot"), _python_dispatcher_if_symbolic(gm):
        try:
            return AOTCallable(gm, list(example_inputs), options)
        except EagerBackwardFails as e:
            log_graphs.debug("the captured graph runs as it is (eager autograd): %s", e)
            return GraphAsIsCallable(gm)
        except Exception as e:  # noqa: BLE001
            if not eager_autograd_refusal(e):
                raise
            log_graphs.debug("the captured graph runs as it is (eager autograd refuses it): %s", e)
            return GraphAsIsCallable(gm)


def _user_torch_function(cls: type) -> bool:
    """Whether ``cls`` (a tensor input's type) has a ``__torch_function__`` other than the
    disabled one (every op run on it calls that, with the op as the function), or a
    ``__torch_dispatch__`` (a wrapper subclass, e.g. one holding two tensors: each aten op runs
    through it, and ember's functionalization cannot make fake tensors of it)."""
    if cls is torch.Tensor or cls is torch.nn.Parameter or issubclass(cls, FakeTensor):
        return False
    return getattr(cls, "__torch_function__", None) is not torch._C._disabled_torch_function_impl or \
        getattr(cls, "__torch_dispatch__", None) is not torch._C._disabled_torch_dispatch_impl


def _functorch_wrapped(t: torch.Tensor) -> bool:
    """A tensor of a torch.func transform the compiled function is called under (``vmap(fn)(x)``,
    ``grad(fn)(x)``): no fake tensor describes it, and the transform must see each op the graph
    runs, as in eager. The captured graph then runs as it is (the transform around it)."""
    return torch._C._functorch.is_functorch_wrapped_tensor(t)


class GraphAsIsCallable:
    """The captured graph run as it is, for inputs of a tensor subclass with a
    ``__torch_function__`` (or of a torch.func transform around the call,
    ``_functorch_wrapped``): in eager, that override sees each torch-level call
    (``torch.relu``, ``Tensor.add``); a functionalized aten graph would show it
    ``aten.relu.default`` instead, or lose the subclass. Ops run one by one as in
    eager, so input mutations happen where the program does them."""

    mutations_after_graph = False

    def __init__(self, gm: torch.fx.GraphModule):
        self.gm = gm

    def __call__(self, *args):
        return self.gm(*args)


def _python_dispatcher_if_symbolic(gm: torch.fx.GraphModule):
    """Running a graph on fake inputs with symbolic sizes needs the Python dispatcher: some C++
    kernels want concrete sizes where the Python meta kernels and decompositions take symbols."""
    for n in gm.graph.nodes:
        v = n.meta.get("example_value", n.meta.get("val")) if n.op == "placeholder" else None
        if isinstance(v, torch.SymInt) or (isinstance(v, torch.Tensor) and any(
                isinstance(d, torch.SymInt) for d in (*v.shape, *v.stride()))):
            from torch._dispatch.python import enable_python_dispatcher
            return enable_python_dispatcher()
    return contextlib.nullcontext()


def _compile_program(*args, **kwargs) -> CompiledGraph:
    """Metadata (unless given), trace, partition and compile one flat program."""
    with tracing_patches():
        return _compile_program_patched(*args, **kwargs)


def _compile_program_patched(fn: Callable, fake_args: list, fake_mode, options: dict, *, lifted: list,
                             out_spec_box: list, static_input_indices: list[int], meta=None) -> CompiledGraph:
    if meta is None:
        meta = collect_metadata(fn, fake_args, fake_mode,
                                keep_input_mutations=options["keep_inference_input_mutations"])
    out_spec = out_spec_box[0]
    if options["on_metadata"] is not None:
        options["on_metadata"](meta, static_input_indices)
    if meta.is_train:
        joint = trace_joint(fn, fake_args, meta, fake_mode, options["decompositions"],
                            options["backward_pass_autocast"])
        parts = options["partition_fn"](joint, num_primals=len(fake_args), num_fw_returns=meta.num_forward_returns)
        _trace_graphs(meta, aot_joint_graph=joint, aot_forward_graph=parts.fw, aot_backward_graph=parts.bw)
        with metrics.timed("backend_compile"):
            fw = boxed(options["fw_compiler"](parts.fw, _placeholder_vals(parts.fw)))
        bw = LazyBackward(parts.bw, options["bw_compiler"], _placeholder_vals(parts.bw), fake_mode)
        num_unversioned = getattr(parts, "num_unversioned", 0)
        _unview_traced_views(meta, parts.fw)
        plan = plan_saved(parts.fw, parts.bw, num_fw_returns=meta.num_forward_returns,
                          num_saved_tensors=parts.num_saved_tensors, num_saved_symints=parts.num_saved_symints,
                          num_unversioned=num_unversioned, unsafe_view_returns=_unsafe_view_returns(meta))
        repeatable = (meta.num_mutated_inputs == 0 and meta.num_intermediate_bases == 0
                      and not meta.aliased_output_indices
                      and not any(i.mutated or i.touches_metadata for i in meta.input_info)
                      and not _draws_random_numbers(parts.fw)
                      and not any(torch.is_autocast_enabled(d) for d in ("cpu", "cuda")))
        fn_cls = make_autograd_function(meta, fw, bw, parts.num_saved_tensors, parts.num_saved_symints,
                                        num_unversioned=num_unversioned, plan=plan,
                                        eager_fn=fn if repeatable else None,
                                        num_params=_leading(static_input_indices))
        compiled = CompiledGraph(meta, lifted=lifted, out_spec=out_spec, forward=fw, autograd_function=fn_cls)
        # A graph that turns grad mode on inside (see grad_mode.py) must be applied with grad mode on,
        # or autograd.Function would not connect its outputs even though the graph computes grads.
        compiled.enables_grad = graph_enables_grad(fn)
        compiled.inference_mode = graph_in_inference_mode(fn)
        compiled.set_inference_outputs(inference_region_outputs(fn))
        compiled.no_grad_inputs = _no_grad_inputs(parts.bw)
        if plan is not None and plan.groups:
            compiled.set_groups(plan.groups, plan.partial_inputs,
                                [i for i, m in enumerate(meta.tangent_mask) if m])
        compiled.graphs = {"joint": joint, "forward": parts.fw, "backward": parts.bw}
        compiled.partition = parts
    else:
        fw_gm = trace_inference(fn, fake_args, meta, fake_mode, options["decompositions"])
        _trace_graphs(meta, aot_inference_graph=fw_gm)
        with metrics.timed("backend_compile"):
            fw = boxed(options["inference_compiler"](fw_gm, _placeholder_vals(fw_gm)))
        compiled = CompiledGraph(meta, lifted=lifted, out_spec=out_spec, forward=fw)
        compiled.inference_mode = graph_in_inference_mode(fn)
        compiled.set_inference_outputs(inference_region_outputs(fn))
        compiled.graphs = {"inference": fw_gm}
    return compiled


def _trace_graphs(meta, **graphs: torch.fx.GraphModule) -> None:
    """The joint, forward and backward (or inference) graphs, to the ``aot_graphs`` log and the
    structured trace (``EMBER_TRACE``: ``aot_joint_graph``, ``aot_forward_graph`` ... records)."""
    tracing = trace_log.writer is not None
    if not tracing and not log_graphs.isEnabledFor(logging.DEBUG):
        return
    text = {name: _readable(gm) for name, gm in graphs.items()}
    for name, code in text.items():
        if name != "aot_joint_graph":
            log_graphs.debug("%s:\n%s", name.removeprefix("aot_").replace("_", " "), code)
    if tracing:
        trace_log.artifact("aot_forward_graph_fw_metadata", lambda: repr(meta))
        for name, code in text.items():
            trace_log.emit(name, {}, code)


def _readable(gm: torch.fx.GraphModule) -> str:
    try:
        return gm.print_readable(print_output=False, include_stride=True, include_device=True)
    except Exception:  # noqa: BLE001 — the plain code, if the annotated form cannot be made
        return gm.code


def _leading(indices) -> int:
    """How many of 0, 1, 2, ... are in ``indices`` (the lifted parameters come first)."""
    present, n = set(indices), 0
    while n in present:
        n += 1
    return n


def _no_grad_inputs(bw: torch.fx.GraphModule) -> tuple:
    """Primal positions for which the backward graph returns None."""
    out = next(n for n in reversed(bw.graph.nodes) if n.op == "output")
    return tuple(i for i, g in enumerate(out.args[0]) if g is None)


def _unview_traced_views(meta, fw: torch.fx.GraphModule) -> None:
    """Outputs that are fresh for the program but that the traced forward makes as a view of an
    intermediate it does not return (``y = y + y; y.view(-1).sub_(1); return y``:
    functionalization regenerates ``y`` as a view of the updated flat tensor). Returned from
    the autograd.Function as a view, autograd would forbid mutating it in place ("a view
    created inside a custom Function"): they are returned as ``_unsafe_view``s instead,
    with the saved-tensor rebasing that comes with that kind (see ember.aot.saved).
    The same holds for an intermediate base (``y`` not returned, ``y[1:]`` returned: the
    wrapper regenerates that view from ``y``, which must be a base as in eager)."""
    from ember.aot.saved import _alias_classes, _is_alias_op
    out = next(n for n in reversed(fw.graph.nodes) if n.op == "output").args[0]
    returns = out[:meta.num_forward_returns]
    n_mut, n_out = meta.num_mutated_inputs, meta.num_outputs
    cls = None

    def fresh_view(pos: int, regenerated_from_it: set) -> bool:
        nonlocal cls
        node = returns[pos]
        if not isinstance(node, torch.fx.Node) or not _is_alias_op(node) or node.target is operator.getitem:
            return False
        cls = cls or _alias_classes(fw)
        root = cls[node]
        # (outputs the wrapper regenerates as views of this one do not count)
        others = {cls[r] for k, r in enumerate(returns)
                  if isinstance(r, torch.fx.Node) and k != pos and k not in regenerated_from_it}
        return root.op != "placeholder" and root is not node and root not in others

    for j, info in enumerate(meta.output_info):
        if info.kind is not OutputKind.NON_ALIAS or not info.is_tensor:
            continue
        views_of_it = {n_mut + k for k, o in enumerate(meta.output_info)
                       if o.kind is OutputKind.ALIAS_OF_INTERMEDIATE_BASE_IS_USER_OUTPUT and o.base_idx == j}
        if fresh_view(n_mut + j, views_of_it):
            meta.output_info[j] = dataclasses.replace(info, kind=OutputKind.UNSAFE_VIEW_ALIAS)
    unview = []
    for b in range(meta.num_intermediate_bases):
        views_of_it = {n_mut + k for k, o in enumerate(meta.output_info)
                       if o.kind in (OutputKind.ALIAS_OF_INTERMEDIATE, OutputKind.ALIAS_OF_INTERMEDIATE_SAVE_AS_OUTPUT)
                       and o.base_idx == b}
        if fresh_view(n_mut + n_out + b, views_of_it):
            unview.append(b)
    meta.unview_bases = tuple(unview)


def _unsafe_view_returns(meta) -> list[int]:
    """Forward-return positions the wrapper turns into ``_unsafe_view``s (see runtime.py)."""
    return [meta.num_mutated_inputs + j for j, o in enumerate(meta.output_info)
            if o.kind is OutputKind.UNSAFE_VIEW_ALIAS] \
        + [meta.num_mutated_inputs + meta.num_outputs + b for b in meta.unview_bases]


class _Variant:
    """One compiled graph for one aliasing layout of the inputs."""

    def __init__(self, compiled: CompiledGraph, layout: InputLayout | None, identity_box: list, signature=None):
        self.compiled = compiled
        self.layout = layout
        self.identity = identity_box[0] if identity_box else {}
        #: for variants compiled at call time on static fake inputs: the inputs' shapes they accept
        self.signature = signature

    def run(self, args: list) -> list:
        if self.layout is None:
            return self.compiled.run_flat(args)
        try:
            inner = self.layout.inner_args(args)
        except Exception as e:  # before the graph: the frame can run eagerly instead
            raise internal_error("in the AOT runtime wrapper (synthetic bases)", e) from None
        flat = self.compiled.run_flat(inner)
        for oi, i in self.identity.items():
            flat[oi] = args[i]  # ``return b`` gives back the caller's alias itself
        return flat


class _GraphAsIs:
    """Runs the captured graph itself (eager ops, eager autograd) for one call."""

    def __init__(self, gm: torch.fx.GraphModule, num_lifted: int):
        self.gm = gm
        self.num_lifted = num_lifted

    def run(self, args: list) -> list:
        return pytree.tree_flatten(self.gm(*args[self.num_lifted:]))[0]


@dataclasses.dataclass
class _InnerProgram:
    """What ``eager_backward_check`` reads of a program: its function, fake inputs and mode."""
    fn: Callable
    fake_args: list
    fake_mode: object


def _signature(args: list) -> tuple:
    return tuple((tuple(a.shape), a.stride(), a.storage_offset(), a.dtype, a.requires_grad)
                 if isinstance(a, torch.Tensor) else (type(a), a) for a in args)


class AOTCallable:
    """What the AOT backends return: call it with the graph's inputs positionally.

    Holds one compiled graph per aliasing layout of the inputs (normally just
    one). When the graph mutates some input, every call checks which tensor
    inputs share a storage (one ``untyped_storage()`` per tensor input) and
    picks, or compiles, the variant for that layout: deduplicated identical
    inputs, synthetic bases for mutated aliases. ``meta`` and ``graphs`` are
    the first variant's.
    """

    def __init__(self, gm: torch.fx.GraphModule, example_inputs: list, options: dict):
        self.gm = gm
        self.options = options
        check_self_overlapping_writes(gm)
        prog = flatten_program(gm, example_inputs)
        self.lifted = prog.lifted
        self.num_lifted = len(prog.lifted)
        args = prog.lifted + example_inputs
        with tracing_patches():
            meta = collect_metadata(prog.fn, prog.fake_args, prog.fake_mode,
                                    keep_input_mutations=options["keep_inference_input_mutations"])
        why, meta.final_saves = eager_backward_check(prog, meta)
        if why is not None:
            raise EagerBackwardFails(f"eager's backward would fail on this program ({why})")
        self.out_spec = prog._spec_box[0]
        info = meta.input_info
        self.data_mutated = frozenset(i for i, x in enumerate(info) if x.mutates_data)
        self.mutated = frozenset(i for i, x in enumerate(info) if x.mutated)
        self.gains_grad = frozenset(i for i, x in enumerate(info) if x.mutates_data and x.requires_grad)
        # a graph that turns grad mode on inside trains even when called with it off (grad_mode.py)
        self.enables_grad = graph_enables_grad(prog.fn)
        self.check_aliasing = bool(self.mutated)
        self.variants: dict = {}
        try:
            key, layout = (compute_layout(args, self.data_mutated, self.mutated, training=meta.is_train,
                                          gains_grad=self.gains_grad)
                           if self.check_aliasing else (None, None))
        except UnsupportedAliasedMutation:
            # These inputs alias in a way the functional graph cannot express: such calls run the
            # captured graph as it is (see _variant_for); other layouts compile when first seen.
            self.primary = _GraphAsIs(gm, self.num_lifted)
            self.meta, self.graphs = meta, {}
            return
        if layout is None:
            compiled = _compile_program(prog.fn, prog.fake_args, prog.fake_mode, options, lifted=[],
                                        out_spec_box=prog._spec_box,
                                        static_input_indices=prog.static_input_indices or [], meta=meta)
            variant = _Variant(compiled, None, [])
        else:
            variant = self._compile_layout(prog, args, layout)
            if isinstance(variant, _GraphAsIs):
                self.primary, self.meta, self.graphs = variant, meta, {}
                self.variants[key] = [variant]
                return
        if prog.static_inputs and variant.signature is None:
            # compiled for this call's sizes (flatten_program): other sizes compile a variant of their own
            variant.signature = _signature(args)
            self.check_aliasing = True
        self.variants[key] = [variant]
        self.primary = variant
        self.meta = variant.compiled.meta
        self.graphs = variant.compiled.graphs

    # ---- compiling variants ------------------------------------------------
    def _compile_layout(self, prog, args: list, layout: InputLayout, signature=None) -> "_Variant | _GraphAsIs":
        identity_box: list = []
        inner_fn = wrap_program(prog.fn, layout, identity_box)
        fakes = inner_fake_args(prog.fake_args, args, layout, prog.fake_mode)
        static = [layout.kept.index(i) for i in (prog.static_input_indices or []) if i in layout.kept]
        # Eager's version checks, as for the plain program (version_check.py), on the inner one: its
        # synthetic base is what the graph writes and saves (without them, a write into the base
        # after the graph, through any alias, went unnoticed where eager's backward raises).
        with tracing_patches():
            meta = collect_metadata(inner_fn, fakes, prog.fake_mode,
                                    keep_input_mutations=self.options["keep_inference_input_mutations"])
        why, meta.final_saves = eager_backward_check(_InnerProgram(inner_fn, fakes, prog.fake_mode), meta)
        if why is not None:
            log_graphs.debug("the captured graph runs as it is for this aliasing (eager's backward "
                             "would fail: %s)", why)
            return _GraphAsIs(self.gm, self.num_lifted)
        compiled = _compile_program(inner_fn, fakes, prog.fake_mode, self.options, lifted=[],
                                    out_spec_box=prog._spec_box, static_input_indices=static, meta=meta)
        return _Variant(compiled, layout, identity_box, signature)

    def _compile_at_call(self, args: list, layout: InputLayout | None) -> _Variant:
        """A variant for a layout first seen at call time: static shapes in a fresh fake mode
        (the frontend's guards are already final), so it only serves calls with these shapes."""
        from torch._subclasses.fake_tensor import FakeTensorMode
        with metrics.timed("aot"):
            prog = flatten_program(self.gm, args[self.num_lifted:], fake_mode=FakeTensorMode())
            signature = _signature(args)
            if layout is None:
                compiled = _compile_program(prog.fn, prog.fake_args, prog.fake_mode, self.options, lifted=[],
                                            out_spec_box=prog._spec_box,
                                            static_input_indices=prog.static_input_indices or [])
                return _Variant(compiled, None, [], signature)
            return self._compile_layout(prog, args, layout, signature)

    def _variant_for(self, args: list) -> "_Variant | _GraphAsIs":
        try:
            key, layout = compute_layout(args, self.data_mutated, self.mutated, training=torch.is_grad_enabled() or self.enables_grad,
                                         gains_grad=self.gains_grad)
        except UnsupportedAliasedMutation:
            # Inputs that share storage in a way the functional graph cannot express (one mutated in
            # data, another in metadata, ...): the captured graph runs as it is, on the real inputs,
            # which is what eager does op by op (the graph-as-is backends run it the same way).
            return _GraphAsIs(self.gm, self.num_lifted)
        candidates = self.variants.get(key)
        if candidates:
            for v in candidates:
                if v.signature is None or v.signature == _signature(args):
                    return v
        with compile_lock:
            for v in self.variants.get(key, ()):  # compiled by another thread meanwhile
                if v.signature is None or v.signature == _signature(args):
                    return v
            cpu_rng = torch.random.get_rng_state()  # (a backend may draw random numbers while compiling)
            try:
                variant = self._compile_at_call(args, layout)
            finally:
                torch.random.set_rng_state(cpu_rng)
            self.variants.setdefault(key, []).append(variant)
        return variant

    # ---- calling -----------------------------------------------------------
    def __call__(self, *user_args):
        args = self.lifted + list(user_args) if self.lifted else list(user_args)
        if self.check_aliasing:
            try:
                variant = self._variant_for(args)
            except Exception as e:  # nothing has run yet: the frame can run eagerly instead
                raise internal_error("in the AOT runtime wrapper (choosing or compiling a variant)", e) from None
        else:
            variant = self.primary
        return pytree.tree_unflatten(variant.run(args), self.out_spec)
