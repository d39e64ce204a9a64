"""wrap(): turn a real Python value read from outside the frame into a tracker.

This is where guards come from: whatever the trace learns about a value with
a source (its type, identity, constant value, tensor metadata) is pinned by a
guard on that source.
"""
from __future__ import annotations

import collections
import enum
import functools
import itertools
import math
import inspect
import os
import sys
import types
import weakref

import torch

from ember.capture.dynamic_dims import named_dynamic
from ember.capture.eager_frames import wrapper_variable
from ember.torch_config import allowed_in_graph
from ember.capture.variables.random_draws import is_random_draw
from ember.capture.sources import (AttrSource, CallSource, CellContentsSource, ConstSource, FreeCellSource, GlobalSource, ItemSource,
                                   LocalSource)
from ember.capture.variables.base import ConstantVariable, LazyGuardedConstant, VariableTracker, unsupported

_CONSTANT_TYPES = (int, float, bool, str, bytes, complex, type(None), torch.dtype, torch.device,
                   torch.layout, torch.memory_format, torch.Size, type(Ellipsis), type(NotImplemented),
                   slice, range)

# Python functions under these torch packages are inlined, not put in the graph as calls.
_INLINED_TORCH_PREFIXES = ("torch.nn.modules", "torch.nn.utils.parametriz", "torch.nn.utils.clip_grad", "torch.utils._contextlib",
                           "torch.nn.parameter", "torch.distributions")
_TRUSTED_MODULES = ("torch", "math", "operator", "builtins", "functools", "itertools", "collections",
                    "typing", "warnings", "inspect", "types", "enum", "dataclasses")


def constant_answers() -> dict:
    """torch's functions whose answer under ember is a known constant (also ones in code ember
    inlines, such as ``torch.nn.modules``)."""
    from ember.capture.variables.torch_fn import _CONSTANT_ANSWERS
    return _CONSTANT_ANSWERS


def is_torch_callable(value) -> bool:
    """True for callables that belong in the graph as one call: torch ops and functions."""
    if isinstance(value, (torch._ops.OpOverload, torch._ops.OpOverloadPacket)):
        return True
    # (only attributes of function and descriptor types are read: a user object's __getattr__ must
    # not run while ember looks at it)
    if isinstance(value, _DESCRIPTOR_TYPES):
        objclass = getattr(value, "__objclass__", None)
        if isinstance(objclass, type) and issubclass(objclass, torch._C.TensorBase):
            return True  # torch.Tensor.add and friends
    if isinstance(value, types.BuiltinFunctionType):
        module = value.__module__ or ""
        return module.startswith("torch") or (value.__self__ is not None
                                              and type(value.__self__).__module__.startswith("torch"))
    if isinstance(value, types.FunctionType):
        module = value.__module__ or ""
        return (module == "torch" or module.startswith("torch.")) and not module.startswith(_INLINED_TORCH_PREFIXES)
    return False


_DESCRIPTOR_TYPES = (types.MethodDescriptorType, types.WrapperDescriptorType, types.ClassMethodDescriptorType,
                     types.GetSetDescriptorType, types.MemberDescriptorType)


# Standard-library modules whose Python functions are called, never traced: their bodies (the regex
# parser and compiler, caches keyed by arguments, C helpers) would only graph-break many times over.
_OPAQUE_MODULES = ("re", "re._parser", "re._compiler", "re._casefix", "sre_parse", "sre_compile")


def is_opaque_library_function(fn) -> bool:
    """A Python function of an ``_OPAQUE_MODULES`` module: one graph break at its call, run as is."""
    return getattr(fn, "__module__", None) in _OPAQUE_MODULES


def wrap(tx, value, source) -> VariableTracker:
    """The tracker for ``value`` read from ``source`` (the same tracker every time in one trace,
    so mutations through one read are seen by the next)."""
    if source is None:
        return _wrap(tx, value, None)
    memo = tx.output.source_memo
    hit = memo.get(source)
    if hit is not None and hit[0] is value:
        return hit[1]
    mutable = _aliasable(value)
    if mutable:
        # One mutable object reached from two sources (`f(lst, lst)`, or a resume function's
        # arguments after a graph break) is one tracker: a mutation through one name shows through
        # the other. Guarded both ways: aliased here, distinct from the other objects of its type.
        key = ("object", type(value))
        seen = memo.setdefault(key, {})
        alias = seen.get(id(value))
        if alias is not None and alias[0] is value:
            tx.guards.same_object(source, alias[2])
            memo[source] = (value, alias[1])
            return alias[1]
    vt = _wrap(tx, value, source)
    memo[source] = (value, vt)
    if mutable and vt.source is not None:
        # The source it was read from, kept here: a tracker may drop its source later (a **kwargs
        # dict is the frame's own).
        for _, _, other_source in list(seen.values())[:_MAX_DISTINCT_GUARDS]:
            if other_source != source:  # (a property making a new list per read: the same source)
                tx.guards.distinct_objects(source, other_source)
        seen[id(value)] = (value, vt, source)
    return vt


