"""Functions marked ``nonstrict_trace`` (torch's decorator): one opaque call in the graph.

The trace does not follow the function's body. It runs the function once, now, on the fake tensors
of its arguments to learn what it returns, and the graph gets one node that calls the real function
at run time: a backend that runs the graph as it is runs the function itself (any Python in it,
graph breaks included, runs as eager would); an AOT backend traces through it like any other Python
the graph calls. This is torch's documented contract for the decorator (``nonstrict``: the
function must not depend on, or make, mutations the rest of the compiled region sees).

Supported arguments: tensors, Python constants (baked into the call, guarded as constants are),
lists, tuples and dicts of them, and objects of classes registered as pytree nodes (their
``flatten_fn`` traced on the object; the call gets a copy rebuilt by ``unflatten_fn``, as in torch). Results: tensors, symbolic sizes, constants, and tuples/lists of
them; the run-time result must have the structure the trace saw (else the call raises). Anything
else — a user object, a module, a function that changes an argument in place — is a graph break
at the call, which then runs eagerly.
"""
from __future__ import annotations

import os
import types

import torch

from ember.capture.variables.base import ConstantVariable, VariableTracker, unsupported

_CONSTANT_TYPES = (int, float, bool, str, type(None), torch.dtype, torch.device)


def is_nonstrict_wrapper(fn) -> bool:
    """``fn`` is the wrapper torch's ``nonstrict_trace`` decorator returns (it keeps the decorated
    function as ``__wrapped__``; its code is the decorator's own local ``wrapped``)."""
    code = getattr(fn, "__code__", None)
    return (isinstance(fn, types.FunctionType) and code is not None
            and code.co_qualname == "nonstrict_trace.<locals>.wrapped"
            and code.co_filename.endswith(os.path.join("_dynamo", "decorators.py"))
            and isinstance(getattr(fn, "__wrapped__", None), types.FunctionType))


def wrap_function_wrapper(guards, value, source):
    """The tracker of a TorchScript function or a ``nonstrict_trace`` wrapper (pinned by identity),
    or None if ``value`` is neither (see ``builder.wrap``)."""
    if type(value) is torch.jit.ScriptFunction:
        from ember.capture.variables.script_functions import wrap_script_function
        return wrap_script_function(guards, value, source)
    if not is_nonstrict_wrapper(value):
        return None
    if source is not None:
        guards.id_match(source, value)
    return NonstrictFunctionVariable(value.__wrapped__, source)


class NonstrictFunctionVariable(VariableTracker):
    """A ``nonstrict_trace`` function: calls become one opaque graph node (see module docstring)."""

    def __init__(self, inner, source=None):
        self.inner = inner  # the decorated function
        self.source = source

    def describe(self):
        return f"nonstrict_trace function {getattr(self.inner, '__qualname__', self.inner)}"

    def python_type(self):
        return types.FunctionType

    def truth(self, tx):
        return True

    def call(self, tx, args, kwargs):
        return call_nonstrict(tx, self.inner, list(args), dict(kwargs))


def nonstrict_of(args: list, kwargs: dict) -> VariableTracker:
    """``nonstrict_trace(fn)`` called in the frame, on a function defined outside it."""
    from ember.capture.variables.functions import UserFunctionVariable
    fn = args[0] if len(args) == 1 and not kwargs else kwargs.get("traceable_fn") if not args and len(kwargs) == 1 \
        else None
    if type(fn) is not UserFunctionVariable or not isinstance(fn.fn, types.FunctionType):
        raise unsupported("EB0027", "nonstrict_trace() of a function defined inside the compiled region")
    return NonstrictFunctionVariable(fn.fn)


class _Slot:
    """Where the ``index``-th tensor argument (or result) goes in a structure."""
    __slots__ = ("index",)

    def __init__(self, index):
        self.index = index

    def __eq__(self, other):
        return isinstance(other, _Slot) and other.index == self.index

    __hash__ = None


