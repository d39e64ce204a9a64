"""Calling a class in traced code: ``construct(tx, cls, args, kwargs)``.

Builtin value types fold on constants; containers, named tuples, structseqs, context managers,
itertools objects, partials, defaultdicts, deques, TypedDicts and Enum lookups become their
trackers; torch's stateless modules and user exceptions are built at trace time; other classes are
traced through their ``__init__`` (new_object.py, new_module.py) or refused with a reason.
"""
from __future__ import annotations

import collections
import enum
import functools
import operator
import random
import types

import torch

from ember.capture.variables.base import is_none, ConstantVariable, VariableTracker, unsupported
from ember.capture.variables.builtins import (_HANDLERS, _PURE_BUILTINS, BuiltinVariable, _constants, _dict, _iter_items,
                                              wrap_constant)
from ember.capture.variables.containers import DictVariable, ListVariable, SetVariable, TupleVariable
from ember.exc import PythonException


def _is_typeddict(cls) -> bool:
    import typing
    try:
        return typing.is_typeddict(cls) or (type(cls).__name__ == "_TypedDictMeta")
    except Exception:  # noqa: BLE001 (an unusual metaclass)
        return False



# Names an exception's __init__ may read without making its construction depend on, or change,
# anything outside (super().__init__(msg), str(x), f-strings of its arguments).
_PLAIN_INIT_GLOBALS = {"super", "str", "repr", "int", "float", "bool", "len", "tuple", "list", "dict", "type",
                       "isinstance", "getattr", "hasattr", "format", "__class__"}


def plain_exception_class(cls: type) -> bool:
    """A user exception class whose ``__new__``/``__init__`` are BaseException's or small Python
    ``__init__``s that read no global state and call nothing but their base's ``__init__`` and
    pure builtins: building one at trace time is what building it at run time would do."""
    from ember.bytecode.normalize import interpreter_instructions
    if type(cls).__call__ is not type.__call__:
        return False
    for klass in cls.__mro__:
        if klass.__module__ == "builtins":
            continue
        d = klass.__dict__
        if "__new__" in d or "__setattr__" in d or "__getattribute__" in d:
            return False
        init = d.get("__init__")
        if init is None:
            continue
        if not isinstance(init, types.FunctionType):
            return False
        for inst in interpreter_instructions(init.__code__):  # (3.12's method loads read as LOAD_METHOD)
            if inst.opname in ("STORE_GLOBAL", "DELETE_GLOBAL", "IMPORT_NAME", "YIELD_VALUE"):
                return False
            if inst.opname == "LOAD_GLOBAL" and inst.argval not in _PLAIN_INIT_GLOBALS:
                return False
            if inst.opname in ("LOAD_DEREF", "LOAD_CLOSURE") and inst.argval != "__class__":
                return False
            method = inst.opname == "LOAD_METHOD" or inst.opname == "LOAD_SUPER_ATTR" and inst.arg & 1
            if method and inst.argval not in ("__init__", "format", "join"):
                return False  # self.helper() could do anything
    return True


