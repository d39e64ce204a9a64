"""The ``autograd.Function`` ember generates for a traced ``MyFunction.apply`` (see
``autograd_function.py``): its forward runs the copied forward graph and stores on ``ctx`` what the
user's forward stored; its backward calls the user's backward.

A tensor the user's forward kept as a ctx *attribute* (``ctx.w = w`` of an argument, or ``ctx.y = y``
of a tensor forward made; not ``save_for_backward``) is read by eager's backward live: no version
check, the value it has when backward runs (the program may have written to it in between: an
argument, or an output that is that tensor). When an AOT backend traces the backward, such a read is
marked (an ``aten.view`` node annotated ``ember_live_read``): the partitioner hands the tensor to the
backward unversioned instead of saving it (``ember.aot.partition``). Under a trace by torch's own
AOTAutograd (a backend built with ``aot_autograd``), the forward tags those tensors as torch's
``autograd_function_apply`` does (``saved_tensor_with_no_vc_check``), and its partitioner saves them
without a version check."""
from __future__ import annotations

import copy

import torch

#: the annotation (``node.meta["custom"]``) of a backward's live read of a ctx attribute
LIVE_READ = "ember_live_read"


def _ref_value(ref, values):
    kind = ref[0]
    if kind == "const":
        return ref[1]
    if kind == "copy":
        return copy.deepcopy(ref[1])
    if kind == "obj":
        from ember.capture.variables.new_object import rebuild
        return rebuild(ref[1], {k: _ref_value(r, values) for k, r in ref[2].items()}, None)
    if kind == "seq":
        items = [_ref_value(r, values) for r in ref[2]]
        return ref[1](items) if ref[1] in (tuple, torch.Size) else ref[1](*items)
    return values[ref[1]]



def _apply_of(wrapper):
    """``wrapper.apply`` as a plain function fx names by itself (a bound ``apply`` reports torch's module,
    and fx would write it as ``torch.autograd.function.apply``)."""
    def apply(*args):
        return wrapper.apply(*args)
    apply.__name__ = apply.__qualname__ = f"{wrapper.__name__.lower()}_apply"
    apply.__module__ = __name__
    apply.ember_function = wrapper
    return apply


def _make_function(fn_cls, backward_fn, gm, n_out, out_is_tuple, saved_refs, attr_refs, non_diff,
                   materialize, n_args, n_user_outs, out_positions, dirty_outs=None):
    """An ``autograd.Function`` named like ``fn_cls`` (autograd's messages name it) taking the user's
    arguments plus one list of the outside tensors forward reads."""
    def forward(ctx, *inputs):
        values = gm(*inputs[:-1], *inputs[-1])
        outs = list(values[:n_out])
        if dirty_outs:  # (the graph changed these inputs in place: they are the outputs, as in eager)
            for k, i in dirty_outs.items():
                outs[k] = inputs[i]
            ctx.mark_dirty(*{id(inputs[i]): inputs[i] for i in dirty_outs.values()}.values())
        if saved_refs is not None:
            ctx.save_for_backward(*[None if r is None else values[r[1]] for r in saved_refs])
        for name, ref in attr_refs.items():
            setattr(ctx, name, _ref_value(ref, values))
        ctx.ember_live = [name for name in attr_refs if _tensors_of(getattr(ctx, name))]
        _tag_no_version_check([t for name in ctx.ember_live for t in _tensors_of(getattr(ctx, name))])
        if non_diff:
            ctx.mark_non_differentiable(*[outs[i] for i in non_diff])
        if not materialize:
            ctx.set_materialize_grads(False)
        return tuple(outs) if out_is_tuple else outs[0]

    def backward(ctx, *grads):
        full = [None] * n_user_outs
        for pos, g in zip(out_positions, grads):
            full[pos] = g
        ctx.needs_input_grad = ctx.needs_input_grad[:n_args]  # (not the list of outside tensors)
        _mark_live_reads(ctx)
        result = backward_fn(ctx, *full)
        if not isinstance(result, tuple):
            result = (result,)
        if len(result) > n_args and all(r is None for r in result[n_args:]):
            result = result[:n_args]  # (eager drops extra gradients that are None)
        if len(result) != n_args:
            raise RuntimeError(f"function {fn_cls.__name__}Backward returned an incorrect number of "
                               f"gradients (expected {n_args}, got {len(result)})")
        return (*result, None)

    return type(fn_cls.__name__, (torch.autograd.Function,),
                {"forward": staticmethod(forward), "backward": staticmethod(backward),
                 "__module__": __name__, "__qualname__": f"ember.{fn_cls.__qualname__}"})


def _tensors_of(value) -> list:
    """The tensors of a ctx attribute read live: a tensor, or the items of a plain list, tuple or
    dict of them (``ctx.ts = (y, w)``)."""
    if isinstance(value, torch.Tensor):
        return [value]
    items = value.values() if type(value) is dict else value if type(value) in (list, tuple) else ()
    return [t for t in items if isinstance(t, torch.Tensor)]


def _live_alias(value):
    """``value`` with its functional tensors replaced by annotated aliases (``_mark_live_reads``)."""
    from torch._subclasses.functional_tensor import FunctionalTensor

    def alias(t):
        if not isinstance(t, FunctionalTensor):
            return t
        with torch.fx.traceback.annotate({LIVE_READ: True}):
            return torch.ops.aten.view.default(t, t.shape)  # (alias decomposes away)

    if isinstance(value, torch.Tensor):
        return alias(value)
    if type(value) is dict:
        return {k: alias(v) for k, v in value.items()}
    return type(value)(alias(v) for v in value)


def _tag_no_version_check(tensors) -> None:
    """While torch's proxy tracing runs this forward (torch's AOTAutograd: ember's own AOT reads the
    backward's markers instead), tag the nodes of ``tensors`` as saved without a version check."""
    if not tensors or torch._C._get_dispatch_mode(torch._C._TorchDispatchModeKey.PROXY) is None:
        return
    try:
        from torch.fx.experimental.proxy_tensor import _get_proxies
    except ImportError:  # (a torch without it: the tensors stay version-checked)
        return
    for t in tensors:
        for proxy in _get_proxies(t):
            proxy.node.meta["saved_tensor_with_no_vc_check"] = True


def _mark_live_reads(ctx) -> None:
    """While an AOT backend traces the backward (functional tensors), give each tensor kept as a ctx
    attribute (or in a list, tuple or dict there) to the user's backward through an annotated alias
    (see the module's docstring)."""
    names = getattr(ctx, "ember_live", ())
    if not names or getattr(torch.fx.traceback, "annotate", None) is None:
        return
    for name in names:
        setattr(ctx, name, _live_alias(getattr(ctx, name)))