def _lower(vt, slots: list, tx):
    """The structure of argument ``vt`` with its tensors replaced by slots (their trackers in ``slots``)."""
    from ember.capture.variables.containers import DictVariable, ListVariable, TupleVariable
    from ember.capture.variables.tensor import TensorVariable
    if isinstance(vt, TensorVariable):
        slots.append(vt)
        return _Slot(len(slots) - 1)
    if isinstance(vt, TupleVariable) and getattr(vt, "tuple_type", None) in (None, tuple):
        return tuple(_lower(i, slots, tx) for i in vt.items)
    if isinstance(vt, ListVariable) and vt.list_cls is list:
        return [_lower(i, slots, tx) for i in vt.items]
    if isinstance(vt, DictVariable) and vt.dict_cls is dict:
        out = {}
        for k, v in vt.items.items():
            key_vt = vt.keys.get(k)
            if key_vt is None or not key_vt.is_constant() or not isinstance(key_vt.as_constant(), _CONSTANT_TYPES):
                raise unsupported("EB0033", "a nonstrict_trace function called with a dict whose keys are not constants")
            out[key_vt.as_constant()] = _lower(v, slots, tx)
        return out
    if vt.is_constant():
        value = vt.as_constant()
        if type(value) in _CONSTANT_TYPES:
            return value
    node = _pytree_node(vt)
    if node is not None:
        return _lower_pytree(vt, node, slots, tx)
    raise unsupported("EB0033", f"a nonstrict_trace function called with {vt.describe()} "
                      "(tensors, constants and lists/tuples/dicts of them are supported)")


def _pytree_node(vt):
    """torch's pytree registration of ``vt``'s class (a user class registered as a pytree node), or None."""
    from ember.capture.variables.new_object import NewObjectVariable
    from ember.capture.variables.objects import UserObjectVariable
    if not isinstance(vt, (UserObjectVariable, NewObjectVariable)):
        return None
    import torch.utils._pytree as pytree
    node = pytree.SUPPORTED_NODES.get(vt.python_type())
    if node is None or not isinstance(node.flatten_fn, types.FunctionType) \
            or not isinstance(node.unflatten_fn, types.FunctionType):
        return None
    return node


class _Node:
    """A pytree node: rebuilt by its class's ``unflatten_fn(children, context)``."""
    __slots__ = ("unflatten", "context", "children")

    def __init__(self, unflatten, context, children):
        self.unflatten, self.context, self.children = unflatten, context, children


def _lower_pytree(vt, node, slots: list, tx):
    """A user object of a pytree-registered class: its ``flatten_fn`` traced on it (children, which are
    lowered in turn, and a context that must be a constant); rebuilt by ``unflatten_fn`` for the call."""
    from ember.capture.variables.containers import ListVariable, TupleVariable
    from ember.capture.variables.functions import UserFunctionVariable
    flat = UserFunctionVariable(node.flatten_fn).call(tx, [vt], {})
    if not isinstance(flat, (TupleVariable, ListVariable)) or len(flat.items) != 2:
        raise unsupported("EB0033", f"the pytree flatten of {vt.describe()} returned {flat.describe()}")
    children, context = flat.items
    if not isinstance(children, (TupleVariable, ListVariable)) or not context.is_constant():
        raise unsupported("EB0033", f"the pytree flatten of {vt.describe()}: children not a sequence, or a context "
                          "that is not a constant")
    return _Node(node.unflatten_fn, context.as_constant(), [_lower(c, slots, tx) for c in children.items])


def _fill(structure, values):
    if isinstance(structure, _Slot):
        return values[structure.index]
    if isinstance(structure, _Node):
        return structure.unflatten([_fill(c, values) for c in structure.children], structure.context)
    if isinstance(structure, tuple):
        return tuple(_fill(i, values) for i in structure)
    if isinstance(structure, list):
        return [_fill(i, values) for i in structure]
    if isinstance(structure, dict):
        return {k: _fill(v, values) for k, v in structure.items()}
    return structure


def _raise_result(structure, flat: list):
    """The result's structure with tensors and symbolic sizes replaced by slots (those in ``flat``)."""
    from ember.fake.symbolic import has_symbols
    if isinstance(structure, torch.Tensor) or isinstance(structure, (torch.SymInt, torch.SymFloat, torch.SymBool)) \
            and has_symbols(structure):
        flat.append(structure)
        return _Slot(len(flat) - 1)
    if type(structure) in (tuple, list):
        return type(structure)(_raise_result(i, flat) for i in structure)
    if type(structure) in _CONSTANT_TYPES:
        return structure
    raise unsupported("EB0033", f"a nonstrict_trace function returning {type(structure).__name__} "
                      "(tensors, sizes, constants and tuples/lists of them are supported)")