# Types whose instances the frame can mutate in place, and which more than one argument or
# attribute of the frame commonly holds: their trackers are shared by identity (see wrap).
_MAX_DISTINCT_GUARDS = 32
_ALIASABLE = frozenset({list, dict, set, type(iter([])), type(iter(())), type(iter(range(0)))})
_ALIASABLE_BY_TYPE: "weakref.WeakKeyDictionary[type, bool]" = weakref.WeakKeyDictionary()  # (classes die)


def _aliasable(value) -> bool:
    """Also subclasses of the mutable builtins (Counter, OrderedDict, defaultdict), deques, and
    instances of Python classes (their attributes are written through one name, read through
    another); not modules, tensors, functions or classes (tracked by identity another way)."""
    t = type(value)
    if t in _ALIASABLE:
        return True
    known = _ALIASABLE_BY_TYPE.get(t)
    if known is None:
        if issubclass(t, (torch.Tensor, torch.nn.Module, type, types.ModuleType, types.FunctionType,
                          types.MethodType, types.BuiltinFunctionType, enum.Enum, tuple, str, bytes,
                          int, float, frozenset, functools.partial)):
            known = False
        elif issubclass(t, (list, dict, set, collections.deque)):
            known = True
        else:
            known = t.__module__ not in ("builtins", "torch") and not t.__module__.startswith("torch.") \
                and hasattr(t, "__dict__") and "__dict__" in dir(t) and not getattr(t, "__slots__", None)
        _ALIASABLE_BY_TYPE[t] = known
    return known


