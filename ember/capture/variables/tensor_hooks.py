"""``t.register_hook(hook)`` (and ``register_post_accumulate_grad_hook``) inside a compiled frame.

A tensor hook does nothing in the forward pass: it changes what the backward pass computes for the
gradient of ``t``. Two cases, by where ``t`` comes from:

- ``t`` is an input of the frame (an argument, a parameter, a global): the registration is replayed
  after the graph, on the real tensor, with the real hook (the function itself, or the lambda or
  ``functools.partial`` the frame made, rebuilt). The hook then runs at backward time exactly as in
  eager — whatever it does — and the handle the frame gets is the real ``RemovableHandle`` (returned,
  stored, or removed in the frame: registered and removed at once, so the handle exists and no hook
  stays). Hooks of one frame are registered in program order.

- ``t`` is computed by the graph: there is no real tensor until the graph runs, and a backend that
  compiles forward and backward together (AOT) has no ``t`` of its own at all. The hook is traced
  now, on a gradient shaped like ``t``, into a subgraph of pure tensor operations (anything else —
  side effects, data-dependent Python — breaks the graph as before), and the frame's graph gets a
  node ``register_traced_hook(t, body, *tensors_it_reads)`` right where the frame registered it. Run
  as it is, that node registers the subgraph on the real ``t``; traced by the AOT layer, it registers
  it on the traced ``t``, so the joint backward includes it. The gradient the hook sees is ``t``'s
  whole gradient, from its uses before and after the registration, as in eager. The handle of such
  a hook cannot be removed or leave the frame (a graph break there).
"""
from __future__ import annotations

import torch
import torch.fx

from ember.capture.variables.base import is_none, ConstantVariable, VariableTracker, unsupported
from ember.fake.snapshot import version_of

_METHODS = ("register_hook", "register_post_accumulate_grad_hook")


class TensorHookHandleVariable(VariableTracker):
    """The ``RemovableHandle`` of a hook the frame registered on an input tensor. Built once after
    the graph by registering the hook (see module docstring); ``remove()`` in the frame is recorded."""

    rebuilt_once = True  # one handle object, however many times the frame refers to it

    def __init__(self, tensor, hook, method: str, effects, version: int):
        self.tensor = tensor
        self.hook = hook
        self.method = method
        self.effects = effects
        self.version = version  # the tensor's version when registered (see reconstruct)

    def python_type(self):
        return torch.utils.hooks.RemovableHandle

    def describe(self):
        return f"RemovableHandle of {self.method}"

    def truth(self, tx):
        return True

    def call_method(self, tx, name, args, kwargs):
        if name == "remove" and not args and not kwargs:
            self.effects.removed_hooks.add(id(self))
            return ConstantVariable(None)
        if name in ("__enter__", "__exit__"):
            raise unsupported("EB0024", "a hook handle used as a context manager")
        raise unsupported("EB0031", f"RemovableHandle.{name}")

    def getattr(self, tx, name):
        from ember.capture.variables.functions import BoundMethodVariable
        if name == "remove":
            return BoundMethodVariable(self, name)
        return super().getattr(tx, name)

    def reconstruct(self, plan) -> str:
        from ember.capture.sources import bind
        if version_of(self.tensor.fake) != self.version:
            # changed in place after the registration: eager's hook stays on the tensor's old
            # autograd node; a registration after the graph would land on the new one
            e = unsupported("EB0024", f"{self.method} on an input the frame then changes in place")
            e.whole_frame = True
            raise e
        removed = id(self) in self.effects.removed_hooks
        return (f"{bind(plan.scope, _register, 'register_hook')}({plan.expr(self.tensor)}, "
                f"{plan.expr(self.hook)}, {self.method!r}, {removed})")


def _register(tensor, hook, method, removed):
    handle = getattr(tensor, method)(hook)
    if removed:
        handle.remove()
    return handle


