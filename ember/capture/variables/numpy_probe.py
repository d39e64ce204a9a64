"""The probe of a NumPy call (see numpy_arrays.py): NumPy itself on stand-in arrays with the
arguments' shapes and dtypes (deterministic test data), and the graph's callable on real tensors
of the same data; the call goes in the graph only if both agree on the result's structure,
dtypes, shapes and values, and on what they write into their arguments.
"""
from __future__ import annotations

import math

import torch

from ember.capture.variables.base import unsupported
from ember.capture.variables.numpy_arrays import _PROBE_LIMIT, NumpyNdarrayVariable, _hint, _np, _np_dtype, _symbolic


def _stand_in(vt, budget, slots, zeros=False):
    """A real NumPy value with ``vt``'s type, dtype and shape (test values, see _test_values);
    the graph arguments among them are appended to ``slots`` in numpy_call's ``spec`` order."""
    from ember.capture.variables.containers import ListVariable, TupleVariable
    if isinstance(vt, NumpyNdarrayVariable):
        fake = vt.tensor.fake
        shape = tuple(_hint(s) for s in fake.shape)
        budget[0] += math.prod(shape)
        if budget[0] > _PROBE_LIMIT:
            raise unsupported("EB0053", "NumPy arrays too large to check torch._numpy's result against")
        arr = _np().zeros(shape, vt.np_dtype()) if zeros else _test_values(shape, vt.np_dtype())
        if vt.readonly:
            arr.setflags(write=False)  # (a write into it raises in NumPy: the probe breaks)
        slots.append(arr)
        return arr[()] if vt.scalar else arr
    if isinstance(vt, (ListVariable, TupleVariable)):
        items = [_stand_in(i, budget, slots, zeros) for i in vt.items]
        return items if isinstance(vt, ListVariable) else tuple(items)
    if type(vt).__name__ == "SliceVariable" and hasattr(vt, "items"):
        return slice(*[_stand_in(i, budget, slots, zeros) for i in vt.items])
    if _symbolic(vt):
        slots.append(_hint(vt.sym))
        return slots[-1]  # (its value now, no guard: NumPy's result types do not depend on it)
    return vt.as_constant()


def _test_values(shape, dtype):
    """Deterministic data with negatives, zero, fractions and no ties (for up to 23 elements)."""
    np = _np()
    k = (np.arange(math.prod(shape)) * 7 + 3) % 23
    if dtype.kind == "b":
        v = k % 3 == 1
    elif dtype.kind == "u":
        v = k
    elif dtype.kind == "i":
        v = k - 11
    elif dtype.kind == "f":
        v = (k - 11) / 4
    else:
        v = (k - 11) / 4 + 1j * (11 - k[::-1]) / 8
    return v.astype(dtype).reshape(shape)


def _probe(kind, target, args, kwargs, np_callable, call, zeros=False):
    """What NumPy itself returns for stand-ins of these arguments (see the module docstring), after
    checking that ``call`` (torch._numpy) computes the same values from the same data. Where NumPy
    raises on the test data (indices out of range), zeros are the stand-ins and only the result's
    structure, dtypes and shapes are checked."""
    np = _np()
    budget = [0]
    slots: list = []
    real_args = [_stand_in(a, budget, slots, zeros) for a in args]
    real_kwargs = {k: _stand_in(v, budget, slots, zeros) for k, v in kwargs.items()}
    # (copies: an in-place operation writes NumPy's stand-ins)
    inputs = [torch.from_numpy(np.array(v, copy=True)) if isinstance(v, np.ndarray) else v for v in slots]
    import warnings
    try:
        with warnings.catch_warnings(), np.errstate(all="ignore"):
            warnings.simplefilter("ignore")
            if kind == "fn":
                out = np_callable(*real_args, **real_kwargs)
            elif kind == "op":
                out = target(*real_args)
            elif kind == "method":
                out = getattr(real_args[0], target)(*real_args[1:], **real_kwargs)
            elif kind == "attr":
                out = getattr(real_args[0], target)
            else:
                real_args[0][real_args[1]] = real_args[2]
                out = None
    except Exception as e:
        if not zeros:
            return _probe(kind, target, args, kwargs, np_callable, call, zeros=True)
        raise unsupported("EB0053", f"NumPy {getattr(target, '__name__', target)} raised {type(e).__name__} on these "
                          "shapes and dtypes (runs eagerly)") from None
    if not zeros:
        _check_values(call, inputs, slots, out)
    for key, arg in [*enumerate(real_args), *real_kwargs.items()]:
        if out is arg and isinstance(arg, np.ndarray):
            return _Same(key)  # `a += 1`, `np.add(a, 1, out=a)`, `np.asarray(a)`: that very array
    return out


