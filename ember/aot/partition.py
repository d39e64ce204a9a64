"""Split a joint forward+backward graph into a forward and a backward graph.

The default partitioner: the forward graph is exactly what the forward
returns need (every primal is an input); everything else the gradients need
goes to the backward. Values computed in the forward and used by the
backward are *saved*: the forward returns them after its own returns, tensors
first, then SymInts, and the backward takes them as inputs before the
tangents::

    forward (*primals)                  -> (*fw_returns, *saved_tensors, *saved_symints)
    backward(*saved_tensors, *saved_symints, *tangents) -> (grad per primal, None if none)

Nothing is recomputed and nothing unneeded is saved. (A min-cut partitioner
that recomputes cheap ops to save memory is a later issue.)
"""
from __future__ import annotations

import operator
from dataclasses import dataclass

import torch
import torch.fx


@dataclass
class PartitionResult:
    fw: torch.fx.GraphModule
    bw: torch.fx.GraphModule
    num_saved_tensors: int
    num_saved_symints: int


def _is_sym(node: torch.fx.Node) -> bool:
    return isinstance(node.meta.get("val"), (torch.SymInt, torch.SymFloat, torch.SymBool, int, float, bool))


def _ancestors(roots, stop=frozenset()) -> set:
    seen: set = set()
    stack = [r for r in roots if isinstance(r, torch.fx.Node)]
    while stack:
        n = stack.pop()
        if n in seen or n in stop:
            continue
        seen.add(n)
        stack.extend(n.all_input_nodes)
    return seen


def _build(joint: torch.fx.GraphModule, inputs: list, body: set, outputs: list, name: str) -> torch.fx.GraphModule:
    g = torch.fx.Graph()
    env: dict = {}
    for n in inputs:
        p = g.placeholder(n.name)
        p.meta = dict(n.meta)
        env[n] = p
    for n in joint.graph.nodes:
        if n in body and n not in env and n.op != "placeholder" and n.op != "output":
            env[n] = g.node_copy(n, lambda x: env[x])
    g.output(tuple(env[o] if isinstance(o, torch.fx.Node) else o for o in outputs))
    gm = torch.fx.GraphModule(joint, g, class_name=name)
    return gm


def default_partition(joint: torch.fx.GraphModule, *, num_primals: int, num_fw_returns: int) -> PartitionResult:
    phs = [n for n in joint.graph.nodes if n.op == "placeholder"]
    primals, tangents = phs[:num_primals], phs[num_primals:]
    out_node = next(n for n in reversed(joint.graph.nodes) if n.op == "output")
    outs = list(out_node.args[0])
    fw_returns, grads = outs[:num_fw_returns], outs[num_fw_returns:]

    fw_nodes = _ancestors(fw_returns) | set(primals)
    # never save a tuple: the forward also computes every getitem of a multi-output op it runs
    for n in list(fw_nodes):
        if isinstance(n.meta.get("val"), (tuple, list)):
            fw_nodes.update(u for u in n.users if u.target is operator.getitem)
    leaked = fw_nodes & set(tangents)
    if leaked:
        raise AssertionError(f"forward returns depend on tangents: {leaked}")
    bw_nodes = _ancestors(grads, stop=fw_nodes)
    returned_by_bw = {g for g in grads if isinstance(g, torch.fx.Node) and g in fw_nodes}
    saved = [n for n in joint.graph.nodes
             if n in fw_nodes and (n in returned_by_bw or any(u in bw_nodes for u in n.users))]
    saved_syms = [n for n in saved if _is_sym(n)]
    saved_tensors = [n for n in saved if not _is_sym(n)]

    fw = _build(joint, primals, fw_nodes, fw_returns + saved_tensors + saved_syms, "EmberForward")
    bw_inputs = saved_tensors + saved_syms + tangents
    bw = _build(joint, bw_inputs, bw_nodes | set(bw_inputs), grads, "EmberBackward")
    return PartitionResult(fw, bw, len(saved_tensors), len(saved_syms))
