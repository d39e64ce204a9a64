"""NumPy in captured code: arrays as tensors, NumPy calls through ``torch._numpy``.

As in torch.compile, an ``np.ndarray`` argument becomes a tensor graph input
(``torch.from_numpy(a)``: it shares the array's memory, so in-place writes of
the graph reach the caller's array through the AOT mutation epilogue), and
every NumPy operation on it — ``np.<fn>``, ndarray methods, operators,
attributes, indexing — is one graph node that runs ``torch._numpy`` (NumPy's
API written over torch tensors) on the underlying tensors. Arrays leaving the
frame are turned back with ``.numpy()`` in the entry's code.

    def f(a):                       # a: np.ndarray float32 (3,)
        return np.sum(a * 2) + 1    # graph: wrapped_sum(wrapped_mul(a, 2)) ...; eager: np.float32

Numpy scalars (``np.float32(2.0)``), dtypes and scalar types are constants
(guarded by type and exact bits); ``np.<fn>`` of constants is folded by NumPy
itself. ``np.random`` and anything outside the pure math API stay graph breaks.

**Never a different answer.** ``torch._numpy`` is not NumPy: before a call is
put in the graph, ember runs the real NumPy function on stand-in arrays of the
same shapes and dtypes (deterministic test data) — a *probe* — and keeps the node only if
``torch._numpy`` gives the same result structure: the same dtypes and shapes,
and a NumPy scalar (``np.float64``) exactly where NumPy returns one rather than
a 0-d array (``np.sum(a)`` is a scalar, ``a.reshape(())`` is not) — and, run on
real tensors of the same data, the same values and the same writes into its
arguments (``np.round(int_array, -1)``: torch._numpy returns its input). Where
NumPy raises on the test data (indices out of range) the stand-ins are zeros and
values are not compared. Any
difference, or a probe that raises, is a graph break: NumPy runs it eagerly.
NumPy 2's dtype rules (NEP 50) depend on dtypes, never on values, so the probe
decides for every call with these guards. Arrays larger than ``_PROBE_LIMIT``
elements are not probed (a graph break).
"""
from __future__ import annotations

import math
import operator
import sys
import types

import torch

from ember.capture.variables.base import ConstantVariable, VariableTracker, unsupported

_PROBE_LIMIT = 1 << 22  # elements over all stand-in arrays of one call


def _np():
    return sys.modules.get("numpy")


def _tnp():
    import torch._numpy as tnp
    return tnp


# Array methods that read data into Python or leave NumPy's array API (break: eager runs them).
_BREAKING_METHODS = {"item", "tolist", "tobytes", "tofile", "dump", "dumps", "__array__", "__bool__", "__int__",
                     "__float__", "__index__", "__complex__", "__iter__", "__reduce__", "__reduce_ex__",
                     "__setstate__", "__array_function__", "__array_ufunc__", "__dlpack__", "view", "resize",
                     "byteswap", "setflags", "getfield", "setfield", "__deepcopy__", "__copy__", "fill"}
# Attributes answered from the metadata (guarded through the inputs).
_META_ATTRS = {"shape", "ndim", "size", "dtype", "itemsize", "nbytes"}
# Attributes that are arrays (traced like methods without arguments).
_ARRAY_ATTRS = {"T", "real", "imag", "mT"}


def is_numpy_value(value) -> bool:
    """A value ``builder.wrap`` hands to this module: arrays, NumPy scalars, dtypes, scalar types,
    and NumPy's callables (functions, ufuncs)."""
    np = _np()
    if np is None:
        return False
    if isinstance(value, (np.ndarray, np.generic, np.dtype, np.ufunc)):
        return True
    if isinstance(value, type):
        return issubclass(value, np.generic) or value is np.dtype
    if type(value).__name__ == "_ArrayFunctionDispatcher":
        return True
    if isinstance(value, types.BuiltinFunctionType) and (getattr(value, "__module__", "") or "") == "numpy":
        return True  # np.zeros, np.arange, np.empty (C functions)
    return isinstance(value, types.FunctionType) and (getattr(value, "__module__", "") or "").split(".")[0] == "numpy"