class TracedHookHandleVariable(VariableTracker):
    """The handle of a hook on a tensor the graph computes (registered inside the graph)."""

    def python_type(self):
        return torch.utils.hooks.RemovableHandle

    def describe(self):
        return "RemovableHandle of a hook on a tensor computed in the graph"

    def truth(self, tx):
        return True


def register_traced_hook(tensor, body, *reads):
    """Graph node: register the traced hook ``body(grad, *reads)`` on ``tensor`` (see module docstring)."""
    def hook(grad):
        out = body(grad, *reads)
        return out[0] if out else None
    tensor.register_hook(hook)


torch.fx.node._side_effectful_functions.add(register_traced_hook)  # (kept by dead-code elimination)


def register_tensor_hook(tx, tensor, method: str, args: list, kwargs: dict) -> VariableTracker:
    """``tensor.<method>(hook)`` in the frame (see module docstring)."""
    if kwargs or len(args) != 1:
        raise unsupported("EB0024", f"Tensor.{method} with unexpected arguments")
    hook = args[0]
    fake = tensor.fake
    if not fake.requires_grad:
        raise unsupported("EB0024", f"Tensor.{method} on a tensor that does not require grad (eager raises)")
    if tensor.source is not None and tensor.node.op == "placeholder":
        if method == "register_post_accumulate_grad_hook" and not fake.is_leaf:
            raise unsupported("EB0024", f"{method} on a tensor that is not a leaf (eager raises)")
        handle = TensorHookHandleVariable(tensor, hook, method, tx.side_effects, version_of(fake))
        tx.side_effects.hooks.append(handle)
        return handle
    if method != "register_hook":
        raise unsupported("EB0024", f"{method} on a tensor computed in the graph")
    _trace_hook_into_graph(tx, tensor, hook)
    return TracedHookHandleVariable()


def _trace_hook_into_graph(tx, tensor, hook) -> None:
    from ember.capture.speculation import Checkpoint
    from ember.capture.subgraph import GradDisabled, Region, extract
    from ember.capture.variables.tensor import TensorVariable
    from ember.exc import PythonException, Unsupported
    output = tx.output
    fake = tensor.fake
    with Checkpoint(tx) as cp:
        try:
            grad = output.call_function(torch.empty_like, [tensor], {})
            region = Region(tx, [grad])
            with GradDisabled():  # (the engine runs hooks with grad mode off)
                try:
                    out = hook.call(tx, [grad], {})
                except PythonException as e:
                    raise unsupported("EB0024", f"a tensor hook raised {type(e.exc).__name__} while tracing it") from None
            region.check_pure("a tensor hook")
            if is_none(out):
                outputs = []
            elif isinstance(out, TensorVariable):
                g = out.fake
                if g.shape != fake.shape or g.dtype != fake.dtype or g.device != fake.device:
                    raise unsupported("EB0024", "a tensor hook returning a gradient of another shape or dtype")
                outputs = [out.node]
            else:
                raise unsupported("EB0024", f"a tensor hook returning {out.describe()}")
            body = region.nodes()
            extras = region.external_inputs(body, {grad.node}, outputs, symbols=True)
            gm = extract(body, [grad.node, *extras], outputs, output.submodules)
            region.erase()
            if grad.node.users:
                raise unsupported("EB0024", "a tensor hook whose gradient escapes it")
            output.graph.erase_node(grad.node)
        except Unsupported as e:
            cp.restore()
            if tensor.node.users:
                # A break here would register the hook on the graph's *output* for ``tensor``: a
                # backend that compiles forward and backward together keeps the uses the graph
                # already made of it inside, and their gradient would never reach the hook (a
                # wrong gradient, not an error). The frame runs eagerly instead.
                e.whole_frame = True
            raise
    attr = output.add_submodule(gm, "hook_body")
    node = output.graph.call_function(register_traced_hook, (tensor.node, attr, *extras))
    node.meta["example_value"] = None
    if output.current_location:
        node.meta["stack_trace"] = output.stack_trace()