def _wrap(tx, value, source) -> VariableTracker:
    from ember.capture.variables.builtins import BuiltinVariable
    from ember.capture.variables.containers import DictVariable, ListVariable, SetVariable, TupleVariable
    from ember.capture.variables.functions import PartialVariable, UserFunctionVariable, UserMethodVariable
    from ember.capture.variables.objects import (ClassVariable, NNModuleVariable, PythonModuleVariable,
                                                 UserObjectVariable)
    from ember.capture.variables.torch_fn import TorchFunctionVariable
    guards = tx.guards

    if isinstance(value, torch.Tensor):
        if value.layout != torch.strided or value.is_nested:
            # sparse / mkldnn layouts: fake tensors and functionalization do not model them faithfully
            # (a sparse Adam step gave wrong moments), so code on them runs eagerly; nor a strided
            # nested tensor (its sizes raise: "NestedTensorImpl doesn't support sizes")
            kind = "a nested tensor" if value.is_nested else f"a tensor with layout {value.layout}"
            raise unsupported("EB0022", f"{kind} in the compiled region")
        if source is None:
            source = ConstSource(value, f"<constant tensor {tuple(value.shape)}>")
        return tx.output.add_input(source, value)

    if isinstance(value, torch.ScriptObject):  # torchbind objects: see variables/script_objects.py
        from ember.capture.variables.script_objects import wrap_script_object
        return wrap_script_object(tx, value, source)

    from ember.capture.variables.numpy_arrays import is_numpy_value
    if is_numpy_value(value):  # arrays as tensors, NumPy scalars and dtypes as constants, np.<fn>
        from ember.capture.variables.numpy_arrays import wrap_numpy
        return wrap_numpy(tx, value, source)

    t = type(value)
    traced_as = getattr(t, "_ember_traced_as", None)
    if traced_as is not None and traced_as(value) is not None:
        # Something ember.compile returned, called inside a traced frame: trace what it wraps
        # (one graph, the outer frame's backend), read through its attribute.
        attr = traced_as(value)
        if source is not None:
            guards.type_match(source, value)
            if isinstance(value, torch.nn.Module):
                guards.hook_keys(source, [], [])  # hooks on the wrapper itself would run around it
        return wrap(tx, getattr(value, attr), AttrSource(source, attr) if source is not None else None)
    if t in _CONSTANT_TYPES or isinstance(value, (torch.dtype, torch.device)):
        if source is not None:
            if t in (slice, range):
                guards.type_match(source, value)
                guards.equals(source, value)
            elif t in (int, float):
                # Type now; the value only if the trace uses it (see LazyGuardedConstant).
                guards.type_match(source, value)
                # (an int: an argument of the frame, or an item of a tuple/list/dict argument such as
                # *args: torch specialises globals and attributes; a finite float from anywhere)
                eligible = (_argument_item(tx, source) if t is int else
                            math.isfinite(value) and _float_source(source)) or \
                    ((t is int or math.isfinite(value)) and named_dynamic(source, value))
                symbolic = tx.output.symbolic_int(source, value) if eligible else None
                if not eligible and tx.output.frame_sizes is not None:
                    # seen all the same (a global int that changed, then a float there, is a symbol at
                    # once: torch's automatic dynamic records every scalar source)
                    tx.output.frame_sizes.int_is_dynamic(source.name(), value)
                if symbolic is not None:  # a value that changed between compiles: a symbol
                    return symbolic
                return LazyGuardedConstant(value, source, functools.partial(guards.constant_match, source, value))
            else:
                guards.constant_match(source, value)
        return ConstantVariable(value, source)

    if isinstance(value, enum.Enum):
        if source is not None:
            guards.id_match(source, value)
        return ConstantVariable(value, source)

    if t is torch.torch_version.TorchVersion:
        # `torch.__version__`: a str whose comparisons parse versions (pure): a constant, guarded
        # by type and text
        if source is not None:
            guards.type_match(source, value)
            guards.equals(CallSource(str.__str__, source, ()), str.__str__(value))
        return ConstantVariable(value, source)

    if t is _LIST_ITERATOR and source is not None and _already_wrapped(tx, list_iterator_state(value)[0]):
        # A list iterator reads its list as it is when advanced: when the frame also holds the
        # list (`it = iter(lst)` live across a graph break with `lst`), track the list itself (the
        # same tracker, see wrap) and the position in it, so `lst.append` shows through `it`.
        # (Otherwise it is iterated as a snapshot below, which is shared across positions.)
        from ember.capture.variables.containers import ListIteratorVariable
        seq, start = list_iterator_state(value)
        guards.type_match(source, value)
        guards.equals(CallSource(list_iterator_index, source, ()), start)
        seq_vt = wrap(tx, seq, CallSource(list_iterator_list, source, ()))
        return ListIteratorVariable(seq_vt, start=start, source=source)

    from ember.capture.variables.dict_views import ResumedDictIterator
    if t is ResumedDictIterator and value.it is not None:  # a dict iterator handed on at a graph break
        if source is not None:
            guards.type_match(source, value)
        return wrap(tx, value.it, AttrSource(source, "it") if source is not None else None)

    if t in _ITERATOR_TYPES:
        from ember.capture.variables.containers import IteratorVariable
        rest = remaining_items(value)
        if source is not None:
            from ember.capture.variables.lazy import LazyIteratorVariable
            guards.type_match(source, value)
            return LazyIteratorVariable(tx, rest, source)
        return IteratorVariable([wrap(tx, v, None) for v in rest], source=source)

    if t is list and source is not None:
        from ember.capture.variables.lazy import LazyListVariable
        guards.type_match(source, value)
        return LazyListVariable(tx, value, source)

    if t is collections.deque and source is not None:
        from ember.capture.variables.deques import DequeVariable
        guards.type_match(source, value)
        guards.length(source, len(value))
        guards.constant_match(AttrSource(source, "maxlen"), value.maxlen)
        items = [wrap(tx, v, ItemSource(source, i)) for i, v in enumerate(value)]
        return DequeVariable(items, value.maxlen, source=source)

    if isinstance(value, list) and t is not list and source is not None:
        from ember.capture.variables.container_methods import list_subclass_input
        vt = list_subclass_input(tx, value, source)
        if vt is not None:
            return vt

    if t in (tuple, list) or (isinstance(value, tuple) and hasattr(t, "_fields")):
        if source is not None:
            guards.type_match(source, value)
            guards.length(source, len(value))
            if t is tuple:
                from ember.capture.variables.lazy_items import lazy_tuple
                return lazy_tuple(tx, value, source)
        items = [wrap(tx, v, ItemSource(source, i) if source is not None else None) for i, v in enumerate(value)]
        if t is list:
            return ListVariable(items, source)
        return TupleVariable(items, source, tuple_type=t if t is not tuple else None)

    if t is types.MappingProxyType:  # a live read-only view of a dict
        from ember.capture.variables.mapping_proxy import wrap_mapping_proxy
        return wrap_mapping_proxy(tx, value, source)
    original = value
    if t is dict and source is not None and all(type(k) in (str, int) for k in value):
        # a plain dict from outside: its keys and values are guarded as far as the trace reads them
        guards.type_match(source, original)
        from ember.capture.variables.dict_inputs import LazyDictVariable
        return LazyDictVariable(tx, value, source)
    if t is dict or (isinstance(value, dict) and t.__module__ == "collections"):
        from ember.capture.variables.dict_inputs import wrap_dict
        return wrap_dict(tx, value, source, t)
    if t in (set, frozenset):
        if not all(_set_item_by_value(v) for v in value):
            raise unsupported("EB0035", "a set of non-constant values")
        if source is not None:
            # By its items: equal values, and functions/classes by identity (the guard's copy holds
            # the very objects, so a nan item matches itself).
            guards.type_match(source, value)
            # the items with their types (1, 1.0 and True are equal) and the order they iterate in
            from ember.capture.sources import CallSource as _Call
            guards.equals(_Call(_typed_set_items, source, ()), _typed_set_items(value))
        # An object item is the very object the set guard pins: what the trace reads from it (an
        # attribute) is guarded through it (`for o in S: x * o.scale`, o.scale changed later).
        return SetVariable([ConstantVariable(v) if type(v) in (str, int, float, bool, type(None), complex, bytes)
                            else wrap(tx, v, ConstSource(v, f"<set item {type(v).__qualname__}>"))
                            for v in value], source, frozen=t is frozenset)

    if isinstance(value, torch.nn.Module):
        # By type, not identity: the modules of one class (the layers of a model) share compiled
        # code. Everything the trace reads from the module is guarded through its source
        # (parameters and buffers are graph inputs, attributes and submodules are re-read,
        # methods through the class); its structure where the trace iterates or measures it.
        if source is not None:
            tx.output.module_sources.add(source)  # (ints read through it stay constants)
        return _by_type(guards, NNModuleVariable(value, source), source, value)

    if value is sys.version_info:
        if source is not None:
            guards.id_match(source, value)  # (sys.version_info itself never changes)
        return ConstantVariable(value)  # an immutable structseq: compares and reads like the real one

    if isinstance(value, types.ModuleType):
        trusted = value.__name__.split(".")[0] in _TRUSTED_MODULES
        if source is not None and not trusted:
            guards.id_match(source, value)
        return PythonModuleVariable(value, source)

    if isinstance(value, type):
        # Identity, wherever it was read from: a global or attribute holding torch.nn.Linear may be
        # rebound to another class too. (Classes read from torch's own namespaces come without a
        # source: those namespaces are assumed not to be monkeypatched.)
        if source is not None:
            guards.id_match(source, value)
        return ClassVariable(value, source)

    if value is os.environ:
        from ember.capture.variables.environ import EnvironVariable
        return EnvironVariable(source)
    if value is inspect.signature:
        from ember.capture.variables.signatures import SignatureFunctionVariable
        return SignatureFunctionVariable()

    from ember.capture.graph_break import GradModeExit
    if type(value) is GradModeExit:
        if source is not None:
            guards.type_match(source, value)
            guards.constant_match(AttrSource(source, "prior"), value.prior)
        return GradModeExitVariable(value.prior, source)

    from ember.capture.variables.sdpa_kernels import SdpaExit, SdpaExitVariable
    if type(value) is SdpaExit:
        if source is not None:
            guards.type_match(source, value)
            guards.constant_match(AttrSource(source, "prior"), value.prior)
        return SdpaExitVariable(value, source)

    from ember.capture.variables.inference_breaks import InferenceBlock
    if type(value) is InferenceBlock:  # handed to a resume function, whose prologue enters it
        from ember.capture.variables.ctx_managers import InferenceModeVariable
        if source is not None:
            guards.type_match(source, value)
            guards.constant_match(AttrSource(source, "mode"), value.mode)
        return InferenceModeVariable(value.mode)

    from ember.capture.variables.autocast_breaks import AutocastExit, AutocastExitVariable
    if type(value) is AutocastExit:
        if source is not None:
            guards.type_match(source, value)
            for attr in ("device", "prior", "block"):
                guards.constant_match(AttrSource(source, attr), getattr(value, attr))
        return AutocastExitVariable(value, source)

    if value is object.__setattr__:
        from ember.capture.variables.new_object import ObjectSetattrFunction
        return ObjectSetattrFunction()
    if value is object.__delattr__:
        from ember.capture.variables.new_object import ObjectDelattrFunction
        return ObjectDelattrFunction()
    if value is torch.nn.Module.__setattr__:
        from ember.capture.variables.new_object import ModuleSetattrFunction
        return ModuleSetattrFunction()
    if value is object.__new__:
        from ember.capture.variables.new_object import ObjectNewFunction
        return ObjectNewFunction()
    if value is tuple.__new__:
        from ember.capture.variables.new_object import TupleNewFunction
        return TupleNewFunction()
    if value is list.__new__ or value is dict.__new__ or value is collections.OrderedDict.__new__:
        from ember.capture.variables.new_object import ContainerNewFunction
        return ContainerNewFunction(value.__self__)

    if isinstance(value, types.BuiltinMethodType) and isinstance(getattr(value, "__self__", None), type):
        from ember.compat import FUNCTION_APPLY, function_apply_class
        owner = function_apply_class(value)
        if owner is not None:  # `f = MyFunction.apply` kept, where torch's apply is in C (2.14+)
            from ember.capture.variables.functions import UserFunctionVariable, UserMethodVariable
            if source is not None:
                guards.id_match(source, value)
            return UserMethodVariable(UserFunctionVariable(FUNCTION_APPLY),
                                      wrap(tx, owner, AttrSource(source, "__self__") if source is not None else None), source)

    if isinstance(value, (types.BuiltinMethodType, types.MethodWrapperType)) and \
            isinstance(getattr(value, "__self__", None), torch.Tensor):
        # `x.to` handed over at a graph break: the method of the tensor (an input of the graph),
        # never a callable that holds this call's tensor inside the graph.
        from ember.capture.variables.tensor import TensorMethodVariable
        if source is None:
            raise unsupported("EB0031", f"a bound method {value.__name__} of a tensor ember cannot name")
        guards.type_match(source, value)
        guards.constant_match(AttrSource(source, "__name__"), value.__name__)
        return TensorMethodVariable(wrap(tx, value.__self__, AttrSource(source, "__self__")), value.__name__)

    if value is collections.namedtuple:  # the class made while tracing (variables/constructors.py)
        from ember.capture.variables.constructors import NamedTupleFactory
        if source is not None:
            guards.id_match(source, value)
        return NamedTupleFactory()

    if source is not None and is_random_draw(value):  # random.randint(1, 6): drawn before the graph
        from ember.capture.variables.random_draws import RandomDrawFunction
        guards.type_match(source, value)
        guards.type_match(AttrSource(source, "__self__"), value.__self__)  # (drawn from the one of each call)
        guards.constant_match(AttrSource(source, "__name__"), value.__name__)
        return RandomDrawFunction(value.__self__, value.__name__, source)

    if isinstance(value, types.BuiltinFunctionType) and value in _torch_polyfills():
        if source is not None:
            guards.id_match(source, value)
        return UserFunctionVariable(_torch_polyfills()[value])  # e.g. grouping tensors into a dict

    if isinstance(value, types.FunctionType):
        from ember.capture.polyfills.torch_utils import function_polyfill
        poly = function_polyfill(value)
        if poly is not None:
            if source is not None:
                guards.id_match(source, value)
            return UserFunctionVariable(poly)  # e.g. kl_divergence without its memo

    if isinstance(value, types.FunctionType) and value is functional_call_function():
        from ember.capture.variables.functional_call import FunctionalCallVariable
        if source is not None:
            guards.id_match(source, value)
        return FunctionalCallVariable(value, source)  # the module called with its tensors swapped

    if isinstance(value, types.FunctionType) and value in functorch_transforms():
        from ember.capture.variables.functorch_calls import FunctorchTransformVariable
        if source is not None:
            guards.id_match(source, value)
        return FunctorchTransformVariable(value, source)  # torch.func.grad and kin: one node

    if callable(value) and not is_torch_callable(value) and allowed_in_graph(value):
        if source is not None:  # (torch.compiler.allow_in_graph(fn): one node, never traced)
            guards.id_match(source, value)
        return TorchFunctionVariable(value, source)

    found = wrapper_variable(tx, value, source)  # (a SkippedFrame, a tracing setting's wrapper)
    if found is not None:
        return found

    if is_torch_callable(value) or (isinstance(value, types.FunctionType) and value in constant_answers()) \
            or value is torch.ops.higher_order.cond \
            or (type(value).__name__ == "Wrap" and type(value).__module__ == "torch._higher_order_ops.wrap"):
        # (torch.ops.higher_order.cond, the operator eager torch.cond calls: traced as torch.cond; the
        # `wrap` operator: its function called, variables/torch_fn.py)
        if source is not None:
            guards.id_match(source, value)  # `act = torch.relu` may later be rebound to torch.tanh
        return TorchFunctionVariable(value, source)

    if type(value) is torch.jit.ScriptFunction or type(value) is types.FunctionType and value.__code__.co_name == "wrapped":
        from ember.capture.variables.nonstrict import wrap_function_wrapper  # (TorchScript, nonstrict_trace)
        found = wrap_function_wrapper(guards, value, source)
        if found is not None:
            return found

    if isinstance(value, types.FunctionType) and is_opaque_library_function(value):
        if source is not None:
            guards.id_match(source, value)
        return OpaqueCallableVariable(value, source, f"calling {value.__module__}.{value.__qualname__} "
                                                     f"(a library ember does not trace into)")

    if isinstance(value, types.FunctionType):
        if source is not None:
            # What a trace bakes in from a Python function is its code and globals (defaults and
            # closure contents are guarded where they are read), so any function object with the
            # same code matches — a lambda made anew on every call does not recompile.
            guards.type_match(source, value)
            guards.function_code(source, value)
        return UserFunctionVariable(value, source)

    if isinstance(value, types.BuiltinMethodType) and type(getattr(value, "__self__", None)) in (list, dict, set) \
            and source is not None:
        # `lst.append` handed over at a graph break: the method of the (shared) container tracker.
        from ember.capture.variables.functions import BoundMethodVariable
        guards.type_match(source, value)
        name = wrap(tx, value.__name__, AttrSource(source, "__name__")).as_constant()
        return BoundMethodVariable(wrap(tx, value.__self__, AttrSource(source, "__self__")), name)

    if value is itertools.tee:  # (a C function, not a class: see polyfills/itertools_.py)
        from ember.capture.polyfills.itertools_ import tee
        if source is not None:
            guards.id_match(source, value)
        return UserFunctionVariable(tee)

    if isinstance(value, types.BuiltinFunctionType) and getattr(value, "__module__", None) in ("_heapq", "_bisect",
                                                                                               "_collections"):
        from ember.capture.polyfills.stdlib import pure_version
        pure = pure_version(value)  # heapq/bisect: their reference Python versions, inlined
        if pure is not None:
            if source is not None:
                guards.id_match(source, value)
            return UserFunctionVariable(pure)

    if isinstance(value, types.BuiltinFunctionType):
        # Module-level functions of builtins/math/operator (and a few pure sys readers) are
        # BuiltinVariables, which fold on constants; any other C function is opaque.
        from ember.capture.variables.builtins import _FRAME_STATE_SYS, _PURE_SYS
        owner = getattr(value, "__self__", None)
        if (getattr(value, "__module__", None) in ("builtins", "math", "_operator", "operator", "cmath")
                and (owner is None or isinstance(owner, types.ModuleType))) or value in _PURE_SYS \
                or value is functools.reduce or value in _FRAME_STATE_SYS:
            if source is not None:
                guards.id_match(source, value)  # `op = math.sin` may be rebound
            return BuiltinVariable(value, source)
        return OpaqueCallableVariable(value, source, f"calling builtin {getattr(value, '__qualname__', value)!s}")

    if isinstance(value, types.MethodType):
        self_src = AttrSource(source, "__self__") if source is not None else None
        func_src = AttrSource(source, "__func__") if source is not None else None
        from ember.capture.variables.functions import _FUNCTION_APPLY, UserFunctionVariable
        if value.__func__ is _FUNCTION_APPLY and isinstance(value.__self__, type):
            # `f = MyFunction.apply` kept (a module attribute, a global): the same call as `MyFunction.apply`
            if func_src is not None:
                guards.id_match(func_src, value.__func__)
            return UserMethodVariable(UserFunctionVariable(value.__func__), wrap(tx, value.__self__, self_src),
                                      source)
        return UserMethodVariable(wrap(tx, value.__func__, func_src), wrap(tx, value.__self__, self_src), source)

    if isinstance(value, functools.partial):
        if source is not None:
            guards.type_match(source, value)
            # which arguments it binds (its keywords dict can gain or lose keys in place)
            guards.length(AttrSource(source, "args"), len(value.args))
            guards.dict_keys(AttrSource(source, "keywords"), list(value.keywords), ordered=False)
        func = wrap(tx, value.func, AttrSource(source, "func") if source is not None else None)
        args = [wrap(tx, a, ItemSource(AttrSource(source, "args"), i) if source is not None else None)
                for i, a in enumerate(value.args)]
        kwargs = {k: wrap(tx, v, ItemSource(AttrSource(source, "keywords"), k) if source is not None else None)
                  for k, v in value.keywords.items()}
        vt = PartialVariable(func, args, kwargs, source)
        vt.real = value  # (what its instance dict holds: see PartialVariable.getattr)
        return vt

    from ember.capture.variables.container_methods import SCALAR_OWNERS
    if isinstance(value, (types.MethodDescriptorType, types.WrapperDescriptorType)) and \
            getattr(value, "__objclass__", None) in (list, tuple, dict, set, frozenset, collections.OrderedDict,
                                                   collections.defaultdict, *SCALAR_OWNERS):
        # `set.add`, `frozenset.__and__`, `str.upper`: called with the object first
        from ember.capture.variables.container_methods import UnboundContainerMethodVariable
        if source is not None:
            guards.id_match(source, value)  # read off a (user) class, which may be patched later
        return UnboundContainerMethodVariable(value.__objclass__, value.__name__, source)

    from ember.capture.variables.weakrefs import WeakRefVariable, is_plain_weakref
    if is_plain_weakref(value):
        return _by_type(guards, WeakRefVariable(value, source), source, value)

    if callable(value) and t.__module__ in ("builtins",) and not hasattr(value, "__dict__"):
        return OpaqueCallableVariable(value, source, f"calling {t.__name__} {getattr(value, '__qualname__', '')}")

    return _by_type(guards, UserObjectVariable(value, source), source, value)