def _tnp_equivalent(fn):
    """The ``torch._numpy`` function for a NumPy function (None: none, or not pure math)."""
    np = _np()
    module = getattr(fn, "__module__", None) or ""
    name = getattr(fn, "__name__", None)
    if not name or name.startswith("_") or "random" in module:
        return None
    tnp = _tnp()
    for np_mod, tnp_mod in ((np, tnp), (np.linalg, tnp.linalg), (np.fft, tnp.fft)):
        if getattr(np_mod, name, None) is fn:
            target = getattr(tnp_mod, name, None)
            if callable(target) and not isinstance(target, type) and not isinstance(target, types.ModuleType):
                return target
    return None


def wrap_numpy(tx, value, source) -> VariableTracker:
    np = _np()
    guards = tx.guards
    if isinstance(value, np.ndarray):
        return _wrap_array(tx, value, source)
    if isinstance(value, np.generic):
        if source is not None:
            from ember.capture.sources import CallSource
            unspecialized = _unspecialized_scalar(tx, value, source)
            if unspecialized is not None:
                return unspecialized
            # type and exact bits (-0.0 and nan payloads included)
            guards.equals(CallSource(scalar_key, source, ()), scalar_key(value))
        return ConstantVariable(value, source)
    if isinstance(value, np.dtype):
        if source is not None:
            guards.type_match(source, value)
            guards.equals(source, value)
        return ConstantVariable(value, source)
    if source is not None:
        guards.id_match(source, value)
    from ember.capture.variables.numpy_callables import NumpyCallableVariable
    return NumpyCallableVariable(value, source)  # (np.random.*: a break at the call)


def scalar_key(v):
    return (type(v), v.tobytes())


def scalar_tensor(v) -> torch.Tensor:
    """The 0-d graph input of an unspecialized NumPy scalar argument."""
    return torch.from_numpy(_np().asarray(v))


def _unspecialized_scalar(tx, value, source):
    """A NumPy scalar argument is a 0-d graph input from the first compile, traced as a NumPy
    scalar (as torch.compile makes every NumPy scalar argument one), so a scale or an index that
    changes every call does not recompile. Where the trace needs its value (a branch, a shape, a torch function taking a
    Python number) it is specialised there, guarded by its bits (see NumpyNdarrayVariable)."""
    np = _np()
    out = tx.output
    if type(value) not in (np.float64, np.float32, np.float16, np.int64, np.int32, np.int16, np.int8,
                           np.uint8, np.uint16, np.uint32) or out.frame_sizes is None:
        return None
    from ember.capture.builder import _argument_item
    if not _argument_item(tx, source):
        return None  # (globals and module attributes stay constants, as ints do)
    memo = out.__dict__.setdefault("numpy_scalar_inputs", {})
    hit = memo.get(source.name())
    if hit is not None:
        return hit
    import functools
    from ember.capture.sources import CallSource
    from ember.capture.variables.tensor import TensorVariable
    real = scalar_tensor(value)
    tensor_source = CallSource(scalar_tensor, source, ())
    tx.guards.type_match(source, value)
    tx.guards.tensor_match(tensor_source, real)
    fake = out.fake.fake(real)
    node = out._placeholder(tensor_source, real, fake)
    tvt = TensorVariable(node, fake, tensor_source, cls=torch.Tensor, real=real)
    out._by_tensor[id(real)] = tvt
    guard_bits = functools.partial(tx.guards.equals, CallSource(scalar_key, source, ()), scalar_key(value))
    vt = NumpyNdarrayVariable(tvt, source=source, scalar=True, specialize=(value, guard_bits))
    memo[source.name()] = vt
    return vt


def symbolic_int_of_scalar(tx, v, kind=int):
    """``int(n)`` of an unspecialized NumPy integer argument (``kind=float``: ``float(v)`` of a NumPy
    float one): a symbolic int (float) read as ``int(n)`` on every call (torch.compile keeps such arguments unspecialized: one graph for every value, where a
    constant guarded by its bits recompiled per value); None when it stays a constant (0 and 1, a
    dynamic=False frame, a value the trace cannot see)."""
    if v._specialize is None or v.np_dtype().kind not in ("iu" if kind is int else "f"):
        return None
    return symbolic_int_of_output(tx.output, v)


