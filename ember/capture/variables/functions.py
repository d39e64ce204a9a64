"""Callables: user functions (inlined), nested functions, methods, partials, cells."""
from __future__ import annotations

import functools
import sys
import inspect
import types

import torch

from ember.capture.sources import AttrSource, CellContentsSource, ItemSource
from ember.capture.variables.base import is_none, ConstantVariable, VariableTracker, unsupported
from ember.exc import PythonException
from ember.torch_config import allowed_in_graph


class CellVariable(VariableTracker):
    """A closure cell created in the traced frame (MAKE_CELL): a mutable box."""

    def __init__(self, contents: VariableTracker | None = None):
        self.contents = contents

    def describe(self):
        return f"cell({self.contents!r})"


class RealCellVariable(VariableTracker):
    """A closure cell of a function that existed before the frame: read via its source (its
    contents), and named at run time by ``cell_source`` (the cell itself, read off the function or
    the argument the frame gets now: a function guarded by its code alone may be another object,
    with other cells, on every call, so a ``nonlocal`` write must not go to the traced call's cell)."""

    def __init__(self, cell: types.CellType, source):
        self.cell = cell
        self.source = source
        self.cell_source = _cell_source(source)

    def describe(self):
        return f"cell<{self.source.name() if self.source else '?'}>"


def _cell_source(contents_source):
    """The source of the cell whose contents ``contents_source`` reads (None: not known)."""
    from ember.capture.sources import AttrSource, CellContentsSource, ClosureCellSource
    if isinstance(contents_source, CellContentsSource):
        return ClosureCellSource(contents_source.base, contents_source.index)
    if isinstance(contents_source, AttrSource) and contents_source.attr == "cell_contents":
        return contents_source.base
    return None


def passed_cell_argument(passed: VariableTracker, name: str) -> VariableTracker:
    """The tracker a resume function's cell parameter gets (``__ember_cell_args__``): a cell, or a
    real cell object read from outside (a nested-break chain's closure that an earlier break made
    passes it on), whose contents are then read and written through its source."""
    if isinstance(passed, (CellVariable, RealCellVariable)):
        return passed
    real = getattr(passed, "obj", None)
    if type(real) is not types.CellType or passed.source is None:
        raise unsupported("EB0009", f"resume function argument {name!r} is not a cell")
    from ember.capture.sources import AttrSource
    cell = RealCellVariable(real, AttrSource(passed.source, "cell_contents"))
    cell.cell_source = passed.source
    return cell


def _binding_error(code: types.CodeType, name: str, defaults: tuple, kwdefaults: dict | None, args: list,
                   kwargs: dict, qualname: str | None = None) -> Exception:
    """Eager's own TypeError for a call whose arguments do not fit ``code``'s parameters: a stub with
    the same parameters (and as many defaults) is called with placeholders, so Python's binding
    raises its exact message; its body never runs."""
    from ember.capture.codegen import parameter_text
    namespace: dict = {}
    try:
        exec(f"def ___stub({parameter_text(code)}): pass", namespace)
        stub = namespace["___stub"]
        stub.__qualname__ = qualname or getattr(code, "co_qualname", name)
        stub.__defaults__ = (None,) * len(defaults) if defaults else None
        stub.__kwdefaults__ = dict.fromkeys(kwdefaults) if kwdefaults else None
        stub(*[None] * len(args), **dict.fromkeys(kwargs))
    except TypeError as e:
        failure = PythonException(e)
        failure.replayable = True  # the same call, run eagerly, raises it again (see _run_loop)
        return failure
    except Exception:  # noqa: BLE001 - a parameter list the stub cannot spell
        pass
    return unsupported("EB0002", f"{name}(): arguments do not match its parameters (TypeError)")