def construct(tx, cls: type, args: list, kwargs: dict) -> VariableTracker:
    """``cls(*args, **kwargs)`` for a class object."""
    if cls in _HANDLERS or cls in _PURE_BUILTINS:
        return BuiltinVariable(cls).call(tx, args, kwargs)
    if cls is torch.Size:
        items = args[0].unpack(tx) if args else []
        from ember.capture.variables.symbolic import SizeVariable, SymNodeVariable
        if not kwargs and len(args) == 1 and any(isinstance(a, SymNodeVariable) for a in items) and all(
                isinstance(a, SymNodeVariable) and isinstance(a.sym, torch.SymInt)
                or type(a) is ConstantVariable and type(a.value) is int for a in items):
            return SizeVariable(list(items))  # torch.Size([x.shape[0], 2]): its sizes stay symbolic
        return ConstantVariable(torch.Size([a.as_constant() for a in items]))
    if cls is random.Random:
        from ember.capture.variables.random_objects import seeded_random
        gen = seeded_random(tx, args, kwargs)
        if gen is not None:
            return gen
    if issubclass(cls, tuple) and hasattr(cls, "_fields"):  # namedtuple
        bound = [*args] + [kwargs[f] for f in cls._fields[len(args):] if f in kwargs]
        if len(bound) != len(cls._fields):
            defaults = getattr(cls, "_field_defaults", {})
            bound += [wrap_constant(defaults[f]) for f in cls._fields[len(bound):]]
        return TupleVariable(bound, tuple_type=cls)
    if issubclass(cls, tuple) and hasattr(cls, "n_sequence_fields") and cls.__module__ == "torch.return_types" \
            and len(args) == 1 and not kwargs:
        # a structseq (torch.return_types.max((values, indices))): one iterable of exactly its fields
        items = _iter_items(tx, args[0])
        if len(items) != cls.n_sequence_fields:
            raise PythonException(TypeError(f"{cls.__module__}.{cls.__name__}() takes a {cls.n_sequence_fields}"
                                            f"-sequence ({len(items)}-sequence given)"))
        return TupleVariable(items, tuple_type=cls)
    from ember.capture.variables.ctx_managers import construct_context
    ctx = construct_context(tx, cls, args, kwargs)
    if ctx is not None:
        return ctx
    if getattr(cls, "__module__", None) == "itertools":
        from ember.capture.variables.itertools_iterators import construct_itertool
        it = construct_itertool(tx, cls, args, kwargs)
        if it is not None:
            return it
    if cls in (torch.no_grad, torch.enable_grad, torch.set_grad_enabled):
        from ember.capture.variables.torch_fn import TorchFunctionVariable
        return TorchFunctionVariable(cls).call(tx, args, kwargs)
    if issubclass(cls, torch.amp.autocast_mode.autocast):
        from ember.capture.variables.grad_modes import AutocastVariable
        return AutocastVariable.create(args, kwargs)
    if cls is functools.partial:
        from ember.capture.variables.functions import PartialVariable
        inner = args[0] if args else None
        if isinstance(inner, PartialVariable):  # partial(partial(f, a, k=1), b) is partial(f, a, b, k=1)
            return PartialVariable(inner.func, [*inner.args, *args[1:]], {**inner.kwargs, **kwargs})
        return PartialVariable(args[0], args[1:], kwargs)
    if cls is collections.defaultdict:
        factory = args[0] if args else ConstantVariable(None)
        d = _dict(tx, *args[1:], **kwargs)
        d = DictVariable(d.items, d.keys, dict_cls=collections.defaultdict)
        d.default_factory = None if is_none(factory) else factory
        return d
    if cls in (operator.itemgetter, operator.attrgetter, operator.methodcaller):
        from ember.capture.variables.operator_getters import OperatorGetterVariable
        return OperatorGetterVariable(cls, args, kwargs)
    if cls is types.MappingProxyType:
        from ember.capture.variables.mapping_proxy import make_mapping_proxy
        return make_mapping_proxy(tx, args, kwargs)
    if cls is collections.deque:
        from ember.capture.variables.deques import construct_deque
        return construct_deque(tx, args, kwargs)
    if cls is collections.OrderedDict:
        d = _dict(tx, *args, **kwargs)
        return DictVariable(d.items, d.keys, dict_cls=collections.OrderedDict)
    if isinstance(cls, type) and issubclass(cls, dict) and _is_typeddict(cls):
        return _dict(tx, *args, **kwargs)  # a TypedDict class makes a plain dict
    if isinstance(cls, enum.EnumMeta) and type(cls).__call__ is enum.EnumMeta.__call__ and len(args) == 1 \
            and not kwargs and args[0].is_constant() and cls._member_map_:
        # `Color("red")`: a lookup of an existing member by value (the class is fixed once made);
        # a value with no member would call the class's _missing_: left to eager
        value = args[0].as_constant()
        member = value if isinstance(value, cls) else None
        if member is None:
            try:
                member = cls._value2member_map_.get(value)
            except TypeError:  # an unhashable value: Enum searches linearly
                member = None
        if member is not None:
            return wrap_constant(member)
        from ember.capture.variables.classes import _plain_enum
        if _plain_enum(cls):  # enum's own _missing_: eager's ValueError, raised here
            try:
                cls(value)
            except Exception as e:
                raise PythonException(e) from None
    import weakref
    if cls is weakref.ref:
        from ember.capture.variables.weakrefs import construct_weakref
        ref = construct_weakref(tx, args, kwargs)
        if ref is not None:
            return ref
    if cls is object and not args:
        raise unsupported("EB0042", "creating new objects in the frame (side effects) is not supported yet")
    if type(cls) is type(torch.FloatTensor) and not getattr(cls, "is_cuda", True) and len(args) == 1 and not kwargs:
        from ember.capture.variables.numpy_bridge import tensor_of_scalars
        made = tensor_of_scalars(tx, args[0], cls.dtype)  # torch.LongTensor([a[0], a[2]]) of NumPy scalars
        if made is not None:
            return made
    if _legacy_tensor_class(cls) and not kwargs:
        values = _nested_constants(args)
        if values is not None:
            return _legacy_tensor(tx, cls, values)
    if _constants(args) and _constants(kwargs.values()) and cls.__module__ in ("builtins", "torch") and \
            cls not in (object,):
        if cls in (bytearray, memoryview) or (cls.__module__ == "torch" and cls not in _TORCH_VALUE_CLASSES
                                               and not issubclass(cls, BaseException)):
            # a new mutable object every call (a typed storage, a stream, a bytearray): made now it
            # would be one object every call returns (and making it now would do what it does
            # twice: a storage's deprecation warning)
            raise unsupported("EB0042", f"constructing a {cls.__qualname__} object inside the frame "
                              "(a new mutable object each call) is not supported yet")
        try:
            value = cls(*[a.as_constant() for a in args], **{k: v.as_constant() for k, v in kwargs.items()})
        except Exception as e:
            raise PythonException(e) from None  # eager raises this very exception
        if not _same_every_call(value):
            # a mutable object (bytearray, a storage): one made now would be the very object every
            # call hands out, and a write through one call's would show in the next
            raise unsupported("EB0042", f"constructing a {cls.__qualname__} object inside the frame "
                              "(a new mutable object each call) is not supported yet")
        return wrap_constant(value)
    if issubclass(cls, torch.nn.Module) and cls.__module__.startswith("torch.nn.modules") \
            and _constants(args) and _constants(kwargs.values()):
        # torch's own stateless modules (losses, activations) built in forward: build it now;
        # it holds only the constants it was given, so one instance serves every call.
        from ember.capture.builder import _stateless
        from ember.capture.variables.objects import NNModuleVariable
        cargs, ckwargs = [a.as_constant() for a in args], {k: v.as_constant() for k, v in kwargs.items()}
        with torch.random.fork_rng(devices=[]):  # its parameter init must not advance the program's RNG
            module = cls(*cargs, **ckwargs)
        if _stateless(module):
            vt = NNModuleVariable(module, None)
            vt.created_in_frame = True
            # (if it escapes the frame, each call hands out a new one, as eager does)
            vt.constructor = (cls, tuple(cargs), ckwargs)
            return vt
    container = _stateless_container(tx, cls, args, kwargs)
    if container is not None:
        return container
    from ember.capture.variables.container_methods import guard_class_layout, plain_subclass
    base = plain_subclass(cls)
    if base is not None and not kwargs and len(args) <= 1:
        guard_class_layout(tx, cls)  # no slot of its own, and the methods the trace inlines
        items = _iter_items(tx, args[0]) if args else []
        if base is list:
            lst = ListVariable(items)
            lst.list_cls = cls
            return lst
        if base is tuple:
            return TupleVariable(items, tuple_type=cls)
        return SetVariable(items, set_cls=cls)
    if isinstance(cls, type) and issubclass(cls, BaseException) and _constants(args) \
            and _constants(kwargs.values()) and plain_exception_class(cls):
        # A user exception class whose construction only stores its arguments: made now, like
        # the builtin ones (what the handler reads from it is the same on every call).
        try:
            return wrap_constant(cls(*[a.as_constant() for a in args],
                                     **{k: v.as_constant() for k, v in kwargs.items()}))
        except Exception as e:
            raise PythonException(e) from None
    if isinstance(cls, type) and issubclass(cls, BaseException):
        from ember.capture.variables.exception_objects import construct_exception, traced_exception_class
        if traced_exception_class(cls):  # (arguments the trace only has: a tensor)
            return construct_exception(tx, cls, args, kwargs)
    from ember.capture.variables.new_module import construct_module, module_constructible
    from ember.capture.variables.new_object import check_instantiable
    if isinstance(cls, type) and cls.__new__ is object.__new__ and type(cls).__call__ is type.__call__:
        check_instantiable(cls)  # an abstract class: eager's TypeError, whatever else the class is
    if module_constructible(cls):
        return construct_module(tx, cls, args, kwargs)
    from ember.capture.variables.new_module import module_python_new
    module_new = module_python_new(cls)
    if module_new is not None:  # (object.__new__(cls) inside it is refused: a module is not a plain object)
        from ember.capture.variables.new_object import construct_with_new
        return construct_with_new(tx, cls, module_new, args, kwargs)
    from ember.capture.variables.new_object import constructible, construct_object, construct_with_new, python_new
    if cls is types.MethodType and len(args) == 2 and not kwargs \
            and type(args[0]).__name__ in ("UserFunctionVariable", "NestedFunctionVariable"):
        # MethodType(fn, obj): fn bound to obj (contextlib.ExitStack wraps __exit__ callbacks so)
        from ember.capture.variables.functions import UserMethodVariable
        return UserMethodVariable(args[0], args[1])
    if cls is types.SimpleNamespace and not args:
        # SimpleNamespace(a=..., b=...): an object whose attributes are the keywords
        from ember.capture.variables.new_object import NewObjectVariable
        ns = NewObjectVariable(cls)
        for k, v in kwargs.items():
            ns.object_setattr(k, v)
        return ns
    if constructible(cls):
        return construct_object(tx, cls, args, kwargs)
    new_fn = python_new(cls)
    if new_fn is not None:
        return construct_with_new(tx, cls, new_fn, args, kwargs)
    raise unsupported("EB0042", f"constructing a {cls.__qualname__} object inside the frame is not supported yet")


