"""Trace the functionalized forward (inference) or forward+backward (joint) with make_fx.

Both run the user's graph on ``FunctionalTensor`` wrappers of the fake inputs
while ``make_fx`` records the aten ops (after the backend's decompositions).
Functionalization turns every mutation into a functional op; what the wrapper
must apply afterwards is described by ``ViewAndMutationMeta``.

Inference graph: ``(*inputs) -> [updated inputs] + [user outputs] + [bases]``;
with ``keep_input_mutations`` data-only input mutations stay in the graph as
``copy_`` nodes right before the output instead.

Joint graph: ``(*primals, *tangents) -> [forward returns] + [grad per primal]``.
The backward is ``torch.autograd.grad`` of the forward returns that take a
tangent with respect to the primals that require grad. A primal whose data
is mutated is cloned first (and a primal whose metadata is mutated is
aliased with ``view``) so that autograd differentiates with respect to the
value the caller passed, not the mutated one.
"""
from __future__ import annotations

import contextlib
from typing import Callable

import torch
import torch.fx
import torch.fx.traceback as fx_traceback
from torch._subclasses.fake_tensor import FakeTensorMode
from torch._subclasses.functional_tensor import FunctionalTensor, FunctionalTensorMode
from torch.fx.experimental.proxy_tensor import make_fx

from ember.aot.autocast import backward_autocast
from ember.aot.errors import MODIFIED_INPLACE, AOTCompileError, EagerBackwardFails
from ember.aot.grad_mode import program_grad_mode
from ember.aot.keyword_ops import keyword_op_decompositions
from ember.aot.overlap import OverlapWriteCheck
from ember.aot.meta import from_functional, functionalization_guard, to_functional
from ember.aot.schemas import OutputKind, ViewAndMutationMeta
from ember.aot.trace_patches import fixed_table


def _intermediate_bases(outs: list, meta: ViewAndMutationMeta) -> list:
    return [o._base for o, info in zip(outs, meta.output_info)
            if info.kind is OutputKind.ALIAS_OF_INTERMEDIATE_SAVE_AS_OUTPUT]


def _sync_all(values) -> None:
    for v in values:
        if isinstance(v, FunctionalTensor):
            torch._sync(v)


def _make_fx(f: Callable, args: list, fake_mode: FakeTensorMode, decompositions) -> torch.fx.GraphModule:
    from torch._dispatch.python import enable_python_dispatcher
    try:
        with fake_mode, enable_python_dispatcher(), fx_traceback.preserve_node_meta():
            table = {**keyword_op_decompositions(), **(fixed_table(decompositions) or {})}
            gm = make_fx(f, decomposition_table=table, tracing_mode="real",
                         _allow_non_fake_inputs=False)(*args)
    except AOTCompileError:
        raise
    except Exception as e:  # noqa: BLE001 — outside any user node (e.g. in the backward)
        if isinstance(e, RuntimeError) and MODIFIED_INPLACE in str(e):
            raise EagerBackwardFails(f"eager's backward rejects this program: {e}") from e
        raise AOTCompileError(f"tracing failed: {type(e).__name__}: {e}") from e
    gm.graph.eliminate_dead_code()
    gm.recompile()
    return gm


def trace_inference(fn: Callable, fake_args: list, meta: ViewAndMutationMeta, fake_mode: FakeTensorMode,
                    decompositions=None) -> torch.fx.GraphModule:
    def forward(*args):
        with functionalization_guard():
            with FunctionalTensorMode():
                f_args = [to_functional(a) for a in args]
                with program_grad_mode():
                    outs = fn(*f_args)
                returns = ([f_args[i] for i in meta.mutated_input_indices] + list(outs)
                           + _intermediate_bases(outs, meta))
                _sync_all(f_args)
                returns = [from_functional(r) for r in returns]
                in_graph = [(args[i], from_functional(f_args[i]))
                            for i, info in enumerate(meta.input_info) if info.mutated_in_graph]
            for old, new in in_graph:
                if old is not new:
                    old.copy_(new)
        return returns

    return _make_fx(forward, list(fake_args), fake_mode, decompositions)


def _fresh_input(x, info):
    if not isinstance(x, torch.Tensor):
        return x
    if info.mutates_data and info.requires_grad:
        return x.clone()
    if info.mutates_metadata or info.metadata_restored:
        return x.view(x.shape)
    return x


