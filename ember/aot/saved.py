"""Saved tensors the program can reach, and a backward for the gradients that arrived.

Eager autograd checks a saved tensor's version only when the node that saved
it runs. A compiled graph is one autograd node for many eager ops, and
``ctx.saved_tensors`` unpacks (and version-checks) everything at once::

    t = x * 2
    m = float(t.max())   # graph 1 returns t and t.max(); max's backward needs t
    t.sub_(1)            # the program mutates the returned t in place
    return t             # loss = t.sum(): eager never runs max's backward

Eager gives ``x.grad == 2``: no gradient reaches ``t.max()``, so its backward
(the only user of the saved ``t``) never runs. Unpacking every saved tensor
would raise "modified by an inplace operation".

``plan_saved`` looks at the partitioned graphs once:

* per saved tensor, the set of tangents whose backward uses it (``needed_by``),
  and the tangents reaching each of its uses (``use_masks``).

When the backward has two or more tangents, every saved tensor is *deferred*:
kept on ``ctx`` (detached, sharing the version counter and storage, no
reference cycle) with its version at save time instead of
``save_for_backward``, whose tensors the engine frees after the first backward
through the node, even when it carried only some of the gradients (a later
backward for the other outputs must still find them). A deferred tensor is
freed once every backward node using it ran (``use_masks``: the tangents
reaching each use, as eager's node that saved it), and a backward through a use
that already ran raises eager's "second time" error. At
``backward()`` the tangents that arrived (``None`` for outputs no gradient
reached: the Function does not materialize zeros) select the deferred tensors
to check: a mutated one that is needed raises eager's error; one that is not
needed is not passed to the backward at all: ``pruned_backward`` drops every
backward node that depends only on absent tangents (their contribution is
zero, as the undefined gradient is in eager).

Pruning also applies with nothing deferred: whenever the backward has two or more
tangents, gradients that did not arrive stay ``None`` rather than zeros, and an
input's gradient that only they reach is ``None`` too. As in eager, no gradient
then flows into the node that made that input (a leaf's ``.grad`` stays ``None``,
an upstream graph's backward does not run for it and does not check its saved
tensors' versions); inputs with hooks of their own get zeros (see runtime.py).

A returned ``_unsafe_view`` (an output that views an intermediate nothing else
aliases, see ``OutputKind.UNSAFE_VIEW_ALIAS``) gets a version counter of its own;
a saved tensor sharing its storage is re-made as a view of it (``rebase``) so that
mutating the output is still seen by the saved tensor's version check.
"""
from __future__ import annotations

import operator
from dataclasses import dataclass, field

import torch
import torch.fx

aten = torch.ops.aten


def _is_alias_op(node: torch.fx.Node) -> bool:
    """Whether ``node``'s result may share storage with its first tensor input."""
    if node.op != "call_function":
        return False
    if node.target is operator.getitem:
        return True
    schema = getattr(node.target, "_schema", None)
    if schema is None:
        return True  # unknown: assume it aliases
    return any(r.alias_info is not None and not r.alias_info.is_write for r in schema.returns)


def _alias_classes(gm: torch.fx.GraphModule) -> dict:
    """Union-find over view ops: node -> representative of its alias class."""
    parent: dict = {}

    def find(n):
        while parent.get(n, n) is not n:
            n = parent[n]
        return n

    for n in gm.graph.nodes:
        parent[n] = n
        if _is_alias_op(n):
            srcs = [a for a in n.all_input_nodes if isinstance(a.meta.get("val"), (torch.Tensor, tuple, list))]
            for a in srcs[:1]:
                parent[find(n)] = find(a)
    return {n: find(n) for n in parent}


