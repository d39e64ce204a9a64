"""The opaque calls of a compiled-autograd graph, as custom ops.

A compiled-autograd graph calls things that only exist at run time: the autograd Nodes of this
backward (a C++ formula, a user's ``autograd.Function.backward``) and tensor hooks. They are
``torch.library`` custom ops so that every backend keeps them as calls: ``make_fx`` (ember's AOT
backends) records them as one node, Inductor runs them as fallback kernels. Each call carries an
integer *spec id*; the spec says which Node of the current backward (by its position in the
engine order) to call, which of its outputs are defined, and their metadata (for the fake
implementation, and to give back exactly the layout the graph was compiled for).

The Nodes themselves are not graph inputs (they are not tensors): the runtime pushes them in a
``RunContext`` before calling the compiled graph (``running``), the ops read it.
"""
from __future__ import annotations

import contextlib
import threading
from dataclasses import dataclass
from typing import Any, Callable

import torch


@dataclass
class TensorMeta:
    shape: tuple
    stride: tuple
    dtype: torch.dtype
    device: torch.device

    @staticmethod
    def of(t: torch.Tensor) -> "TensorMeta":
        return TensorMeta(tuple(t.shape), tuple(t.stride()), t.dtype, t.device)

    def empty(self) -> torch.Tensor:
        return torch.empty_strided(self.shape, self.stride, dtype=self.dtype, device=self.device)


@dataclass
class NodeCallSpec:
    """One opaque Node call: ``run(node, grads) -> list of gradients (None where undefined)``."""
    position: int                 # index of the Node in RunContext.nodes
    run: Callable[[Any, list], list]
    defined: tuple                # which outputs were defined when traced
    outs: list                    # TensorMeta per defined output


@dataclass
class HookCallSpec:
    """One tensor hook (``register_hook``) call: the hook is ``RunContext.hooks[position]``."""
    position: int
    out: TensorMeta


_SPECS: list = []
_SPECS_LOCK = threading.Lock()


def add_spec(spec) -> int:
    with _SPECS_LOCK:
        _SPECS.append(spec)
        return len(_SPECS) - 1


class RunContext:
    """What the ops of one compiled-autograd call reach: the Nodes and hooks of this backward."""
    __slots__ = ("nodes", "hooks")

    def __init__(self, nodes: list, hooks: list):
        self.nodes = nodes
        self.hooks = hooks


_local = threading.local()


@contextlib.contextmanager
def running(ctx: RunContext):
    stack = getattr(_local, "stack", None)
    if stack is None:
        stack = _local.stack = []
    stack.append(ctx)
    try:
        yield
    finally:
        stack.pop()


def _current() -> RunContext:
    return _local.stack[-1]


def _dense(t: torch.Tensor) -> bool:
    """No element stored twice (an expanded gradient is not: it cannot be copied into). Cheap:
    runs for every output of every opaque call."""
    if t.is_contiguous():
        return True
    return all(st != 0 or sz <= 1 for sz, st in zip(t.shape, t.stride()))


def normalize(t: torch.Tensor, taken: list) -> torch.Tensor:
    """``t``, or a contiguous copy of it: a custom op's outputs must not alias its inputs or each
    other, and must not be expanded (the graph is compiled for a plain layout)."""
    if not _dense(t) or (t.numel() and any(o is not None and o.untyped_storage().data_ptr() ==
                                           t.untyped_storage().data_ptr() for o in taken)):
        return t.clone(memory_format=torch.contiguous_format)
    return t


def _fresh(t: torch.Tensor, meta: TensorMeta, taken: list) -> torch.Tensor:
    """``normalize``, with exactly the layout the graph was compiled for."""
    t = normalize(t, taken)
    if tuple(t.stride()) != meta.stride or t.dtype != meta.dtype:
        out = meta.empty()
        out.copy_(t)
        return out
    return t


_lib = torch.library.Library("ember_autograd", "DEF")
_lib.define("call_node(int spec_id, Tensor?[] grads) -> Tensor[]")
_lib.define("call_hook(int spec_id, Tensor grad) -> Tensor")