def bind_arguments(code: types.CodeType, name: str, defaults: tuple, kwdefaults: dict | None,
                   args: list, kwargs: dict, qualname: str | None = None) -> dict[str, VariableTracker]:
    """Map call arguments (trackers) to the parameters of ``code``, as Python's call protocol does."""
    from ember.capture.variables.containers import DictVariable, TupleVariable
    names = code.co_varnames
    argc, posonly, kwonly = code.co_argcount, code.co_posonlyargcount, code.co_kwonlyargcount
    has_varargs = bool(code.co_flags & inspect.CO_VARARGS)
    has_varkw = bool(code.co_flags & inspect.CO_VARKEYWORDS)
    result: dict[str, VariableTracker] = {}
    positional = names[:argc]
    for pname, value in zip(positional, args):
        result[pname] = value
    extra = list(args[argc:])
    if extra and not has_varargs:
        raise _binding_error(code, name, defaults, kwdefaults, args, kwargs, qualname)
    kwonly_names = names[argc:argc + kwonly]
    i = argc + kwonly
    if has_varargs:
        result[names[i]] = TupleVariable(extra)
        i += 1
    varkw = {}
    for key, value in kwargs.items():
        if key in positional[posonly:] or key in kwonly_names:
            if key in result:
                raise _binding_error(code, name, defaults, kwdefaults, args, kwargs, qualname)
            result[key] = value
        elif has_varkw:
            varkw[key] = value
        else:
            raise _binding_error(code, name, defaults, kwdefaults, args, kwargs, qualname)
    first_default = argc - len(defaults)
    for j, pname in enumerate(positional):
        if pname not in result:
            if j >= first_default:
                result[pname] = defaults[j - first_default]
            else:
                raise _binding_error(code, name, defaults, kwdefaults, args, kwargs, qualname)
    for pname in kwonly_names:
        if pname not in result:
            if kwdefaults and pname in kwdefaults:
                result[pname] = kwdefaults[pname]
            else:
                raise _binding_error(code, name, defaults, kwdefaults, args, kwargs, qualname)
    if has_varkw:
        d = DictVariable({})
        for k, v in varkw.items():
            d.set_item(ConstantVariable(k), v)
        result[names[i]] = d
    return result


