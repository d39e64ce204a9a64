"""Split a joint forward+backward graph into a forward and a backward graph.

Both partitioners produce::

    forward (*primals) -> (*fw_returns, *saved_tensors, *saved_symints, *mutable_inputs)
    backward(*saved_tensors, *saved_symints, *mutable_inputs, *tangents) -> (grad per primal, None if none)

``default_partition``: the forward is exactly what the forward returns need;
everything else the gradients need goes to the backward; forward values the
backward uses are saved. Nothing is recomputed.

``min_cut_partition`` (``ember.aot.mincut``): chooses what to save and what
the backward recomputes by a minimum cut (see there).

Tags set while tracing the joint (``node.meta["partitioner_tag"]``) are
honoured by both:

* ``must_be_in_forward``: a ``copy_`` that applies a forward mutation of an
  input inside the forward graph (and everything it needs);
* ``must_be_in_backward``: a ``copy_`` that applies a mutation the backward
  made to an input. Its destination input reaches the backward as a
  *mutable input*: passed on ``ctx`` without ``save_for_backward``'s version
  check (the forward's own mutation of that input happened in between);
* ``node.meta["ember_must_save"]``: the value a forward mutation wrote; the
  min-cut partitioner never recomputes it in the backward.

A saved *primal* that is mutated (``placeholder.meta["ember_mutated"]``) is
saved as a ``clone`` taken in the forward: the backward must see the value the
forward read, not the one the mutation left. A primal that only the backward
mutates is not saved at all: the backward reads it through its mutable input,
as eager's backward reads a tensor kept on ``ctx`` when it runs (after an
earlier call's backward wrote to it). So is a primal, or a forward value, that a custom Function's
backward reads as a ctx attribute (``JointParts.live_reads``), after the mutable inputs.
"""
from __future__ import annotations

import operator
from dataclasses import dataclass, field

import torch
import torch.fx

aten = torch.ops.aten


@dataclass
class PartitionResult:
    fw: torch.fx.GraphModule
    bw: torch.fx.GraphModule
    num_saved_tensors: int
    num_saved_symints: int
    #: inputs the backward mutates or reads live, passed after the saved SymInts (no version check)
    num_unversioned: int = 0
    saved_names: list[str] = field(default_factory=list)
    recomputed: int = 0


def _is_sym(node: torch.fx.Node) -> bool:
    return isinstance(node.meta.get("val"), (torch.SymInt, torch.SymFloat, torch.SymBool, int, float, bool))


def ancestors(roots, stop=frozenset(), skip_edge=None) -> set:
    """Nodes reachable backwards from ``roots``, not expanding past ``stop``.

    ``skip_edge(user, input)`` drops an edge (the destination of a backward ``copy_``).
    """
    seen: set = set()
    stack = [r for r in roots if isinstance(r, torch.fx.Node)]
    while stack:
        n = stack.pop()
        if n in seen:
            continue
        seen.add(n)
        if n in stop:
            continue
        for a in n.all_input_nodes:
            if skip_edge is None or not skip_edge(n, a):
                stack.append(a)
    return seen


@dataclass
class JointParts:
    """The joint graph's pieces, as the partitioners see them."""

    joint: torch.fx.GraphModule
    primals: list
    tangents: list
    fw_returns: list
    grads: list
    fw_copies: list   # copy_ nodes tagged must_be_in_forward
    bw_copies: list   # copy_ nodes tagged must_be_in_backward
    mutable_inputs: list  # destinations of bw_copies (primals), unique, in order
    #: (backward node, primal): the node reads the primal as a custom Function's ctx attribute (see
    #: ``strip_live_markers``): live, unversioned
    live_reads: list = field(default_factory=list)

    def skip_edge(self, user: torch.fx.Node, inp: torch.fx.Node) -> bool:
        return user in self._bw_copy_set and inp is user.args[0]

    def __post_init__(self):
        self._bw_copy_set = set(self.bw_copies)


