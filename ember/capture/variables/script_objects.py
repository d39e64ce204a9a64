"""TorchScript objects (``torch.ScriptObject``) in the frame, above all torchbind custom-class
instances (``torch.classes.ns.Cls(...)``, classes registered from C++ with ``torch::class_``).

An object of a torchbind class is traced with a stand-in that answers for it at trace time:

* its **fake class**, when one is registered (``@torch._library.register_fake_class("ns::Cls")``
  with ``__obj_unflatten__``): the fake object is made from the real one's ``__obj_flatten__()``
  (torch's ``maybe_to_fake_obj``), once per trace, and evolves as the traced calls change it;
* the **real object**, when its class declares itself safe to trace with it (a ``tracing_mode()``
  method answering ``"real"``: torch's ``fake_class_registry.tracing_with_real``);
* otherwise a method call, or passing it to a torch op, breaks the graph with a reason that names
  the class (``EB0054``); passing the object along unchanged (returning it, storing it) is fine.

In the graph the object is an input (read from its source on every call, guarded by its class
name; two sources holding one object are one input, distinct objects are guarded distinct); a
method call is a ``torch.ops.higher_order.call_torchbind(obj, "method", *args)``
node and a torchbind op (``torch.ops.ns.op(obj, x)``) a call of that op, both run on the real
object when the graph runs, in program order, so what they change happens on every call. Nothing
is run on the real object at trace time (the real-mode case excepted: its class said so).

**State guard.** The stand-in's answers can depend on the object's state (a queue's tensors'
shapes, a counter a fake method returns): the frame is guarded on the object's flattened state as
it is at entry (tensors by dtype/device/shape/stride/requires_grad, other values by equality), and
only then are non-tensor results of its methods and ops (``q.size()``) constants of the trace (the
call itself stays in the graph). An object that cannot be flattened gets no state guard: its
non-tensor results break the graph. A changed state at the next call recompiles.

Refused (a graph break naming the class): a method its fake class does not implement, a call with
a tensor that requires grad (``call_torchbind`` has no autograd), a call inside a region that may
be rolled back (a cond branch, an autograd.Function: the stand-in's state cannot be), attributes
other than methods, and TorchScript objects that are not torchbind classes (a scripted module's
``._c``). Backends that trace the graph again (ember's aot_eager, inductor) are refused at the use (a
graph break); a backend callable ember does not know gets, while it compiles, a stand-in for the
object that refuses any use (a backend that runs the graph then fails to compile and the frame
runs eagerly), never the real object, whose methods would run at compile time.
"""
from __future__ import annotations

import logging

import torch

from ember.capture.variables.base import ConstantVariable, VariableTracker, unsupported

TORCHBIND = "__torch__.torch.classes."


def class_name(obj) -> str:
    try:
        return obj._type().qualified_name()
    except Exception:  # noqa: BLE001 — a ScriptObject without a type: name the Python type
        return type(obj).__qualname__


def _short(qualname: str) -> str:
    """``__torch__.torch.classes.ns.Cls`` → ``ns::Cls`` (how register_fake_class names it)."""
    if qualname.startswith(TORCHBIND):
        ns, _, cls = qualname[len(TORCHBIND):].rpartition(".")
        return f"{ns}::{cls}"
    return qualname


def state_key(obj):
    """The object's flattened state as guards compare it (tensors by metadata, not data)."""
    def key(v):
        if isinstance(v, torch.Tensor):
            return ("tensor", v.dtype, v.device, tuple(v.shape), v.stride(), v.storage_offset(),
                    v.requires_grad)
        if isinstance(v, (tuple, list)):
            return (type(v).__name__, tuple(key(i) for i in v))
        if isinstance(v, dict):
            return ("dict", tuple((k, key(i)) for k, i in v.items()))
        if v is None or type(v) in (int, float, bool, str):
            return v
        raise TypeError(f"unguardable {type(v).__name__} in a flattened TorchScript object")
    return key(obj.__obj_flatten__())


def script_class_of(obj) -> str | None:
    """The guard's reading of an input: its TorchScript class name (None: not a ScriptObject)."""
    return class_name(obj) if isinstance(obj, torch.ScriptObject) else None


def wrap_script_object(tx, value, source) -> "ScriptObjectVariable":
    """One tracker per object (two sources holding it share it, guarded `is`; distinct objects are
    guarded distinct: their stand-ins' states are separate). An object read from the frame's
    inputs is guarded by class, not identity: the graph takes it as an input."""
    guards = tx.guards
    if source is None:
        return ScriptObjectVariable(value, None, tx)
    seen = tx.output.__dict__.setdefault("script_sources", {})
    hit = seen.get(id(value))
    if hit is not None and hit[0] is value:
        guards.same_object(source, hit[2])
        return hit[1]
    for _other, _vt, other_source in seen.values():
        guards.distinct_objects(source, other_source)
    from ember.capture.guards import GuardKind
    from ember.capture.sources import bind
    qualname = class_name(value)
    guards._add(GuardKind.TYPE_MATCH, source, "script_class", f"{source.name()} is a TorchScript {qualname}",
                f"{bind(guards.scope, script_class_of, 'script_class')}({source.expr(guards.scope)}) == {qualname!r}")
    vt = ScriptObjectVariable(value, source, tx)
    seen[id(value)] = (value, vt, source)
    return vt