class UserFunctionVariable(VariableTracker):
    """A Python function defined outside the frame; calls are inlined."""

    def __init__(self, fn: types.FunctionType, source=None):
        self.fn = fn
        self.source = source

    def python_type(self):
        return types.FunctionType

    def describe(self):
        return f"function {self.fn.__qualname__}"

    def truth(self, tx):
        return True

    def guard_source(self):
        """Where guards read this function from: its source, or the function object itself for one
        reached without a source (a method of a list subclass); None for ember's own (polyfills)."""
        if self.source is not None:
            return self.source
        if (getattr(self.fn, "__module__", None) or "").startswith("ember."):
            return None
        return function_source(self.fn, None)

    def defaults(self, tx) -> tuple[tuple, dict]:
        from ember.capture.builder import wrap
        fn = self.fn
        src = self.guard_source()
        dsrc = AttrSource(src, "__defaults__") if src else None
        ksrc = AttrSource(src, "__kwdefaults__") if src else None
        if dsrc is not None and fn.__defaults__:
            # Each default guarded as it is read (by value, or automatic dynamic for numbers), not
            # the tuple's identity: a function made anew on every call (`lambda y, k=k: ...`) has a
            # new tuple each time, and torch.compile does not recompile for it.
            tx.guards.length(dsrc, len(fn.__defaults__))
        defaults = tuple(wrap(tx, d, ItemSource(dsrc, i) if dsrc else None)
                         for i, d in enumerate(fn.__defaults__ or ()))
        kwdefaults = {k: wrap(tx, v, ItemSource(ksrc, k) if ksrc else None)
                      for k, v in (fn.__kwdefaults__ or {}).items()}
        return defaults, kwdefaults

    def closure(self, tx) -> tuple:
        cells = self.fn.__closure__ or ()
        names = self.fn.__code__.co_freevars
        # (`__class__` is the cell the compiler makes for zero-argument super(): never rebound.)
        return tuple(RealCellVariable(c, CellContentsSource(self.source, i, names[i])
                                      if self.source and names[i] != "__class__" else None)
                     for i, c in enumerate(cells))

    def call(self, tx, args, kwargs, traced: bool = False):
        """``traced``: inline the body even where the program marked the function allow_in_graph
        (an argument no graph node can take: torch_fn.call_allowed)."""
        if allowed_in_graph(self.fn) and not traced:  # `torch.compiler.allow_in_graph(fn)`: one node
            from ember.capture.variables.torch_fn import call_allowed
            return call_allowed(tx, self.fn, args, kwargs, self.source)
        from ember.capture.variables.ctx_managers import WARNING_FILTER_FUNCTIONS, call_warning_filter
        if self.fn in WARNING_FILTER_FUNCTIONS:
            return call_warning_filter(tx, self.fn)
        if self.fn is _sdpa_kernel_fn():
            from ember.capture.variables.sdpa_kernels import SdpaKernelVariable
            return SdpaKernelVariable.create(tx, args, kwargs)
        if self.fn is torch.autograd.graph.disable_saved_tensors_hooks:
            from ember.capture.variables.saved_hooks import DisableSavedHooksVariable
            return DisableSavedHooksVariable.create(tx, args, kwargs)
        from ember.capture.variables.copying import COPY_FUNCTIONS, call_copy_function
        if self.fn in COPY_FUNCTIONS:
            return call_copy_function(tx, self.fn, args, kwargs)
        if getattr(getattr(self.fn, "__code__", None), "co_name", None) == "wrapped":  # (nonstrict_trace, as a method)
            from ember.capture.variables.nonstrict import call_nonstrict, is_nonstrict_wrapper
            if is_nonstrict_wrapper(self.fn):
                return call_nonstrict(tx, self.fn.__wrapped__, list(args), dict(kwargs))
        if self.fn in _MODULE_CALLS and args and type(args[0]).__name__ == "NNModuleVariable":
            # `super().__call__(x)` / `nn.Module.__call__(self, x)` from a class's own __call__
            return args[0].standard_call(tx, list(args[1:]), kwargs)
        from ember.capture.variables.new_module import call_singledispatch, is_singledispatch
        if is_singledispatch(self.fn):
            result = call_singledispatch(tx, self, args, kwargs)
            if result is not None:
                return result
        if self.fn is torch.utils.hooks.RemovableHandle.remove:
            # (a handle made before the trace: its hook's id, new on every registration, would be
            # baked into the trace and guarded, a recompile per call of `h = register(...); h.remove()`)
            raise unsupported("EB0031", "RemovableHandle.remove() runs eagerly (a hook's id is new on every "
                              "registration)")
        from ember.capture.skipfiles import compile_disabled
        if compile_disabled(self.fn):
            name = getattr(self.fn, "__qualname__", self.fn.__name__)
            raise unsupported("EB0029", f"call to {name}(), marked torch.compiler.disable: it runs eagerly")
        if "__deprecated__" in self.fn.__dict__:
            from ember.capture.variables.deprecated import call_deprecated, deprecated_wrapper
            found = deprecated_wrapper(self.fn)
            result = call_deprecated(tx, self, found, args, kwargs) if found is not None else None
            if result is not None:
                return result
        if self.source is None and self.guard_source() is not None:
            # (one with a source had its code guarded when it was wrapped: builder.py)
            tx.guards.function_code(self.guard_source(), self.fn)
        defaults, kwdefaults = self.defaults(tx)
        return tx.inline_call(self.fn.__code__, self.fn.__globals__, self.fn.__name__, defaults, kwdefaults,
                              self.closure(tx), args, kwargs, fn_vt=self)

    def setattr(self, tx, name, value):
        """``counted.calls += 1`` on a function from outside: an attribute in its ``__dict__``,
        replayed after the graph (its own slots, ``__code__``, ``__defaults__``... stay refused)."""
        if self.source is None or name.startswith("__"):
            return super().setattr(tx, name, value)
        tx.side_effects.store_attr(self, self.fn, name, value)

    def getattr(self, tx, name):
        from ember.capture.builder import wrap
        if not name.startswith("__"):
            pending = tx.side_effects.load_attr(self.fn, name)  # (the frame assigned it)
            if pending is not None:
                return pending
        if name == "__dict__" and self.source is not None:
            tx.side_effects.read_instance_dict(self.fn)  # (refused after a write, and a write after it)
        src = self.guard_source()
        if name in ("__name__", "__qualname__", "__module__", "__doc__") and src is not None:
            # assignable: guarded (`g.__name__ = "h"` after the compile is seen)
            value = getattr(self.fn, name)
            if isinstance(value, str) or value is None:
                tx.guards.constant_match(AttrSource(src, name), value)
            return ConstantVariable(value)
        if name == "__code__" and src is not None:
            tx.guards.function_code(src, self.fn)
        if name in ("__name__", "__qualname__", "__module__", "__doc__", "__code__") or \
                name == "__type_params__" and hasattr(self.fn, name):  # (3.12+: functools.wraps reads it)
            return ConstantVariable(getattr(self.fn, name))
        if name in ("__defaults__", "__kwdefaults__"):
            return wrap(tx, getattr(self.fn, name), AttrSource(src, name) if src else None)
        if name == "__get__":
            return FunctionGetVariable(self)
        if name in self.fn.__dict__:  # (guarded: `f.marked = 2` after the compile is seen)
            return wrap(tx, self.fn.__dict__[name], AttrSource(function_source(self.fn, self.source), name))
        if name in ("__dict__", "__annotations__") and self.source is not None:
            return wrap(tx, getattr(self.fn, name), AttrSource(self.source, name))
        if hasattr(self.fn, name):  # (never "missing": `getattr(f, name, default)` would take the default)
            raise unsupported("EB0031", f"attribute {name!r} of {self.describe()}")
        from ember.capture.variables.objects import MissingAttribute, _guard_absent
        _guard_absent(tx, function_source(self.fn, self.source), self.fn, name)  # (`f.marked = 1` later)
        raise MissingAttribute(f"'{type(self.fn).__name__}' object has no attribute '{name}'")


