"""``nn.Module`` objects constructed inside the frame, and other library idioms HF models use in
``forward``: ``dict.fromkeys``, ``functools.singledispatch`` (``lru_cache``-wrapped helpers: lru_cached.py).

A module built in the frame (``ACT2FN["silu"]`` builds ``SiLUActivation()`` on every call) is
a `NewModuleVariable`: an object made in the frame whose ``__init__`` is inlined, with
``nn.Module.__init__`` standing for the empty module state (no parameters, buffers or
submodules, ``training=True``). Calling it runs its ``forward`` — a fresh module has no hooks
(global hooks make the call unsupported). Only modules without parameters, buffers or submodules
are modelled: assigning a Parameter or a module to it is unsupported (a plain tensor is a plain
attribute, as ``Module.__setattr__`` stores it). If it escapes the frame, the generated code builds
it after the graph: ``object.__new__(cls)``, ``nn.Module.__init__``, then the traced ``__dict__``.
"""
from __future__ import annotations

import collections
import functools
import types

import torch

from ember.capture.variables.base import ConstantVariable, VariableTracker, unsupported
from ember.capture.variables.new_object import NewObjectVariable, _lookup
from ember.exc import Unsupported


def module_python_new(cls: type):
    """The Python ``__new__`` of a module class otherwise `module_constructible` (``__new__`` that
    returns another module: it runs inlined, see `construct_with_new`), or None."""
    if not isinstance(cls, type) or not issubclass(cls, torch.nn.Module) or cls.__new__ is object.__new__:
        return None
    raw = _lookup(cls, "__new__")
    fn = raw.__func__ if isinstance(raw, staticmethod) else raw
    return fn if isinstance(fn, types.FunctionType) and module_constructible(cls, any_new=True) else None


def module_constructible(cls: type, any_new: bool = False) -> bool:
    if not issubclass(cls, torch.nn.Module) or type(cls) is not type:
        return False
    if (cls.__new__ is not object.__new__ and not any_new) or \
            _lookup(cls, "__setattr__") is not torch.nn.Module.__setattr__:
        return False
    if _lookup(cls, "__getattr__") is not torch.nn.Module.__getattr__:
        return False
    # Container / parametrized torch modules hold state: only plain Python subclasses.
    return all(k.__module__ != "builtins" or k is object for k in cls.__mro__) and not issubclass(
        cls, (torch.nn.ModuleList, torch.nn.ModuleDict, torch.nn.Sequential, torch.nn.ParameterList,
              torch.nn.ParameterDict))


_STATE_MEMBERS = frozenset({"_parameters", "_buffers", "_modules", "register_buffer", "register_parameter",
                            "add_module", "register_module", "get_submodule", "get_parameter", "get_buffer",
                            "state_dict", "load_state_dict", "parameters", "buffers", "named_parameters",
                            "named_buffers", "children", "modules", "named_children", "named_modules", "apply"})


class NewModuleVariable(NewObjectVariable):
    def describe(self):
        return f"new {self.cls.__qualname__} module"

    module_initialized = False  # nn.Module.__init__ ran (what rebuilding it after the graph repeats)

    def getattr(self, tx, name):
        if name in _STATE_MEMBERS and self.module_initialized and \
                _lookup(self.cls, name) is getattr(torch.nn.Module, name, None):
            # (eager's module has these; the trace models a module without parameters, buffers or
            # submodules: it would find them missing and believe that the program raises)
            raise unsupported("EB0042", f"{self.describe()}.{name}: a module built in the frame with parameters, "
                              "buffers or submodules (stateful module)")
        return super().getattr(tx, name)

    def init_module_state(self):
        """``nn.Module.__init__()``: the state a fresh module has that the trace can see."""
        self.attrs.setdefault("training", ConstantVariable(True))
        self.module_initialized = True

    def setattr(self, tx, name, value):
        from ember.capture.variables.objects import NNModuleVariable
        from ember.capture.variables.tensor import TensorVariable
        if isinstance(value, TensorVariable) and not _is_parameter(value):
            pass  # a plain tensor: Module.__setattr__ keeps it in the instance __dict__
        elif isinstance(value, (TensorVariable, NNModuleVariable, NewModuleVariable)):
            raise unsupported("EB0042", f"a module built in the frame holding {value.describe()} (stateful module)")
        attr = _lookup(self.cls, name)
        if isinstance(attr, property):
            return super().setattr(tx, name, value)
        self.attrs[name] = value  # what Module.__setattr__ does for a plain value

    def call(self, tx, args, kwargs):
        mm = torch.nn.modules.module
        if mm._global_forward_hooks or mm._global_forward_pre_hooks or mm._global_backward_hooks or \
                getattr(mm, "_global_backward_pre_hooks", None):
            raise unsupported("EB0043", "global module hooks on a module built in the frame")
        if _lookup(self.cls, "__call__") is not torch.nn.Module.__call__:
            return self.getattr(tx, "__call__").call(tx, args, kwargs)
        return self.getattr(tx, "forward").call(tx, args, kwargs)

    def reconstruct(self, plan) -> str:
        if not self.module_initialized:  # (eager's object lacks the module state: not modelled)
            raise unsupported("EB0015", f"a {self.describe()} whose __init__ skipped nn.Module.__init__ escapes the frame")
        attrs = "{" + ", ".join(f"{k!r}: {plan.expr(v)}" for k, v in self.attrs.items()) + "}"
        from ember.capture.sources import bind
        return f"{bind(plan.scope, rebuild_module, 'rebuild_module')}({bind(plan.scope, self.cls, 'cls')}, {attrs})"


