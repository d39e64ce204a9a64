"""Objects that live outside the frame: nn.Modules, user objects, Python modules, classes.

Reading their attributes reads the real object and installs a guard on what
was read (identity for modules and functions, type and value for constants,
full metadata for tensors), so a later call with something different misses
the cache and recompiles.
"""
from __future__ import annotations

import collections
import functools
import random
import types

import torch

from ember.capture.sources import AttrSource, ConstSource, ItemSource, ModuleMemberSource
from ember.capture.variables.base import ConstantVariable, VariableTracker, unsupported
from ember.capture.variables.deferred_calls import deferred_call
from ember.capture.variables.real_dicts import _DICT_READS, RealDictReadVariable
from ember.capture.variables.instance_lookup import module_written_dict, tracked_instance_dict, type_attribute
from ember.capture.variables.module_state import (MEMBER_DICTS, check_dicts, check_instance_dict,
                                                  check_members_written, check_tree, module_member_of)
from ember.exc import PythonException
from ember.capture.variables.module_listings import _LISTINGS, _listing_prefix, listing_keys  # noqa: F401
from ember.capture.variables.functional_call import overridden
from ember.capture.variables.random_draws import DRAWS as RANDOM_DRAWS, is_random_draw


_ABSENT = object()


# types.SimpleNamespace lists its own __setattr__ slot, which is PyObject_GenericSetAttr
_NAMESPACE_SETATTR = types.SimpleNamespace.__setattr__


class MissingAttribute(PythonException):
    """The attribute does not exist (so ``hasattr`` is False, ``getattr`` takes the default)."""

    def __init__(self, reason: str):
        super().__init__(AttributeError(reason), reason)


def raw_attribute(obj, name, default=None):
    """``obj.name`` without the class's ``__getattr__``/``__getattribute__`` (user code, maybe with
    side effects or raising KeyError): ``default`` where the plain lookup fails."""
    try:
        return object.__getattribute__(obj, name)
    except AttributeError:
        return default


def thread_local(obj) -> bool:
    """A ``threading.local`` whose attribute access is local's own (a per-thread ``__dict__``)."""
    import _thread
    t = type(obj)
    return isinstance(obj, _thread._local) and t.__getattribute__ is _thread._local.__getattribute__ and \
        t.__setattr__ is _thread._local.__setattr__ and t.__delattr__ is _thread._local.__delattr__ and \
        not any("__getattr__" in k.__dict__ for k in t.__mro__)


def _static_lookup(obj, name):
    """Find ``name`` on ``type(obj)``'s MRO without running descriptors."""
    for klass in type(obj).__mro__:
        if name in klass.__dict__:
            return klass.__dict__[name]
    return None


def _is_data_descriptor(attr) -> bool:
    """A class attribute that wins over the instance dict (a property, a slot, __dict__)."""
    return isinstance(attr, property) or (hasattr(type(attr), "__set__") and not isinstance(attr, type))


def _on_class(obj, name) -> bool:
    """``name`` is defined somewhere on ``type(obj)``'s MRO (possibly as None: `cfg = None`)."""
    return any(name in klass.__dict__ for klass in type(obj).__mro__)


def class_source(cls: type) -> ConstSource:
    """Where guards re-read ``cls``'s attributes: the class object itself (its identity is already
    pinned wherever the trace learned it, by a type or identity guard on the instance)."""
    return ConstSource(cls, f"<class {cls.__qualname__}>")


def pending_class_attribute(tx, cls: type, name: str):
    """The value the frame assigned to ``cls.name`` (or to the base class ``cls`` inherits ``name``
    from), not yet replayed; None if none (see `ClassVariable.setattr`)."""
    for klass in cls.__mro__:
        hit = tx.side_effects.load_attr(klass, name)
        if hit is not None:
            return hit
        if name in klass.__dict__:
            return None
    return None


def call_getattr_hook(tx, obj_vt, cls: type, name: str):
    """``cls.__getattr__(obj, name)`` (a Python function), traced; an exception it raises is marked
    so that `with_getattr_fallback` does not call it a second time."""
    hook = _lookup_class(cls, "__getattr__")
    try:
        return class_member(tx, hook, AttrSource(class_source(cls), "__getattr__"), obj_vt, cls).call(
            tx, [ConstantVariable(name)], {})
    except PythonException as e:
        e.from_getattr_hook = True
        raise


def with_getattr_fallback(tx, obj_vt, cls: type, name: str, lookup):
    """``lookup()`` (the attribute as ``__getattribute__`` finds it); an AttributeError raised there
    (a property that raises it, an unset slot) goes to the class's Python ``__getattr__``, as
    CPython's ``slot_tp_getattr_hook`` does."""
    try:
        return lookup()
    except PythonException as e:
        if getattr(e, "from_getattr_hook", False) or not isinstance(e.exc, AttributeError) or \
                not isinstance(_lookup_class(cls, "__getattr__"), types.FunctionType):
            raise
    return call_getattr_hook(tx, obj_vt, cls, name)


def _lookup_class(cls: type, name: str):
    for klass in cls.__mro__:
        if name in klass.__dict__:
            return klass.__dict__[name]
    return None