def function_source(fn, source):
    """Where a guard reads a function from: its source, or (a function reached with none, such as
    a method found on an object's class) the function object itself, held by the guard."""
    if source is not None:
        return source
    from ember.capture.sources import ConstSource
    return ConstSource(fn, f"<function {getattr(fn, '__qualname__', fn)}>")


# attributes a function keeps outside its __dict__, assignable
_FUNCTION_SLOTS = ("__name__", "__qualname__", "__doc__", "__module__", "__type_params__", "__annotations__")


class NestedFunctionVariable(VariableTracker):
    """A function created by MAKE_FUNCTION inside the traced frame."""

    def __init__(self, code, name, globals_dict, defaults=(), kwdefaults=None, closure=(), qualname=None):
        self.code = code
        self.name = name
        self.globals = globals_dict
        self.defaults_vts = tuple(defaults)
        self.kwdefaults_vts = dict(kwdefaults or {})
        self.closure_cells = tuple(closure)
        self.qualname = qualname or name
        self.annotations: tuple = ()  # MAKE_FUNCTION's flat (name, value, ...) tuple
        # attributes the frame assigned: the ones stored on the function object itself
        # (`__name__`, `__doc__` ...: functools.wraps) and the ones in its __dict__ (`__wrapped__`)
        self.special: dict[str, VariableTracker] = {}
        self.attrs: dict[str, VariableTracker] = {}
        self._dict_view = None

    def python_type(self):
        return types.FunctionType

    def describe(self):
        return f"nested function {self.qualname}"

    def hash_key(self):
        # made in the frame (one tracker per function object): hashed by identity, as functions are
        return ("__nested_function__", id(self))

    def truth(self, tx):
        return True

    def call(self, tx, args, kwargs):
        return tx.inline_call(self.code, self.globals, self.name, self.defaults_vts, self.kwdefaults_vts,
                              self.closure_cells, args, kwargs, fn_vt=self)

    def setattr(self, tx, name, value):
        if name in _FUNCTION_SLOTS:
            if name in ("__name__", "__qualname__") and not (value.is_constant() and isinstance(value.as_constant(), str)):
                raise PythonException(TypeError(f"{name} must be set to a string object"))
            if name == "__annotations__" and type(value).__name__ not in ("DictVariable", "LazyDictVariable"):
                raise unsupported("EB0032", f"assigning __annotations__ of {self.describe()} to {value.describe()}")
            self.special[name] = value
        elif name in ("__code__", "__defaults__", "__kwdefaults__", "__closure__", "__globals__", "__dict__",
                      "__class__"):
            raise unsupported("EB0032", f"assigning {name} of {self.describe()}")
        else:
            self.attrs[name] = value
            if self._dict_view is not None:
                self._dict_view.keys.setdefault(name, ConstantVariable(name))

    def getattr(self, tx, name):
        if name in self.special:
            return self.special[name]
        if name in self.attrs:
            return self.attrs[name]
        if name == "__dict__":
            if self._dict_view is None:
                from ember.capture.variables.containers import DictVariable
                self._dict_view = DictVariable.sharing(self.attrs)
            return self._dict_view
        if name in ("__name__", "__qualname__"):
            return ConstantVariable(self.name if name == "__name__" else self.qualname)
        if name == "__code__":
            return ConstantVariable(self.code)
        if name == "__type_params__" and hasattr(types.FunctionType, "__type_params__"):
            return ConstantVariable(())  # (3.12+; a generic `def f[T]` is not traced)
        if name == "__module__":
            return ConstantVariable(self.globals.get("__name__"))
        if name == "__doc__":  # CPython <= 3.12: the first constant when it is a str (a docstring)
            first = self.code.co_consts[0] if self.code.co_consts else None
            return ConstantVariable(first if isinstance(first, str) else None)
        if name == "__defaults__":
            from ember.capture.variables.containers import TupleVariable
            return TupleVariable(list(self.defaults_vts)) if self.defaults_vts else ConstantVariable(None)
        if name == "__kwdefaults__":
            from ember.capture.variables.containers import DictVariable
            if not self.kwdefaults_vts:
                return ConstantVariable(None)
            return DictVariable.read_only_of(self.kwdefaults_vts.items(),
                                             "changing a nested function's __kwdefaults__ through the dict",
                                             view_of=(self, "__kwdefaults__"))
        if name == "__annotations__" and all(v.is_constant() for v in self.annotations[::2]):
            from ember.capture.variables.containers import DictVariable
            return DictVariable.read_only_of(zip(self.annotations[::2], self.annotations[1::2]),
                                             "changing a nested function's __annotations__",
                                             view_of=(self, "__annotations__"))
        return super().getattr(tx, name)


