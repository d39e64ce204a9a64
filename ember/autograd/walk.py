"""Walk the autograd graph of one backward: which Nodes run, in the engine's order, and the key.

The engine (torch/csrc/autograd/engine.cpp) counts, for every Node reachable from the roots,
how many edges lead into it; a Node is ready when all have delivered, and among ready Nodes it
runs the one with the highest sequence number first (the most recently created; an
``AccumulateGrad`` has the largest possible number, so a leaf's gradient is accumulated as soon
as it is complete). With ``inputs=`` (``torch.autograd.grad``, ``backward(inputs=...)``) only the
Nodes that lead to an input run. ``walk`` replays that schedule without running anything and
returns the order and a *key*: everything a traced graph bakes in (Node kinds and edges, the
metadata of every gradient, which leaves have a ``.grad``, hook counts, the saved tensors of
inlined AOT backwards). Two backwards with equal keys run the same graph.
"""
from __future__ import annotations

import heapq
from dataclasses import dataclass, field

import torch

from ember.autograd.hooks import hooked_tensors

RELEASED = "ember_released"

# Node kinds
ACC, CPP, PY, AOT = "acc", "cpp", "py", "aot"


class Unsupported(Exception):
    """This backward runs eagerly, through the autograd engine (the message says why)."""


def kind_of(node) -> str:
    fwd = getattr(node, "_forward_cls", None)
    if fwd is not None:
        return AOT if getattr(fwd, "_ember_backward", None) is not None else PY
    if type(node).__name__ == "AccumulateGrad":
        return ACC
    return CPP


_SAVES: dict = {}


def _saves_tensors(node, kind: str) -> bool:
    if kind in (PY, AOT):
        return bool(node._raw_saved_tensors)
    t = type(node)
    if t not in _SAVES:
        _SAVES[t] = any(a.startswith("_saved_") for a in dir(t))
    return _SAVES[t]


def _meta(t):
    if t is None:
        return None
    return (tuple(t.shape), t.stride() if t.layout == torch.strided else None, t.dtype, t.device, t.layout)


@dataclass
class Walk:
    order: list                      # the Nodes to run, in the engine's order
    hooked: list                     # per Node in order: its hooked/retaining tensors
    edges: list                      # per Node in order: [(position of target or -1, input_nr)]
    accumulate: list                 # per Node in order: whether an AccumulateGrad accumulates
    kinds: list
    runs: list                       # per Node in order: whether the engine runs it
    captures: dict                   # (position, input_nr) -> output index (grad's inputs)
    roots: list                      # (position, input_nr) per root
    key: tuple = ()
    saved: dict = field(default_factory=dict)  # position -> list of saved tensors (inlined AOT)


def walk(root_edges: list, root_grads: list, targets: list | None, accumulate_only: set | None) -> Walk:
    """``root_edges``: (node, input_nr) per root. ``targets``: (node, input_nr) per input of
    ``torch.autograd.grad`` (their gradients are captured, nothing accumulates), or None.
    ``accumulate_only``: ids of the AccumulateGrad nodes of ``backward(inputs=...)``, or None."""
    # discover (DFS, deterministic) and count dependencies
    seen: dict = {}
    nodes: list = []
    deps: dict = {}
    stack = [n for n, _ in root_edges]
    for n in stack:
        deps[id(n)] = deps.get(id(n), 0) + 1
    while stack:
        n = stack.pop()
        if id(n) in seen:
            continue
        seen[id(n)] = len(nodes)
        nodes.append(n)
        for m, _ in n.next_functions:
            if m is None:
                continue
            deps[id(m)] = deps.get(id(m), 0) + 1
            if id(m) not in seen:
                stack.append(m)

    kinds = {id(n): kind_of(n) for n in nodes}
    target_ids = {id(n) for n, _ in targets} if targets is not None else set()
    needed = _needed(nodes, kinds, target_ids, targets is not None, accumulate_only)

    # the engine's schedule
    pos: dict = {}
    order, hooked, edges, acc_flags, kind_list, runs_list = [], [], [], [], [], []
    if any(g is not None and g.layout != torch.strided for g in root_grads):
        raise Unsupported("a sparse root gradient")
    key: list = [tuple(_meta(g) for g in root_grads)]
    ready: list = []
    for n, _ in root_edges:
        deps[id(n)] -= 1
    for n, _ in root_edges:
        if deps[id(n)] == 0 and id(n) not in pos:
            pos[id(n)] = -1
            heapq.heappush(ready, (-n._sequence_nr(), seen[id(n)], n))
    pending: list = []
    while ready:
        _, _, n = heapq.heappop(ready)
        pending.append(n)
        if id(n) not in needed:
            continue  # (never runs: its inputs only reach captures)
        for m, _ in n.next_functions:
            if m is None:
                continue
            deps[id(m)] -= 1
            if deps[id(m)] == 0:
                heapq.heappush(ready, (-m._sequence_nr(), seen[id(m)], m))
    for i, n in enumerate(pending):
        pos[id(n)] = i
    saved: dict = {}
    for i, n in enumerate(pending):
        k = kinds[id(n)]
        kind_list.append(k)
        order.append(n)
        tensors = hooked_tensors(n) if k != ACC else []
        if tensors is None:
            raise Unsupported("a tensor with a hook or retain_grad() was changed in place afterwards")
        hooked.append(tensors)
        runs = id(n) in needed
        runs_list.append(runs)
        if runs and k in (PY, AOT):
            _check_function_node(n)
        elif runs and k == CPP and getattr(n, "_saved_sparse", False):
            raise Unsupported(f"{n.name()} makes a sparse gradient")
        elif runs and k == ACC and n.variable.grad is not None and n.variable.grad.layout != torch.strided:
            raise Unsupported("a leaf with a sparse .grad")
        es = [(pos.get(id(m), -1) if m is not None and id(m) in pos else -1, nr) for m, nr in n.next_functions] \
            if runs else []
        edges.append(es)
        acc = k == ACC and runs
        acc_flags.append(acc)
        if runs and k != ACC and (n.metadata.get(RELEASED) if n.metadata else False) and _saves_tensors(n, k):
            raise SecondBackward()
        key.append(_node_key(n, k, runs, es, tensors))
        if runs and k == AOT:
            saved[i] = aot_saved(n)  # (eager's error if one was changed in place)
            key.append(tuple(_meta(t) for t in saved[i]))
    captures = {}
    if targets is not None:
        for j, (n, nr) in enumerate(targets):
            if id(n) not in pos:
                e = Unsupported("an input of torch.autograd.grad is not reachable from the outputs")
                e.silent = True  # (the engine gives eager's answer: its error, or None with allow_unused)
                raise e
            captures.setdefault((pos[id(n)], nr), j)
    roots = [(pos[id(n)], nr) for n, nr in root_edges]
    key.append(tuple(roots))
    key.append(tuple(sorted(captures.items())))
    return Walk(order=order, hooked=hooked, edges=edges, accumulate=acc_flags, kinds=kind_list, runs=runs_list,
                captures=captures, roots=roots, key=tuple(key), saved=saved)