def _stateless_container(tx, cls, args, kwargs):
    """``nn.Sequential(...)`` / ``nn.ModuleList([...])`` / ``nn.ModuleDict({...})`` of torch's
    stateless modules built in the frame (``nn.Sequential(nn.ReLU(), nn.Tanh())``): built now from
    the modules the trace built, like each of them (nothing in it holds a parameter or buffer, so
    one instance serves every call, as one stateless module does; see FrameContainerModuleVariable).
    One with a parameter or buffer is refused as before."""
    if cls not in (torch.nn.Sequential, torch.nn.ModuleList, torch.nn.ModuleDict) or kwargs:
        return None
    from ember.capture.variables.objects import NNModuleVariable

    def made_module(vt):
        return isinstance(vt, NNModuleVariable) and getattr(vt, "created_in_frame", False) \
            and vt.source is None and _no_state(vt.module)
    if cls is torch.nn.Sequential:
        items = list(args)
        if not items or not all(made_module(a) for a in items):
            return None
        real_args = [a.module for a in items]
    elif len(args) != 1:
        return None
    elif cls is torch.nn.ModuleList:
        if not isinstance(args[0], (ListVariable, TupleVariable)) or not all(made_module(a) for a in args[0].items):
            return None
        real_args = [[a.module for a in args[0].items]]
    else:
        d = args[0]
        if type(d).__name__ not in ("DictVariable", "LazyDictVariable") or d.dict_cls not in (dict, collections.OrderedDict) \
                or not all(isinstance(k, str) for k in d.items) or not all(made_module(v) for v in d.items.values()):
            return None
        real_args = [{k: v.module for k, v in d.items.items()}]
    with torch.random.fork_rng(devices=[]):
        module = cls(*real_args)
    from ember.capture.variables.new_module import FrameContainerModuleVariable
    members = items if cls is torch.nn.Sequential else \
        (list(args[0].items) if cls is torch.nn.ModuleList else list(args[0].items.values()))
    return FrameContainerModuleVariable(module, dict(zip(module._modules, members)))