def index_of_scalar(tx, v):
    """``v.__index__()`` where Python needs an int of a NumPy integer argument (a slice bound:
    ``x[:n]``): a symbolic int, as ``int(n)`` makes it, so a bound that changes every call does not
    recompile; None for anything else (and where it stays a constant: 0 and 1, dynamic=False)."""
    if isinstance(v, NumpyNdarrayVariable) and v.scalar and v._specialize is not None \
            and v.np_dtype().kind in "iu":
        return symbolic_int_of_scalar(tx, v)
    return None


def symbolic_int_of_output(output, v):
    """``symbolic_int_of_scalar`` given the output graph (a NumPy int passed to a torch function);
    a NumPy float there is a symbolic float, as a float argument that changed is."""
    if v._specialize is None or v.source is None or v.np_dtype().kind not in "iuf":
        return None
    from ember.capture.sources import CallSource
    kind = float if v.np_dtype().kind == "f" else int
    return output.symbolic_int(CallSource(kind, v.source, ()), kind(v._specialize[0]), force=True)


def _wrap_array(tx, value, source) -> VariableTracker:
    np = _np()
    if type(value) is not np.ndarray:
        raise unsupported("EB0052", f"a {type(value).__name__} (an ndarray subclass) in the compiled region")
    if source is None:
        raise unsupported("EB0052", "an np.ndarray ember cannot name (a constant array)")
    if value.dtype.byteorder not in ("=", "|") or value.dtype.kind not in "biufc" \
            or any(s < 0 or s % value.itemsize for s in value.strides):
        raise unsupported("EB0052", f"an np.ndarray of dtype {value.dtype} / strides {value.strides} "
                          "(torch.from_numpy cannot share it)")
    readonly = not value.flags.writeable
    convert = readonly_from_numpy if readonly else torch.from_numpy
    try:
        real = convert(value)
    except Exception as e:
        raise unsupported("EB0052", f"torch.from_numpy of an np.ndarray raised {type(e).__name__}") from None
    out = tx.output
    memo = out.numpy_inputs
    hit = memo.get(id(value))
    if hit is not None and hit[0] is value:
        if hit[2] != source:
            tx.guards.same_object(source, hit[2])
        return hit[1]
    from ember.capture.sources import ApplySource, AttrSource, CallSource
    guards = tx.guards
    guards.type_match(source, value)
    guards.equals(AttrSource(source, "dtype"), value.dtype)
    guards.constant_match(AttrSource(AttrSource(source, "flags"), "writeable"), not readonly)
    for other, _vt, other_source in list(memo.values()):
        if _shares_memory(value, other):
            raise unsupported("EB0052", "two np.ndarray inputs over the same memory (from_numpy would make two "
                              "unrelated tensors of it)")
        # from_numpy makes a new storage per array: two arrays over the same memory would be two
        # unrelated graph inputs (a write through one unseen by the other): guarded apart
        guards.equals(ApplySource(_shares_memory, (source, other_source)), False)
    for t_source, t in zip(list(out.input_sources), list(out.input_values)):
        if isinstance(t, torch.Tensor) and not (isinstance(t_source, CallSource)
                                                and t_source.func in (torch.from_numpy, readonly_from_numpy)):
            guard_apart(guards, value, source, t, t_source)
    tensor_source = CallSource(convert, source, ())
    # sizes as a tensor input's: static, then dynamic in a dimension that changed (automatic dynamic)
    fake = out._symbolic_input(tensor_source, real)
    if fake is None:
        guards.tensor_match(tensor_source, real)
        fake = out.fake.fake(real)
    node = out._placeholder(tensor_source, real, fake)
    from ember.capture.variables.tensor import TensorVariable
    tvt = TensorVariable(node, fake, tensor_source, cls=torch.Tensor, real=real)
    out._by_tensor[id(real)] = tvt
    vt = NumpyNdarrayVariable(tvt, source=source, readonly=readonly)
    memo[id(value)] = (value, vt, source)
    return vt