def _guard_not_on_instance(tx, obj_vt, obj, name):
    """A class-level attribute found for ``obj.name``: an instance attribute added later would
    shadow it (``a.act = other``), so pin its absence from the instance ``__dict__``."""
    if obj_vt.source is not None and isinstance(raw_attribute(obj, "__dict__"), dict):
        tracked = getattr(obj_vt, "_tracked_instance_dict", None)
        if tracked is not None and tracked(tx) is not None:
            return  # the trace holds the dict: its key set is guarded, and the trace may have changed it
        tx.guards.not_in_instance_dict(obj_vt.source, name)


def class_member(tx, raw, lookup_src, self_vt, bind_cls, inst_src=None):
    """The tracker for a class attribute ``raw`` (as found in a class ``__dict__`` on the MRO) read
    through an instance (or class) ``self_vt``, with a guard that the same lookup still finds it.

    ``lookup_src`` re-does the class-level lookup (``cls.name`` or ``super(C, T).name``), which for a
    function or property gives the object itself, for a staticmethod its function, for a classmethod
    a method whose ``__func__`` is pinned. Returns None for other kinds of attributes."""
    from ember.capture.builder import wrap
    from ember.capture.variables.functions import UserFunctionVariable, UserMethodVariable
    if isinstance(raw, types.FunctionType):
        tx.guards.id_match(lookup_src, raw)
        # and its code, on the object itself (IPython's autoreload assigns a method's __code__ in
        # place: the same function object, new code)
        from ember.capture.variables.functions import function_source
        tx.guards.function_code(function_source(raw, None), raw)
        return UserMethodVariable(UserFunctionVariable(raw, lookup_src), self_vt, inst_src)
    if isinstance(raw, property):
        if raw.fget is None:
            raise unsupported("EB0031", "property has no getter")
        tx.guards.id_match(lookup_src, raw)
        getter = raw.fget
        if isinstance(getter, types.FunctionType):
            return UserFunctionVariable(getter, AttrSource(lookup_src, "fget")).call(tx, [self_vt], {})
        return wrap(tx, getter, AttrSource(lookup_src, "fget")).call(tx, [self_vt], {})
    if isinstance(raw, staticmethod):
        return wrap(tx, raw.__func__, lookup_src)
    if isinstance(raw, classmethod):
        fsrc = AttrSource(lookup_src, "__func__")
        if isinstance(raw.__func__, types.FunctionType):
            tx.guards.id_match(fsrc, raw.__func__)
            func = UserFunctionVariable(raw.__func__, fsrc)
        else:
            func = wrap(tx, raw.__func__, fsrc)
        return UserMethodVariable(func, ClassVariable(bind_cls, class_source(bind_cls)), inst_src)
    return None


def _python_slot(obj, cls_attr) -> bool:
    """Whether ``cls_attr`` (found on ``obj``'s class) is a ``__slots__`` member of a Python class of
    ``obj`` (not a C type's read-only member)."""
    if type(cls_attr) is not types.MemberDescriptorType:
        return False
    owner = getattr(cls_attr, "__objclass__", None)
    return isinstance(owner, type) and isinstance(obj, owner) and "__slots__" in vars(owner) \
        and vars(owner).get(cls_attr.__name__) is cls_attr


def _class_attribute(tx, obj_vt, obj, name):
    """Resolve an attribute found on the class: methods bind, properties run inlined."""
    from ember.capture.builder import wrap
    from ember.capture.variables.functions import UserFunctionVariable, UserMethodVariable
    attr = _static_lookup(obj, name)
    src = AttrSource(obj_vt.source, name) if obj_vt.source else None
    lookup_src = AttrSource(class_source(type(obj)), name)
    if src is not None and type(obj) is random.Random and name in RANDOM_DRAWS \
            and is_random_draw(value := getattr(obj, name)):
        # `rng.random()` / `rng.randint(1, 6)` of a random.Random: drawn before the graph, as
        # random.random() is (variables/random_draws.py), not a break inside random.py
        return wrap(tx, value, src)
    member = class_member(tx, attr, lookup_src, obj_vt, type(obj), src)
    if member is not None:
        if not isinstance(attr, property):  # data descriptors win over the instance dict; the rest don't
            _guard_not_on_instance(tx, obj_vt, obj, name)
        return member
    getter = _static_lookup(attr, "__get__")
    if isinstance(getter, types.FunctionType) and obj_vt.source is not None and \
            (tx.side_effects or not (isinstance(attr, functools.cached_property)
                                     or isinstance(_static_lookup(obj, "__getattr__"), types.FunctionType))):
        # a descriptor class written in Python: its __get__(desc, obj, type) runs inlined, so it
        # sees the frame's pending writes, and what it does (a counter, a cache) happens once per
        # read, as in eager (read for real, it ran while tracing and again in the guard re-reading
        # it on every call). functools.cached_property with nothing pending is read for real
        # below (its lock is not traceable): it runs its function once, and the instance dict,
        # which it fills, answers every later read. So is a descriptor of a class with a
        # __getattr__, which an AttributeError from __get__ falls back to (ScriptModule's
        # `forward` descriptor raises there by design).
        return UserFunctionVariable(getter).call(
            tx, [_class_attribute_raw(tx, obj_vt, obj, name), obj_vt, ClassVariable(type(obj), class_source(type(obj)))], {})
    if hasattr(attr, "__get__") and not isinstance(attr, (int, float, str, bool, type(None))):
        try:
            value = getattr(obj, name)
        except AttributeError as e:  # e.g. an unset __slots__ member: eager's own message
            _guard_absent(tx, obj_vt.source, obj, name)
            raise MissingAttribute(str(e)) from None
        if isinstance(value, types.MethodType) and isinstance(value.__func__, types.FunctionType):
            fsrc = AttrSource(src, "__func__") if src is not None else None
            if fsrc is not None:
                tx.guards.id_match(fsrc, value.__func__)
            return UserMethodVariable(UserFunctionVariable(value.__func__, fsrc), obj_vt, src)
        if isinstance(obj, dict) and name in _DICT_READS:
            return RealDictReadVariable(obj_vt, name)
        if isinstance(value, (types.BuiltinMethodType, types.MethodWrapperType)):
            from ember.capture.builder import OpaqueCallableVariable
            vt = OpaqueCallableVariable(value, src, f"calling builtin method {type(obj).__name__}.{name}")
            vt.owner_vt = obj_vt  # (whose identity a folded call pins: see fold_scalar_type_method)
            return vt
        return wrap(tx, value, src)
    return wrap(tx, attr, src if src is not None else lookup_src)


