"""Min-cut rematerialization: save little, recompute cheap ops in the backward.

The backward needs some values the forward computed. Saving all of them (the
default partitioner) keeps many activations alive between forward and
backward; recomputing cheap ones (pointwise ops, views) from a few saved
values uses less memory. Which values to save is a minimum cut:

* every joint node ``n`` the backward needs (transitively) becomes two
  vertices ``n_in -> n_out`` with capacity = the bytes it would cost to save
  ``n`` (a view: infinite, save its base instead; a SymInt: ~0);
* ``a_out -> n_in`` (infinite) for each input ``a`` of ``n``;
* ``source -> n_in`` (infinite) for nodes that *cannot be recomputed* in the
  backward: primals, random ops, mutations, anything tagged
  ``must_be_in_forward`` or ``ember_must_save`` (the value a forward mutation
  wrote to an input: the input no longer holds it in the backward), and every
  op not known to be cheap (matmuls, convolutions, reductions, ...);
* ``n_in -> sink`` (infinite) for nodes that must run in the backward: those
  depending on a tangent, ``copy_``s tagged ``must_be_in_backward``, and what
  the backward computes from an input only the backward writes (it reads that
  input when it runs).

A minimum ``source``/``sink`` cut only cuts ``n_in -> n_out`` edges: those
``n`` are saved. Everything between the saved values and the gradients is
(re)computed in the backward. Example: ``y = relu(x @ w); z = y.sin()``: the
default partitioner saves ``x``, ``w``, ``y`` and ``cos(y)``-like values; the
min cut saves ``x``, ``w`` and ``x @ w`` and recomputes ``relu`` and ``cos``.
"""
from __future__ import annotations

import math
import operator

import torch
import torch.fx

from ember.aot.partition import (JointParts, PartitionResult, _is_sym, _with_getitems, ancestors, assemble,
                                 forward_random_ops, split_joint)

aten = torch.ops.aten

#: cheap non-pointwise ops the backward may recompute
_CHEAP = {
    aten._to_copy.default, aten.clone.default, aten.expand.default, aten.full.default, aten.full_like.default,
    aten.zeros.default, aten.zeros_like.default, aten.ones.default, aten.ones_like.default,
    aten.scalar_tensor.default, aten.empty_like.default, aten.where.self, aten.fill.Scalar,
    aten._unsafe_view.default, aten.lift_fresh_copy.default, aten.squeeze.dim, aten.unsqueeze.default,
    aten.view.default, aten.reshape.default, aten.permute.default, aten.t.default, aten.transpose.int,
    aten.slice.Tensor, aten.select.int, aten.alias.default, aten.as_strided.default, aten.split.Tensor,
    aten.cat.default, aten.unbind.int, aten.squeeze.dims,
}


def _tensor_bytes(val) -> float:
    if isinstance(val, torch.Tensor):
        numel = val.numel()
        if isinstance(numel, torch.SymInt):
            # its value at this trace, without guarding (int() would specialise the sizes)
            hint = numel.node.hint
            numel = hint if isinstance(hint, int) else 1 << 20  # (unbacked: no hint)
        return float(max(numel, 1) * val.element_size())
    return math.inf


def _is_view(node: torch.fx.Node) -> bool:
    t = node.target
    return isinstance(t, torch._ops.OpOverload) and t.is_view


def recomputable(node: torch.fx.Node) -> bool:
    """May the backward recompute this node (cheap, deterministic, functional)?"""
    if node.op == "get_attr":  # a subgraph (cond's branches): each graph reads its own
        return True
    if node.op != "call_function":
        return False
    if node.meta.get("ember_must_save") or node.meta.get("partitioner_tag") == "must_be_in_forward":
        return False
    t = node.target
    if t is operator.getitem:
        return recomputable(node.args[0])
    if not isinstance(t, torch._ops.OpOverload):
        return False
    if t._schema.is_mutable or torch.Tag.nondeterministic_seeded in t.tags:
        return False
    if isinstance(node.meta.get("val"), (tuple, list)) and not checkpointed(node):
        return False
    return torch.Tag.pointwise in t.tags or t.is_view or t in _CHEAP or checkpointed(node)


def checkpointed(node: torch.fx.Node) -> bool:
    """Made inside ``torch.utils.checkpoint`` (tagged by capture): recompute rather than save."""
    from torch.utils.checkpoint import CheckpointPolicy
    return node.meta.get("recompute") in (CheckpointPolicy.PREFER_RECOMPUTE, CheckpointPolicy.MUST_RECOMPUTE)