def split_joint(joint: torch.fx.GraphModule, num_primals: int, num_fw_returns: int) -> JointParts:
    phs = [n for n in joint.graph.nodes if n.op == "placeholder"]
    out_node = next(n for n in reversed(joint.graph.nodes) if n.op == "output")
    outs = list(out_node.args[0])
    fw_copies = [n for n in joint.graph.nodes if n.meta.get("partitioner_tag") == "must_be_in_forward"]
    bw_copies = [n for n in joint.graph.nodes if n.meta.get("partitioner_tag") == "must_be_in_backward"
                 and n.target is aten.copy_.default]
    mutable = []
    for n in bw_copies:
        if n.args[0] not in mutable:
            mutable.append(n.args[0])
    strip_live_markers(joint)
    primals = set(phs[:num_primals])
    live_reads = [(n, p) for n in joint.graph.nodes for p in n.meta.get(LIVE_FROM, ())
                  if p not in mutable and p in n.all_input_nodes]
    if any(p not in primals for _, p in live_reads):  # (a forward value; never one made from a tangent)
        from ember.aot.mincut import _descendants
        after_tangents = _descendants(phs[num_primals:])
        live_reads = [(n, p) for n, p in live_reads if p in primals or p not in after_tangents]
    return JointParts(joint, phs[:num_primals], phs[num_primals:], outs[:num_fw_returns], outs[num_fw_returns:],
                      fw_copies, bw_copies, mutable, live_reads)


LIVE_FROM = "ember_live_from"


def strip_live_markers(joint: torch.fx.GraphModule) -> None:
    """A custom Function's backward reads an input kept as a ctx attribute through a same-shape
    ``aten.view`` annotated ``ember_live_read`` (capture/variables/generated_function.py). Each
    marker goes (Inductor's joint passes would drop it as a no-op), its users read the primal (or the
    forward's value: a tensor forward made, ``ctx.y = y``) directly and record it in
    ``node.meta[LIVE_FROM]``. Run before any joint pass; idempotent."""
    for n in list(joint.graph.nodes):
        if not (n.op == "call_function" and n.target is aten.view.default
                and n.meta.get("custom", {}).get("ember_live_read") and isinstance(n.args[0], torch.fx.Node)):
            continue
        if any(u.op == "output" for u in n.users):
            continue  # (returned as a gradient: left as a view, saved as any other read)
        for u in n.users:
            u.meta[LIVE_FROM] = (*u.meta.get(LIVE_FROM, ()), n.args[0])
        n.replace_all_uses_with(n.args[0])
        joint.graph.erase_node(n)


def forward_random_ops(parts: JointParts) -> list:
    """Random ops of the forward (not fed by a tangent), used or not: eager draws their numbers
    whatever becomes of the result, and a later random op must draw what eager draws after them."""
    after_tangents = set(parts.tangents)
    for n in parts.joint.graph.nodes:
        if n not in after_tangents and any(a in after_tangents for a in n.all_input_nodes):
            after_tangents.add(n)
    return [n for n in parts.joint.graph.nodes
            if n.op == "call_function" and n not in after_tangents
            and torch.Tag.nondeterministic_seeded in getattr(n.target, "tags", ())]


def _with_getitems(nodes: set) -> set:
    """Never save a tuple: the forward also computes every getitem of a multi-output op it runs."""
    for n in list(nodes):
        if isinstance(n.meta.get("val"), (tuple, list)):
            nodes.update(u for u in n.users if u.target is operator.getitem)
    return nodes


def _build(joint: torch.fx.GraphModule, inputs: list, body: set, outputs: list, name: str, *,
           input_names: list | None = None, arg_override=None, output_override=None) -> torch.fx.GraphModule:
    g = torch.fx.Graph()
    env: dict = {}
    extra: dict = {}
    for k, n in enumerate(inputs):
        p = g.placeholder(input_names[k] if input_names else n.name)
        p.meta = dict(n.meta)
        if input_names and input_names[k] != n.name:
            extra[n] = p  # a second placeholder for the same joint node (mutable input)
            env.setdefault(n, p)  # not saved: every read of it is a read of the mutable input
        else:
            env[n] = p
    for n in joint.graph.nodes:
        if n in body and n not in env and n.op != "placeholder" and n.op != "output":
            if arg_override is not None and n in arg_override:
                repl = arg_override[n]
                env[n] = g.node_copy(n, lambda x, repl=repl: extra[x] if x in repl else env[x])
            else:
                env[n] = g.node_copy(n, lambda x: env[x])
    results = []
    for k, o in enumerate(outputs):
        if output_override is not None and k in output_override:
            results.append(output_override[k](g, env))
        else:
            results.append(env[o] if isinstance(o, torch.fx.Node) else o)
    g.output(tuple(results))
    gm = torch.fx.GraphModule(joint, g, class_name=name)
    return gm


