"""Trackers lowered to what an FX node takes: ``_lower`` turns a value the trace holds (tensors,
symbolic sizes, containers, constants) into (fx argument, fake value) pairs of the same
structure, for ``OutputGraph._call`` and TorchScript method calls."""
from __future__ import annotations

import operator

import torch

from ember.capture.variables.base import ConstantVariable, VariableTracker, unsupported
from ember.capture.variables.containers import DictVariable, ListVariable, TupleVariable
from ember.capture.variables.symbolic import SymNodeVariable, SymSliceVariable
from ember.capture.variables.tensor import TensorVariable
from ember.fake.symbolic import has_symbols, plain


# Python scalar types torch accepts where it takes a dtype (fx cannot print the class into code).
_PYTHON_SCALAR_TYPES = {bool: torch.bool, int: torch.int64, float: torch.float64, complex: torch.complex128}


def _has_numpy_scalar(values) -> bool:
    for v in values:
        if type(v) in (TupleVariable, ListVariable):  # (not a lazy list: reading its items guards them)
            if _has_numpy_scalar(v.items):
                return True
        elif type(v) is ConstantVariable and type(v.value).__module__ == "numpy":  # (how numpy_arrays wraps one)
            return True
        elif type(v).__name__ == "NumpyNdarrayVariable":  # (a NumPy scalar argument, unspecialized)
            return True
    return False


# The torch functions that read a NumPy scalar's own dtype (torch.tensor(np.int8(2)) is int8,
# torch.tensor(2) int64); every other torch function and method reads it as the Python number it holds.
NUMPY_TYPED_CONSTRUCTORS = (torch.tensor, torch.as_tensor, torch.asarray)


def _numpy_scalar_value(value) -> bool:
    import sys
    np = sys.modules.get("numpy")
    return np is not None and isinstance(value, np.generic) and value.dtype.kind in "biufc"


def numpy_scalar_arguments(output, kind, target, args, kwargs, label: str):
    """The arguments of a torch call some of which are NumPy scalars, as eager reads them."""
    if kind == "call_function" and target in NUMPY_TYPED_CONSTRUCTORS and len(args) == 1 \
            and type(args[0]) is ConstantVariable and _numpy_scalar_value(args[0].value):
        # torch.tensor(np.float32(1.5)) of a constant: the number, with the scalar's dtype
        value = args[0].value
        dtype = ConstantVariable(torch.from_numpy(type(value)(0).reshape(1)).dtype)
        return [ConstantVariable(value.item())], {"dtype": dtype, **kwargs}
    if kind == "call_function" and target in NUMPY_TYPED_CONSTRUCTORS:
        # torch.tensor(np.int8(2)) is int8, torch.tensor(2) int64 (the other torch functions
        # and methods read a NumPy scalar as the Python number it holds)
        raise unsupported("EB0030", f"a NumPy scalar passed to {label}")
    return (numbers_of_numpy_scalars(output, list(args)),
            dict(zip(kwargs, numbers_of_numpy_scalars(output, list(kwargs.values())))))


def numbers_of_numpy_scalars(output, values: list) -> list:
    """``values`` with each NumPy int or float scalar (also inside a tuple or list) replaced by the
    Python number eager reads it as (``torch.zeros(n)``, ``x.new_ones((n, 2))``, ``torch.full((2,),
    v)``): an unspecialized NumPy int argument becomes a symbolic int (one graph for every value,
    as ``int(n)`` makes it), anything else its value, guarded. NumPy bools stay (eager reads them
    as floats in some places, as bools in others: ``_numpy_constant`` refuses them)."""
    import numpy as np
    from ember.capture.variables.numpy_arrays import NumpyNdarrayVariable, symbolic_int_of_output
    out = []
    for v in values:
        if type(v) in (TupleVariable, ListVariable) and _has_numpy_scalar(v.items):
            v = type(v)(numbers_of_numpy_scalars(output, v.items))
        elif type(v) is ConstantVariable and isinstance(v.value, (np.integer, np.floating)) \
                and not isinstance(v.value, np.bool_):
            v = ConstantVariable(v.value.item())
        elif isinstance(v, NumpyNdarrayVariable) and v.scalar and v.is_constant() \
                and v.np_dtype().kind in "iuf":
            v = symbolic_int_of_output(output, v) or ConstantVariable(v.as_constant().item())
        out.append(v)
    return out


_POW_FUNCTIONS = (operator.pow, operator.ipow, torch.pow)
_POW_METHODS = ("pow", "pow_", "__pow__", "__ipow__", "__rpow__")


