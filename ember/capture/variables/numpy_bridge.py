"""Where NumPy meets torch in captured code: operators with an ndarray operand,
``t.numpy()``, and ``torch.from_numpy`` / ``torch.as_tensor`` / ``torch.tensor`` of a traced array
(see numpy_arrays.py for arrays and NumPy calls themselves).
"""
from __future__ import annotations

import operator

import torch

from ember.capture.variables.base import ConstantVariable, unsupported
from ember.capture.variables.numpy_arrays import _INPLACE_OPS, NumpyNdarrayVariable, numpy_call


def binary(tx, fn, a, b):
    """``a <op> b`` where one side is an ndarray/NumPy scalar tracker (the other a constant or one)."""
    from ember.capture.variables.tensor import TensorVariable
    if isinstance(a, TensorVariable) or isinstance(b, TensorVariable):
        return _tensor_and_array(tx, fn, a, b)
    if fn in _INPLACE_OPS and not isinstance(a, NumpyNdarrayVariable):
        from ember.capture.opcodes import _INPLACE_TO_PLAIN
        fn = _INPLACE_TO_PLAIN[fn]
    if fn in _INPLACE_OPS and a.scalar:
        from ember.capture.opcodes import _INPLACE_TO_PLAIN
        fn = _INPLACE_TO_PLAIN[fn]  # numpy scalars are immutable: `s += 1` rebinds
    return numpy_call(tx, "op", fn, [a, b], {}, label=fn.__name__)


# `tensor <op> ndarray` that eager computes as the torch operation on ``torch.from_numpy(array)``
# (a new tensor; an in-place operator rebinds: Tensor.__iadd__ refuses an ndarray). Eager takes
# other paths elsewhere — NumPy's own arithmetic wrapped back into a tensor where the dtypes differ,
# for bool, pow, true division, matmul; a TypeError for <, <=, >, >= — which break.
_TENSOR_ARRAY_OPS = {operator.add, operator.sub, operator.mul, operator.floordiv, operator.mod, operator.and_,
                     operator.or_, operator.xor, operator.lshift, operator.rshift}


def _tensor_and_array(tx, fn, a, b):
    from ember.capture.opcodes import _INPLACE_TO_PLAIN
    from ember.capture.variables.tensor import TensorVariable
    plain = _INPLACE_TO_PLAIN.get(fn, fn)
    tensor_left = isinstance(a, TensorVariable)
    t, arr = (a, b) if tensor_left else (b, a)
    fake = t.fake
    plain_tensor = isinstance(arr, NumpyNdarrayVariable) and fake.device.type == "cpu" and fake.dim() >= 1 \
        and getattr(t, "cls", None) in (torch.Tensor, torch.nn.Parameter)
    if plain_tensor and arr.scalar:
        # `t += s` is in place, as eager's Tensor.__iadd__ (a NumPy scalar is a number to it);
        # `s += t` rebinds (NumPy scalars are immutable)
        return _tensor_and_scalar(tx, fn if tensor_left else plain, t, arr, tensor_left)
    ok = plain_tensor and arr.tensor.fake.dim() >= 1 and fake.dtype == arr.tensor.fake.dtype and not arr.readonly \
        and fake.dtype is not torch.bool and (plain in _TENSOR_ARRAY_OPS and tensor_left or plain is operator.eq)
    if not ok:
        raise unsupported("EB0053", f"{fn.__name__} of a tensor and an ndarray (eager mixes torch's and NumPy's rules)")
    return tx.output.call_function(plain, [a.tensor if a is arr else a, b.tensor if b is arr else b], {})


# `tensor <op> numpy_scalar` (either side): eager reads the NumPy scalar as the Python number it
# holds (a wrapped number: it takes part in type promotion by its kind only)
_TENSOR_SCALAR_OPS = {operator.add, operator.sub, operator.mul, operator.truediv, operator.floordiv, operator.mod,
                      operator.lt, operator.le, operator.gt, operator.ge, operator.eq, operator.ne}


def _tensor_and_scalar(tx, fn, t, s, tensor_left):
    """A traced NumPy scalar (a 0-d tensor in the graph) with a tensor of at least one dimension.
    The 0-d tensor promotes like the Python number (checked against eager for every dtype pair)
    where it is cast to the dtype a Python number would give, when it would promote further;
    half-precision tensors (eager computes the scalar at a different precision) break."""
    from ember.capture.opcodes import _INPLACE_TO_PLAIN
    fake, sfake = t.fake, s.tensor.fake
    if _INPLACE_TO_PLAIN.get(fn, fn) not in _TENSOR_SCALAR_OPS or fake.dtype in (torch.float16, torch.bfloat16, torch.bool) or fake.is_complex() \
            or sfake.dtype.is_complex or sfake.dtype is torch.bool:
        raise unsupported("EB0030", f"a NumPy scalar in {fn.__name__} with a {fake.dtype} tensor")
    python_number = 1.0 if sfake.dtype.is_floating_point else 1
    expected = torch.result_type(fake, python_number)
    scalar = s.tensor
    if torch.result_type(fake, sfake) != expected:
        scalar = tx.output.call_method("to", [scalar], {"dtype": ConstantVariable(expected)})
    args = [t, scalar] if tensor_left else [scalar, t]
    return tx.output.call_function(fn, args, {})