def _symbol_binders(parts: JointParts, bw_inputs: list, bw_body: set) -> list:
    """Size nodes the backward needs as inputs: a compiler binds each symbol of a graph's sizes from
    an input (a SymInt input, or a dimension of a tensor input that is that symbol). A symbol the
    backward's sizes use (``s1 + (8 - s1 % 8) % 8``, a padded gradient) but no backward input binds
    is read in the forward (``sym_size`` of a primal) and saved."""
    from torch.fx.experimental.symbolic_shapes import free_symbols

    def bound(val) -> set:
        if isinstance(val, torch.SymInt):
            return {val.node.expr} if val.node.expr.is_Symbol else set()
        if isinstance(val, torch.Tensor):
            return {d.node.expr for d in (*val.shape, *val.stride(), val.storage_offset())
                    if isinstance(d, torch.SymInt) and d.node.expr.is_Symbol}
        return set()

    inputs = bw_inputs + parts.mutable_inputs + parts.tangents
    have: set = set()
    for n in inputs:
        have |= bound(n.meta.get("val"))
    needed: set = set()
    for n in list(bw_body) + inputs:
        val = n.meta.get("val")
        if isinstance(val, (torch.Tensor, torch.SymInt, torch.SymFloat, torch.SymBool)):
            needed |= free_symbols(val)
    missing = needed - have
    if not missing:
        return []
    graph = parts.joint.graph
    made = []
    for p in parts.primals:
        val = p.meta.get("val")
        if isinstance(val, torch.SymInt) and val.node.expr in missing:
            missing.discard(val.node.expr)  # an int input that is the symbol itself (a saved `2*s4`'s)
            made.append(p)
            continue
        if not isinstance(val, torch.Tensor):
            continue
        for d, size in enumerate(val.shape):
            if isinstance(size, torch.SymInt) and size.node.expr in missing:
                missing.discard(size.node.expr)
                with graph.inserting_after(parts.primals[-1]):
                    node = graph.call_function(aten.sym_size.int, (p, d))
                node.meta["val"] = size
                made.append(node)
    return made


_METADATA_READS = (aten.sym_size.int, aten.sym_stride.int, aten.sym_numel.default,
                   aten.sym_storage_offset.default)


def _sizes_instead_of_tensors(parts: JointParts, fw_nodes: set, saved: list, bw_body: set):
    """A tensor the backward reads only the sizes of (``sym_size``: ``sum``'s gradient expanded to
    a symbolic shape) is not saved: the forward reads those sizes and saves them. Eager's nodes save
    sizes there too; a saved tensor is version-checked, and the program may write into it before the
    backward (an input clamped in place by a later graph: "modified by an inplace operation" where
    eager's backward succeeds)."""
    grads = {g for g in parts.grads if isinstance(g, torch.fx.Node)}
    out, fw_nodes, bw_body = [], set(fw_nodes), set(bw_body)
    for n in saved:
        if _is_sym(n) or n in grads:
            out.append(n)
            continue
        users = [u for u in n.users if u in bw_body and not parts.skip_edge(u, n)]
        if not users or any(u.target not in _METADATA_READS or u.args[0] is not n
                            or any(isinstance(a, torch.fx.Node) for a in u.args[1:]) for u in users):
            out.append(n)
            continue
        for u in users:
            fw_nodes.add(u)
            bw_body.discard(u)
            out.append(u)
    return fw_nodes, out, bw_body