def _capacity(node: torch.fx.Node) -> float:
    if _is_sym(node):
        return 1e-3
    val = node.meta.get("val")
    if isinstance(val, (tuple, list)) or val is None:
        return math.inf  # a tuple cannot be saved (its getitems can)
    if _is_view(node) and node.op == "call_function":
        return math.inf  # saving a view keeps its base alive: save the base instead
    if checkpointed(node) and recomputable(node):
        return math.inf  # a checkpointed intermediate: the backward recomputes it
    return _tensor_bytes(val)


def _descendants(roots) -> set:
    seen: set = set()
    stack = list(roots)
    while stack:
        n = stack.pop()
        if n in seen:
            continue
        seen.add(n)
        stack.extend(n.users)
    return seen


def choose_saved(parts: JointParts) -> list:
    import networkx as nx

    bw_roots = [g for g in parts.grads if isinstance(g, torch.fx.Node)] + parts.bw_copies
    region = ancestors(bw_roots, skip_edge=parts.skip_edge)
    backward_only = _descendants(parts.tangents) | set(parts.bw_copies)
    # an input only the backward writes is read there live (``partition.assemble``): what the
    # backward computes from it must run in the backward, not be precomputed by the forward
    live = [p for p in parts.mutable_inputs if not p.meta.get("ember_fw_mutated")]
    if live:
        backward_only |= _descendants(live) - set(live) - ancestors(parts.fw_returns + parts.fw_copies)
    pinned: set = set()
    if parts.live_reads:  # (a ctx attribute's live read, likewise)
        backward_only |= _descendants([u for u, _ in parts.live_reads]) - ancestors(parts.fw_returns + parts.fw_copies)
        # what the forward computes from such an input is saved, never recomputed: recomputed, it would
        # read the input's later value (or check its version), where eager kept the forward's result
        pinned = _descendants([p for _, p in parts.live_reads])
    live_pairs = set(parts.live_reads)  # (a live read takes its value from the live input, not the cut)
    g = nx.DiGraph()
    g.add_node("source")
    g.add_node("sink")
    for n in region:
        if n in backward_only:
            g.add_edge(n.name + "_in", "sink", capacity=math.inf)
        else:
            if n.op == "placeholder" or not recomputable(n) or n in pinned:
                g.add_edge("source", n.name + "_in", capacity=math.inf)
            g.add_edge(n.name + "_in", n.name + "_out", capacity=_capacity(n))
        for a in n.all_input_nodes:
            if parts.skip_edge(n, a) or (n, a) in live_pairs:
                continue
            g.add_edge(a.name + "_out", n.name + "_in", capacity=math.inf)
    cut_value, (reachable, _) = nx.minimum_cut(g, "source", "sink")
    if math.isinf(cut_value):
        raise AssertionError("min-cut partitioner: no finite cut (a needed value can neither be saved nor recomputed)")
    return [n for n in parts.joint.graph.nodes
            if n in region and n not in backward_only and (n.name + "_in") in reachable
            and (n.name + "_out") not in reachable]


def min_cut_partition(joint: torch.fx.GraphModule, *, num_primals: int, num_fw_returns: int) -> PartitionResult:
    parts = split_joint(joint, num_primals, num_fw_returns)
    saved = choose_saved(parts)
    saved_set = set(saved)
    stop = saved_set | set(parts.tangents)
    bw_body = ancestors([g for g in parts.grads if isinstance(g, torch.fx.Node)] + parts.bw_copies,
                        stop=stop, skip_edge=parts.skip_edge) - saved_set
    stray = [n for n in parts.primals if n in bw_body]
    if stray:
        # a gradient that reads an input without depending on any tangent (a zero-size batch:
        # `zeros_like(x)`), so no cut separates it: the input itself is saved (a reference)
        saved = saved + stray
        bw_body -= set(stray)
    fw_nodes = _with_getitems(ancestors(parts.fw_returns + parts.fw_copies + saved + forward_random_ops(parts))
                              | set(parts.primals))
    if fw_nodes & set(parts.tangents):
        raise AssertionError("min-cut partitioner: forward depends on tangents")
    return assemble(parts, fw_nodes, saved, bw_body - set(parts.tangents))
