"""``copy.copy`` / ``copy.deepcopy`` of traced values, without tracing the ``copy`` module.

Inlining ``copy.deepcopy`` ends in ``object.__reduce_ex__`` (a C method), so
it is answered here for the values whose copy is plain data: the copy of an
object from outside the frame whose class uses the default pickling protocol
(no ``__deepcopy__``, ``__reduce__``, ``__getstate__``/``__setstate__``,
``__slots__``) is what ``copy._reconstruct`` builds — ``cls.__new__(cls)``
with a (deep) copy of its ``__dict__`` — so it becomes an object made in the
frame (`NewObjectVariable`) holding copies of the attribute trackers. Writes
to the copy stay in the frame; if it escapes it is rebuilt after the graph.
Constants, classes and functions are atomic (shared), as in ``copy``. HF models
do ``copy.deepcopy(config)`` inside ``forward`` (``get_text_config``).
"""
from __future__ import annotations

import copy
import copyreg
import types

import torch

from ember.capture.variables.base import ConstantVariable, LazyGuardedConstant, VariableTracker, unsupported
from ember.capture.variables.objects import raw_attribute


def _default_protocol(cls: type) -> bool:
    return (getattr(cls, "__deepcopy__", None) is None and getattr(cls, "__copy__", None) is None
            and cls.__reduce_ex__ is object.__reduce_ex__ and cls.__reduce__ is object.__reduce__
            and getattr(cls, "__getstate__", object.__getstate__) is object.__getstate__
            and getattr(cls, "__setstate__", None) is None and cls not in copyreg.dispatch_table
            and not any("__slots__" in k.__dict__ for k in cls.__mro__)
            and cls.__new__ in (object.__new__, dict.__new__))  # (copy calls a Python __new__)


def copy_value(tx, vt: VariableTracker, deep: bool, memo: dict | None = None) -> VariableTracker:
    from ember.capture.variables.builtins import BuiltinVariable
    from ember.capture.variables.containers import DictVariable, ListVariable, SetVariable, TupleVariable
    from ember.capture.variables.functions import NestedFunctionVariable, UserFunctionVariable
    from ember.capture.variables.new_object import NewObjectVariable
    from ember.capture.variables.objects import ClassVariable, PythonModuleVariable, UserObjectVariable
    from ember.capture.variables.tensor import TensorVariable
    from ember.capture.variables.torch_fn import TorchFunctionVariable
    memo = {} if memo is None else memo
    key = id(vt)
    if key in memo:
        return memo[key]

    def inner(v):
        return copy_value(tx, v, deep, memo) if deep else v

    if isinstance(vt, (ClassVariable, BuiltinVariable, UserFunctionVariable, NestedFunctionVariable,
                       TorchFunctionVariable, PythonModuleVariable)):
        return vt  # atomic
    if isinstance(vt, LazyGuardedConstant):
        return vt  # an int or float: its copy is itself (and reading it would guard its value)
    if type(vt) is ConstantVariable:
        value = vt.value
        if isinstance(value, (int, float, bool, str, bytes, complex, type(None), range, type(Ellipsis),
                              frozenset, types.FunctionType)) or type(value).__module__ == "torch":
            return ConstantVariable(value)
        if isinstance(value, tuple):
            return ConstantVariable(copy.deepcopy(value) if deep else value)
        raise unsupported("EB0041", f"copying {vt.describe()}")
    if isinstance(vt, TensorVariable):
        if not deep:
            raise unsupported("EB0041", "copy.copy of a tensor (an alias sharing its storage)")
        out = deepcopy_tensor(tx, vt, memo)
        memo[key] = out
        return out
    if isinstance(vt, TupleVariable):
        out = TupleVariable([inner(i) for i in vt.items], tuple_type=vt.tuple_type)
    elif isinstance(vt, ListVariable):
        out = ListVariable([])
        if vt.list_cls is not list:
            out.list_cls = vt.list_cls  # a plain list subclass made in the frame
        memo[key] = out
        out.items = [inner(i) for i in vt.items]
    elif isinstance(vt, DictVariable):
        if vt.dict_cls is not dict:
            raise unsupported("EB0041", f"copying a {vt.dict_cls.__name__}")
        out = DictVariable({})
        memo[key] = out
        for k, v in vt.items.items():
            out.set_item(vt.keys[k], inner(v))
    elif isinstance(vt, SetVariable):
        out = SetVariable(list(vt.items.values()), set_cls=vt.set_cls)
    elif isinstance(vt, UserObjectVariable):
        obj = vt.obj
        cls = type(obj)
        if not _default_protocol(cls) or isinstance(obj, (dict, list, tuple, set)) or \
                not isinstance(raw_attribute(obj, "__dict__"), dict) or type(cls) not in (type,):
            raise unsupported("EB0041", f"copying a {cls.__name__} object (custom copy protocol)")
        out = NewObjectVariable(cls)
        memo[key] = out
        for name in list(obj.__dict__):
            out.attrs[name] = inner(vt.getattr(tx, name) if _plain_attr(obj, name) else _raw_attr(tx, vt, name))
    elif isinstance(vt, NewObjectVariable):
        if vt.items is not None or not _default_protocol(vt.cls):
            raise unsupported("EB0041", f"copying a {vt.describe()}")
        out = NewObjectVariable(vt.cls)
        memo[key] = out
        for name, value in vt.attrs.items():
            out.attrs[name] = inner(value)
    else:
        raise unsupported("EB0041", f"copying {vt.describe()}")
    memo[key] = out
    return out