def _run_time_call(inner, arg_structure, result_structure):
    """The graph node's target: ``inner`` on the run-time tensors, flattened as at trace time."""
    def nonstrict_call(*tensors):
        args, kwargs = _fill(arg_structure, tensors)
        with _closed_over_tensors(tensors):
            out = inner(*args, **kwargs)
        flat = []
        if _flatten_like(out, result_structure, flat):
            return tuple(flat)
        raise RuntimeError(f"nonstrict_trace function {getattr(inner, '__qualname__', inner)} returned a result "
                           "of another structure than when it was traced")
    nonstrict_call.__qualname__ = nonstrict_call.__name__ = f"nonstrict_{getattr(inner, '__name__', 'call')}"
    return nonstrict_call


class _closed_over_tensors:
    """While a backend traces the call on fake tensors (the AOT layer): real tensors the function
    closes over are constants of that trace, as when it ran at capture time."""

    def __init__(self, tensors):
        from torch._guards import detect_fake_mode
        self.mode = detect_fake_mode(tensors) if any(isinstance(t, torch.Tensor) for t in tensors) else None

    def __enter__(self):
        if self.mode is not None:
            self.allowed, self.mode.allow_non_fake_inputs = self.mode.allow_non_fake_inputs, True

    def __exit__(self, *exc):
        if self.mode is not None:
            self.mode.allow_non_fake_inputs = self.allowed


def _flatten_like(value, structure, flat: list) -> bool:
    if isinstance(structure, _Slot):
        flat.append(value)
        return True
    if type(structure) in (tuple, list):
        return type(value) is type(structure) and len(value) == len(structure) and all(
            _flatten_like(v, s, flat) for v, s in zip(value, structure))
    return type(value) is type(structure) and value == structure


def call_nonstrict(tx, inner, args: list, kwargs: dict) -> VariableTracker:
    from ember.capture.variables.containers import ListVariable, TupleVariable
    slots: list = []
    arg_structure = (tuple(_lower(a, slots, tx) for a in args), {k: _lower(v, slots, tx) for k, v in kwargs.items()})
    output = tx.output
    fakes = [s.fake for s in slots]
    if any(f.is_inference() for f in fakes):  # (no version counter: a write could not be seen)
        raise unsupported("EB0033", "a nonstrict_trace function with an inference tensor argument")
    versions = [f._version for f in fakes]
    mode = output.fake.mode
    allowed, mode.allow_non_fake_inputs = mode.allow_non_fake_inputs, True  # (tensors it closes over)
    try:
        with output.fake.enabled():
            call_args, call_kwargs = _fill(arg_structure, fakes)
            result = inner(*call_args, **call_kwargs)
    except Exception as e:  # noqa: BLE001 — run at the break, eagerly, it raises as it should
        raise unsupported("EB0033", f"a nonstrict_trace function raised {type(e).__name__} on fake tensors") from None
    finally:
        mode.allow_non_fake_inputs = allowed
    if any(f._version != v for f, v in zip(fakes, versions)):
        raise unsupported("EB0033", "a nonstrict_trace function that changes an argument in place")
    flat: list = []
    result_structure = _raise_result(result, flat)
    if any(isinstance(t, torch.Tensor) and type(t).__name__ != "FakeTensor" for t in flat):
        raise unsupported("EB0033", "a nonstrict_trace function returning a tensor from outside its arguments")
    node = output.graph.call_function(_run_time_call(inner, arg_structure, result_structure),
                                      tuple(s.node for s in slots))
    if output.current_location:
        node.meta["stack_trace"] = output.stack_trace()
    items = output._wrap_result(node, tuple(flat)).items if flat else []

    def build(structure):
        if isinstance(structure, _Slot):
            return items[structure.index]
        if isinstance(structure, tuple):
            return TupleVariable([build(i) for i in structure])
        if isinstance(structure, list):
            return ListVariable([build(i) for i in structure])
        return ConstantVariable(structure)
    return build(result_structure)
