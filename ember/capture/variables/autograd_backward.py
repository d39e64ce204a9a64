"""Step 2 of a traced ``autograd.Function`` call (see autograd_function.py): the user's ``backward``
inlined once on stand-in gradients, to learn whether it can be traced and to install the guards it
needs, then dropped. It runs later for real, with the eager backend, or on fake tensors while an AOT
backend traces the joint graph: so what it reads must come through ctx (or be guarded), and it may not
decide a branch on a tensor's value.
"""
from __future__ import annotations

import copy

import torch
import torch.fx as fx

from ember.capture.subgraph import GradDisabled, Region
from ember.capture.variables.base import is_none, ConstantVariable, unsupported
from ember.capture.variables.tensor import TensorVariable
from ember.exc import PythonException, Unsupported
from ember.fake.snapshot import version_of
from ember.fake.symbolic import has_symbols, plain


def check_backward(tx, cls_vt, fn_cls, backward_fn, ctx, out_items, args=(), forward_nodes=frozenset()):
    from ember.capture.variables.functions import UserFunctionVariable
    # read through the class (as forward was): patching Fn.backward later must recompile
    name = "vjp" if backward_fn is fn_cls.vjp and backward_fn is not fn_cls.backward else "backward"
    fn_vt = tx.getattr(cls_vt, name)
    wrapped = getattr(backward_fn, "__wrapped__", None)  # once_differentiable's body
    if wrapped is not None:
        fn_vt = UserFunctionVariable(wrapped)
    inputs_before = len(tx.output.placeholders)
    bctx = copy.copy(ctx)  # what backward assigns on ctx must not reach the forward's record
    bctx.attrs = dict(ctx.attrs)
    from ember.capture.speculation import Checkpoint
    cp = Checkpoint(tx)
    region = Region(tx, [])
    watched = _ctx_tensors(ctx)
    versions = [version_of(t) for _, t in watched]
    try:
        try:
            with GradDisabled():
                grads = [tx.output.call_function(torch.zeros_like, [o], {}) if isinstance(o, TensorVariable)
                         else ConstantVariable(None) for o in out_items]
                result = fn_vt.call(tx, [bctx, *grads], {})
        except PythonException as e:  # eager raises it in backward(), not here: run the call eagerly
            raise unsupported("EB0048", f"{fn_cls.__qualname__}.backward raised {type(e.exc).__name__} "
                              "while tracing") from None
        region.check_pure(f"{fn_cls.__qualname__}.backward")
        if len(tx.output.__dict__.get("assumptions", ())) != cp.assumed:
            # `assert (g > 0).all()`: an AOT backend runs this backward on fake tensors, where the
            # check cannot be decided (capture/assumptions.py tests a forward's after the graph)
            raise unsupported("EB0048", f"{fn_cls.__qualname__}.backward branches on a tensor's value")
        _check_backward_reads(fn_cls, region, ctx, grads)
        _check_backward_writes(tx, fn_cls, watched, versions, forward_nodes, out_items)
    except Unsupported:
        cp.restore()
        raise
    # Backward runs later, not here: its nodes go, and what it changed in place on the fake tensors
    # (``x.t_()`` of a saved input) is undone, or the rest of the frame would see x transposed.
    if not cp.restore():
        raise unsupported("EB0048", f"{fn_cls.__qualname__}.backward changes a view's autograd state "
                          "(cannot be undone while tracing)")
    if len(tx.output.placeholders) != inputs_before:
        # AOT would run the real backward on fake tensors, where a real tensor from outside cannot go
        raise unsupported("EB0048", f"{fn_cls.__qualname__}.backward reads tensors from outside the Function")
    from ember.capture.variables.containers import TupleVariable
    items = list(result.items) if isinstance(result, TupleVariable) else [result]  # (eager: not a tuple -> (r,))
    n_in = len(ctx.needs_input_grad)
    if len(items) > n_in and all(is_none(i) for i in items[n_in:]):
        items = items[:n_in]  # (eager drops extra gradients that are None)
    if len(items) > n_in and not ctx.materialize:
        return  # (the extra gradients may be None at run time, as eager needs: the generated Function checks)
    if len(items) != n_in:
        # eager's error at backward time; an AOT backend would meet it while compiling: run the call eagerly
        raise unsupported("EB0048", f"{fn_cls.__qualname__}.backward returns {len(items)} gradients for {n_in} inputs")
    for k, (grad, arg) in enumerate(zip(items, args)):
        # gradients autograd rejects (eager raises at backward time, an AOT backend while compiling)
        if is_none(grad):
            continue
        if not isinstance(grad, TensorVariable):
            raise unsupported("EB0048", f"{fn_cls.__qualname__}.backward returns a {grad.describe()} as a gradient")
        if not isinstance(arg, TensorVariable):
            raise unsupported("EB0048", f"{fn_cls.__qualname__}.backward returns a gradient for argument {k}, "
                              "which is not a tensor")
        want, got = arg.fake.shape, grad.fake.shape
        if not (has_symbols(want) or has_symbols(got)) and tuple(want) != tuple(got):
            try:
                torch.broadcast_shapes(want, got)
                expandable = torch.broadcast_shapes(want, got) == tuple(got)
            except RuntimeError:
                expandable = False
            if not expandable:  # (a gradient the input's shape expands to is summed down, as eager does)
                raise unsupported("EB0048", f"{fn_cls.__qualname__}.backward returns a gradient of shape {tuple(got)} "
                                  f"for an input of shape {tuple(want)}")