@dataclass
class SavedPlan:
    """What the runtime needs to save lazily-checked tensors and prune the backward."""

    bw: torch.fx.GraphModule
    tangents: list              # the backward's tangent placeholders, in order
    #: indices (into the saved tensors) kept out of save_for_backward
    deferred: tuple
    #: per saved tensor, the tangents (bitmask) whose backward uses it
    needed_by: list
    all_tangents: int
    #: (saved index, forward return index): saved tensors sharing storage with an _unsafe_view return
    rebase: tuple = ()
    #: per tangent, its static (shape, dtype, device), or None where the shape is symbolic
    tangent_meta: list = field(default_factory=list)
    dep: dict = field(default_factory=dict)
    #: tangents (bitmasks) grouped by the set of inputs their gradients reach, when they reach
    #: different sets (see ``output_groups``); () otherwise
    groups: tuple = ()
    #: the inputs some group's gradients do not reach
    partial_inputs: tuple = ()
    #: per saved tensor, the tangents (bitmask) reaching each backward node that uses it: one
    #: mask per eager node that saved it, as far as the graph tells
    use_masks: list = field(default_factory=list)
    _pruned: dict = field(default_factory=dict)

    def needed_deferred(self, present: int) -> list[int]:
        """Positions in ``deferred`` whose tensor the backward for these tangents uses."""
        return [k for k, i in enumerate(self.deferred) if self.needed_by[i] & present]

    def runs_again(self, present: int, consumed: int) -> bool:
        """Whether the backward for ``present`` runs a use of a saved tensor that an earlier
        backward (without retain_graph) for the tangents in ``consumed`` already ran: eager's
        node for it has freed its saved tensors."""
        if not consumed:
            return False
        return any(m & present and m & consumed for masks in self.use_masks for m in masks)

    def freed_after(self, consumed: int) -> list[int]:
        """Positions in ``deferred`` whose tensor no later backward may use once the tangents in
        ``consumed`` were backpropagated without retain_graph."""
        if consumed == self.all_tangents:
            return list(range(len(self.deferred)))
        return [k for k, i in enumerate(self.deferred) if all(m & consumed for m in self.use_masks[i])]


def _tangent_deps(bw: torch.fx.GraphModule, tangents: list) -> dict:
    dep = {t: 1 << i for i, t in enumerate(tangents)}
    for n in bw.graph.nodes:
        if n.op in ("call_function", "call_method", "call_module", "get_attr"):
            m = 0
            for a in n.all_input_nodes:
                m |= dep.get(a, 0)
            dep[n] = m
    return dep


def _needed_by(bw: torch.fx.GraphModule, dep: dict, present: int) -> dict:
    """node -> the tangents in ``present`` (bitmask) whose backward needs this tangent-independent
    node (a saved tensor, or a value computed from saved tensors only)."""
    use: dict = {}
    for n in reversed(bw.graph.nodes):
        if n.op == "output":
            mask = present
        elif dep.get(n, 0):
            mask = dep[n] & present
        else:
            mask = use.get(n, 0)
        if not mask:
            continue
        for a in n.all_input_nodes:
            if not dep.get(a, 0):
                use[a] = use.get(a, 0) | mask
    return use


def _use_masks(bw: torch.fx.GraphModule, dep: dict, node: torch.fx.Node) -> tuple:
    """The tangent masks of the first tangent-dependent nodes that use ``node`` (through nodes
    computed from saved values only): in eager, one mask per node that saved the tensor."""
    masks: set = set()
    seen: set = set()
    todo = [node]
    while todo:
        n = todo.pop()
        for u in n.users:
            if u in seen:
                continue
            seen.add(u)
            if dep.get(u, 0):
                masks.add(dep[u])
            else:
                todo.append(u)
    return tuple(sorted(masks))


def _static_meta(val):
    if not isinstance(val, torch.Tensor) or any(not isinstance(s, int) for s in val.shape):
        return None
    return (tuple(val.shape), val.dtype, val.device)


