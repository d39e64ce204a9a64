"""Whether a tensor subclass's own ``__torch_function__`` (or ``__torch_dispatch__``) may have
Python side effects.

ember puts an op on such a subclass into the graph as it is: the override runs when the graph
runs, not at trace time (variables/tensor.py, ``subclass_result_class``), and metadata reads
through it are asked once, at trace time, of a stand-in (``subclass_metadata.py``). That is only
right for an override without Python side effects. One that logs or counts
(``LOG.append(func.__name__)``) would log at run time *before* the Python side effects the frame
made ahead of the op are replayed (they replay after the graph), the frame's own later reads of
what it wrote would not see the write (``len(LOG)`` folded at trace time), and a metadata read
(``t.dim()``) would log once at trace time and never on later calls.

So an override counts as pure only when a conservative scan of its bytecode (and of the
functions and comprehensions it defines) finds nothing that could change state outside the call:
no store into a global, an attribute, a subscript or an outside cell, no import, no yield, and
names read only from a short list (``super``, ``isinstance``, ``getattr``..., ``torch``, the
``func`` it was given, ``kwargs.get``, ``DisableTorchFunctionSubclass``...). Anything else (a
global log, a print, a call of a helper) makes ops on the class graph breaks: they run eagerly,
in program order, with the override's real effects. ``super().__torch_function__`` of a user
base class is checked as well (every class on the MRO that defines one).
"""
from __future__ import annotations

import dis
import types
import weakref

import torch

_PURE_GLOBALS = frozenset({
    "super", "getattr", "hasattr", "isinstance", "issubclass", "type", "len", "tuple", "list",
    "dict", "set", "frozenset", "zip", "enumerate", "range", "any", "all", "bool", "int", "float",
    "str", "NotImplemented", "torch", "Tensor", "True", "False", "None",
})
_PURE_ATTRS = frozenset({
    "__torch_function__", "get", "items", "keys", "values", "copy", "as_subclass", "_C",
    "DisableTorchFunctionSubclass", "DisableTorchFunction", "Tensor", "__name__", "__qualname__",
    "__func__", "__self__", "__class__", "shape", "dtype", "device", "ndim", "requires_grad",
    "clone", "detach", "contiguous", "float", "double", "size", "dim", "numel", "_disabled_torch_function_impl",
})
_WRITES = frozenset({"STORE_GLOBAL", "DELETE_GLOBAL", "STORE_ATTR", "DELETE_ATTR", "STORE_SUBSCR",
                     "DELETE_SUBSCR", "IMPORT_NAME", "IMPORT_FROM", "IMPORT_STAR", "YIELD_VALUE",
                     "PRINT_EXPR", "STORE_NAME", "DELETE_NAME", "LOAD_NAME", "STORE_SLICE"})
_READS_NAME = frozenset({"LOAD_GLOBAL"})
_READS_ATTR = frozenset({"LOAD_ATTR", "LOAD_METHOD", "LOAD_SUPER_ATTR"})
_DEREFS = frozenset({"LOAD_DEREF", "LOAD_CLASSDEREF", "LOAD_FROM_DICT_OR_DEREF", "STORE_DEREF",
                     "DELETE_DEREF", "LOAD_CLOSURE"})

_DISABLED = (torch._C._disabled_torch_function_impl, torch._C._disabled_torch_dispatch_impl)

_cache: "weakref.WeakKeyDictionary[type, bool]" = weakref.WeakKeyDictionary()


def _code_is_pure(code: types.CodeType, outside: frozenset) -> bool:
    """``outside``: the names of cells that belong to code outside the override (its closure,
    except ``__class__``, which ``super()`` reads)."""
    for inst in dis.get_instructions(code):
        op = inst.opname
        if op in _WRITES:
            return False
        if op in _READS_NAME and inst.argval not in _PURE_GLOBALS:
            return False
        if op in _READS_ATTR and inst.argval not in _PURE_ATTRS:
            return False
        if op in _DEREFS and inst.argval in outside:
            return False
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            # (a lambda or comprehension of the override: the override's own cells are its locals)
            if not _code_is_pure(const, outside):
                return False
    return True


def _function_is_pure(fn) -> bool:
    if isinstance(fn, (classmethod, staticmethod)):
        fn = fn.__func__
    if not isinstance(fn, types.FunctionType):
        return False  # (a C function or a callable object: not read)
    outside = frozenset(n for n in fn.__code__.co_freevars if n != "__class__")
    return _code_is_pure(fn.__code__, outside)


def torch_function_is_pure(cls: type) -> bool:
    """True when no ``__torch_function__`` or ``__torch_dispatch__`` defined on ``cls``'s MRO (above
    torch's own classes) may have Python side effects (conservatively: see the module docstring; a
    ``__torch_dispatch__`` also runs when the graph runs, once per aten op). Cached per class."""
    try:
        return _cache[cls]
    except (KeyError, TypeError):
        pass
    pure = True
    for k in cls.__mro__:
        if (k.__module__ or "").split(".")[0] == "torch":
            continue  # (torch's own classes: Tensor, Parameter, DTensor...)
        for name in ("__torch_function__", "__torch_dispatch__"):
            own = k.__dict__.get(name)
            if own is None or getattr(own, "__func__", own) in _DISABLED:
                continue
            if not _function_is_pure(own):
                pure = False
                break
        if not pure:
            break
    try:
        _cache[cls] = pure
    except TypeError:
        pass
    return pure


def check_pure_override(values, label: str) -> None:
    """Break before ``label`` (an op or a metadata read) when a tensor among ``values`` (trackers, in
    lists, tuples and dicts) is of a subclass whose ``__torch_function__`` may have side effects."""
    from ember.capture.variables.base import unsupported
    from ember.capture.variables.tensor import tensor_trackers
    for v in tensor_trackers(values):
        c = v.cls
        if c is torch.Tensor or c is torch.nn.Parameter:
            continue
        if not torch_function_is_pure(c):
            raise unsupported("EB0031", f"{label} on a {c.__name__} tensor: its __torch_function__ or "
                              "__torch_dispatch__ may have Python side effects (it runs eagerly, in program order)")