def assemble(parts: JointParts, fw_nodes: set, saved: list, bw_body: set) -> PartitionResult:
    """Forward and backward graphs from the chosen forward nodes, saved values and backward body."""
    fw_nodes, saved, bw_body = _sizes_instead_of_tensors(parts, fw_nodes, saved, bw_body)
    saved_syms = [n for n in saved if _is_sym(n)]
    saved_tensors = [n for n in saved if not _is_sym(n)]
    binders = _symbol_binders(parts, saved_tensors + saved_syms, bw_body)
    saved_syms += binders
    fw_nodes = fw_nodes | set(binders)
    saved = saved + binders
    # a primal only the backward mutates is read there through its mutable input, live: eager's
    # backward reads it when it runs (after earlier backwards' writes), and saving it would check
    # its version, which those writes bump
    live = [n for n in saved_tensors
            if n in parts.mutable_inputs and not n.meta.get("ember_fw_mutated")]
    # a primal a custom Function's backward reads as a ctx attribute (``ctx.w = w``) is handed to the
    # backward as it is (eager's backward reads it live, with no version check); it is saved only if
    # other backward nodes need the forward's view of it
    markers = [(u, p) for u, p in parts.live_reads if u in bw_body]
    live_prims = list(dict.fromkeys(p for _, p in markers))
    # (a forward value kept as a ctx attribute is returned by the forward, made there if nothing
    # else needed it: eager's forward made it, and its backward reads it as it is then)
    made = [p for p in live_prims if p not in fw_nodes]
    if made:
        fw_nodes = fw_nodes | _with_getitems(ancestors(made))
    live += [p for p in live_prims if all((u, p) in markers for u in p.users if u in bw_body)]
    override: dict = {c: (c.args[0],) for c in parts.bw_copies}
    for u, p in markers:
        override[u] = (*override.get(u, ()), p)
    if live:
        saved_tensors = [n for n in saved_tensors if n not in live]
        saved = [n for n in saved if n not in live]
    # a saved primal that some mutation overwrites: save a clone taken before it
    clones = {}  # output position -> builder
    for k, n in enumerate(saved_tensors):
        if n.op == "placeholder" and n.meta.get("ember_mutated"):
            clones[len(parts.fw_returns) + k] = (lambda g, env, n=n: g.call_function(aten.clone.default, (env[n],)))
    fw = _build(parts.joint, parts.primals, fw_nodes | set(parts.primals),
                parts.fw_returns + saved_tensors + saved_syms + parts.mutable_inputs + live_prims, "EmberForward",
                output_override=clones)
    mutable_names = [n.name + "_mutable" for n in parts.mutable_inputs]
    bw_inputs = saved_tensors + saved_syms + parts.mutable_inputs + live_prims + parts.tangents
    names = ([n.name for n in saved_tensors + saved_syms] + mutable_names + [n.name + "_live" for n in live_prims]
             + [n.name for n in parts.tangents])
    bw = _build(parts.joint, bw_inputs, bw_body | set(saved) | set(parts.tangents), parts.grads, "EmberBackward",
                input_names=names, arg_override=override)
    for n in bw.graph.nodes:
        if n.op == "placeholder" and n.name in mutable_names:
            n.meta["ember_role"] = "mutable_input"
    recomputed = sum(1 for n in bw_body if n in fw_nodes and n not in saved and n.op != "placeholder")
    return PartitionResult(fw, bw, len(saved_tensors), len(saved_syms), len(parts.mutable_inputs) + len(live_prims),
                           [n.name for n in saved], recomputed)


def default_partition(joint: torch.fx.GraphModule, *, num_primals: int, num_fw_returns: int) -> PartitionResult:
    parts = split_joint(joint, num_primals, num_fw_returns)
    # (a forward value a custom Function's backward reads as a ctx attribute is made by the forward)
    fw_nodes = _with_getitems(ancestors(parts.fw_returns + parts.fw_copies + forward_random_ops(parts)
                                        + [p for _, p in parts.live_reads])
                              | set(parts.primals))
    leaked = fw_nodes & set(parts.tangents)
    if leaked:
        raise AssertionError(f"forward returns depend on tangents: {leaked}")
    from ember.aot.mincut import checkpointed, recomputable
    # what torch.utils.checkpoint made is recomputed by the backward (see capture/variables/checkpoint.py)
    kept = fw_nodes - {n for n in fw_nodes if checkpointed(n) and recomputable(n)}
    bw_nodes = ancestors(parts.grads + parts.bw_copies, stop=kept, skip_edge=parts.skip_edge)
    bw_only = bw_nodes - kept
    returned_by_bw = {g for g in parts.grads if isinstance(g, torch.fx.Node) and g in kept}
    live = set(parts.live_reads)  # (such a read takes the value live, not saved)
    saved = [n for n in joint.graph.nodes
             if n in kept and (n in returned_by_bw or any(
                 u in bw_only and not parts.skip_edge(u, n) and (u, n) not in live for u in n.users))]
    attrs = {n for n in saved if n.op == "get_attr"}  # a subgraph is not saved: the backward reads it too
    return assemble(parts, fw_nodes, [n for n in saved if n not in attrs], bw_only | attrs)