class FunctionGetVariable(VariableTracker):
    """``f.__get__``: the descriptor call a class attribute lookup makes, binding ``f`` to an object
    (``func.__get__(opt, type(opt))(*args)`` in torch's lr-scheduler wrapper of ``Optimizer.step``):
    a method like ``obj.f`` read from the class."""

    def __init__(self, func: UserFunctionVariable):
        self.func = func

    def python_type(self):
        return types.MethodWrapperType

    def describe(self):
        return f"{self.func.describe()}.__get__"

    def truth(self, tx):
        return True

    def call(self, tx, args, kwargs):
        if kwargs or not 1 <= len(args) <= 2:
            raise unsupported("EB0033", f"calling {self.describe()} with {len(args)} arguments"
                                        f"{' and keywords' if kwargs else ''}")
        obj = args[0]
        if is_none(obj):
            if len(args) == 1 or is_none(args[1]):
                raise PythonException(TypeError("__get__(None, None) is invalid"))
            return self.func  # read from the class: the function itself
        return UserMethodVariable(self.func, obj)


class UserMethodVariable(VariableTracker):
    """``obj.method`` where ``method`` is a Python function: inline with ``obj`` first."""

    def __init__(self, func: VariableTracker, obj: VariableTracker, source=None):
        self.func = func
        self.obj = obj
        self.source = source

    def python_type(self):
        return types.MethodType

    def describe(self):
        return f"method {self.func.describe()} of {self.obj.describe()}"

    def truth(self, tx):
        return True

    def call(self, tx, args, kwargs):
        if isinstance(self.func, UserFunctionVariable) and self.func.fn is _FUNCTION_APPLY:
            from ember.capture.variables.autograd_function import trace_function_apply
            return trace_function_apply(tx, self.obj, args, kwargs)
        if getattr(self.func, "fn", None) in _CONTEXT_CLONES:  # `@torch.inference_mode()` decorators
            return UserFunctionVariable(self.func.fn).call(tx, [self.obj, *args], kwargs)
        from ember.capture.variables.optimizer_init import call_init_group, is_init_group
        if is_init_group(getattr(self.func, "fn", None)):  # an optimizer's lazy state: made for real
            result = call_init_group(tx, self.obj, self.func.fn, args, kwargs)
            if result is not None:
                return result
        return self.func.call(tx, [self.obj, *args], kwargs)

    def getattr(self, tx, name):
        if name == "__self__":
            return self.obj
        if name == "__func__":
            return self.func
        return self.func.getattr(tx, name)


def _sdpa_kernel_fn():
    attention = sys.modules.get("torch.nn.attention")
    return getattr(attention, "sdpa_kernel", None) if attention is not None else None


def _context_clones():
    import torch
    return (torch.inference_mode.clone,)


_CONTEXT_CLONES = _context_clones()


def _module_calls():
    import torch
    return (torch.nn.Module.__call__, torch.nn.Module._call_impl)


_MODULE_CALLS = _module_calls()