def _class_attribute_raw(tx, obj_vt, obj, name):
    """The object stored under ``name`` in the class dict that defines it (a descriptor itself, not
    what its ``__get__`` gives)."""
    from ember.capture.builder import wrap
    from ember.capture.sources import ItemSource
    owner = next(k for k in type(obj).__mro__ if name in k.__dict__)
    return wrap(tx, owner.__dict__[name], ItemSource(AttrSource(class_source(owner), "__dict__"), name))


def _guard_absent(tx, source, obj, name):
    """``obj`` has no attribute ``name`` (a failed hasattr / getattr with a default): pin that."""
    if source is not None:
        tx.guards.no_attribute(source, obj, name)


class NNModuleVariable(VariableTracker):
    """An ``nn.Module`` instance. Guarded by identity; calls inline ``forward``."""

    def __init__(self, module: torch.nn.Module, source=None):
        self.module = module
        self.source = source

    def python_type(self):
        return type(self.module)

    def describe(self):
        return f"module {type(self.module).__name__}" + (f" ({self.source.name()})" if self.source else "")

    def truth(self, tx):
        if hasattr(type(self.module), "__len__"):
            self.guard_structure(tx)
            return len(self.module) > 0
        return True

    def guard_structure(self, tx) -> None:
        """The trace measured, indexed or iterated this container module: modules are guarded by
        type, not identity, so pin its members (their names, in order)."""
        check_dicts(tx, self.module)
        check_members_written(tx, self.module)
        if self.source is None:
            return
        d = self.module.__dict__
        for kind in ("_modules", "_parameters"):
            members = d.get(kind)
            if members:
                tx.guards.dict_keys(AttrSource(self.source, kind), list(members), ordered=True)
        if not d.get("_modules") and not d.get("_parameters"):
            for kind in ("_modules", "_parameters"):
                tx.guards.length(AttrSource(self.source, kind), 0)

    identity_guard = None  # set by builder.wrap: installs the identity guard (type is guarded)

    def hash_key(self):
        if self.identity_guard is not None:
            self.identity_guard()  # a dict key / set element: identity observed
        return ("__module__", id(self.module))

    def _sub(self, key):
        return AttrSource(self.source, key) if self.source else None

    def getattr(self, tx, name):
        from ember.capture.builder import wrap
        m = self.module
        d = m.__dict__
        pending = tx.side_effects.load_attr(m, name)
        if pending is not None:
            return pending
        swapped = overridden(tx, m, name)  # inside torch.func.functional_call
        if swapped is not None:
            return swapped
        if name == "__dict__":
            view = module_written_dict(tx, self, d) if tx.side_effects.has_attrs(m) else None
            if view is not None:
                return view
            tx.side_effects.read_instance_dict(m)
        if name == "__class__":
            return ClassVariable(type(m), class_source(type(m)))
        # Python's lookup order: a data descriptor on the class (a property), the instance dict, any
        # other class attribute (a method named like a submodule shadows it: `self.linear` is the
        # method), and only then nn.Module.__getattr__'s parameters, buffers and submodules.
        on_class = _on_class(m, name)
        if on_class and _is_data_descriptor(_static_lookup(m, name)):
            return _class_attribute(tx, self, m, name)
        tracked = tracked_instance_dict(tx, self.source, m)
        if tracked is None and name != "__dict__":
            check_instance_dict(tx, m)  # (written through a tracker the read cannot consult)
        if tracked is not None:
            # the trace holds `module.__dict__` as a dict tracker (and may have written into it):
            # the attribute is what that dict holds now, not what the real one held
            if name in tracked.items:
                if name in MEMBER_DICTS:
                    check_members_written(tx, m)
                return tracked.items[name]
            if name in d:  # deleted by the frame: what the lookup finds now was not there at entry
                raise unsupported("EB0032", f"reading {type(m).__name__}.{name} after the frame deleted it "
                                  "from the instance __dict__")
        elif name in d:
            if name in MEMBER_DICTS:
                check_members_written(tx, m)
            return wrap(tx, d[name], self._sub(name))
        pending_cls = pending_class_attribute(tx, type(m), name)
        if pending_cls is not None:  # a class attribute the frame assigned (`Cls.count += 1`)
            _guard_not_on_instance(tx, self, m, name)
            return pending_cls
        if name in _LISTINGS and getattr(type(m), name) is getattr(torch.nn.Module, name, None):
            from ember.capture.variables.functions import BoundMethodVariable
            tx.guards.id_match(AttrSource(class_source(type(m)), name), getattr(torch.nn.Module, name))
            _guard_not_on_instance(tx, self, m, name)
            return BoundMethodVariable(self, name)
        if on_class:
            return _class_attribute(tx, self, m, name)
        member = module_member_of(tx, self, name)
        if member is not None:
            return member
        _guard_absent(tx, self.source, m, name)
        hook = _static_lookup(m, "__getattr__")
        if isinstance(hook, types.FunctionType) and hook is not torch.nn.Module.__getattr__:
            # A module class's own __getattr__ (its super().__getattr__ is `module_member`).
            return class_member(tx, hook, AttrSource(class_source(type(m)), "__getattr__"), self,
                                type(m)).call(tx, [ConstantVariable(name)], {})
        raise MissingAttribute(f"'{type(m).__name__}' object has no attribute '{name}'")

    def _tracked_instance_dict(self, tx):
        return tracked_instance_dict(tx, self.source, self.module)

    def module_member(self, tx, name):
        """``nn.Module.__getattr__``: a parameter, buffer or submodule, else AttributeError."""
        from ember.capture.builder import wrap
        d = self.module.__dict__
        swapped = overridden(tx, self.module, name)  # inside torch.func.functional_call
        if swapped is not None:
            return swapped
        member = module_member_of(tx, self, name)
        if member is not None:
            return member
        raise MissingAttribute(f"'{type(self.module).__name__}' object has no attribute '{name}'")

    def call(self, tx, args, kwargs):
        """``module(*args)``: a class's own ``__call__`` (overriding Module's) is inlined, as
        eager runs it; otherwise `standard_call`."""
        from torch.nn.modules.lazy import LazyModuleMixin
        if isinstance(self.module, LazyModuleMixin) and hasattr(self.module, "_initialize_hook"):
            # its first call builds the parameters (and changes its class): done now, as eager
            # does at this call, or else that call runs eagerly
            from ember.capture.variables.lazy_modules import initialize_lazy
            initialize_lazy(tx, self, args, kwargs)
        own_call = _static_lookup(self.module, "__call__")
        if own_call is not torch.nn.Module.__call__ and isinstance(own_call, types.FunctionType):
            return _class_attribute(tx, self, self.module, "__call__").call(tx, args, kwargs)
        return self.standard_call(tx, args, kwargs)

    def standard_call(self, tx, args, kwargs):
        """``Module.__call__(module, *args)``: hooks and ``forward``, as ``Module._call_impl`` runs
        them (see `module_hooks.call_with_hooks`)."""
        from ember.capture.variables.module_hooks import call_with_hooks
        return call_with_hooks(tx, self, args, kwargs)

    def call_method(self, tx, name, args, kwargs):
        m = self.module
        if name == "__len__":
            own = _static_lookup(m, "__len__")
            if own is None:
                raise unsupported("EB0038", f"len() of {self.describe()} (its class defines no __len__)")
            if isinstance(own, types.FunctionType) and not own.__module__.startswith("torch.nn."):
                return _class_attribute(tx, self, m, "__len__").call(tx, args, kwargs)  # the class's own
            self.guard_structure(tx)
            return ConstantVariable(len(m))
        if name == "__getitem__" and isinstance(m, (torch.nn.ModuleList, torch.nn.Sequential,
                                                  torch.nn.ModuleDict, torch.nn.ParameterList,
                                                  torch.nn.ParameterDict)):
            check_dicts(tx, m)
            check_members_written(tx, m)
            key = args[0].as_constant()
            if isinstance(key, slice) or (isinstance(key, int) and key < 0):
                self.guard_structure(tx)  # which members these are depends on how many there are
            try:
                m[key]
            except Exception as e:  # a missing key / an index out of range: eager's exception
                self.guard_structure(tx)
                raise PythonException(e) from None
            if isinstance(key, slice) and isinstance(m, (torch.nn.ModuleList, torch.nn.Sequential,
                                                         torch.nn.ParameterList)):
                from ember.capture.variables.module_slices import slice_container
                return slice_container(tx, self, key)
            if isinstance(key, slice):
                raise unsupported("EB0039", f"slicing a {type(m).__name__}")
            from ember.capture.builder import wrap
            if isinstance(m, (torch.nn.ModuleDict, torch.nn.ParameterDict)):
                return wrap(tx, m[key], ItemSource(self.source, key) if self.source else None)
            idx = key + len(m) if key < 0 else key
            return self.getattr(tx, str(idx)) if not isinstance(m, torch.nn.ParameterList) else \
                wrap(tx, m[idx], ItemSource(self.source, idx) if self.source else None)
        if name in _LISTINGS:
            return self._listing(tx, name, args, kwargs)
        return super().call_method(tx, name, args, kwargs)

    def _listing(self, tx, name, args, kwargs):
        """Iteration helpers: materialize the real listing and guard each item."""
        from ember.capture.builder import wrap
        from ember.capture.variables.containers import TupleVariable
        m = self.module
        check_tree(tx, m)
        cargs = [a.as_constant() for a in args]
        ckw = {k: v.as_constant() for k, v in kwargs.items()}
        items = list(getattr(m, name)(*cargs, **ckw))
        if self.source is not None:
            # How many items there are (and under which names) is baked into the trace.
            from ember.capture.sources import CallSource
            tx.guards.equals(CallSource(listing_keys, self.source, (name, tuple(cargs), tuple(ckw.items()))),
                             listing_keys(m, name, tuple(cargs), tuple(ckw.items())))
        prefix = _listing_prefix(m, name, cargs, ckw)
        out = []
        for item in items:
            if isinstance(item, tuple):
                key, value = item
                path = key[len(prefix):].lstrip(".") if prefix and isinstance(key, str) else key
                out.append(TupleVariable([ConstantVariable(key), wrap(tx, value, self._dotted(path))]))
            elif name == "keys":
                out.append(ConstantVariable(item))
            else:
                out.append(wrap(tx, item, self._find(item)))
        if name in ("keys", "values", "items"):
            return TupleVariable(out)
        # parameters(), named_modules(), ... are generators: `next(m.parameters())` works, once each
        from ember.capture.variables.containers import IteratorVariable
        return IteratorVariable(out, real_type=types.GeneratorType)

    def _dotted(self, key):
        if self.source is None or not isinstance(key, str):
            return None
        src = self.source
        for part in key.split(".") if key else []:
            src = AttrSource(src, part)
        return src

    def _find(self, obj):
        for key, value in list(self.module.named_parameters()) + list(self.module.named_buffers()) \
                + list(self.module.named_modules()):
            if value is obj:
                return self._dotted(key)
        return None

    def unpack(self, tx):
        m = self.module
        self.guard_structure(tx)
        if isinstance(m, (torch.nn.ModuleList, torch.nn.Sequential)):
            return [self.getattr(tx, k) for k in m._modules]
        if isinstance(m, torch.nn.ModuleDict):
            return [ConstantVariable(k) for k in m._modules]
        if isinstance(m, torch.nn.ParameterDict) and list(m._keys) == list(m._parameters):
            # (its keys, in order, as the structure guard pinned them: every value a Parameter)
            return [ConstantVariable(k) for k in m._keys]
        if isinstance(m, torch.nn.ParameterList):
            from ember.capture.builder import wrap
            return [wrap(tx, p, ItemSource(self.source, i) if self.source else None) for i, p in enumerate(m)]
        raise unsupported("EB0034", f"iterating over {type(m).__name__}")

    def setattr(self, tx, name, value):
        """``module.name = value``: the class's own Python ``__setattr__`` is inlined (it usually
        ends in ``super().__setattr__``, which is `module_setattr`); otherwise Module's."""
        m = self.module
        custom = _static_lookup(m, "__setattr__")
        if isinstance(custom, types.FunctionType) and custom is not torch.nn.Module.__setattr__:
            from ember.capture.variables.functions import UserFunctionVariable, UserMethodVariable
            tx.guards.id_match(AttrSource(class_source(type(m)), "__setattr__"), custom)
            UserMethodVariable(UserFunctionVariable(custom), self).call(tx, [ConstantVariable(name), value], {})
            return
        if custom is not torch.nn.Module.__setattr__:
            raise unsupported("EB0032", f"assigning {type(m).__name__}.{name} with a custom __setattr__")
        self.module_setattr(tx, name, value)

    def module_setattr(self, tx, name, value):
        """``nn.Module.__setattr__(module, name, value)``: recorded and replayed after the graph
        with ``nn.Module.__setattr__`` itself (never the class's own ``__setattr__`` again)."""
        m = self.module
        if name in m.__dict__.get("_modules", {}) and isinstance(value, NNModuleVariable) and \
                value.module is m._modules[name] and not getattr(torch.nn.modules.module, "_global_module_registration_hooks", 1):
            return  # `self.proj = self.proj.to(dtype)`: the same module back (no registration hook to call)
        if name in m.__dict__.get("_parameters", {}) or name in m.__dict__.get("_modules", {}):
            raise unsupported("EB0032", f"assigning parameter/submodule {type(m).__name__}.{name} inside the frame")
        if name not in m.__dict__.get("_buffers", {}) and not isinstance(value, NNModuleVariable) \
                and _on_class(m, name):
            # Module.__setattr__ ends in object.__setattr__: a property's setter runs
            cls_attr = _static_lookup(m, name)
            if isinstance(cls_attr, property) and isinstance(cls_attr.fset, types.FunctionType):
                from ember.capture.variables.functions import UserFunctionVariable
                tx.guards.id_match(AttrSource(class_source(type(m)), name), cls_attr)
                UserFunctionVariable(cls_attr.fset).call(tx, [self, value], {})
                return
            if _is_data_descriptor(cls_attr):
                raise unsupported("EB0032", f"assigning {type(m).__name__}.{name} through a descriptor/property")
        tx.side_effects.store_attr(self, m, name, value, via=torch.nn.Module.__setattr__)

    def generic_setattr(self, tx, name, value):
        """``object.__setattr__(module, name, value)``: into the instance dict, bypassing Module's."""
        m = self.module
        if _is_data_descriptor(_static_lookup(m, name)):
            raise unsupported("EB0032", f"assigning {type(m).__name__}.{name} through a descriptor/property")
        tx.side_effects.store_attr(self, m, name, value, raw=True)