def unary(tx, fn, v):
    return numpy_call(tx, "op", fn, [v], {}, label=fn.__name__)


def tensor_numpy(tx, tensor, args, kwargs):
    """``t.numpy()`` / ``t.numpy(force=...)`` in the frame: an array over the same memory, as eager's
    (``force=True``: of ``t.detach()``, a copy only where eager copies: a conjugate or negative
    bit); what eager refuses breaks, and eager raises. As in torch.compile, the graph holds a node
    for it (``view_as``: the ndarray is a view of the tensor), so the frame compiles a graph."""
    fake = tensor.fake
    force = False
    if args or set(kwargs) - {"force"}:
        raise unsupported("EB0052", "Tensor.numpy() with positional or unknown arguments (eager raises)")
    if "force" in kwargs:
        flag = kwargs["force"]
        if not flag.is_constant():
            raise unsupported("EB0052", "Tensor.numpy(force=<a traced value>)")
        force = bool(flag.as_constant())
    if fake.device.type != "cpu" or fake.dtype is torch.bfloat16 or fake.layout is not torch.strided \
            or tensor.cls is not torch.Tensor or not force and (fake.requires_grad or fake.is_conj() or fake.is_neg()):
        raise unsupported("EB0052", "Tensor.numpy() of a tensor eager cannot convert without a copy (runs eagerly)")
    out = tx.output
    if force:
        view = out.call_method("detach", [tensor], {})
        if fake.is_conj():
            view = out.call_method("resolve_conj", [view], {})
        if fake.is_neg():
            view = out.call_method("resolve_neg", [view], {})
    else:
        view = out.call_method("view_as", [tensor, tensor], {})
    return NumpyNdarrayVariable(view)


def torch_call_with_numpy(tx, fn, args, kwargs):
    """``torch.from_numpy(a)`` / ``torch.as_tensor(a, dtype=)`` / ``torch.tensor(a, dtype=)`` of a
    traced array; None when this is no such call (other torch functions taking an ndarray break)."""
    if len(args) != 1 or not isinstance(args[0], NumpyNdarrayVariable):
        return None
    a = args[0]
    options = {}
    for k, v in kwargs.items():
        if k not in ("dtype", "device") or fn is torch.from_numpy or not v.is_constant():
            return None
        options[k] = v.as_constant()
    dtype = options.get("dtype")
    device = options.get("device")
    if dtype is not None and not isinstance(dtype, torch.dtype) or \
            device is not None and torch.device(device).type != "cpu":
        return None
    out = tx.output
    if fn is torch.from_numpy or fn is torch.as_tensor or fn is torch.asarray:
        if fn is torch.asarray and kwargs or a.readonly:
            return None  # (of a read-only array: eager warns, and shares it writeable)
        if a.scalar:
            if fn is torch.from_numpy:
                return None  # eager raises TypeError
            t = out.call_function(torch.clone, [a.tensor], {})
        else:
            t = a.tensor  # shares the array's memory, as eager's
    elif fn is torch.tensor:
        t = out.call_function(torch.clone, [a.tensor], {})  # (eager keeps a dense layout's strides too)
    else:
        return None
    if dtype is not None and dtype != t.fake.dtype:  # (a copy in eager too)
        t = out.call_method("to", [t], {"dtype": ConstantVariable(dtype)})
    return t


def tensor_of_scalars(tx, seq, dtype=None):
    """``torch.tensor([s0, s1, ...])`` / ``torch.LongTensor([...])`` of NumPy scalars the graph
    computed (``[a[0], a[2]]``), all of one dtype: eager's tensor has that dtype (or ``dtype``,
    converted as ``.to`` converts). None: another list (eager's other inference rules)."""
    from ember.capture.variables.containers import ListVariable, TupleVariable
    if not isinstance(seq, (ListVariable, TupleVariable)) or not seq.items:
        return None
    items = seq.items
    if not all(isinstance(i, NumpyNdarrayVariable) and i.scalar for i in items) \
            or len({i.tensor.fake.dtype for i in items}) != 1 or dtype is not None and not isinstance(dtype, torch.dtype):
        return None
    out = tx.output
    t = out.call_function(torch.stack, [ListVariable([i.tensor for i in items])], {})
    if dtype is not None and dtype != t.fake.dtype:
        t = out.call_method("to", [t], {"dtype": ConstantVariable(dtype)})
    return t