def _no_state(m: torch.nn.Module) -> bool:
    return next(m.parameters(), None) is None and next(m.buffers(), None) is None


class NamedTupleFactory(VariableTracker):
    """``collections.namedtuple(...)`` called in the frame with constant arguments: the class is
    made while tracing, as torch.compile does (its body is ``exec``'d code and ``sys.intern``,
    which broke the graph, and the resume function then guarded on a new class every call). The
    frame keeps the one class made at trace time (torch.compile's behaviour too)."""

    def describe(self):
        return "collections.namedtuple"

    def reconstruct(self, plan) -> str:
        """On the stack at a graph break (its call with a tensor argument breaks): the function."""
        from ember.capture.sources import bind
        return bind(plan.scope, collections.namedtuple, "namedtuple")

    def python_type(self):
        return types.FunctionType

    def truth(self, tx):
        return True

    def hash_key(self):
        # a dict key or set element (`{namedtuple: ...}`): the function itself, compared by identity
        # as any function is (see containers.set_key)
        return collections.namedtuple

    def call(self, tx, args, kwargs):
        if not _constants(args) or not _constants(kwargs.values()):
            raise unsupported("EB0033", "collections.namedtuple with arguments that are not constants")
        try:
            cls = collections.namedtuple(*[a.as_constant() for a in args],
                                         **{k: v.as_constant() for k, v in kwargs.items()})
        except (TypeError, ValueError) as e:
            raise PythonException(e) from None  # eager raises this very exception
        from ember.capture.builder import wrap
        return wrap(tx, cls, None)