class FrameContainerModuleVariable:  # (defined below, after NNModuleVariable is importable)
    pass


def _frame_container_class():
    from ember.capture.variables.objects import NNModuleVariable

    class FrameContainerModuleVariable(NNModuleVariable):
        """An ``nn.Sequential`` / ``ModuleList`` / ``ModuleDict`` of stateless torch modules built in
        the frame (constructors.py ``_stateless_container``): the real container made while tracing
        serves every call, so the program must not reach it or change it. Its members are the
        trackers of the modules the frame built (each rebuilt anew if it escapes), its instance
        dicts are read-only (``append``, ``add_module``, hooks, ``.eval()`` break the graph), and if
        it escapes the frame the generated code builds a new container of new members."""

        created_in_frame = True

        def __init__(self, module, members: dict):
            super().__init__(module, None)
            self.members = members  # name -> tracker of the member module

        def getattr(self, tx, name):
            if name == "_modules":
                return DictVariableRO.read_only_of(self.members.items(), "changing the submodules of a "
                                                   f"{type(self.module).__name__} built in the frame",
                                                   view_of=(self, "_modules"))
            if name in self.members and name not in type(self.module).__dict__:
                return self.members[name]
            value = super().getattr(tx, name)
            if isinstance(value, DictVariableRO) and value.source is None:
                value.read_only = f"changing the state of a {type(self.module).__name__} built in the frame"
                value.view_of = (self, name)
            return value

        def module_member(self, tx, name):
            if name in self.members:
                return self.members[name]
            return super().module_member(tx, name)

        def reconstruct(self, plan) -> str:
            from ember.capture.sources import bind
            cls = bind(plan.scope, type(self.module), "module_cls")
            parts = [plan.expr(v) for v in self.members.values()]
            if isinstance(self.module, torch.nn.Sequential):
                return f"{cls}({', '.join(parts)})"
            if isinstance(self.module, torch.nn.ModuleList):
                return f"{cls}([{', '.join(parts)}])"
            return f"{cls}({{{', '.join(f'{k!r}: {p}' for k, p in zip(self.members, parts))}}})"

    return FrameContainerModuleVariable


def _is_parameter(vt) -> bool:
    try:
        return issubclass(vt.python_type(), torch.nn.Parameter)
    except Exception:  # noqa: BLE001 - cannot tell: treat as one (refused)
        return True


def rebuild_module(cls, attrs: dict):
    """Runtime helper for generated code: the module the trace described (its ``__init__`` already
    ran in the trace; ``module_constructible`` classes use object.__new__ and Module.__setattr__)."""
    obj = object.__new__(cls)
    torch.nn.Module.__init__(obj)
    obj.__dict__.update(attrs)
    return obj


def construct_module(tx, cls: type, args: list, kwargs: dict) -> NewModuleVariable:
    from ember.capture.variables.functions import UserFunctionVariable
    from ember.capture.variables.new_object import check_instantiable
    check_instantiable(cls)
    obj = NewModuleVariable(cls)
    init = _lookup(cls, "__init__")
    if init is torch.nn.Module.__init__:
        if args or kwargs:
            raise unsupported("EB0002", f"{cls.__name__}() takes no arguments (TypeError)")
        obj.init_module_state()
    elif isinstance(init, types.FunctionType):
        UserFunctionVariable(init).call(tx, [obj, *args], kwargs)
    else:
        raise unsupported("EB0042", f"{cls.__name__}.__init__ is not a Python function")
    return obj