class UserObjectVariable(VariableTracker):
    """Any other Python object that existed before the frame (read-only)."""

    def __init__(self, obj, source=None):
        self.obj = obj
        self.source = source

    def python_type(self):
        return type(self.obj)

    def describe(self):
        return f"{type(self.obj).__name__} object"

    identity_guard = None  # set by builder.wrap: installs the identity guard (type is guarded)

    def hash_key(self):
        from ember.capture.variables.new_object import dataclass_value_fields, hashed_by_identity
        if not hashed_by_identity(type(self.obj)):
            names = dataclass_value_fields(type(self.obj))
            if names is not None and self.identity_guard is not None:
                values = tuple(raw_attribute(self.obj, n, _ABSENT) for n in names)
                if all(type(v) in (int, float, str, bool, bytes, type(None)) for v in values):
                    self.identity_guard()  # (a frozen instance: its fields are pinned with it)
                    return ("__dataclass__", type(self.obj), values)
            from ember.capture.variables.new_object import pybind11_enum_value
            value = pybind11_enum_value(self.obj)
            if value is not None:  # (C++ enum: hashed and compared by its value, no Python code)
                if self.identity_guard is not None:
                    self.identity_guard()
                return ("__pybind11_enum__", type(self.obj), value)
            raise unsupported("EB0035", f"a {type(self.obj).__name__} object (its own __eq__/__hash__) as a dict key "
                              f"or set element")
        if self.identity_guard is not None:
            self.identity_guard()  # a dict key / set element: identity observed
        return ("__object__", id(self.obj))

    def truth(self, tx):
        t = type(self.obj)
        if _static_lookup(self.obj, "__bool__") is not None or _static_lookup(self.obj, "__len__") is not None:
            from ember.capture.variables.user_operators import checked_truth
            meth = "__bool__" if hasattr(t, "__bool__") else "__len__"
            return checked_truth(meth, self.call_method(tx, meth, [], {}))
        return True

    def getattr(self, tx, name):
        return with_getattr_fallback(tx, self, type(self.obj), name, lambda: self._getattr(tx, name))

    def _getattr(self, tx, name):
        from ember.capture.builder import wrap
        obj = self.obj
        pending = tx.side_effects.load_attr(obj, name)
        if pending is not None:
            return pending
        d = raw_attribute(obj, "__dict__")
        if d is None and thread_local(obj):
            d = obj.__dict__  # (this thread's: the compiled code runs in the caller's thread too)
        if name == "__class__":
            return ClassVariable(type(obj), class_source(type(obj)))
        if name == "__dict__":
            if tx.side_effects.has_attrs(obj) and type(d) is dict and self.source is not None and \
                    _static_lookup(obj, "__getattribute__") is object.__getattribute__:
                return self._written_dict(tx, d)
            tx.side_effects.read_instance_dict(obj)
        if isinstance(_static_lookup(obj, "__getattribute__"), types.FunctionType):
            return self._custom_getattribute(tx, name)
        deferred = deferred_call(self, obj, name)  # (logging, a real autograd.Function ctx's records)
        if deferred is not None:
            return deferred
        cls_attr = _static_lookup(obj, name)
        if isinstance(cls_attr, property) or (hasattr(cls_attr, "__set__") and not isinstance(cls_attr, type)
                                              and hasattr(type(cls_attr), "__get__")):
            # data descriptors win over the instance dict (one without __get__ does not: CPython
            # reads the instance dict, and only then hands out the descriptor itself)
            return _class_attribute(tx, self, obj, name)
        tracked = self._tracked_instance_dict(tx)
        if tracked is not None:
            # the trace holds `obj.__dict__` as a dict tracker (and may have written into it):
            # the attribute is what that dict holds now, not what the real one held
            if name in tracked.items:
                return tracked.items[name]
        elif d is not None and name in d:
            return wrap(tx, d[name], AttrSource(self.source, name) if self.source else None)
        pending_cls = pending_class_attribute(tx, type(obj), name)
        if pending_cls is not None:  # `Cls.count += 1` earlier in the frame, read as `self.count`
            _guard_not_on_instance(tx, self, obj, name)
            return pending_cls
        if cls_attr is not None or _on_class(obj, name):
            return _class_attribute(tx, self, obj, name)
        if raw_attribute(obj, "__slots__") is not None and raw_attribute(obj, name, _ABSENT) is not _ABSENT:
            return wrap(tx, raw_attribute(obj, name), AttrSource(self.source, name) if self.source else None)
        if tracked is not None and not hasattr(type(obj), name):
            # absent from the dict the trace holds (its key set is guarded): pin the class's side
            tx.guards.no_attribute(class_source(type(obj)), type(obj), name)
        else:
            _guard_absent(tx, self.source, obj, name)  # (for a __getattr__ hook: that it is still called)
        getattr_hook = _static_lookup(obj, "__getattr__")
        if isinstance(getattr_hook, types.FunctionType):
            return call_getattr_hook(tx, self, type(obj), name)
        raise MissingAttribute(f"'{type(obj).__name__}' object has no attribute '{name}'")

    def _tracked_instance_dict(self, tx):
        return tracked_instance_dict(tx, self.source, self.obj)

    def _written_dict(self, tx, d: dict):
        from ember.capture.variables.instance_lookup import written_instance_dict
        return written_instance_dict(tx, self, d)

    def iter(self, tx):
        it = _static_lookup(self.obj, "__iter__")
        if isinstance(it, types.FunctionType):
            from ember.capture.variables.new_object import checked_iterator, drain
            result = checked_iterator(self.getattr(tx, "__iter__").call(tx, [], {}))
            if result is self:  # an iterator object (`__iter__` returns self): `__next__` until it stops
                from ember.capture.variables.containers import IteratorVariable
                return IteratorVariable(drain(tx, self))
            return result.iter(tx)
        if isinstance(self.obj, dict) and it in (dict.__iter__, collections.OrderedDict.__iter__) \
                and self.source is not None:
            # a dict subclass's own iteration: its keys, read now and guarded by re-reading them
            return RealDictReadVariable(self, "keys").call(tx, [], {}).iter(tx)
        if it is None and isinstance(_static_lookup(self.obj, "__getitem__"), types.FunctionType):
            from ember.capture.polyfills.stdlib import sequence_iter
            from ember.capture.variables.functions import UserFunctionVariable
            return UserFunctionVariable(sequence_iter).call(tx, [self], {}).iter(tx)  # obj[0], obj[1] ...
        raise unsupported("EB0034", f"iterating over {type(self.obj).__name__} object")

    def unpack(self, tx):
        return self.iter(tx).unpack(tx)

    def _custom_getattribute(self, tx, name):
        """Classes with a Python ``__getattribute__`` (e.g. HF configs' attribute_map): the class's
        own ``__getattribute__`` is inlined; its ``object.__getattribute__`` sees the frame's recorded
        writes, and what it does besides (a counter, a cache) is recorded and replayed once, as in
        eager (a real read while tracing ran it an extra time, and the guard re-reading the
        attribute on every call once more)."""
        from ember.capture.variables.functions import UserFunctionVariable, UserMethodVariable
        getattribute = _static_lookup(self.obj, "__getattribute__")
        return UserMethodVariable(UserFunctionVariable(getattribute), self).call(tx, [ConstantVariable(name)], {})

    def setattr(self, tx, name, value):
        obj = self.obj
        custom = _static_lookup(obj, "__setattr__")
        if isinstance(custom, types.FunctionType):
            # A Python __setattr__ (e.g. HF configs' validation and attribute_map) is inlined; it ends
            # in object.__setattr__ (super().__setattr__), which is `generic_setattr`.
            from ember.capture.variables.functions import UserFunctionVariable, UserMethodVariable
            UserMethodVariable(UserFunctionVariable(custom), self).call(tx, [ConstantVariable(name), value], {})
            return
        if thread_local(obj) and _static_lookup(obj, name) is None and self.source is not None:
            # threading.local: its C __setattr__ writes this thread's dict; replayed with setattr
            # in the caller's thread
            tx.side_effects.store_attr(self, obj, name, value)
            return
        if custom not in (None, object.__setattr__, _NAMESPACE_SETATTR):  # (SimpleNamespace's is generic)
            raise unsupported("EB0032", f"assigning {type(obj).__name__}.{name} with a custom __setattr__")
        self.generic_setattr(tx, name, value)

    def generic_setattr(self, tx, name, value):
        """``object.__setattr__(obj, name, value)``: recorded, replayed after the graph the same way."""
        obj = self.obj
        cls_attr = _static_lookup(obj, name)
        if isinstance(cls_attr, property) and isinstance(cls_attr.fset, types.FunctionType):
            from ember.capture.variables.functions import UserFunctionVariable
            UserFunctionVariable(cls_attr.fset).call(tx, [self, value], {})  # the setter's own writes
            return
        setter = _static_lookup(cls_attr, "__set__") if cls_attr is not None else None
        if isinstance(setter, types.FunctionType) and self.source is not None:
            # a descriptor class written in Python: its __set__(desc, obj, value)
            from ember.capture.variables.functions import UserFunctionVariable
            desc = _class_attribute_raw(tx, self, obj, name)
            UserFunctionVariable(setter).call(tx, [desc, self, value], {})
            return
        if _python_slot(obj, cls_attr):
            # a `__slots__` member of a Python class: recorded like an instance attribute (reads in
            # the frame see the value), replayed with object.__setattr__ (the slot's own __set__)
            tx.side_effects.store_attr(self, obj, name, value, raw=True)
            return
        if cls_attr is not None and hasattr(cls_attr, "__set__"):
            raise unsupported("EB0032", f"assigning {type(obj).__name__}.{name} through a descriptor/property")
        if raw_attribute(obj, "__dict__") is None:
            raise unsupported("EB0032", f"assigning {type(obj).__name__}.{name} on an object without __dict__")
        from ember.capture.variables.instance_lookup import write_through_read_dict
        if not write_through_read_dict(tx, self, name, value):
            tx.side_effects.store_attr(self, obj, name, value, raw=True)

    def delattr(self, tx, name):
        """``del obj.name``: an instance attribute of a plain object (no ``__delattr__``,
        ``__getattr__`` or class attribute of that name, whose lookup would change), recorded and
        replayed after the graph like an assignment. Its presence is guarded: eager raises
        AttributeError without it."""
        obj = self.obj
        cls = type(obj)
        if self.source is None:
            raise unsupported("EB0008", f"deleting attribute {name!r} of an object ember cannot name")
        if _static_lookup(obj, "__delattr__") not in (None, object.__delattr__) or \
                _static_lookup(obj, "__getattr__") is not None or \
                any(name in vars(klass) for klass in cls.__mro__) or type(raw_attribute(obj, "__dict__")) is not dict:
            raise unsupported("EB0008", f"deleting attribute {name!r} of {cls.__name__} (a class attribute, "
                              "__delattr__ or __getattr__ of its own)")
        if tx.side_effects.load_attr(obj, name) is None:  # (raises if the frame deleted it already)
            import operator
            from ember.capture.sources import CallSource
            present = name in obj.__dict__
            tx.guards.equals(CallSource(operator.contains, AttrSource(self.source, "__dict__"), (name,)), present)
            if not present:
                raise MissingAttribute(f"'{cls.__name__}' object has no attribute '{name}'")
        tx.side_effects.delete_attr(self, obj, name)

    def generic_getattr(self, tx, name):
        """``object.__getattribute__(obj, name)`` (what a custom ``__getattribute__`` defers to)."""
        from ember.capture.builder import wrap
        from ember.capture.variables.functions import UserFunctionVariable, UserMethodVariable
        pending = tx.side_effects.load_attr(self.obj, name)
        if pending is not None:
            return pending
        try:
            value = object.__getattribute__(self.obj, name)
        except AttributeError as e:
            raise MissingAttribute(str(e)) from None
        src = None
        if self.source is not None:  # guarded by re-doing the same read
            from ember.capture.sources import CallSource
            src = CallSource(object.__getattribute__, self.source, (name,))
        if isinstance(value, types.MethodType) and value.__self__ is self.obj and \
                isinstance(value.__func__, types.FunctionType):
            fsrc = AttrSource(src, "__func__") if src is not None else None
            if fsrc is not None:
                tx.guards.id_match(fsrc, value.__func__)  # the method may be monkeypatched
            return UserMethodVariable(UserFunctionVariable(value.__func__, fsrc), self)
        return wrap(tx, value, src)

    def call(self, tx, args, kwargs):
        if isinstance(self.obj, functools._lru_cache_wrapper):
            from ember.capture.variables.lru_cached import call_lru_cached
            return call_lru_cached(tx, self.obj, self.source, args, kwargs)
        call = _static_lookup(self.obj, "__call__")
        if isinstance(call, types.FunctionType):
            from ember.capture.polyfills.torch_utils import function_polyfill
            poly = function_polyfill(call)  # (a GraphModule's _WrappedCall: traced without its try)
            if poly is not None:
                from ember.capture.variables.functions import UserFunctionVariable
                return UserFunctionVariable(poly).call(tx, [self, *args], kwargs)
            return self.getattr(tx, "__call__").call(tx, args, kwargs)
        return super().call(tx, args, kwargs)

    def call_method(self, tx, name, args, kwargs):
        if name[:2] == "__" == name[-2:]:
            # an implicit call (`obj[k]`, `len(obj)`, `k in obj`): Python finds the method on the
            # type, past the instance dict, __getattribute__ and __getattr__; without one, a TypeError
            if _static_lookup(self.obj, name) is None:
                raise unsupported("EB0038", f"{name} of {self.describe()} (its class defines none)")
            return type_attribute(tx, self, self.obj, name).call(tx, args, kwargs)
        return self.getattr(tx, name).call(tx, args, kwargs)


# (ClassVariable and PythonModuleVariable live in their own modules; re-exported here, where most
# callers import them from)
from ember.capture.variables.classes import ClassVariable  # noqa: E402,F401
from ember.capture.variables.python_modules import PythonModuleVariable  # noqa: E402,F401