_NOT_A_LEAF = ("Only Tensors created explicitly by the user (graph leaves) support the deepcopy protocol at the "
               "moment.  If you were attempting to deepcopy a module, this may be because of a "
               "torch.nn.utils.weight_norm usage, see https://github.com/pytorch/pytorch/pull/103001")


def deepcopy_tensor(tx, vt, memo: dict) -> VariableTracker:
    """``copy.deepcopy(t)`` of a traced tensor, where it is a plain ``clone()``.

    ``Tensor.__deepcopy__`` refuses non-leaves (so does this, with eager's error); otherwise it
    copies the whole storage (memoized, so tensors sharing a storage in one deepcopy share the new
    one) and re-creates the view on it, then makes the copy a leaf with the original's
    ``requires_grad`` and a copy of its ``.grad`` and ``__dict__``. That is ``clone()`` exactly for a
    plain tensor that does not require grad and is its storage's only, whole, dense view; anything
    else (a view, a new leaf that requires grad, a subclass or Parameter, a ``.grad``) breaks.
    """
    from ember.exc import PythonException
    fake, real = vt.fake, vt.real
    is_leaf = real.is_leaf if real is not None else (not fake.requires_grad or fake.grad_fn is None)
    if not is_leaf:
        raise PythonException(RuntimeError(_NOT_A_LEAF))
    if vt.cls is not torch.Tensor:
        raise unsupported("EB0041", f"copy.deepcopy of a {vt.cls.__name__} (its own copy protocol)")
    if fake.requires_grad:
        raise unsupported("EB0041", "copy.deepcopy of a tensor that requires grad (it makes a new leaf)")
    if real is not None and (real.grad is not None or getattr(real, "__dict__", None)):
        raise unsupported("EB0041", "copy.deepcopy of a tensor with a .grad or attributes")
    if fake.layout != torch.strided or fake.is_quantized or fake.is_conj() or fake.is_neg() or \
            fake.device.type not in ("cpu", "cuda"):
        raise unsupported("EB0041", f"copy.deepcopy of a {fake.layout} {fake.device.type} tensor")
    storage = fake.untyped_storage()
    if fake.storage_offset() != 0 or not fake.is_contiguous() or \
            storage.nbytes() != fake.numel() * fake.element_size():
        raise unsupported("EB0041", "copy.deepcopy of a view (it copies the whole storage)")
    skey = ("storage", storage._cdata)
    if skey in memo:
        raise unsupported("EB0041", "copy.deepcopy of tensors sharing a storage")
    memo[skey] = True
    return tx.output.call_method("clone", [vt], {})


def _plain_attr(obj, name) -> bool:
    """Reading ``obj.name`` gives the instance-dict entry (no data descriptor, plain getattribute)."""
    cls = type(obj)
    if cls.__getattribute__ is not object.__getattribute__:
        return False
    for klass in cls.__mro__:
        attr = klass.__dict__.get(name)
        if attr is not None:
            return not hasattr(attr, "__set__")
    return True


def _raw_attr(tx, vt, name):
    """The instance-dict entry ``name`` of an outside object, read as ``object.__getattribute__``."""
    generic = getattr(vt, "generic_getattr", None)
    if generic is None:
        raise unsupported("EB0041", f"copying a {type(vt.obj).__name__} object")
    return generic(tx, name)


def call_copy_function(tx, fn, args, kwargs):
    """``copy.copy(x)`` / ``copy.deepcopy(x)`` (no memo argument)."""
    if kwargs or len(args) != 1:
        raise unsupported("EB0041", f"copy.{fn.__name__} with a memo")
    return copy_value(tx, args[0], deep=fn is copy.deepcopy)


COPY_FUNCTIONS = (copy.copy, copy.deepcopy)