def _by_type(guards, vt, source, value):
    """Guard ``value`` by its type, and by identity only if the program observes it (``is``,
    ``id()``, a dict key: through ``vt.identity_guard``)."""
    if source is not None:
        guards.type_match(source, value)
        vt.identity_guard = functools.partial(guards.id_match, source, value)
    return vt


_ITERATOR_TYPES = (type(iter(())), type(iter([])), type(iter(range(0))))


def _typed_set_items(s) -> tuple:
    return tuple((type(v), v) for v in s)


def _set_item_by_value(v) -> bool:
    """A set item a guard on the set's equality pins: a scalar constant, or an object compared by
    identity (a function, a builtin, a class)."""
    return type(v) in (str, int, float, bool, type(None), complex, bytes) or _identity_key(v) or \
        isinstance(v, (types.BuiltinFunctionType, torch._ops.OpOverload, torch._ops.OpOverloadPacket))
    # (torch ops compare by identity and hash their C handle: {aten.mm.default} of a checkpoint policy)


def _identity_object(k) -> bool:
    """A dict key the trace keys by identity under a tuple (``("__module__", id)``): a module or a
    user object (not a class or a function, which are their own keys)."""
    return _identity_key(k) and not isinstance(k, (type, types.FunctionType, types.BuiltinFunctionType,
                                                    types.MethodType, enum.Enum)) \
        and (isinstance(k, torch.nn.Module) or _aliasable(k))


