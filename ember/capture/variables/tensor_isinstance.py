"""``isinstance(t, torch.nn.Parameter)`` / ``isinstance(t, torch.nn.Buffer)`` /
``isinstance(t, torch.FloatTensor)`` of a tensor.

Their metaclasses answer True for any tensor carrying the flag ``_is_param`` / ``_is_buffer``,
whatever its type: ``nn.Parameter(TwoTensor(...))`` (a wrapper-subclass parameter, a DTensor
parameter under FSDP) is a TwoTensor with ``_is_param``, and ``nn.Buffer(t)`` returns a plain
Tensor with ``_is_buffer``. The answer for a tensor the frame reads (an input, a module's
attribute) is the real ``isinstance``, guarded on the flag; a tensor made in the frame has no
flag, and its type answers.

The legacy tensor types (``torch.FloatTensor``, ``torch.cuda.LongTensor``, ...) are no classes of
any tensor: their metaclass answers by the tensor's dtype, device type and layout, which the
tensor's guards fix (its fake tensor gives the same answer).
"""
import torch

_LEGACY_TYPE = type(torch.FloatTensor)  # torch.tensortype


def legacy_type_isinstance(obj, cls):
    """``isinstance(tensor, cls)`` where ``cls`` names a legacy tensor type: (True, ()) when one of
    them matches, (False, rest) with the other classes of ``cls`` to ask otherwise; None when
    ``cls`` names none."""
    classes = cls if isinstance(cls, tuple) else (cls,)
    legacy = [c for c in classes if type(c) is _LEGACY_TYPE]
    if not legacy:
        return None
    if any(isinstance(obj.fake, c) for c in legacy):
        return True, ()
    return False, tuple(c for c in classes if type(c) is not _LEGACY_TYPE)


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
