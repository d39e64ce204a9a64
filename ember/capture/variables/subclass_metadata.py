"""Metadata of a tensor subclass whose own ``__torch_function__`` may answer for it.

The trace reads a tensor's metadata (``t.ndim``, ``t.shape``, ``t.dim()``, ``t.size(1)``) from its
fake tensor and folds it into the graph as a constant. In eager, on a subclass that overrides
``__torch_function__``, the read goes through the override, which may answer something else
(``if func == Tensor.ndim.__get__: return 10``): the constant would be a wrong answer. Ops are
not affected (the graph calls them on the real subclass tensors, where the override runs).

So such a read is checked: the override is asked the same question on a stand-in of the same
class (the real input tensor, or a meta tensor with the fake's metadata) and compared with the
plain answer on that stand-in. Equal (a pass-through override): the fake's value stands.
Different, or the override fails on the stand-in: a graph break.
"""
from __future__ import annotations

import torch

from ember.capture.variables.base import unsupported


def overrides_torch_function(cls: type) -> bool:
    """A tensor subclass with its own ``__torch_function__`` (not torch's default, not disabled)."""
    if cls is torch.Tensor or cls is torch.nn.Parameter:
        return False
    tf = getattr(cls, "__torch_function__", None)
    if tf is None or tf is torch._C._disabled_torch_function_impl:
        return False
    return getattr(tf, "__func__", None) is not torch.Tensor.__torch_function__.__func__


def _stand_in(vt):
    real = getattr(vt, "real", None)
    if real is not None and type(real) is vt.cls:
        return real
    fake = vt.fake
    sizes, strides = [], []
    for s in (*fake.shape, *fake.stride()):
        if not isinstance(s, int):
            hint = getattr(getattr(s, "node", None), "hint", None)
            if hint is None:
                return None
            s = int(hint)
        (sizes if len(sizes) < fake.dim() else strides).append(s)
    with torch._C.DisableTorchFunctionSubclass():
        t = torch.empty_strided(sizes, strides, dtype=fake.dtype, device="meta")
        if fake.requires_grad and (fake.dtype.is_floating_point or fake.dtype.is_complex):
            t.requires_grad_(True)
        return t.as_subclass(vt.cls)


def _same(a, b) -> bool:
    if type(a) is not type(b):
        return False
    if isinstance(a, torch.Tensor):
        return False  # (a tensor answer is not metadata: not expected here)
    try:
        return bool(a == b)
    except Exception:  # noqa: BLE001 — an answer that cannot be compared: not the same
        return False


def check_certain(vt, label: str) -> None:
    """Break on ``label``, a read of the metadata of ``vt``, when ``vt`` is the result of an op that
    a subclass's ``__torch_function__`` (or ``__torch_dispatch__``) answered: what it returned at
    run time (its shape, dtype, length) is not what the fake tensor shows."""
    if getattr(vt, "cls_uncertain", False):
        raise unsupported("EB0031", f"{label} of a tensor computed through {vt.cls.__name__}'s "
                          "__torch_function__ or __torch_dispatch__ (what it returned is decided at run time)")


def check_metadata_read(vt, func, rest=(), kwargs=None, what: str = "") -> None:
    """``func(t, *rest, **kwargs)`` with ``t`` the tensor of tracker ``vt`` (``func`` as torch hands
    it to ``__torch_function__``: ``Tensor.ndim.__get__``, ``Tensor.dim``, ``torch.numel``): break
    unless the class's override answers as the plain function does."""
    cls = vt.cls
    label = what or getattr(func, "__name__", str(func))
    check_certain(vt, label)
    if not overrides_torch_function(cls):
        return
    from ember.capture.variables.override_purity import check_pure_override
    check_pure_override([vt], label)  # (the probe below runs the override at trace time)
    probe = _stand_in(vt)
    if probe is None:
        raise unsupported("EB0031", f"{label} of a {cls.__name__} tensor (its __torch_function__ "
                          "may answer for it; sizes unknown at trace time)")
    kwargs = kwargs or {}
    try:
        got = cls.__torch_function__(func, (cls,), (probe, *rest), kwargs)
        with torch._C.DisableTorchFunctionSubclass():
            plain = func(probe, *rest, **kwargs)
    except Exception as e:  # noqa: BLE001 — the override does not take the stand-in: not traced
        raise unsupported("EB0031", f"{label} of a {cls.__name__} tensor: its __torch_function__ "
                          f"could not be checked ({type(e).__name__})") from None
    if not _same(got, plain):
        raise unsupported("EB0031", f"{label} of a {cls.__name__} tensor: its __torch_function__ "
                          "answers for it")


