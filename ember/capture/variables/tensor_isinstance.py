"""``isinstance(t, torch.nn.Parameter)`` / ``isinstance(t, torch.nn.Buffer)`` of a tensor.

Their metaclasses answer True for any tensor carrying the flag ``_is_param`` / ``_is_buffer``,
whatever its type: ``nn.Parameter(TwoTensor(...))`` (a wrapper-subclass parameter, a DTensor
parameter under FSDP) is a TwoTensor with ``_is_param``, and ``nn.Buffer(t)`` returns a plain
Tensor with ``_is_buffer``. The answer for a tensor the frame reads (an input, a module's
attribute) is the real ``isinstance``, guarded on the flag; a tensor made in the frame has no
flag, and its type answers.
"""
import torch

_FLAGS = {torch.nn.Parameter: "_is_param", torch.nn.Buffer: "_is_buffer"}


def flag_isinstance(tx, obj, cls):
    """The answer (a bool) when a class in ``cls`` is Parameter or Buffer and ``obj`` is a
    tensor read from outside the frame; None otherwise (its type answers)."""
    classes = cls if isinstance(cls, tuple) else (cls,)
    flags = [_FLAGS[c] for c in classes if c in _FLAGS]
    real = getattr(obj, "real", None)
    if not flags or obj.source is None or not isinstance(real, torch.Tensor):
        return None
    for name in flags:
        tx.guards.attribute_flag(obj.source, name, getattr(real, name, False))
    return isinstance(real, cls)