def readonly_from_numpy(a) -> torch.Tensor:
    """``torch.from_numpy`` of a read-only array, without torch's warning about it: the graph never
    writes it (its probe stand-ins are read-only too, so a write raises there: a break, and eager
    raises NumPy's ValueError)."""
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        return torch.from_numpy(a)


def _shares_memory(a, b) -> bool:
    return bool(_np().may_share_memory(a, b))


def overlaps(a, t) -> bool:
    """Whether array ``a``'s memory and tensor ``t``'s storage overlap (``torch.from_numpy(a)``
    passed next to ``a``: two graph inputs that functionalization would treat as unrelated)."""
    if not isinstance(t, torch.Tensor) or t.device.type != "cpu" or t.layout is not torch.strided:
        return False
    lo, hi = _np().lib.array_utils.byte_bounds(a)
    storage = t.untyped_storage()
    start, n = storage.data_ptr(), storage.nbytes()
    return lo < start + n and start < hi and n > 0 and hi > lo


def guard_apart(guards, array, array_source, tensor, tensor_source) -> None:
    """An ndarray input and a tensor input must not share memory: refused now, guarded after
    (parameters: checked now only, a guard per parameter and array would cost every call)."""
    if overlaps(array, tensor):
        raise unsupported("EB0052", "a tensor input over the memory of an np.ndarray input (torch.from_numpy(a) "
                          "passed with a)")
    if isinstance(tensor, torch.nn.Parameter) or tensor_source is None:
        return
    from ember.capture.sources import ApplySource
    guards.equals(ApplySource(overlaps, (array_source, tensor_source)), False)


def guard_new_tensor_input(output, tensor, tensor_source) -> None:
    """(output_graph.add_input) a tensor input read after ndarray inputs: kept apart from them."""
    for array, _vt, array_source in list(output.numpy_inputs.values()):
        guard_apart(output.guards, array, array_source, tensor, tensor_source)


# -- the graph's callables --------------------------------------------------------------------

class _Slot:
    """Where the i-th tensor argument of a NumpyCall goes in its argument structure."""
    __slots__ = ("i",)

    def __init__(self, i):
        self.i = i


class _SymSlot:
    """Where the i-th node argument, a symbolic int, goes (``np.ones((2, n))``)."""
    __slots__ = ("i",)

    def __init__(self, i):
        self.i = i


class NumpyCall:
    """An fx call target: rebuild the arguments (tensors as ``torch._numpy`` arrays), call the
    ``torch._numpy`` function / method / operator, and return tensors."""

    def __init__(self, kind: str, target, spec_args: tuple, spec_kwargs: dict, label: str):
        self.kind, self.target = kind, target
        # NumPy divides integers in float64; torch._numpy in torch's default dtype: integer
        # operands are converted first (what NumPy computes; the probe still checks the result)
        self.float64_operands = label in _TRUE_DIVISIONS
        self.spec_args, self.spec_kwargs = spec_args, spec_kwargs
        self.__name__ = f"wrapped_{label}"
        self.__qualname__ = self.__name__

    ember_tensor_op = True

    def __repr__(self):
        return f"<numpy {self.kind} {self.__name__}>"

    def __call__(self, *tensors):
        tnp = _tnp()
        if self.float64_operands:
            tensors = tuple(t.to(torch.float64) if isinstance(t, torch.Tensor) and not t.is_floating_point()
                            and not t.is_complex() else t for t in tensors)

        def rebuild(s):
            if isinstance(s, _Slot):
                return tnp.ndarray(tensors[s.i])
            if isinstance(s, _SymSlot):
                return tensors[s.i]
            if isinstance(s, _NpScalar):
                return tnp.asarray(s.value, dtype=s.dtype)
            if isinstance(s, (tuple, list)):
                if self.kind == "fn" and s and all(isinstance(x, _Slot) for x in s):
                    # a sequence of arrays (np.array([a, b]), np.stack): as tensors, which
                    # torch._numpy stacks (its ndarrays it would read element by element)
                    items = [tensors[x.i] for x in s]
                else:
                    items = [rebuild(x) for x in s]
                return tuple(items) if isinstance(s, tuple) else items
            if isinstance(s, slice):
                return slice(rebuild(s.start), rebuild(s.stop), rebuild(s.step))
            return s
        args = [rebuild(a) for a in self.spec_args]
        kwargs = {k: rebuild(v) for k, v in self.spec_kwargs.items()}
        if self.kind == "fn" or self.kind == "op":
            out = self.target(*args, **kwargs)
        elif self.kind == "method":
            out = getattr(args[0], self.target)(*args[1:], **kwargs)
        elif self.kind == "attr":
            out = getattr(args[0], self.target)
        elif self.kind == "setitem":
            args[0][args[1]] = args[2]
            return None
        else:
            raise AssertionError(self.kind)
        return _to_tensors(out)