class ScriptObjectVariable(VariableTracker):
    def __init__(self, value, source, tx):
        self.value = value
        self.source = source
        self.qualname = class_name(value)
        self._tx = tx

    def python_type(self):
        return type(self.value)

    def describe(self):
        return f"TorchScript object of class {_short(self.qualname)}"

    def truth(self, tx):
        return True

    def hash_key(self):
        return ("script_object", id(self.value))

    # -- the stand-in ------------------------------------------------------------------
    def _refuse(self, what: str):
        return unsupported("EB0054", f"{what} of a TorchScript object of class {_short(self.qualname)}")

    def graph_value(self):
        """(the graph's node for the object, the stand-in tracing uses): see the module doc."""
        tx = self._tx
        output = tx.output
        memo = output.__dict__.setdefault("script_objects", {})
        hit = memo.get(id(self.value))
        if hit is not None and not getattr(hit[1], "_erased", False):
            return hit[1], hit[2]
        if tx.trace.checkpoints:
            raise self._refuse("use inside a region traced speculatively (cond branch, autograd.Function, "
                               "checkpoint), whose state could not be rolled back,")
        if self.source is None:
            raise self._refuse("a method or torch op use (an object ember cannot read again on the next call)")
        if not self.qualname.startswith(TORCHBIND):
            raise self._refuse("a method or torch op use (not a torchbind class: only those are traced)")
        backend = getattr(output, "backend", None)
        if _traces_graph_again(backend):
            raise self._refuse(f"a method or torch op use with backend {getattr(backend, '__name__', backend)!r} "
                               "(it traces the graph again, where the object would be run at compile time)")
        from torch._library import fake_class_registry as registry
        real_mode = registry.tracing_with_real(self.value)
        if not real_mode and registry.find_fake_class(self.qualname) is None:
            raise self._refuse(f"a method or torch op use (no fake class registered: "
                               f"torch._library.register_fake_class({_short(self.qualname)!r}), and the "
                               "class does not declare itself safe to trace with the real object)")
        guarded = self._guard_state(tx)
        if not real_mode:
            quiet = logging.getLogger(registry.__name__)
            level = quiet.level
            quiet.setLevel(logging.ERROR)  # (its warning per method the fake class leaves out: we refuse those)
            try:
                with output.fake.enabled():
                    example = registry.maybe_to_fake_obj(output.fake.mode, self.value)
            except Exception as e:  # noqa: BLE001 — a fake class that cannot take this object
                raise self._refuse(f"conversion to its fake class ({type(e).__name__}: "
                                   f"{str(e).splitlines()[0] if str(e) else ''})") from None
            finally:
                quiet.setLevel(level)
        else:
            example = self.value
        node = output._placeholder(self.source, self.value, example)  # read from its source per call
        node.meta["example_value"] = example
        memo[id(self.value)] = (self.value, node, example, None, guarded)
        return node, example

    def _guard_state(self, tx) -> bool:
        if self.source is None or not hasattr(self.value, "__obj_flatten__"):
            return False
        try:
            key = state_key(self.value)
        except Exception:  # noqa: BLE001 — no state guard: non-tensor results break instead
            return False
        from ember.capture.guards import GuardKind
        from ember.capture.sources import bind
        guards = tx.guards
        e = self.source.expr(guards.scope)
        fn = bind(guards.scope, state_key, "script_state")
        guards._add(GuardKind.EQUALS_MATCH, self.source, "script_state",
                    f"{self.source.name()}'s flattened state == {key!r}", f"{fn}({e}) == {bind(guards.scope, key, 'state')}")
        return True

    def state_guarded(self) -> bool:
        hit = self._tx.output.__dict__.get("script_objects", {}).get(id(self.value))
        return bool(hit and hit[4])

    # -- attributes and methods ---------------------------------------------------------
    def getattr(self, tx, name):
        try:
            has = self.value._has_method(name)
        except Exception:  # noqa: BLE001
            has = False
        if has:
            return ScriptMethodVariable(self, name)
        raise self._refuse(f"attribute {name!r}")

    def call_method(self, tx, name, args, kwargs):
        return self.getattr(tx, name).call(tx, args, kwargs)