class ModuleInitVariable(VariableTracker):
    """``super().__init__()`` reaching ``nn.Module.__init__`` inside a module built in the frame."""

    def __init__(self, obj):
        self.obj = obj

    def call(self, tx, args, kwargs):
        if args or kwargs:
            raise unsupported("EB0042", "nn.Module.__init__ with arguments")
        self.obj.init_module_state()
        return ConstantVariable(None)


# -- dict.fromkeys ---------------------------------------------------------------------------

class DictFromKeysVariable(VariableTracker):
    """``dict.fromkeys(iterable, value=None)`` (and OrderedDict's)."""

    def __init__(self, dict_cls):
        self.dict_cls = dict_cls

    def describe(self):
        return f"{self.dict_cls.__name__}.fromkeys"

    def truth(self, tx):
        return True

    def getattr(self, tx, name):
        if name in ("__name__", "__qualname__"):
            return ConstantVariable("fromkeys" if name == "__name__" else "dict.fromkeys")
        return super().getattr(tx, name)

    def call(self, tx, args, kwargs):
        from ember.capture.variables.containers import DictVariable
        if kwargs or not 1 <= len(args) <= 2:
            from ember.exc import PythonException
            try:  # CPython's own message for the wrong arguments
                dict.fromkeys(*[()] * len(args), **{k: None for k in kwargs})
            except TypeError as e:
                raise PythonException(TypeError(*e.args)) from None
            raise unsupported("EB0037", "dict.fromkeys with unexpected arguments")
        value = args[1] if len(args) == 2 else ConstantVariable(None)
        if self.dict_cls in (dict, collections.OrderedDict):
            d = DictVariable({}, dict_cls=self.dict_cls)
            for key in args[0].iter(tx).unpack(tx):
                d.set_item(key, value)
            return d
        # a subclass: `cls()` (its __init__ runs), then `d[key] = value` through its __setitem__
        from ember.capture.variables.builtins import construct
        d = construct(tx, self.dict_cls, [], {})
        for key in args[0].iter(tx).unpack(tx):
            d.call_method(tx, "__setitem__", [key, value], {})
        return d


def class_attribute_override(cls, name):
    """A tracker for ``cls.name`` that the class-attribute lookup should not produce, or None."""
    if name == "fromkeys" and isinstance(cls, type) and issubclass(cls, dict) and \
            getattr(cls, "fromkeys", None) is not None and getattr(cls.fromkeys, "__func__", cls.fromkeys).__name__ == "fromkeys" \
            and not isinstance(getattr(cls.fromkeys, "__func__", None), types.FunctionType):
        return DictFromKeysVariable(cls)  # dict's own classmethod, bound to cls
    import itertools
    if name == "from_iterable" and cls is itertools.chain:
        from ember.capture.variables.itertools_iterators import ChainFromIterable
        return ChainFromIterable()
    return None


# -- functools.singledispatch -----------------------------------------------------------------

_SINGLEDISPATCH_CODE = functools.singledispatch(lambda arg: arg).__code__  # the wrapper's code


def is_singledispatch(fn) -> bool:
    return getattr(fn, "__code__", None) is _SINGLEDISPATCH_CODE and hasattr(fn, "dispatch")


def call_singledispatch(tx, fn_vt, args, kwargs):
    """``proc(x)`` of a ``functools.singledispatch`` function: the implementation registered for
    ``type(x)``, chosen now (the wrapper's own lookup goes through a WeakKeyDictionary) and inlined.
    The argument's type is guarded already; the registry is guarded on its size (``register``
    after the compile adds a key). None: not handled here (the wrapper is inlined as it is)."""
    fn = fn_vt.fn
    if not args or fn_vt.source is None:
        return None
    try:
        cls = args[0].python_type()
    except Unsupported:
        return None
    impl = fn.dispatch(cls)
    if not isinstance(impl, types.FunctionType):
        return None
    from ember.capture.sources import AttrSource
    from ember.capture.variables.functions import UserFunctionVariable
    tx.guards.length(AttrSource(fn_vt.source, "registry"), len(fn.registry))
    return UserFunctionVariable(impl).call(tx, list(args), kwargs)


from ember.capture.variables.containers import DictVariable as DictVariableRO  # noqa: E402
FrameContainerModuleVariable = _frame_container_class()  # noqa: F811