def _to_tensors(out):
    tnp = _tnp()
    if isinstance(out, tnp.ndarray):
        return out.tensor
    if isinstance(out, (tuple, list)):
        return type(out)(_to_tensors(o) for o in out)
    return out


class _NpScalar:
    """A NumPy scalar argument: a 0-d ``torch._numpy`` array of its dtype (NEP 50: both strong)."""
    __slots__ = ("value", "dtype")

    def __init__(self, value, dtype):
        self.value, self.dtype = value, dtype


# -- trackers ---------------------------------------------------------------------------------

class NumpyNdarrayVariable(VariableTracker):
    """An ndarray (or, ``scalar=True``, a NumPy scalar that eager has here) backed by a tensor."""

    def __init__(self, tensor, source=None, scalar: bool = False, specialize=None, readonly: bool = False):
        self.tensor = tensor  # TensorVariable
        self.source = source  # the array's own source (an input array), else None
        self.scalar = scalar
        self.readonly = readonly  # NumPy's writeable flag is False (a read-only input, a view of one)
        # an unspecialized NumPy scalar argument: (its value, the guard on it) for the uses that
        # need a Python value (see _unspecialized_scalar)
        self._specialize = specialize

    def is_constant(self):
        return self._specialize is not None

    def as_constant(self):
        if self._specialize is None:
            return super().as_constant()
        value, guard_bits = self._specialize
        guard_bits()
        return value

    def describe(self):
        kind = "numpy scalar" if self.scalar else "ndarray"
        return f"{kind}({list(self.tensor.fake.shape)} {self.tensor.fake.dtype})"

    def np_dtype(self):
        return _np_dtype(self.tensor.fake.dtype)

    def python_type(self):
        np = _np()
        return self.np_dtype().type if self.scalar else np.ndarray

    def truth(self, tx):
        if self._specialize is not None:
            return bool(self.as_constant())
        raise unsupported("EB0016", "the truth value of an ndarray reads its data")

    def hash_key(self):
        if self.scalar:
            raise unsupported("EB0035", "a NumPy scalar computed by the graph as a dict key")
        from ember.exc import PythonException
        raise PythonException(TypeError("unhashable type: 'numpy.ndarray'"))

    def getattr(self, tx, name):
        fake = self.tensor.fake
        if name == "__class__":
            from ember.capture.variables.objects import ClassVariable
            return ClassVariable(self.python_type())
        if name in _META_ATTRS:
            from ember.fake.symbolic import has_symbols
            if name in ("shape", "size", "nbytes") and has_symbols(tuple(fake.shape)):
                return self._symbolic_meta(tx, name)  # (a dynamic size: computed by the graph)
            shape = tuple(int(s) for s in fake.shape)
            dt = self.np_dtype()
            value = {"shape": shape, "ndim": len(shape), "size": math.prod(shape), "dtype": dt,
                     "itemsize": dt.itemsize, "nbytes": dt.itemsize * math.prod(shape)}[name]
            from ember.capture.variables.builtins import wrap_constant
            return wrap_constant(value)
        if name in _ARRAY_ATTRS:
            return numpy_call(tx, "attr", name, [self], {}, label=name)
        import inspect
        if name.startswith("_") and name not in ("__getitem__", "__setitem__", "__len__") or \
                name in _BREAKING_METHODS or not inspect.isfunction(inspect.getattr_static(_tnp().ndarray, name, None)):
            if not name.startswith("_") and _is_method(self.python_type(), name):
                # (`a.tobytes()`: the break comes at the call, which eager runs, and the rest of
                # the frame compiles again)
                from ember.capture.variables.functions import BoundMethodVariable
                return BoundMethodVariable(self, name)
            # (properties other than the ones above — strides, flags, base — are NumPy's layout,
            # which torch's need not match)
            raise unsupported("EB0053", f"ndarray.{name} ({'a NumPy scalar' if self.scalar else 'an ndarray'} "
                              "traced through torch._numpy)")
        from ember.capture.variables.functions import BoundMethodVariable
        return BoundMethodVariable(self, name)

    def _symbolic_meta(self, tx, name):
        from ember.capture.variables.containers import TupleVariable
        out = tx.output
        if name == "shape":
            return TupleVariable([out.call_method("size", [self.tensor, ConstantVariable(i)], {})
                                  for i in range(self.tensor.fake.dim())])
        size = out.call_method("numel", [self.tensor], {})
        if name == "size":
            return size
        return out.call_function(operator.mul, [size, ConstantVariable(self.np_dtype().itemsize)], {})

    def call_method(self, tx, name, args, kwargs):
        if name == "__len__" and not args and not kwargs:
            if self.tensor.fake.dim() == 0:
                from ember.exc import PythonException
                raise PythonException(TypeError("len() of unsized object"))
            from ember.fake.symbolic import has_symbols
            if has_symbols(self.tensor.fake.shape[0]):
                return tx.output.call_method("size", [self.tensor, ConstantVariable(0)], {})
            return ConstantVariable(int(self.tensor.fake.shape[0]))
        import inspect
        if name in _BREAKING_METHODS or name.startswith("_") and name not in ("__getitem__", "__setitem__") \
                or not inspect.isfunction(inspect.getattr_static(_tnp().ndarray, name, None)):
            raise unsupported("EB0053", f"ndarray.{name}")
        if name == "__setitem__":
            numpy_call(tx, "setitem", name, [self, *args], kwargs, label="setitem")
            return ConstantVariable(None)
        return numpy_call(tx, "method", name, [self, *args], kwargs, label=name)

    def unpack(self, tx):
        """``for row in a``: ``a[0]``, ``a[1]``, ... (rows, or NumPy scalars of a 1-d array)."""
        fake = self.tensor.fake
        if self.scalar or fake.dim() == 0:
            raise unsupported("EB0034", "iterating over a 0-d array or a NumPy scalar")  # (eager's TypeError)
        n = int(fake.shape[0])
        if n > 64:
            raise unsupported("EB0034", "iterating over an ndarray of more than 64 rows")
        return [numpy_call(tx, "op", operator.getitem, [self, ConstantVariable(i)], {}, label="getitem")
                for i in range(n)]

    def reconstruct(self, plan) -> str:
        """The array in the entry's code after the graph: the caller's own array (an input), else
        ``.numpy()`` of the graph's tensor (sharing its memory), ``[()]`` for a NumPy scalar; built
        once per tracker, so one array returned twice is one object."""
        if self.source is not None:
            return plan._read(self.source)
        memo = plan.__dict__.setdefault("numpy_built", {})
        hit = memo.get(id(self))
        if hit is not None:
            return hit
        plan._keep.append(self)
        name = plan._fresh("___np")
        tensor = plan.expr(self.tensor)
        plan.prelude.append(f"{name} = {tensor}.numpy(){'[()]' if self.scalar else ''}")
        if self.readonly:  # (a view of a read-only array is read-only in eager)
            plan.prelude.append(f"{name}.setflags(write=False)")
        memo[id(self)] = name
        return name