# Values a constructor called on constants may make once, at trace time, and hand out on every
# call: immutable ones, and containers whose trackers are rebuilt fresh per call (wrap_constant).
_IMMUTABLE_TYPES = (int, float, complex, str, bytes, type(None), range, slice, type(Ellipsis),
                    type(NotImplemented), torch.Size, torch.device, torch.dtype, torch.layout,
                    torch.memory_format, torch.finfo, torch.iinfo, property, staticmethod, classmethod,
                    enum.Enum, BaseException, type)


# torch's classes whose instances are values (made at trace time from constants, one serves every call)
_TORCH_VALUE_CLASSES = frozenset({torch.Size, torch.device, torch.dtype, torch.finfo, torch.iinfo, torch.layout,
                                  torch.memory_format, torch.qscheme})


def _same_every_call(value) -> bool:
    if isinstance(value, _IMMUTABLE_TYPES):
        return True
    if type(value) in (tuple, list, set, frozenset):
        return all(_same_every_call(v) for v in value)
    if type(value) is dict:
        return all(_same_every_call(k) and _same_every_call(v) for k, v in value.items())
    return isinstance(value, (zip, map, filter, enumerate, reversed)) or type(value).__name__.endswith("iterator")


def _legacy_tensor_class(cls) -> bool:
    """``torch.Tensor`` or a legacy CPU tensor type (``torch.FloatTensor``, ``torch.LongTensor``)."""
    return cls is torch.Tensor or (type(cls) is type(torch.FloatTensor) and getattr(cls, "is_cuda", True) is False)


def _nested_constants(items):
    """The Python values of trackers that are constants or lists/tuples of them (nested), else None."""
    out = []
    for v in items:
        if isinstance(v, (ListVariable, TupleVariable)) and type(v) in (ListVariable, TupleVariable):
            inner = _nested_constants(v.items)
            if inner is None:
                return None
            out.append(inner if isinstance(v, ListVariable) else tuple(inner))
        elif v.is_constant():
            out.append(v.as_constant())
        else:
            return None
    return out


def _legacy_tensor(tx, cls, values):
    """``torch.Tensor([1.0, 2.0])`` / ``torch.LongTensor(2, 3)`` on constants: a new tensor every call
    (eager's), made by the graph as ``torch.tensor(data)`` / ``torch.empty(sizes)`` of the class's
    dtype (``torch.Tensor``'s: the default dtype, guarded for every frame). Made once at trace time it
    would be one tensor that every call returns, and a write to one call's shows in the next."""
    from ember.capture.variables.torch_fn import TorchFunctionVariable
    sizes_only = all(type(v) is int for v in values) or (len(values) == 1 and isinstance(values[0], torch.Size))
    if not sizes_only or any(v < 0 for v in (values[0] if values and isinstance(values[0], torch.Size) else values)):
        try:  # eager's exception for what eager refuses (ragged data, a negative size)
            cls(*values)
        except Exception as e:
            raise PythonException(e) from None
    dtype = ConstantVariable(torch.get_default_dtype() if cls is torch.Tensor else cls.dtype)
    if len(values) == 1 and isinstance(values[0], torch.Size):
        sizes = list(values[0])
    elif all(type(v) is int for v in values):
        sizes = values  # torch.Tensor() / torch.Tensor(2, 3): sizes, values uninitialised
    elif len(values) == 1 and type(values[0]) in (list, tuple):
        return TorchFunctionVariable(torch.tensor).call(tx, [wrap_constant(values[0])], {"dtype": dtype})
    else:
        raise unsupported("EB0042", f"{cls.__name__}({', '.join(type(v).__name__ for v in values)}) inside the frame")
    return TorchFunctionVariable(torch.empty).call(tx, [ConstantVariable(tuple(sizes))], {"dtype": dtype})