def _weak_identity_key(k) -> bool:
    """A dict key that is a live weak reference to a module or a user object hashed by identity:
    equal to another reference to the same object, as that object is to itself."""
    from ember.capture.variables.weakrefs import is_plain_weakref
    if not is_plain_weakref(k):
        return False
    referent = k()
    return referent is not None and _identity_object(referent)


def _tensor_key(k) -> bool:
    """A tensor dict key (hashed by identity): a plain tensor or parameter, not a subclass that may
    define its own hashing."""
    return type(k) in (torch.Tensor, torch.nn.Parameter)


def _nth_key(d, i):
    """The ``i``-th key of dict ``d`` (a source of a tensor key, see _wrap)."""
    return list(d)[i]


def _nth_value(d, i):
    return list(d.values())[i]



def _plain_constant(k) -> bool:
    """A key hashed by value all the way down (no object, module or class inside a tuple)."""
    if isinstance(k, tuple):
        return all(_plain_constant(i) for i in k)
    return isinstance(k, (str, int, float, bool, type(None), enum.Enum, bytes, complex, frozenset, torch.device))


def _identity_key(k) -> bool:
    """A dict key compared by identity (a class, a function, a typing form): hashing and comparing
    it runs no user code, and the guard on the key set pins the very objects."""
    t = type(k)
    if isinstance(k, type):
        return type(t).__eq__ is type.__eq__ and type(t).__hash__ is type.__hash__ if t is not type else True
    return t.__eq__ is object.__eq__ and t.__hash__ is object.__hash__