def plan_saved(fw: torch.fx.GraphModule, bw: torch.fx.GraphModule, *, num_fw_returns: int, num_saved_tensors: int,
               num_saved_symints: int, num_unversioned: int, unsafe_view_returns: list[int]) -> SavedPlan | None:
    """The plan for one partitioned graph, or None when every saved tensor is saved as usual and
    the backward always runs whole (a single tangent, or a backward with side effects)."""
    fw_out = next(n for n in reversed(fw.graph.nodes) if n.op == "output").args[0]
    returns = list(fw_out[:num_fw_returns])
    saved = list(fw_out[num_fw_returns:num_fw_returns + num_saved_tensors])
    cls = _alias_classes(fw)
    uv_classes = {cls[returns[i]]: i for i in unsafe_view_returns if isinstance(returns[i], torch.fx.Node)}
    rebase = tuple((k, uv_classes[cls[s]]) for k, s in enumerate(saved)
                   if isinstance(s, torch.fx.Node) and cls[s] in uv_classes)

    bw_phs = [n for n in bw.graph.nodes if n.op == "placeholder"]
    n_before = num_saved_tensors + num_saved_symints + num_unversioned
    tangents = bw_phs[n_before:]
    all_tangents = (1 << len(tangents)) - 1
    deferred: tuple = ()
    needed: list = []
    dep: dict = {}
    use_masks: list = []
    # Pruning needs a backward without side effects (a copy_ into an input must happen).
    prunable = len(tangents) > 1 and not num_unversioned and not any(_mutates(n) for n in bw.graph.nodes)
    if prunable:
        dep = _tangent_deps(bw, tangents)
        use = _needed_by(bw, dep, all_tangents)
        needed = [use.get(bw_phs[k], 0) for k in range(num_saved_tensors)]
        use_masks = [_use_masks(bw, dep, bw_phs[k]) for k in range(num_saved_tensors)]
        # Every saved tensor is deferred: the engine frees save_for_backward's tensors after the
        # first backward through the node, but a later backward for other tangents may still
        # need them (`d(fake.detach())` backpropagated, then `d(fake)`: eager's nodes for `fake`
        # have not run yet). The runtime frees each one when no later backward may use it.
        deferred = tuple(range(num_saved_tensors))
    if not prunable and not rebase:
        return None
    plan = SavedPlan(bw, tangents, deferred, needed, all_tangents, rebase,
                     [_static_meta(t.meta.get("val")) for t in tangents], dep, use_masks=use_masks)
    if prunable and not rebase and not unsafe_view_returns:
        plan.groups, plan.partial_inputs = output_groups(bw, dep, len(tangents))
    return plan


def output_groups(bw: torch.fx.GraphModule, dep: dict, n_tangents: int) -> tuple[tuple, tuple]:
    """Tangents grouped by the inputs their gradients reach, and the inputs not every group reaches.

    A compiled graph is one autograd node: its backward runs when a gradient reaches any output,
    and the engine then runs the producers of *all* its inputs, with undefined gradients for the
    ones the arrived gradients do not reach. Eager never runs those (they are not on the path
    from the loss), and running them is not harmless: a producer whose saved tensor the program
    later wrote in place raises "modified by an inplace operation", and hooks on the way are
    called with None. Outputs whose gradients reach different inputs are therefore given one
    node each (see ``runtime.CompiledGraph``) -- only when such an input has a producer or hooks.

    Returns ``((bits, inputs), ...)`` (one entry per distinct input set, ``bits`` the tangents)
    and the partial inputs, or ``((), ())`` when all tangents reach the same inputs."""
    out = next(n for n in reversed(bw.graph.nodes) if n.op == "output").args[0]
    reach = [0] * len(out)  # per input: the tangents whose gradients reach it
    for i, g in enumerate(out):
        if isinstance(g, torch.fx.Node):
            reach[i] = dep.get(g, 0)
    by_set: dict = {}
    for j in range(n_tangents):
        inputs = frozenset(i for i, r in enumerate(reach) if r >> j & 1)
        if not inputs:
            return (), ()  # (an output no input's gradient depends on: nothing to split)
        by_set[inputs] = by_set.get(inputs, 0) | 1 << j
    if len(by_set) < 2:
        return (), ()
    reached = frozenset().union(*by_set)
    partial = tuple(sorted(i for i in reached if any(i not in s for s in by_set)))
    return tuple((bits, inputs) for inputs, bits in by_set.items()), partial


def _mutates(n: torch.fx.Node) -> bool:
    if n.op != "call_function":
        return n.op in ("call_method", "call_module")
    schema = getattr(n.target, "_schema", None)
    return schema is not None and schema.is_mutable


_ADD_LIKE = (aten.add.Tensor, aten.sub.Tensor)