from ember.compat import FUNCTION_APPLY as _FUNCTION_APPLY  # noqa: E402  (torch's, or a stand-in on 2.14+)


class BoundMethodVariable(VariableTracker):
    """A method of a tracked value implemented by the tracker (``lst.append``)."""

    def __init__(self, obj: VariableTracker, name: str):
        self.obj = obj
        self.name = name

    def describe(self):
        return f"{self.obj.describe()}.{self.name}"

    def truth(self, tx):
        return True

    def call(self, tx, args, kwargs):
        return self.obj.call_method(tx, self.name, args, kwargs)

    def getattr(self, tx, name):
        if name == "__self__":
            return self.obj
        if name in ("__name__", "__qualname__", "__doc__", "__text_signature__"):
            # what the real bound method reports (`unittest.assertRaises(E, lst.append)` reads __name__)
            try:
                method = getattr(self.obj.python_type(), self.name)
            except Exception:
                method = None
            if method is not None and hasattr(method, name):
                if name == "__qualname__":  # a bound builtin method names the object's own class
                    return ConstantVariable(f"{self.obj.python_type().__qualname__}.{method.__name__}")
                return ConstantVariable(getattr(method, name))
        return super().getattr(tx, name)

    def reconstruct(self, plan) -> str:
        """``getattr(obj, name)`` on the rebuilt object (``out.append`` live across a break)."""
        from ember.capture.sources import bind
        return f"{bind(plan.scope, getattr, 'getattr')}({plan.expr(self.obj)}, {self.name!r})"


class PartialVariable(VariableTracker):
    """``functools.partial(func, *args, **kwargs)``."""

    def __init__(self, func: VariableTracker, args: list, kwargs: dict, source=None):
        self.func = func
        self.args = list(args)
        self.kwargs = dict(kwargs)
        self.source = source

    def describe(self):
        return f"partial({self.func.describe()})"

    def truth(self, tx):
        return True

    def call(self, tx, args, kwargs):
        return self.func.call(tx, [*self.args, *args], {**self.kwargs, **kwargs})

    def hash_key(self):
        if self.source is not None:  # (one from outside would need its identity pinned)
            raise unsupported("EB0035", f"{self.describe()} from outside as a dict key")
        return ("__partial__", id(self))  # made in the frame: hashed by identity, one tracker each

    def python_type(self):
        import functools
        return functools.partial

    def reconstruct(self, plan) -> str:
        """``functools.partial(func, *args, **kwargs)`` again (returned, or live across a break);
        one from outside is that very object."""
        import functools
        from ember.capture.sources import bind
        if self.source is not None:
            return plan._read(self.source)
        parts = [plan.expr(self.func)] + [plan.expr(a) for a in self.args]
        parts += [f"**{{{k!r}: {plan.expr(v)}}}" for k, v in self.kwargs.items()]
        return f"{bind(plan.scope, functools.partial, 'partial')}({', '.join(parts)})"

    def getattr(self, tx, name):
        if name == "func":
            return self.func
        if name == "args":
            from ember.capture.variables.containers import TupleVariable
            return TupleVariable(self.args)
        if name == "keywords":
            from ember.capture.variables.containers import DictVariable
            return DictVariable.read_only_of(self.kwargs.items(), "changing a partial's keywords through its dict",
                                             view_of=(self, "keywords"))
        real = getattr(self, "real", None)
        from ember.capture.guards import on_mro
        if not on_mro(type(real) if real is not None else functools.partial, name):
            # not a partial's attribute (`__name__`: hasattr is False): only its instance dict may have it
            from ember.capture.variables.objects import MissingAttribute
            if self.source is None and real is None:  # made in the frame: its __dict__ is empty
                raise MissingAttribute(f"'functools.partial' object has no attribute '{name}'")
            if real is not None and self.source is not None:
                if name in real.__dict__:  # (its key is re-read by the attribute's guard)
                    from ember.capture.builder import wrap
                    from ember.capture.sources import AttrSource
                    return wrap(tx, real.__dict__[name], AttrSource(self.source, name))
                tx.guards.no_attribute(self.source, real, name)
                raise MissingAttribute(f"'functools.partial' object has no attribute '{name}'")
        return super().getattr(tx, name)


def real_defaults(fn) -> tuple[tuple, dict]:
    return tuple(fn.__defaults__ or ()), dict(fn.__kwdefaults__ or {})