def functional_call_function():
    from ember.capture.variables.functional_call import functional_call_function as fn
    return fn()


def functorch_transforms() -> dict:
    from ember.capture.variables.functorch_calls import transforms
    return transforms()


def _torch_polyfills() -> dict:
    from ember.capture.polyfills.torch_utils import POLYFILLS
    return POLYFILLS


def _float_source(source) -> bool:
    """A float read from a frame's argument, a global or a closure cell, directly or through
    attributes and items (``opt.param_groups[0]['lr']``), may become a symbol when it changes."""
    source = _item_of(source)
    while isinstance(source, (ItemSource, AttrSource)):
        source = source.base
    # (a closure's cell: the function's own variable, such as a loss scale a closure updates)
    return isinstance(source, (LocalSource, GlobalSource, CellContentsSource))


def _item_of(source):
    """The tensor's source for ``t.item()`` of a 0-d input (its value follows the tensor's)."""
    return source.base if isinstance(source, CallSource) and source.func is torch.Tensor.item else source


def _argument_item(tx, source) -> bool:
    """An int that may become a symbol when it changes (torch's unspecialised ints): read from the
    frame's arguments or its own closure cells, directly or through items and attributes of
    objects that are not modules, and through the closure cells of functions reached that way
    (``helper.__closure__[0].cell_contents`` of a helper the frame closes over, at any depth: in
    torch.compile the frame's free variables are locals like its arguments). Ints from globals,
    from nn.Module attributes and from the defaults of a function the frame calls stay constants
    (recompiling per value), as in torch.compile."""
    source = _item_of(source)
    modules = tx.output.module_sources
    while isinstance(source, (ItemSource, AttrSource, CellContentsSource)):
        if isinstance(source, FreeCellSource):  # the frame's own free variable (a closure twin's)
            return True
        if isinstance(source, AttrSource) and source.attr in ("__defaults__", "__kwdefaults__"):
            return False
        if isinstance(source, CellContentsSource) and isinstance(source.base, ConstSource):
            return source.base.label == "FN"  # a cell of the compiled function itself
        source = source.base
        if source in modules:
            return False
    return isinstance(source, LocalSource)