def _is_method(cls, name) -> bool:
    """A method (not a property) of NumPy's class ``cls``."""
    import inspect
    attr = inspect.getattr_static(cls, name, None)
    return type(attr).__name__ in ("method_descriptor", "function", "builtin_function_or_method")


def _np_dtype(torch_dtype):
    np = _np()
    if torch_dtype is torch.bfloat16:
        raise unsupported("EB0052", "a bfloat16 tensor as a NumPy array")
    return np.dtype(str(torch_dtype).replace("torch.", "").replace("bool", "bool_"))


# -- one traced call ----------------------------------------------------------------------------

def numpy_call(tx, kind, target, args, kwargs, label, np_callable=None):
    """Put one NumPy operation in the graph (after the probe agreed, see the module docstring)."""
    tensors: list = []

    def spec(vt):
        from ember.capture.variables.containers import ListVariable, TupleVariable
        from ember.capture.variables.symbolic import SymNodeVariable
        if isinstance(vt, NumpyNdarrayVariable):
            tensors.append(vt.tensor)
            return _Slot(len(tensors) - 1)
        if isinstance(vt, (ListVariable, TupleVariable)):
            items = [spec(i) for i in vt.items]
            return items if isinstance(vt, ListVariable) else tuple(items)
        if type(vt).__name__ == "SliceVariable" and hasattr(vt, "items"):
            return slice(*[spec(i) for i in vt.items])
        if isinstance(vt, SymNodeVariable) and _symbolic(vt):
            if not isinstance(vt.sym, torch.SymInt):
                raise unsupported("EB0053", "a symbolic float as a NumPy argument")
            tensors.append(vt)  # (an argument of the node: torch._numpy gets the SymInt, then the int)
            return _SymSlot(len(tensors) - 1)
        if vt.is_constant():
            c = vt.as_constant()
            return _spec_constant(c)
        raise unsupported("EB0053", f"passing {vt.describe()} to NumPy")

    if label in _INT_DIVISIONS and _integer_division_by_data(tx, args, kwargs):
        # NumPy gives 0 (and a warning) for an integer division by zero, torch raises: unless the
        # divisor is a non-zero constant, eager runs it
        raise unsupported("EB0053", f"integer {label} by an array (NumPy and torch differ on division by zero)")
    spec_args = tuple(spec(a) for a in args)
    spec_kwargs = {k: spec(v) for k, v in kwargs.items()}
    call = NumpyCall(kind, target, spec_args, spec_kwargs, label)
    from ember.capture.variables.numpy_probe import _agree, _probe
    expected = _probe(kind, target, args, kwargs, np_callable, call)
    if kind == "setitem":
        result = tx.output.call_function(call, tensors, {})
        _agree(expected, None, label)
        return result
    result = tx.output.call_function(call, tensors, {})
    return _wrap(result, expected, label, kind, target, args, kwargs)