def check_metadata_call(kind: str, target, args, kwargs) -> None:
    """A graph call (``t.dim()``, ``t.size(1)``, ``torch.numel(t)``) whose answer is metadata folded
    to a constant: checked as above when a tensor argument's class overrides ``__torch_function__``
    (the tensor first, the other arguments constants; otherwise a break)."""
    from ember.capture.variables.tensor import TensorVariable
    flat = [*args, *kwargs.values()]
    for a in flat:
        check_certain(a, f"{getattr(target, '__name__', target)}()")
    if not any(isinstance(a, TensorVariable) and overrides_torch_function(a.cls) for a in flat):
        return
    func = getattr(torch.Tensor, target, None) if kind == "call_method" else target
    rest = args[1:]
    if func is None or not args or not isinstance(args[0], TensorVariable) \
            or not all(a.is_constant() for a in [*rest, *kwargs.values()]):
        raise unsupported("EB0031", f"{getattr(func, '__name__', target)} of tensor subclasses whose "
                          "__torch_function__ may answer for it")
    check_metadata_read(args[0], func, tuple(a.as_constant() for a in rest),
                        {k: v.as_constant() for k, v in kwargs.items()})


def as_plain_tensor(t):
    """``t.as_subclass(torch.Tensor)`` as a graph call (fx cannot write a class argument into the
    graph's code). The tensors a tracing pass hands it (fake, functional: torch's own classes) get
    the alias the op makes; a subclass tensor at run time, eager's op (no ``__torch_function__``)."""
    if type(t).__module__.split(".")[0] == "torch":
        return torch.ops.aten.alias.default(t)
    return torch.Tensor.as_subclass(t, torch.Tensor)


def as_subclass_call(tx, vt, args, kwargs):
    """``t.as_subclass(torch.Tensor)``: a plain tensor aliasing ``t`` (the op does not go through
    ``__torch_function__``: its class is certain). Of a subclass with its own ``__torch_dispatch__``:
    a break."""
    if kwargs or vt.python_type().__torch_dispatch__ is not torch.Tensor.__torch_dispatch__:
        raise unsupported("EB0033", "Tensor.as_subclass(torch.Tensor) of a tensor subclass with its own "
                          "__torch_dispatch__")
    out = tx.output.call_function(as_plain_tensor, [vt], {})
    out.cls, out.cls_uncertain = torch.Tensor, False
    return out


HAS_TORCH_FUNCTION = frozenset({torch._C._has_torch_function, torch._C._has_torch_function_unary,
                                 torch._C._has_torch_function_variadic})


def _has_torch_function(vt) -> bool:
    """Whether eager's ``has_torch_function`` counts the value of tracker ``vt``: not a plain
    Tensor or Parameter, with a ``__torch_function__`` that is not the disabled one."""
    from ember.capture.variables.tensor import TensorVariable
    cls = vt.python_type()  # (an op result whose class only the run decides: a break)
    if isinstance(vt, TensorVariable) and cls in (torch.Tensor, torch.nn.Parameter):
        return False
    tf = getattr(cls, "__torch_function__", None)
    return tf is not None and tf is not torch._C._disabled_torch_function_impl


def has_torch_function_call(tx, fn, args, kwargs):
    """``torch.overrides.has_torch_function((a, b))`` (and its ``_unary`` / ``_variadic`` forms):
    answered from the trackers' classes, not the fake tensors' (a fake tensor is no subclass), and
    under a guard on whether subclasses' ``__torch_function__`` is on where the frame is called."""
    from ember.capture.variables.base import ConstantVariable
    if kwargs:
        raise unsupported("EB0031", f"{fn.__name__} with keyword arguments")
    items = args
    if fn is torch._C._has_torch_function:
        if len(args) != 1:
            raise unsupported("EB0031", f"{fn.__name__} of {len(args)} arguments")
        items = args[0].unpack(tx)
    if not any(_has_torch_function(v) for v in items):
        return ConstantVariable(False)
    return torch_function_enabled(tx)


def torch_function_enabled(tx, fn=torch._C._is_torch_function_enabled):
    """``torch._C._is_torch_function_enabled()`` (or ``_get_torch_function_state()``) where the
    frame is called (the trace itself runs with subclasses' ``__torch_function__`` off), guarded."""
    from ember.capture.frame_state import caller_torch_function_state
    from ember.capture.variables.base import ConstantVariable
    state = caller_torch_function_state()
    tx.guards.global_state("torch_function_state", torch._C._get_torch_function_state, state,
                           "torch._C._get_torch_function_state()")
    if fn is torch._C._get_torch_function_state:
        return ConstantVariable(state)
    return ConstantVariable(state == torch._C._TorchFunctionState.ENABLED)
