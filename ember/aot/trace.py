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

from typing import Callable

import torch
import torch.fx
import torch.fx.traceback as fx_traceback
from torch._subclasses.fake_tensor import FakeTensorMode
from torch._subclasses.functional_tensor import FunctionalTensor, FunctionalTensorMode
from torch.fx.experimental.proxy_tensor import make_fx

from ember.aot.errors import AOTCompileError
from ember.aot.meta import from_functional, functionalization_guard, to_functional
from ember.aot.schemas import OutputKind, ViewAndMutationMeta


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
            gm = make_fx(f, decomposition_table=decompositions or {}, tracing_mode="real",
                         _allow_non_fake_inputs=False)(*args)
    except AOTCompileError:
        raise
    except Exception as e:  # noqa: BLE001 — outside any user node (e.g. in the backward)
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
    if info.mutates_metadata:
        return x.view(x.shape)
    return x


def trace_joint(fn: Callable, fake_args: list, meta: ViewAndMutationMeta, fake_mode: FakeTensorMode,
                decompositions=None) -> torch.fx.GraphModule:
    num_primals = len(fake_args)
    mask = meta.tangent_mask

    def joint(*args):
        primals, tangents = args[:num_primals], args[num_primals:]
        with functionalization_guard(), FunctionalTensorMode():
            f_primals = [to_functional(p) for p in primals]
            f_tangents = [to_functional(t) for t in tangents]
            with torch.enable_grad():
                call_args = [_fresh_input(p, info) for p, info in zip(f_primals, meta.input_info)]
                outs = fn(*call_args)
                returns = ([call_args[i] for i in meta.mutated_input_indices] + list(outs)
                           + _intermediate_bases(outs, meta))
                _sync_all(call_args)
            if len(returns) != len(mask):
                raise AOTCompileError("the graph returned a different number of values while tracing "
                                      f"({len(returns)} vs {len(mask)} during metadata collection)")
            diff_outs, diff_tangents = [], []
            for r, t in zip([r for r, m in zip(returns, mask) if m], f_tangents):
                if isinstance(r, torch.Tensor) and r.requires_grad:
                    diff_outs.append(r)
                    diff_tangents.append(t)
            grad_primals = [p for p in f_primals if isinstance(p, torch.Tensor) and p.requires_grad]
            grads = [None] * len(grad_primals)
            if grad_primals and diff_outs:
                grads = list(torch.autograd.grad(diff_outs, grad_primals, grad_outputs=diff_tangents,
                                                 allow_unused=True))
            grads_iter = iter(grads)
            per_primal = [next(grads_iter) if isinstance(p, torch.Tensor) and p.requires_grad else None
                          for p in f_primals]
            result = [from_functional(r) for r in returns] + [from_functional(g) for g in per_primal]
        return result

    gm = _make_fx(joint, list(fake_args) + list(meta.traced_tangents), fake_mode, decompositions)
    for i, n in enumerate(n for n in gm.graph.nodes if n.op == "placeholder"):
        n.meta["ember_role"] = "primal" if i < num_primals else "tangent"
    return gm
