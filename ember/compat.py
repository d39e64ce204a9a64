"""Differences between the torch releases ember runs on, in one place.

ember uses a few torch internals whose shape changes between releases; each difference is named
here once, so that the layers above test no torch version. Supported: the releases in
``ember.support.SUPPORTED_TORCH`` (docs/python_versions.md, "torch versions").

* ``torch.autograd.Function.apply``: a Python classmethod up to torch 2.13, a C
  ``classmethod_descriptor`` from 2.14. The capture layer recognises ``MyFunction.apply`` by
  ``FUNCTION_APPLY``, a Python function either way: the real one, or (2.14+) a stand-in that
  calls the class's own ``apply``, so the residual code after a graph break still calls it.
* Fake tensors of real 0-d integer/float64 tensors: from torch 2.14, ``FakeTensorMode.from_tensor``
  without a ``ShapeEnv`` remembers the real tensor's value as its ``item()`` (``item_memo``), so
  a fake op that reads the value (``torch.zeros(2, m)`` with a 0-d tensor ``m``) silently gets the
  first call's number and the graph bakes it in. ``fake_from_real`` forgets such a concrete memo:
  the value is data, read as 2.13 reads it (a data-dependent error, or an unbacked symbol).
* ``torch.amp.autocast_mode._UnmanagedAutocast`` (the autocast ``_enter_autocast`` makes) exists
  from torch 2.12 on; 2.11 makes a plain ``torch.amp.autocast``: ``UNMANAGED_AUTOCAST``.
* A guard's location (``SLoc``): torch 2.11 formats ``framework_loc=None`` as a frame and fails;
  ``NO_FRAMEWORK_LOC`` is the empty string later releases print for None.
"""
from __future__ import annotations

import types

import torch

__all__ = ["FUNCTION_APPLY", "NO_FRAMEWORK_LOC", "TORCH_VERSION", "UNMANAGED_AUTOCAST", "fake_from_real",
           "function_apply_class"]


def _torch_version() -> tuple[int, int]:
    try:
        major, minor = torch.__version__.split("+")[0].split(".")[:2]
        return int(major), int(minor)
    except ValueError:
        return (0, 0)


TORCH_VERSION: tuple[int, int] = _torch_version()

UNMANAGED_AUTOCAST = getattr(torch.amp.autocast_mode, "_UnmanagedAutocast", torch.amp.autocast)
NO_FRAMEWORK_LOC = ""

_APPLY_DESCRIPTOR = torch.autograd.Function.__dict__["apply"]


def _function_apply_standin(cls, *args, **kwargs):
    """``cls.apply(*args, **kwargs)``: what ``MyFunction.apply`` is to ember where torch's own is in C."""
    return cls.apply(*args, **kwargs)


#: The function ``MyFunction.apply`` binds to the class, as ember's capture sees it.
FUNCTION_APPLY = _APPLY_DESCRIPTOR.__func__ if isinstance(_APPLY_DESCRIPTOR, classmethod) \
    else _function_apply_standin


def function_apply_class(value) -> type | None:
    """The autograd.Function subclass when ``value`` is its ``apply`` read off the class (a bound
    method of either kind), else None."""
    owner = getattr(value, "__self__", None)
    if not (isinstance(owner, type) and issubclass(owner, torch.autograd.Function)):
        return None
    if isinstance(value, types.MethodType):
        return owner if value.__func__ is FUNCTION_APPLY else None
    if isinstance(value, types.BuiltinMethodType) and getattr(value, "__name__", None) == "apply":
        return owner if _class_apply_is_torchs(owner) else None
    return None


def _class_apply_is_torchs(cls: type) -> bool:
    for klass in cls.__mro__:
        if "apply" in klass.__dict__:
            return klass.__dict__["apply"] is _APPLY_DESCRIPTOR
    return False


def is_apply_descriptor(raw) -> bool:
    """``raw`` (a class's ``apply`` read statically) is torch's C ``apply`` (2.14+)."""
    return raw is _APPLY_DESCRIPTOR and not isinstance(raw, classmethod)


def fake_from_real(mode, real: torch.Tensor, **kwargs):
    """``mode.from_tensor(real, **kwargs)``, without a concrete ``item()`` taken from ``real``'s data.

    A symbolic memo (a backed symbol that the ShapeEnv guards) is kept; a plain number is the
    data of one call, never a fact about the graph's input.
    """
    fake = mode.from_tensor(real, **kwargs)
    memo = getattr(fake, "item_memo", None)
    if memo is not None and isinstance(memo, (bool, int, float)):
        fake.item_memo = None
    return fake