_TRUE_DIVISIONS = {"truediv", "true_divide", "divide"}
_INT_DIVISIONS = {"floordiv", "ifloordiv", "mod", "imod", "floor_divide", "remainder", "fmod", "divmod",
                  "pow", "ipow", "power", "float_power"}


def _integer_division_by_data(tx, args, kwargs) -> bool:
    """An integer array meets a divisor (or exponent) that is not a constant (non-zero,
    non-negative); a method's or operator's left operand is args[0]."""
    def integer(vt):
        return isinstance(vt, NumpyNdarrayVariable) and not vt.tensor.fake.dtype.is_floating_point \
            and not vt.tensor.fake.dtype.is_complex
    operands = [*args, *kwargs.values()]
    if not any(integer(v) for v in operands):
        return False
    rest = operands[1:]
    return not all(_positive_input_scalar(tx, v) or not isinstance(v, NumpyNdarrayVariable) and v.is_constant()
                   and isinstance(v.as_constant(), (int, float)) and v.as_constant() > 0
                   and not isinstance(v.as_constant(), bool) for v in rest)


def _positive(v) -> bool:
    return bool(v > 0)


def _positive_input_scalar(tx, v) -> bool:
    """An unspecialized NumPy scalar argument that is positive now: guarded to stay so (an integer
    division by it is then the same in NumPy and torch)."""
    if not isinstance(v, NumpyNdarrayVariable) or v._specialize is None or v.np_dtype().kind not in "iu":
        return False
    if not v._specialize[0] > 0:
        return False
    from ember.capture.sources import ApplySource
    tx.guards.equals(ApplySource(_positive, (v.source,)), True)
    return True