def _check_backward_reads(fn_cls, region, ctx, grads) -> None:
    """Backward may read only its gradients and what ctx holds. A tensor the frame already has (a global
    or closure tensor forward read too, a module's parameter) is a real tensor when AOT traces the user's
    backward on fake ones (it cannot be handed in): the call runs eagerly, as torch.compile breaks on a
    backward reading a lifted free variable."""
    known = {n for v in [*(ctx.saved or []), *ctx.attrs.values()] for n in _graph_nodes_in(v)}
    stand_ins = {g.node for g in grads if isinstance(g, TensorVariable)}  # (zeros_like of the outputs)
    body = region.nodes()
    inside = set(body)
    for n in body:
        if n in stand_ins:
            continue
        for i in n.all_input_nodes:
            if i in inside or i in known:
                continue
            value = i.meta.get("example_value")
            if isinstance(value, torch.Tensor):
                raise unsupported("EB0048", f"{fn_cls.__qualname__}.backward reads tensors from outside the Function")
            if isinstance(value, (torch.SymInt, torch.SymFloat, torch.SymBool)) and has_symbols(value):
                # a dynamic number read other than through ctx (a global float forward read too): AOT
                # traces this backward with the value it has now, so the graph holds only for it
                plain(value)


def _ctx_tensors(ctx) -> list:
    """(node, fake tensor) of the tensors ``ctx`` holds: saved, and as attributes (in containers and
    objects too)."""
    found = {}
    for v in [*(ctx.saved or []), *ctx.attrs.values()]:
        for n in _graph_nodes_in(v):
            t = n.meta.get("example_value")
            if isinstance(t, torch.Tensor):
                found[id(t)] = (n, t)
    return list(found.values())


def _root(t):
    return t._base if t._is_view() and t._base is not None else t


def _check_backward_writes(tx, fn_cls, watched, versions, forward_nodes, out_items) -> None:
    """Backward may write in place to what ctx holds of the frame's *inputs* (or their views): an AOT
    backward hands those in and copies the writes back. And to a tensor forward made that the program
    cannot reach (not returned, no view of it returned): no one sees the write. A write to a returned
    tensor (``ctx.y.mul_(2)`` of a returned ``y``) or to one the frame computed before the call would
    stay inside the functional backward graph, where eager's backward changed the tensor the program
    holds: the call runs eagerly."""
    inputs = {id(n.meta.get("example_value")) for n in tx.output.placeholders}
    returned = {id(_root(n.meta["example_value"])) for o in out_items for n in _graph_nodes_in(o)
                if isinstance(n.meta.get("example_value"), torch.Tensor)}
    for (node, t), before in zip(watched, versions):
        if version_of(t) == before:
            continue
        root = _root(t)
        if id(root) in inputs or id(t) in inputs:
            continue
        if node in forward_nodes and id(root) not in returned:
            continue
        raise unsupported("EB0048", f"{fn_cls.__qualname__}.backward writes in place to a tensor the program holds "
                          "(returned by forward, or computed by the frame) and kept on ctx")


def _graph_nodes_in(vt, depth=0) -> list:
    """The graph values (tensors, symbolic numbers) a ctx attribute holds, in containers and objects too."""
    from ember.capture.variables.containers import BaseSequence, DictVariable
    from ember.capture.variables.new_object import NewObjectVariable
    node = getattr(vt, "node", None)
    if isinstance(node, fx.Node):
        return [node]
    if depth > 8:
        return []
    if isinstance(vt, BaseSequence):
        return [n for i in vt.items for n in _graph_nodes_in(i, depth + 1)]
    items = getattr(vt, "items", None)
    if isinstance(vt, DictVariable) and isinstance(items, dict):
        return [n for i in items.values() for n in _graph_nodes_in(i, depth + 1)]
    if isinstance(vt, NewObjectVariable):
        return [n for i in vt.attrs.values() for n in _graph_nodes_in(i, depth + 1)]
    return []