def aot_saved(node) -> list:
    """The saved tensors of an ember AOT backward Node, in its backward graph's order, checked
    as its own backward checks them (a RuntimeError: the engine then raises eager's error)."""
    info = node._forward_cls._ember_backward
    if not getattr(node, "deferred_mode", False):
        return list(node.saved_tensors)
    values = node.deferred
    if values is None or node.consumed:  # (a backward for some of its gradients ran: eager's turn)
        raise RuntimeError(SECOND_BACKWARD)
    for k in info.plan.needed_deferred(info.plan.all_tangents):
        t = values[k]
        if t is not None and t._version != node.deferred_versions[k]:
            raise RuntimeError("a saved tensor was modified in place")
    saved = [None] * info.num_saved_tensors
    if info.kept:
        for k, t in zip(info.kept, node.saved_tensors):
            saved[k] = t
    for k, t in zip(info.deferred, values):
        saved[k] = t
    return saved


def _check_function_node(n) -> None:
    """What makes an ``autograd.Function`` Node unsupported, known before anything runs."""
    if type(n).__name__ == "BackwardHookFunctionBackward":
        raise Unsupported("a module backward hook (register_full_backward_hook / _pre_hook): its hooks sit on "
                          "the autograd Node, where compiled autograd cannot see them")
    if len(n.next_functions) != len(n.needs_input_grad):
        raise Unsupported(f"{n.name()}: an autograd.Function with non-tensor arguments (its gradients cannot be "
                          "matched to its inputs from Python)")


class SecondBackward(Exception):
    pass


SECOND_BACKWARD = ("Trying to backward through the graph a second time (or directly access saved tensors after "
                   "they have already been freed). Saved intermediate values of the graph are freed when you call "
                   ".backward() or autograd.grad(). Specify retain_graph=True if you need to backward through the "
                   "graph a second time or if you need to access saved tensors after calling backward.")


def _needed(nodes, kinds, target_ids, capturing: bool, accumulate_only) -> set:
    """ids of the Nodes the engine runs."""
    if not capturing and accumulate_only is None:
        return {id(n) for n in nodes}
    need: dict = {}
    # nodes were discovered parents-first: settle children before parents
    for n in reversed(nodes):
        if kinds[id(n)] == ACC:
            need[id(n)] = not capturing and id(n) in accumulate_only
            continue
        need[id(n)] = any(m is not None and (need.get(id(m), False) or id(m) in target_ids)
                          for m, _ in n.next_functions)
    # (a DFS discovery order is not a topological order in general: iterate to a fixed point)
    changed = True
    while changed:
        changed = False
        for n in nodes:
            if kinds[id(n)] != ACC and not need[id(n)]:
                if any(m is not None and (need.get(id(m), False) or id(m) in target_ids) for m, _ in n.next_functions):
                    need[id(n)] = True
                    changed = True
    return {i for i, v in need.items() if v}


def _node_key(n, k: str, runs: bool, es: list, tensors: list) -> tuple:
    if not runs:
        return (k, False, tuple(tuple(_im(m) for m in n._input_metadata)) if k != ACC else None)
    if k == ACC:
        v = n.variable
        g = v.grad
        return (k, _meta(v), v.requires_grad, _meta(g), len(v._backward_hooks or ()),
                len(v._post_accumulate_grad_hooks or ()))
    ins = tuple(_im(m) for m in n._input_metadata)
    hk = tuple((t.output_nr, len(t._backward_hooks or ()), t.retains_grad, _meta(t.grad) if t.retains_grad else None)
               for t in tensors)
    if k == CPP:
        return (k, type(n), tuple(es), ins, hk)
    fwd = n._forward_cls
    extra = ()
    if k == AOT:
        extra = (getattr(n, "deferred_mode", None), hasattr(n, "final_checks"), len(getattr(n, "symints", ())),
                 len(getattr(n, "unversioned", ())))
    return (k, fwd, tuple(es), ins, hk, tuple(n.needs_input_grad), getattr(n, "_ember_no_materialize", False), extra)


def _im(m):
    return (tuple(m.shape), m.dtype, m.device)