@contextlib.contextmanager
def partitioner_tag(tag: str):
    """Nodes ``make_fx`` records inside get ``node.meta["partitioner_tag"] = tag``."""
    old = fx_traceback.current_meta.get("partitioner_tag")
    fx_traceback.current_meta["partitioner_tag"] = tag
    try:
        yield
    finally:
        fx_traceback.current_meta["partitioner_tag"] = old


def _mutation_counter(t) -> int:
    if isinstance(t, FunctionalTensor):
        return torch._functionalize_mutation_counter(t.elem)
    return -1


def _graph_modules_in(fn, depth: int = 4) -> list:
    """The GraphModules a traced program closes over (through wrapper closures)."""
    if isinstance(fn, torch.fx.GraphModule):
        return [fn]
    found = []
    owner = getattr(fn, "__self__", None)
    if isinstance(owner, torch.fx.GraphModule):
        found.append(owner)
    if depth:
        for cell in getattr(fn, "__closure__", None) or ():
            try:
                value = cell.cell_contents
            except ValueError:
                continue
            if isinstance(value, torch.fx.GraphModule) or callable(value) and hasattr(value, "__closure__"):
                found.extend(_graph_modules_in(value, depth - 1))
    return found


def _calls_lstm(gm: torch.fx.GraphModule) -> bool:
    for n in gm.graph.nodes:
        if n.op == "call_module":
            if isinstance(gm.get_submodule(n.target), torch.nn.LSTM):
                return True
        elif n.op in ("call_function", "call_method") and "lstm" in str(
                getattr(n.target, "__name__", n.target)).lower():
            return True
    return False


@contextlib.contextmanager
def _differentiable_lstm(fn):
    """Trace ``aten.lstm`` into differentiable ops for a joint graph.

    torch's Python decomposition of ``aten.lstm`` (used under the Python dispatcher)
    picks the oneDNN layer whenever the *input* does not require grad, with
    ``train=False``, even when the weights require grad: that kernel then keeps no
    workspace for its backward (None at run time). With oneDNN off while tracing, the
    decomposition takes its plain-aten path, which autograd differentiates. Only for
    graphs that call an LSTM (the flag is process-wide; the compile lock is held).
    """
    if not torch._C._get_mkldnn_enabled() or not any(_calls_lstm(gm) for gm in _graph_modules_in(fn)):
        yield
        return
    torch._C._set_mkldnn_enabled(False)
    try:
        yield
    finally:
        torch._C._set_mkldnn_enabled(True)