class ScriptMethodVariable(VariableTracker):
    """``obj.method`` of a TorchScript object, called as a ``call_torchbind`` node."""

    def __init__(self, obj: ScriptObjectVariable, name: str):
        self.obj = obj
        self.name = name
        if obj.source is not None:  # (rebuilt at a graph break by reading it again)
            from ember.capture.sources import AttrSource
            self.source = AttrSource(obj.source, name)

    def python_type(self):
        return torch.ScriptMethod

    def describe(self):
        return f"method {self.name} of a {self.obj.describe()}"

    def call(self, tx, args, kwargs):
        from torch._higher_order_ops.torchbind import call_torchbind
        from torch._library.fake_class_registry import FakeScriptObject
        from ember.capture.output_graph import _lower
        obj, name = self.obj, self.name
        node, example = obj.graph_value()
        if isinstance(example, FakeScriptObject) and name not in object.__getattribute__(example, "__dict__"):
            raise obj._refuse(f"method {name}() (its fake class does not implement it)")
        node_args, fake_args = _lower(list(args))
        node_kwargs, fake_kwargs = _lower(dict(kwargs))
        if torch.is_grad_enabled() and any(isinstance(a, torch.Tensor) and a.requires_grad
                                           for a in [*fake_args, *fake_kwargs.values()]):
            raise obj._refuse(f"method {name}() given a tensor that requires grad (no autograd through it)")
        output = tx.output
        try:
            with output.fake.enabled():
                result = call_torchbind(example, name, *fake_args, **fake_kwargs)
        except Exception as e:  # noqa: BLE001 — what the stand-in cannot answer runs eagerly
            raise obj._refuse(f"method {name}() (tracing it raised {type(e).__name__})") from None
        call = output.graph.create_node("call_function", call_torchbind, (node, name, *node_args), node_kwargs)
        if output.current_location:
            call.meta["stack_trace"] = output.stack_trace()
        return wrap_script_result(output, call, result, [obj], f"method {name}()")


def wrap_script_result(output, node, result, objects, what: str) -> VariableTracker:
    """The tracker of what a call on TorchScript objects returned (its node stays in the graph)."""
    if result is None:
        node.meta["example_value"] = None
        return ConstantVariable(None)
    if isinstance(result, torch.Tensor) or (isinstance(result, (tuple, list)) and result
                                            and all(isinstance(r, torch.Tensor) for r in result)):
        return output._wrap_result(node, result)
    if type(result) in (int, float, bool, str) and all(o.state_guarded() for o in objects):
        node.meta["example_value"] = result  # (the call still runs in the graph: it may change the object)
        return ConstantVariable(result)
    raise objects[0]._refuse(f"{what} returning a {type(result).__name__} (not a tensor; the object's state "
                             "is not guarded)")


def script_objects_in(args) -> list:
    """The ScriptObjectVariables among a call's (nested) arguments."""
    from ember.capture.variables.containers import DictVariable, ListVariable, TupleVariable
    out = []

    def visit(v):
        if isinstance(v, ScriptObjectVariable):
            out.append(v)
        elif isinstance(v, (TupleVariable, ListVariable)):
            for i in v.items:
                visit(i)
        elif isinstance(v, DictVariable):
            for i in v.items.values():
                visit(i)
        elif isinstance(v, (list, tuple)):
            for i in v:
                visit(i)
        elif isinstance(v, dict):
            for i in v.values():
                visit(i)
    visit(args)
    return out


def _traces_graph_again(backend) -> bool:
    """ember's AOT backends (aot_eager, inductor) trace the graph again; its eager backend runs it as
    it is. Another callable is not known in advance: see `hidden_script_objects`."""
    module = getattr(backend, "__module__", None) or ""
    return module.startswith("ember.backends.") and module != "ember.backends.eager"


class _HiddenAtCompileTime:
    """Stands for a TorchScript object while a backend compiles the graph: a backend that runs the
    graph's methods then (tracing it again) fails to compile, so the frame runs eagerly, instead
    of running them on the real object at compile time."""

    def __init__(self, name: str):
        self.name = name

    def __getattr__(self, attr):
        raise RuntimeError(f"the TorchScript object ({self.name}) is only available when the graph runs")


class hidden_script_objects:
    """While the backend compiles ``gm``: the TorchScript objects among its example inputs swapped
    for stand-ins that refuse any use (put back afterwards)."""

    def __init__(self, example_inputs: list):
        self.inputs = example_inputs
        self.saved = {}

    def __enter__(self):
        for i, value in enumerate(self.inputs):
            if isinstance(value, torch.ScriptObject):
                self.saved[i] = value
                self.inputs[i] = _HiddenAtCompileTime(class_name(value))
        return self

    def __exit__(self, *exc):
        for i, value in self.saved.items():
            self.inputs[i] = value
        return False