def _spec_constant(c):
    np = _np()
    if isinstance(c, np.generic):
        if isinstance(c, (np.datetime64, np.timedelta64, np.void, np.str_, np.bytes_, np.object_)):
            raise unsupported("EB0053", f"a {type(c).__name__} scalar in NumPy code")
        return _NpScalar(c.item(), c.dtype.name)
    if isinstance(c, np.dtype):
        return c.name
    if isinstance(c, type) and issubclass(c, np.generic):
        return np.dtype(c).name
    if isinstance(c, (tuple, list)):
        return type(c)(_spec_constant(x) for x in c)
    if isinstance(c, slice):
        return slice(_spec_constant(c.start), _spec_constant(c.stop), _spec_constant(c.step))
    if c is None or c is Ellipsis or type(c) in (int, float, bool, str, complex):
        return c
    if isinstance(c, type) and c in (int, float, bool, complex):
        return c
    raise unsupported("EB0053", f"a {type(c).__name__} constant in NumPy code")


def _symbolic(vt) -> bool:
    from ember.capture.variables.symbolic import SymNodeVariable
    from ember.fake.symbolic import has_symbols
    return isinstance(vt, SymNodeVariable) and has_symbols(vt.sym)


def _hint(v):
    """A size or symbolic int's value for the current inputs, recording no guard."""
    if isinstance(v, (torch.SymInt, torch.SymFloat, torch.SymBool)):
        node = v.node
        hint = node.hint if node.has_hint() else None
        if hint is None:
            raise unsupported("EB0053", "a NumPy argument of an unbacked size")
        return hint
    return v


_INPLACE_OPS = {operator.iadd, operator.isub, operator.imul, operator.itruediv, operator.ifloordiv,
                operator.imod, operator.ipow, operator.iand, operator.ior, operator.ixor,
                operator.ilshift, operator.irshift, operator.imatmul}


def _wrap(result, expected, label, kind, target, args, kwargs):
    """The graph's result as NumPy trackers, shaped as the probe's."""
    from ember.capture.variables.containers import ListVariable, TupleVariable
    from ember.capture.variables.numpy_probe import _agree, _Same
    from ember.capture.variables.tensor import TensorVariable
    np = _np()
    if isinstance(expected, _Same):
        same = args[expected.key] if isinstance(expected.key, int) else kwargs[expected.key]
        if not isinstance(result, TensorVariable) or not isinstance(same, NumpyNdarrayVariable) \
                or result.fake is not same.tensor.fake:
            raise unsupported("EB0053", f"torch._numpy's {label} made a new array where NumPy returns its argument")
        return same  # `a += 1` is `a` itself
    fake = _fakes(result)
    _agree(expected, fake, label)

    def build(r, e):
        if isinstance(r, TensorVariable):
            return NumpyNdarrayVariable(r, scalar=isinstance(e, np.generic),
                                        readonly=isinstance(e, np.ndarray) and not e.flags.writeable)
        if isinstance(r, (TupleVariable, ListVariable)):
            items = [build(i, x) for i, x in zip(r.items, e)]
            return ListVariable(items) if type(e) is list else TupleVariable(items)
        return r
    return build(result, expected)


def _fakes(vt):
    from ember.capture.variables.containers import ListVariable, TupleVariable
    from ember.capture.variables.tensor import TensorVariable
    if isinstance(vt, TensorVariable):
        return vt.fake
    if isinstance(vt, (TupleVariable, ListVariable)):
        items = [_fakes(i) for i in vt.items]
        return items if isinstance(vt, ListVariable) else tuple(items)
    if vt.is_constant():
        return vt.as_constant()
    raise unsupported("EB0053", f"torch._numpy returned {vt.describe()}")
