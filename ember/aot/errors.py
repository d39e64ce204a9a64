"""Errors of the AOT layer, and the interpreter that locates them in the user's graph."""
from __future__ import annotations

import torch
import torch.fx

from ember.exc import BackendCompilerFailed


class AOTCompileError(BackendCompilerFailed):
    """The AOT layer cannot compile this graph (it cannot be functionalized or traced).

    Names the op and, when the graph recorded it, the user's source line::

        ember.aot: cannot trace aten.nonzero.default (data-dependent output shape)
          in node 'nonzero' = torch.nonzero(x)
          File "model.py", line 12, in forward
            idx = torch.nonzero(x)
    """

    def __init__(self, reason: str, *, node: torch.fx.Node | None = None, op: str | None = None):
        self.reason = reason
        self.node_name = node.name if node is not None else None
        self.op = op
        self.stack_trace = node.meta.get("stack_trace") if node is not None else None
        msg = f"ember.aot: {reason}"
        if node is not None:
            msg += f"\n  in node {node.name!r} = {_describe_target(node)}"
            if self.stack_trace:
                msg += "\n" + "\n".join("  " + line for line in self.stack_trace.rstrip().splitlines()[-4:])
        super().__init__(msg)


class EagerBackwardFails(AOTCompileError):
    """Eager's autograd rejects this program's backward: a tensor an op saved for it was changed
    in place afterwards ("modified by an inplace operation"). A functional graph would compute a
    gradient eager never gives, so the captured graph runs as it is (eager ops, eager autograd:
    the forward runs, and the backward raises eager's error where eager raises it)."""


MODIFIED_INPLACE = "modified by an inplace operation"

# autograd's other refusals of in-place writes to views (of a custom Function's multiple outputs,
# of a view made in no_grad mode...): eager raises them too, where the program writes
_VIEW_INPLACE_REFUSALS = (
    "has been modified inplace. This view is the output of a function that returns multiple views",
    "is a view and is being modified inplace",
    "is a view and its base or another view of its base has been modified inplace",
    # (a view made under no_grad whose base the graph wrote in place: its metadata cannot be read
    # in grad mode; the graph run as it is makes and writes them as the program does)
    "view was created in no_grad mode and its base or another view of its base has been modified",
)


def eager_autograd_refusal(e: BaseException) -> bool:
    """Whether ``e`` (or what it wraps) is one of autograd's own refusals, which eager raises on
    this program as well: an in-place write it cannot allow, or an op without a derivative
    (``x.scatter(0, i, s, reduce="add")``: eager's backward raises "derivative for aten::scatter is
    not implemented"). The captured graph then runs as it is (see EagerBackwardFails): its forward
    as eager's, its backward raising where eager's raises."""
    seen = 0
    while e is not None and seen < 8:
        text = str(e)
        if isinstance(e, RuntimeError) and not isinstance(e, AOTCompileError) and (
                MODIFIED_INPLACE in text or any(m in text for m in _VIEW_INPLACE_REFUSALS)
                or ("derivative for" in text and "not implemented" in text)):
            return True
        e, seen = e.__cause__, seen + 1
    return False


class UnsupportedAliasedMutation(AOTCompileError):
    """Inputs alias each other in a way synthetic bases cannot express (see ``ember.aot.aliasing``)."""


def _describe_target(node: torch.fx.Node) -> str:
    t = node.target
    if isinstance(t, (torch._ops.OpOverload, torch._ops.OpOverloadPacket)):
        return f"{t}(...)"
    if node.op == "call_method":
        return f"Tensor.{t}(...)"
    if node.op == "call_module":
        return f"self.{t}(...)"
    name = getattr(t, "__qualname__", None) or getattr(t, "__name__", None) or str(t)
    mod = getattr(t, "__module__", None)
    if mod and mod not in ("builtins", "_operator") and not str(name).startswith(mod):
        name = f"{mod}.{name}"
    return f"{name}(...)"


def _failing_op(exc: BaseException) -> str | None:
    """Best effort: the aten op named by fake-tensor / functionalization exceptions."""
    func = getattr(exc, "func", None)
    if func is not None:
        return str(func)
    text = str(exc)
    for word in text.replace("(", " ").replace(",", " ").split():
        if word.startswith("aten.") or word.startswith("aten::"):
            return word.rstrip(".:")
    return None


_ENTER_INFERENCE = torch.autograd.grad_mode._enter_inference_mode
_EXIT_INFERENCE = torch.autograd.grad_mode._exit_inference_mode


class _InferenceRegion:
    """What a traced ``_enter_inference_mode`` returns: the grad mode to restore at its exit."""
    __slots__ = ("grad_enabled",)

    def __init__(self, grad_enabled: bool):
        self.grad_enabled = grad_enabled


class LocatingInterpreter(torch.fx.Interpreter):
    """Runs a GraphModule node by node; an exception names the node and its source line.

    Used for every tracing run of the user's graph (metadata collection and joint
    tracing). With ``torch.fx.traceback.preserve_node_meta()`` active, the nodes
    ``make_fx`` records inherit each user node's ``stack_trace``.
    """

    def __init__(self, gm: torch.fx.GraphModule):
        super().__init__(gm, garbage_collect_values=True)
        self.extra_traceback = False  # our error already names the node
        from ember.aot.data_writes import DataWrites
        self.data_writes = DataWrites()  # writes through Tensor.data: hidden from autograd

    def call_function(self, target, args, kwargs):
        # An inference_mode region traces as the grad mode it sets (inference_mode(True): grad off,
        # (False): on): functionalizing a write inside real inference mode fails ("Cannot set
        # version_counter for inference tensor", a KV cache written in a compiled decode step), and
        # the traced graph has no mode of its own anyway (see ember.aot.grad_mode for its results).
        if target is _ENTER_INFERENCE:
            previous = torch.is_grad_enabled()
            torch._C._set_grad_enabled(not args[0])
            return _InferenceRegion(previous)
        if target is _EXIT_INFERENCE and isinstance(args[0], _InferenceRegion):
            torch._C._set_grad_enabled(args[0].grad_enabled)
            return None
        return super().call_function(target, args, kwargs)

    def run_node(self, n: torch.fx.Node):
        try:
            result = super().run_node(n)
            self.data_writes.after(n, self.env, result)
            return result
        except AOTCompileError:
            raise
        except Exception as e:  # noqa: BLE001 — re-raised with the location
            op = _failing_op(e)
            if op is None and isinstance(n.target, (torch._ops.OpOverload, torch._ops.OpOverloadPacket)):
                op = str(n.target)
            reason = f"cannot trace {op or _describe_target(n)}: {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
            raise AOTCompileError(reason, node=n, op=op) from e