def symbolic_pow_as_float(output, kind, target, args: list) -> list | None:
    """``x ** n`` of a floating tensor that requires grad and a symbolic int: the int as a symbolic
    float, the same power for a floating tensor (the exponent is read as the tensor's dtype either
    way); ``n ** x``: the number's value, guarded. pow's autograd formulas compare a Scalar
    exponent with 0 and take the log of a Scalar base, which a SymInt cannot do ("NYI SymInt
    equality" while tracing the backward: the frame ran eagerly). None: not such a call."""
    if len(args) != 2 or not (kind == "call_function" and target in _POW_FUNCTIONS
                              or kind == "call_method" and target in _POW_METHODS):
        return None
    base, exponent = args
    if kind == "call_method" and target == "__rpow__":
        base, exponent = exponent, base
    if isinstance(base, TensorVariable) and isinstance(exponent, SymNodeVariable):
        tensor, number = base, exponent
    elif isinstance(exponent, TensorVariable) and isinstance(base, SymNodeVariable):
        tensor, number = exponent, base
    else:
        return None
    if not (tensor.fake.requires_grad and tensor.fake.is_floating_point()):
        return None
    if not isinstance(number.sym, torch.SymInt):
        return None
    if number is base:
        converted = ConstantVariable(number.as_constant())
    else:
        converted = output.call_function(torch.sym_float, [number], {})
    return [converted if a is number else a for a in args]


def _numpy_constant(c):
    """A NumPy scalar passed to a torch operation (``x * np.float32(2.0)``): torch reads a float or
    int NumPy scalar as the Python number it holds (fx cannot print the NumPy object into code);
    other NumPy values (bool scalars, which torch promotes differently, dtypes) break."""
    import numpy as np
    if isinstance(c, (np.floating, np.integer)) and not isinstance(c, np.bool_):
        value = c.item()
        return value, value
    raise unsupported("EB0030", f"passing NumPy's {type(c).__name__} to a torch operation")


def _lower(value):
    """Trackers → (fx argument, fake value) with the same structure."""
    if isinstance(value, TensorVariable):
        if value.fake.__dict__.get("_ember_data_replaced"):
            from ember.capture.variables.tensor import check_data_not_replaced
            check_data_not_replaced(value)
        return value.node, value.fake
    if isinstance(value, SymNodeVariable):
        return value.node, value.sym
    if isinstance(value, SymSliceVariable):
        pairs = [_lower(p) for p in value.parts]
        return slice(*[p[0] for p in pairs]), slice(*[p[1] for p in pairs])
    if isinstance(value, (list, tuple)) and not isinstance(value, VariableTracker):
        pairs = [_lower(v) for v in value]
        return type(value)(p[0] for p in pairs), type(value)(p[1] for p in pairs)
    if isinstance(value, dict):
        pairs = {k: _lower(v) for k, v in value.items()}
        return {k: p[0] for k, p in pairs.items()}, {k: p[1] for k, p in pairs.items()}
    if isinstance(value, (TupleVariable, ListVariable)):
        pairs = [_lower(v) for v in value.items]
        kind = list if isinstance(value, ListVariable) else tuple
        return kind(p[0] for p in pairs), kind(p[1] for p in pairs)
    if isinstance(value, DictVariable):
        pairs = {k: _lower(v) for k, v in value.items.items()}
        return {k: p[0] for k, p in pairs.items()}, {k: p[1] for k, p in pairs.items()}
    if isinstance(value, VariableTracker):
        graph_value = getattr(value, "graph_value", None)  # a TorchScript object (script_objects.py)
        if graph_value is not None:
            return graph_value()
        if value.is_constant():
            c = value.as_constant()
            if has_symbols(c):  # a size some other path kept as a constant: its value, guarded
                c = plain(c)
            if type(c) is type and c in _PYTHON_SCALAR_TYPES:  # x.to(bool): the dtype torch reads it as
                return _PYTHON_SCALAR_TYPES[c], c
            if type(c).__module__ == "numpy" or isinstance(c, type) and c.__module__ == "numpy":
                return _numpy_constant(c)
            return c, c
        raise unsupported("EB0030", f"passing {value.describe()} to a torch operation")
    return value, value


_SIZE_ARITHMETIC = {operator.eq, operator.ne, operator.lt, operator.le, operator.gt, operator.ge, operator.add,
                    operator.sub, operator.mul, operator.floordiv, operator.mod, operator.truediv, operator.neg,
                    operator.getitem, operator.not_, getattr}
_SIZE_METHODS = {"size", "dim", "stride", "numel"}


def unused_size_arithmetic(graph) -> set:
    """The nodes of ``graph`` that only compute sizes (``x.shape[0] == 3`` on a dynamic size) and
    that nothing reads: the trace already decided on them (a guard). A graph of only these, whose
    output reads none of them, has nothing to run."""
    dead: set = set()
    for n in reversed(graph.nodes):
        if n.op not in ("call_function", "call_method") or n.meta.get("unbacked_bindings"):
            continue
        if isinstance(n.meta.get("example_value"), torch.Tensor):
            continue
        if not (n.op == "call_function" and n.target in _SIZE_ARITHMETIC
                or n.op == "call_method" and n.target in _SIZE_METHODS):
            continue
        if all(u in dead for u in n.users):
            dead.add(n)
    return dead