def pruned_backward(plan: SavedPlan, present: int):
    """The backward graph for the tangents in ``present`` (bitmask), or None if it cannot be
    built (a zero of symbolic shape would be needed).

    Returns ``(gm, arg_indices)``: the graph takes ``[args[i] for i in arg_indices]`` of the full
    backward's arguments. A node that depends on tangents, all absent, is zero: it is dropped, a
    grad output made of it is None, an ``add``/``sub`` with it passes its other operand through,
    and any other use gets a ``zeros`` of its (static) shape.
    """
    if present in plan._pruned:
        return plan._pruned[present]
    bw, dep = plan.bw, plan.dep

    def is_zero(n) -> bool:
        return isinstance(n, torch.fx.Node) and bool(dep.get(n, 0)) and not dep[n] & present

    use = _needed_by(bw, dep, present)
    g = torch.fx.Graph()
    env: dict = {}
    zeros: dict = {}
    arg_indices = []
    result = None
    ok = True

    def zero_of(z):
        nonlocal ok
        if z in zeros:
            return zeros[z]
        val = z.meta.get("val")
        size = _size_in(g, env, val) if isinstance(val, torch.Tensor) else None
        if size is None:
            ok = False
            return None
        # (aten.full, not aten.zeros: Inductor lowers full itself, and has no lowering for zeros,
        # which it expects decomposed: "both a fallback and a decomp for same op")
        node = g.call_function(aten.full.default, (size, 0),
                               {"dtype": val.dtype, "layout": torch.strided, "device": val.device,
                                "pin_memory": False})
        node.meta["val"] = val.new_zeros(val.shape)
        zeros[z] = node
        return node

    def arg(a):
        if is_zero(a):
            return zero_of(a)
        return env[a]

    k = 0
    for n in bw.graph.nodes:
        if n.op == "placeholder":
            wanted = (dep[n] & present) if n in dep else use.get(n, 0)
            val = n.meta.get("val")
            if isinstance(val, torch.SymInt) and val.node.expr.is_Symbol:
                wanted = True  # (a size symbol: it binds the symbol in other inputs' expressions)
            if wanted:
                p = g.placeholder(n.name)
                p.meta = dict(n.meta)
                env[n] = p
                arg_indices.append(k)
            k += 1
            continue
        if n.op == "output":
            outs = [None if is_zero(o) else (env[o] if isinstance(o, torch.fx.Node) else o) for o in n.args[0]]
            g.output(tuple(outs))
            break
        if is_zero(n) or (not dep.get(n, 0) and not use.get(n, 0)):
            continue
        passed = _pass_through(n, is_zero)
        if passed is not None:
            env[n] = env[passed]
            continue
        env[n] = g.node_copy(n, arg)
        if not ok:
            break
    if ok:
        gm = torch.fx.GraphModule(bw, g, class_name="EmberBackwardPruned")
        gm.graph.eliminate_dead_code()
        gm.recompile()
        result = (gm, arg_indices)
    plan._pruned[present] = result
    return result


def _pass_through(n: torch.fx.Node, is_zero):
    """``a + 0``, ``0 + a``, ``a - 0`` with ``a`` of the result's shape and dtype: ``a``."""
    if n.target not in _ADD_LIKE or len(n.args) != 2 or n.kwargs:
        return None
    a, b = n.args
    if n.target is aten.add.Tensor and is_zero(a) and not is_zero(b):
        a, b = b, a
    if not isinstance(a, torch.fx.Node) or is_zero(a) or not is_zero(b):
        return None
    va, vn = a.meta.get("val"), n.meta.get("val")
    if isinstance(va, torch.Tensor) and isinstance(vn, torch.Tensor) and va.dtype == vn.dtype \
            and _same_size(va.shape, vn.shape):
        return a
    return None


def _same_size(a, b) -> bool:
    """Sizes known equal without evaluating a symbolic comparison (which would add a guard)."""
    if len(a) != len(b):
        return False
    for x, y in zip(a, b):
        if isinstance(x, torch.SymInt) and isinstance(y, torch.SymInt):
            if x.node.expr != y.node.expr:
                return False
        elif isinstance(x, torch.SymInt) or isinstance(y, torch.SymInt) or x != y:
            return False
    return True


def _size_in(g: torch.fx.Graph, env: dict, val: torch.Tensor):
    """``val``'s size as arguments of a node in ``g``: ints, and for a symbolic size the
    ``sym_size`` of a value already in ``g`` with that size (None if there is none)."""
    size = []
    for s in val.shape:
        if isinstance(s, int):
            size.append(s)
            continue
        expr = s.node.expr
        found = None
        for old, new in env.items():
            v = old.meta.get("val")
            if isinstance(v, torch.SymInt) and v.node.expr == expr:
                found = new
            elif isinstance(v, torch.Tensor):
                for d, vs in enumerate(v.shape):
                    if isinstance(vs, torch.SymInt) and vs.node.expr == expr:
                        found = g.call_function(aten.sym_size.int, (new, d))
                        found.meta["val"] = vs
                        break
            if found is not None:
                break
        if found is None:
            return None
        size.append(found)
    return size
