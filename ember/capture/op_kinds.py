"""What kind of call a traced op is, read off its target (capture's OutputGraph decides from these
whether a call goes into the graph, runs at trace time, or breaks the graph)."""
from __future__ import annotations

import torch

from ember.capture.variables.containers import ListVariable, TupleVariable
from ember.capture.variables.tensor import TensorVariable

_TENSOR_OP_MODULES = frozenset({"torch", "torch._C._VariableFunctions", "torch._C._nn", "torch._C._linalg",
                                "torch._C._fft", "torch._C._special", "torch._C._nested", "torch._C._sparse",
                                "torch.functional", "torch.nn.functional", "torch._refs"})
_QUERY_PREFIXES = ("get", "is", "are", "has", "query", "can_", "promote_types", "result_type")
_QUERY_SUFFIXES = ("_enabled", "_available", "_count", "count", "_supported", "_version")


def _is_tensor_op(target) -> bool:
    """An aten operator or its binding in torch's namespaces (factories, functionals)."""
    if isinstance(target, (torch._ops.OpOverload, torch._ops.OpOverloadPacket)):
        return True
    if getattr(target, "ember_tensor_op", False):  # a NumPy call through torch._numpy (np.zeros(3))
        return True
    module = getattr(target, "__module__", None) or ""
    if module in _TENSOR_OP_MODULES:
        return True
    name = getattr(target, "__name__", None)
    return name is not None and getattr(torch._C._VariableFunctions, name, None) is target


def _binds_torch_runtime(target) -> bool:
    """A binding in ``torch._C``: it acts on process state whether its arguments are ints or SymInts
    (run at trace time, ``_functorch._vmap_increment_nesting(s0)`` pushed a vmap level nothing popped)."""
    module = getattr(target, "__module__", None) or ""
    return module == "torch._C" or module.startswith("torch._C.")


def _reads_state_only(target) -> bool:
    """A query by its name (``_is_tracing``, ``_cuda_getDeviceCount``, ``_get_cudnn_enabled``)."""
    name = (getattr(target, "__name__", "") or "").lstrip("_")
    low = name.lower()
    return (low.startswith(_QUERY_PREFIXES) or "_get" in low or "get_" in low or "_is_" in low
            or "getdevice" in low or low.endswith(_QUERY_SUFFIXES))


_GUARDABLE = (bool, int, float, str, bytes, type(None), torch.dtype, torch.device, torch.layout,
              torch.memory_format)


def _guardable_answer(value) -> bool:
    if isinstance(value, (tuple, list, frozenset)):
        return all(_guardable_answer(v) for v in value)
    return type(value) in _GUARDABLE


_INDEX_WRITES = frozenset({"setitem", "__setitem__", "index_put", "index_put_", "_index_put_impl_"})


def _mask_write_needs_grad(kind, target, args, kwargs) -> bool:
    """``t[mask] = v`` / ``t.index_put_((mask,), v)`` with a boolean (or uint8) index tensor,
    grad mode on and ``v`` requiring grad: ``v``'s grad is ``grad[mask]``, a data-dependent shape.
    ``t`` alone requiring grad is fine (``t``'s grad is ``grad`` with zeros written through the
    mask, a fixed shape): ``y[y < 0] = 0.0`` stays in the graph."""
    name = target if isinstance(target, str) else getattr(target, "__name__", "")
    if name not in _INDEX_WRITES or not torch.is_grad_enabled() or len(args) < 2:
        return False
    index = args[1]
    parts = index.items if isinstance(index, (TupleVariable, ListVariable)) else \
        list(index) if isinstance(index, (tuple, list)) else [index]
    if not any(isinstance(p, TensorVariable) and p.fake.dtype in (torch.bool, torch.uint8) for p in parts):
        return False
    values = list(args[2:]) + list(kwargs.values())
    return any(isinstance(v, TensorVariable) and v.fake.requires_grad for v in values)


def _may_mutate(kind, target, result) -> bool:
    """Ops that must stay in the graph even when they return no tensor."""
    if result is None:
        return True
    name = target if isinstance(target, str) else getattr(target, "__name__", "")
    return name.endswith("_") and not name.endswith("__") or name in ("setitem", "__setitem__")