def call_node(spec_id: int, grads: list) -> list:
    spec: NodeCallSpec = _SPECS[spec_id]
    node = _current().nodes[spec.position]
    outs = spec.run(node, list(grads))  # (the runtime runs the graph under no_grad)
    taken = [g for g in grads if g is not None]
    result = []
    metas = iter(spec.outs)
    for was_defined, o in zip(spec.defined, outs):
        if was_defined != (o is not None):
            raise RuntimeError(
                f"ember compiled autograd: {node.name()} returned "
                f"{'no gradient' if o is None else 'a gradient'} where it did not when the backward was "
                "traced (a backward whose defined outputs depend on the data); run this backward without "
                "compiled autograd")
        if o is not None:
            o = _fresh(o, next(metas), taken)
            taken.append(o)
            result.append(o)
    return result


def call_hook(spec_id: int, grad: torch.Tensor) -> torch.Tensor:
    spec: HookCallSpec = _SPECS[spec_id]
    hook = _current().hooks[spec.position]
    out = run_tensor_hook(hook, grad)
    return _fresh(out, spec.out, [grad])


@dataclass
class AccumulateSpec:
    """An ``AccumulateGrad`` of a leaf with post-accumulate-grad hooks: ``RunContext.nodes[position]``."""
    position: int


_lib.define("accumulate_grad(int spec_id, Tensor grad) -> Tensor")


def empty_like_leaf(var: torch.Tensor, g: torch.Tensor) -> torch.Tensor:
    """An uninitialised gradient for leaf ``var`` with eager's layout (the leaf's strides when it is
    non-overlapping and dense, else contiguous)."""
    from torch._prims_common import is_non_overlapping_and_dense_or_false
    if var.is_contiguous() or is_non_overlapping_and_dense_or_false(var):
        return torch.empty_strided(var.shape, var.stride(), dtype=g.dtype, device=g.device)
    return torch.empty(var.shape, dtype=g.dtype, device=g.device)


def accumulate_into(var: torch.Tensor, grad: torch.Tensor) -> None:
    """AccumulateGrad inside the graph, for a leaf whose post-accumulate hooks must run right
    after its accumulation (eager's order): a copy (the graph may reuse ``grad``'s memory) or an
    in-place add, then the hooks."""
    with torch.no_grad():
        if var.grad is None:
            new = empty_like_leaf(var, grad)
            new.copy_(grad)
            var.grad = new
        else:
            var.grad.add_(grad)
    for hook in list(var._post_accumulate_grad_hooks.values()):
        hook(var)


def accumulate_grad(spec_id: int, grad: torch.Tensor) -> torch.Tensor:
    spec: AccumulateSpec = _SPECS[spec_id]
    accumulate_into(_current().nodes[spec.position].variable, grad)
    return grad.new_empty(0)  # (an output keeps the call in the graph)


_lib.impl("accumulate_grad", accumulate_grad, "CompositeExplicitAutograd")


@torch.library.register_fake("ember_autograd::accumulate_grad")
def _accumulate_grad_fake(spec_id, grad):
    return grad.new_empty(0)


_lib.impl("call_node", call_node, "CompositeExplicitAutograd")
_lib.impl("call_hook", call_hook, "CompositeExplicitAutograd")


@torch.library.register_fake("ember_autograd::call_node")
def _call_node_fake(spec_id, grads):
    return [m.empty() for m in _SPECS[spec_id].outs]


@torch.library.register_fake("ember_autograd::call_hook")
def _call_hook_fake(spec_id, grad):
    return _SPECS[spec_id].out.empty()


def run_tensor_hook(hook, grad: torch.Tensor) -> torch.Tensor:
    """A ``register_hook`` hook as the engine calls it: ``None`` keeps the gradient."""
    with torch.no_grad():
        out = hook(grad)
    if out is None:
        return grad
    if not isinstance(out, torch.Tensor):
        raise TypeError(f"expected a Tensor or None from the hook, got {type(out).__name__}")
    if out.shape != grad.shape:
        raise RuntimeError(f"hook '{getattr(hook, '__name__', hook)}' has changed the size of value")
    return out