def trace_joint(fn: Callable, fake_args: list, meta: ViewAndMutationMeta, fake_mode: FakeTensorMode,
                decompositions=None, backward_pass_autocast="same_as_forward") -> torch.fx.GraphModule:
    """Trace ``(*primals, *tangents) -> [forward returns] + [grad per primal]``.

    Input mutations are attributed to the pass that made them. Right after the
    forward we take the value of every input (and of every forward return) and
    its functionalization *mutation counter*; the forward's mutations are
    returned (or, for ``mutated_in_graph`` inputs, applied by a ``copy_`` tagged
    ``must_be_in_forward``) with those post-forward values. If the counter
    moved during the backward (a custom ``autograd.Function`` whose backward
    mutates a saved input), the backward's final value is written by a second
    ``copy_`` tagged ``must_be_in_backward``. The values written by forward
    mutations are tagged ``ember_must_save`` (never recomputed in the backward,
    where the input no longer holds them).
    """
    num_primals = len(fake_args)
    mask = meta.tangent_mask
    in_graph = [i for i, info in enumerate(meta.input_info) if info.mutated_in_graph]
    emitted: list[tuple[str, int]] = []
    # The program starts in the grad mode it is compiled (and guarded) for. Training with grad mode
    # off at entry happens when the graph turns it on inside itself (grad_mode.py): the ops before
    # that must stay outside autograd, as in eager, so the forward runs in the entry mode.
    grad_at_entry = torch.is_grad_enabled()

    def joint(*args):
        primals, tangents = args[:num_primals], args[num_primals:]
        fw_copies, bw_copies = [], []
        with functionalization_guard():
            with FunctionalTensorMode():
                f_primals = [to_functional(p) for p in primals]
                f_tangents = [to_functional(t) for t in tangents]
                with torch.enable_grad():
                    call_args = [_fresh_input(p, info) for p, info in zip(f_primals, meta.input_info)]
                    torch._C._set_grad_enabled(grad_at_entry)
                    try:
                        outs = fn(*call_args)
                    finally:
                        torch._C._set_grad_enabled(True)
                    returns = ([call_args[i] for i in meta.mutated_input_indices] + list(outs)
                               + _intermediate_bases(outs, meta))
                    _sync_all(call_args)
                if len(returns) != len(mask):
                    raise AOTCompileError("the graph returned a different number of values while tracing "
                                          f"({len(returns)} vs {len(mask)} during metadata collection)")
                # ---- post-forward: what the forward produced, before the backward can mutate it
                fw_values = [from_functional(r) for r in returns]
                counters = [_mutation_counter(a) for a in call_args]
                fw_copies = [(i, from_functional(call_args[i])) for i in in_graph]
                diff_outs, diff_tangents = [], []
                for r, t in zip([r for r, m in zip(returns, mask) if m], f_tangents):
                    if isinstance(r, torch.Tensor) and r.requires_grad:
                        diff_outs.append(r)
                        diff_tangents.append(t)
                grad_primals = [p for p in f_primals if isinstance(p, torch.Tensor) and p.requires_grad]
                grads = [None] * len(grad_primals)
                if grad_primals and diff_outs:
                    with partitioner_tag("is_backward"), backward_autocast(backward_pass_autocast), \
                            OverlapWriteCheck():
                        grads = list(torch.autograd.grad(diff_outs, grad_primals, grad_outputs=diff_tangents,
                                                         allow_unused=True))
                grads_iter = iter(grads)
                per_primal = [next(grads_iter) if isinstance(p, torch.Tensor) and p.requires_grad else None
                              for p in f_primals]
                grads_out = [from_functional(g) for g in per_primal]
                # ---- mutations made by the backward
                for i, a in enumerate(call_args):
                    if not isinstance(a, FunctionalTensor) or _mutation_counter(a) == counters[i]:
                        continue
                    if torch._functionalize_has_metadata_mutation(a.elem) and not meta.input_info[i].mutates_metadata:
                        raise AOTCompileError(f"input {i} has its metadata mutated in the backward; not supported")
                    if meta.input_info[i].requires_grad:
                        raise AOTCompileError(
                            f"input {i} requires grad and is mutated in the backward (a custom "
                            "autograd.Function's backward writes to it); not supported")
                    bw_copies.append((i, from_functional(a)))
            # ---- emit the copies into the inputs, without re-pointing the inputs' proxies
            from torch.fx.experimental.proxy_tensor import _proxy_tensor_disable_update_tensor_tracker
            with torch.no_grad(), _proxy_tensor_disable_update_tensor_tracker():
                emitted.clear()
                for i, v in fw_copies:
                    with partitioner_tag("must_be_in_forward"):
                        primals[i].copy_(v)
                    emitted.append(("must_be_in_forward", i))
                for i, v in bw_copies:
                    with partitioner_tag("must_be_in_backward"):
                        primals[i].copy_(v)
                    emitted.append(("must_be_in_backward", i))
        return fw_values + grads_out

    with _differentiable_lstm(fn):
        gm = _make_fx(joint, list(fake_args) + list(meta.traced_tangents), fake_mode, decompositions)
    phs = [n for n in gm.graph.nodes if n.op == "placeholder"]
    for i, n in enumerate(phs):
        n.meta["ember_role"] = "primal" if i < num_primals else "tangent"
    out = next(n for n in reversed(gm.graph.nodes) if n.op == "output")
    fw_returns = out.args[0][:len(mask)]
    for k in range(meta.num_mutated_inputs):  # sources of forward mutations: never recompute
        if isinstance(fw_returns[k], torch.fx.Node):
            fw_returns[k].meta["ember_must_save"] = True
    copies = [n for n in gm.graph.nodes
              if n.target is torch.ops.aten.copy_.default and n.args[0] in phs[:num_primals]]
    if len(copies) != len(emitted):
        raise AOTCompileError(f"joint tracing: expected {len(emitted)} input copies, found {len(copies)}")
    for i, info in enumerate(meta.input_info):
        if info.mutated:
            phs[i].meta["ember_mutated"] = True
            phs[i].meta["ember_fw_mutated"] = True
    for n, (tag, i) in zip(copies, emitted):
        phs[i].meta["ember_mutated"] = True
        if tag == "must_be_in_forward":
            phs[i].meta["ember_fw_mutated"] = True
        n.meta["partitioner_tag"] = tag
        n.meta["ember_mutated_input"] = i
        if tag == "must_be_in_forward" and isinstance(n.args[1], torch.fx.Node):
            n.args[1].meta["ember_must_save"] = True
    return gm