def pin_identity(tx, vt) -> None:
    """The program observes ``vt``'s identity (``is``, ``id()``, a dict key or set element): an
    object from outside guarded only by type must now be guarded by identity."""
    if getattr(vt, "source", None) is None:
        return
    from ember.capture.variables.objects import NNModuleVariable, UserObjectVariable
    if isinstance(vt, NNModuleVariable):
        tx.guards.id_match(vt.source, vt.module)
    elif isinstance(vt, UserObjectVariable):
        tx.guards.id_match(vt.source, vt.obj)
    elif type(vt).__name__ == "TensorVariable" and vt.reads_input():
        tx.output.observe_tensor_identity()


def _stateless(m: torch.nn.Module) -> bool:
    d = m.__dict__
    return not any(v is not None for kind in ("_parameters", "_buffers", "_modules")
                   for v in (d.get(kind) or {}).values())


_LIST_ITERATOR = type(iter([]))


def _already_wrapped(tx, obj) -> bool:
    return tracker_of(tx, obj) is not None


def tracker_of(tx, obj):
    """The tracker this trace made for the mutable object ``obj`` (however it was reached), or None."""
    seen = tx.output.source_memo.get(("object", type(obj)), {})
    hit = seen.get(id(obj))
    return hit[1] if hit is not None and hit[0] is obj else None


def list_iterator_state(it) -> tuple:
    """(the list, the index of the next item) of a list iterator, without advancing it."""
    _fn, args, *state = it.__reduce__()
    return args[0], (state[0] if state else 0)


def list_iterator_list(it) -> list:
    return list_iterator_state(it)[0]


def list_iterator_index(it) -> int:
    return list_iterator_state(it)[1]


def remaining_items(it) -> tuple:
    """The items a tuple/list/range iterator has left, without advancing it."""
    fn, args, *state = it.__reduce__()
    seq = args[0]
    index = state[0] if state else 0
    return tuple(seq[index:])


def advance(it, n: int) -> None:
    """Consume ``n`` items of a real iterator (the trace consumed them symbolically)."""
    for _ in range(n):
        next(it)


class GradModeExitVariable(VariableTracker):
    """A resumed grad-mode ``with`` block's exit (see graph_break.GradModeExit): traced in-graph."""

    def __init__(self, prior: bool, source=None):
        self.prior = prior
        self.source = source

    def call(self, tx, args, kwargs):
        tx.output.set_grad_enabled(self.prior)
        return ConstantVariable(None)


from ember.capture.variables.opaque_callables import (OpaqueCallableVariable,  # noqa: E402,F401
                                                   handling_traced_exception)