def _check_values(call, inputs, slots, expected) -> None:
    """Run ``call`` (what the graph will run) on real tensors holding the stand-ins' data, and
    compare its result and its writes into the arguments with NumPy's: ``torch._numpy`` differs
    from NumPy in values too (``np.round(int_array, -1)`` returns its input), which the dtypes and
    shapes alone do not show. Any difference, or an exception, is a graph break."""
    from torch._subclasses.fake_tensor import unset_fake_temporarily
    import warnings
    try:
        with unset_fake_temporarily(), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            got = call(*inputs)
    except Exception as e:
        raise unsupported("EB0053", f"torch._numpy's {call.__name__[8:]} raised {type(e).__name__} where NumPy "
                          "did not (runs eagerly)") from None
    np = _np()
    same = _same_values(expected, got) and all(
        _same_values(s, i) for s, i in zip(slots, inputs) if isinstance(s, np.ndarray))
    if not same:
        raise unsupported("EB0053", f"torch._numpy's {call.__name__[8:]} computes other values than NumPy's "
                          "(runs eagerly)")


def _same_values(expected, got) -> bool:
    np = _np()
    if isinstance(expected, (np.ndarray, np.generic)):
        if not isinstance(got, torch.Tensor) or got.dtype is torch.bfloat16:
            return isinstance(expected, np.ndarray) and got is None  # (setitem returns None)
        g = got.detach().numpy()
        if g.shape != np.shape(expected):
            return False
        kind = np.asarray(expected).dtype.kind
        if kind in "fc":
            tol = {2: 2e-3, 4: 2e-6, 8: 1e-12}.get(np.asarray(expected).dtype.itemsize // (2 if kind == "c" else 1), 1e-12)
            return bool(np.allclose(g, expected, rtol=tol, atol=tol, equal_nan=True))
        return bool(np.array_equal(g, expected))
    if isinstance(expected, (tuple, list)):
        return isinstance(got, (tuple, list)) and len(got) == len(expected) and \
            all(_same_values(e, g) for e, g in zip(expected, got))
    if isinstance(expected, float) and expected != expected:
        return isinstance(got, float) and got != got
    return type(got) is type(expected) and bool(got == expected) if not isinstance(got, torch.Tensor) else False


class _Same:
    """The operation returned one of its (array) arguments: its tracker, identity kept."""

    def __init__(self, key):
        self.key = key
def _agree(expected, fake, label):
    """The probe's real NumPy result and the fake's: the same structure, types, dtypes, shapes."""
    np = _np()
    if isinstance(expected, np.ndarray):
        ok = isinstance(fake, torch.Tensor) and tuple(_hint(s) for s in fake.shape) == expected.shape and \
            fake.dtype is not torch.bfloat16 and _np_dtype(fake.dtype) == expected.dtype
    elif isinstance(expected, np.generic):
        ok = isinstance(fake, torch.Tensor) and fake.dim() == 0 and fake.dtype is not torch.bfloat16 \
            and _np_dtype(fake.dtype) == expected.dtype
    elif isinstance(expected, (tuple, list)):
        # (a list where NumPy returns a tuple, np.meshgrid: built as NumPy's, see _wrap)
        ok = (type(fake) is type(expected) or type(expected) in (tuple, list) and type(fake) in (tuple, list)) \
            and len(fake) == len(expected) and \
            all(_agree(e, f, label) is None for e, f in zip(expected, fake))
    else:
        ok = not isinstance(fake, torch.Tensor) and type(fake) is type(expected) and fake == expected
    if not ok:
        raise unsupported("EB0053", f"torch._numpy's {label} differs from NumPy's on these dtypes/shapes "
                          f"(NumPy: {_kind(expected)}; torch._numpy: {_kind(fake)}): runs eagerly")
    return None


def _kind(v):
    np = _np()
    if isinstance(v, np.ndarray):
        return f"ndarray {v.dtype} {v.shape}"
    if isinstance(v, np.generic):
        return f"{type(v).__name__}"
    if isinstance(v, torch.Tensor):
        return f"tensor {v.dtype} {tuple(v.shape)}"
    return type(v).__name__
