"""A traced ``MyFunction.apply`` inside the function of a ``torch.func`` transform (``grad``,
``vjp``, ``jacrev``, ``vmap``; see functorch_calls.py).

There the transform, run for real when the graph runs (``FunctorchCall``), must see the user's own
Function: functorch requires the ``setup_context`` form, and calls ``forward``, ``setup_context``,
``backward`` (or the vmap rule ``generate_vmap_rule`` makes) at its own levels. So the body graph
calls ``MyFunction.apply`` itself, as eager does, rather than the Function ember generates
(autograd_function.py). The call is still traced first: forward for its outputs, its purity and
its guards, backward on stand-in gradients (and ``jvp`` on stand-in tangents under forward mode:
jvp, jacfwd, hessian) for the guards they need; what functorch would refuse or what would run
untraced (a hand-written ``vmap`` rule) stays a break, so the call runs eagerly.

    def f(x, w):
        return torch.func.grad(lambda a: Scale.apply(a, w).sum())(x)    # one graph
"""
from __future__ import annotations

import torch

from ember.capture.variables.base import ConstantVariable, unsupported
from ember.capture.variables.tensor import TensorVariable


def apply_in_transform(tx, cls_vt, fn_cls, backward_fn, ctx, args, out_items, body, region,
                       dirty_args, uses_setup_context):
    """The node calling ``fn_cls.apply(*args)`` that replaces the traced forward in the
    transform's body (whose nodes go)."""
    names = list(tx.trace.transform_names)
    what = f"{fn_cls.__qualname__} under {names[-1] if names else 'a torch.func transform'}"
    if not uses_setup_context:
        raise unsupported("EB0048", f"{what} without setup_context (eager raises)")
    forward_mode = any("forward mode" in n or n.endswith("hessian") for n in names)
    if _forward_ad_level() != -1 or forward_mode and not _defines(fn_cls, "jvp"):
        raise unsupported("EB0048", f"{what} (forward-mode AD)")
    if any(n.endswith(("vmap", "jacfwd", "hessian")) for n in names) and not getattr(fn_cls, "generate_vmap_rule", False):
        raise unsupported("EB0048", f"{what}: its own vmap rule (or none) under vmap")
    if dirty_args:
        raise unsupported("EB0047", f"{what}: ctx.mark_dirty")
    if not all(isinstance(o, TensorVariable) for o in out_items):
        raise unsupported("EB0048", f"{what}: forward returns values that are not tensors")
    if not all(isinstance(a, TensorVariable) or a.is_constant() for a in args):
        raise unsupported("EB0048", f"{what}: arguments that are neither tensors nor constants")
    tensor_args = [a for a in args if isinstance(a, TensorVariable)]
    if region.external_inputs(body, {a.node for a in tensor_args}, symbols=True):
        raise unsupported("EB0048", f"{what}: forward reads tensors from outside the Function")
    if torch.is_grad_enabled() and any(ctx.needs_input_grad):
        from ember.capture.variables.autograd_backward import check_backward
        check_backward(tx, cls_vt, fn_cls, backward_fn, ctx, out_items, args, forward_nodes=set(body))
    if forward_mode:
        _check_jvp(tx, cls_vt, fn_cls, ctx, args)
    region.erase()  # (the user's forward runs again inside apply)
    call_args = [a if isinstance(a, TensorVariable) else ConstantVariable(a.as_constant()) for a in args]
    return tx.output.call_function(_user_apply(fn_cls), call_args, {})


def _check_jvp(tx, cls_vt, fn_cls, ctx, args) -> None:
    """The user's ``jvp`` inlined once on stand-in tangents, for its guards (it runs for real inside
    the transform), then dropped: it may read only ctx and its tangents, and change nothing."""
    import copy
    from ember.capture.speculation import Checkpoint
    from ember.capture.subgraph import GradDisabled, Region
    from ember.capture.variables.autograd_backward import _check_backward_reads
    from ember.exc import PythonException, Unsupported
    jctx = copy.copy(ctx)
    jctx.attrs = dict(ctx.attrs)
    if ctx.saved_forward is not None:
        jctx.saved = list(ctx.saved_forward)
    inputs_before = len(tx.output.placeholders)
    cp = Checkpoint(tx)
    region = Region(tx, [])
    try:
        try:
            with GradDisabled():
                tangents = [tx.output.call_function(torch.zeros_like, [a], {}) if isinstance(a, TensorVariable)
                            else ConstantVariable(None) for a in args]
                tx.getattr(cls_vt, "jvp").call(tx, [jctx, *tangents], {})
        except PythonException as e:
            raise unsupported("EB0048", f"{fn_cls.__qualname__}.jvp raised {type(e.exc).__name__} "
                              "while tracing") from None
        region.check_pure(f"{fn_cls.__qualname__}.jvp")
        _check_backward_reads(fn_cls, region, jctx, tangents)
    except Unsupported:
        cp.restore()
        raise
    if not cp.restore() or len(tx.output.placeholders) != inputs_before:
        raise unsupported("EB0048", f"{fn_cls.__qualname__}.jvp reads tensors from outside the Function")


def _defines(fn_cls, name: str) -> bool:
    """Whether the user's Function class (not torch's base) defines ``name``."""
    return any(name in vars(k) for k in fn_cls.__mro__
               if k not in (torch.autograd.Function, *torch.autograd.Function.__mro__))


_APPLIES: dict = {}


def _user_apply(fn_cls):
    """``fn_cls.apply`` as a plain function fx names by itself (one per class)."""
    apply = _APPLIES.get(fn_cls)
    if apply is None:
        def apply(*args):
            return fn_cls.apply(*args)
        apply.__name__ = apply.__qualname__ = f"{fn_cls.__name__.lower()}_apply"
        apply.__module__ = __name__
        _APPLIES[fn_cls] = apply
    return apply


def _forward_ad_level() -> int:
    import torch.autograd.forward_ad as forward_ad
    return forward_ad._current_level
