"""``MyFunction.apply(*args)`` of a ``torch.autograd.Function`` traced into the graph.

Eager runs ``forward`` with grad disabled and records one autograd node whose backward is the
user's ``backward``. ember does the same in three steps:

1. ``forward`` is inlined (with a `FunctionCtxVariable` standing in for ``ctx``) under grad
   disabled. Its operations land in the frame's graph as nodes ``R``; what it stores on the ctx
   (saved tensors, attributes, non-differentiable outputs, materialize flag) is recorded.
2. ``backward`` is inlined once on stand-in gradients to check that it is traceable and to install
   the guards it needs (the globals it reads); its nodes are then dropped (autograd_backward.py).
3. ``R`` is copied into a GraphModule that a generated ``autograd.Function`` runs in its forward;
   its backward calls the user's backward with a ctx rebuilt from what step 1 recorded. The graph
   calls that Function's ``apply``: the eager backend runs it as is, AOT traces through it (the
   joint trace calls the user's backward on fake tensors, so the backward graph is the user's).

``R`` stays in the frame's graph under a no-grad region, for any of its values that escape the
forward in other ways (stored in a list, or an output that is not a tensor or a tuple: eager passes
those through, their tensors not requiring grad): unused, it is removed when the graph is finished.

What forward stores on ``ctx`` the generated Function stores again on each call: tensors and
symbolic numbers (outputs of the copied graph), constants, containers and objects forward made
(a fresh copy each call), objects, lists and dicts from outside the frame (those very objects,
identity-guarded). A container the frame made before forward is copied, and the frame checks at the
end of its trace that the program did not change it later; if it did, the frame breaks at the call.
``ctx.mark_dirty`` of an input (not a view, not a leaf that requires grad, not resized) is traced: the
copied graph changes the input in place and the generated Function marks it dirty and returns it.

Anything else (a graph break inside forward or backward, side effects, in-place changes to inputs
not marked dirty, a backward that reads tensors from outside or returns the wrong number of
gradients) breaks the graph at the call, which then runs eagerly, as before.
"""
from __future__ import annotations

import copy
import functools
import inspect
import types

import torch
import torch.fx as fx

from ember.capture.subgraph import GradDisabled, Region, extract
from ember.capture.variables.base import is_none, ConstantVariable, VariableTracker, unsupported
from ember.capture.variables.generated_function import _apply_of, _make_function
from ember.capture.variables.tensor import TensorVariable
from ember.fake.snapshot import version_of
from ember.exc import Unsupported

_CTX_METHODS = ("save_for_backward", "mark_non_differentiable", "set_materialize_grads", "mark_dirty",
                "save_for_forward")


class FunctionCtxVariable(VariableTracker):
    """The ``ctx`` of a traced ``autograd.Function``: records what forward stores on it."""

    def __init__(self, fn_cls, needs_input_grad: tuple):
        self.fn_cls = fn_cls
        self.attrs: dict[str, VariableTracker] = {}
        self.saved: list | None = None
        self.non_differentiable: list[VariableTracker] = []
        self.dirty: list[VariableTracker] = []
        self.materialize = True
        self.needs_input_grad = needs_input_grad
        self.saved_forward: list | None = None  # (ctx.save_for_forward: what a jvp reads)

    def python_type(self):
        return self.fn_cls._backward_cls

    def describe(self):
        return f"ctx of {self.fn_cls.__qualname__}"

    def truth(self, tx):
        return True

    def getattr(self, tx, name):
        from ember.capture.variables.containers import TupleVariable
        from ember.capture.variables.functions import BoundMethodVariable
        if name in self.attrs:
            return self.attrs[name]
        if name == "needs_input_grad":
            return TupleVariable([ConstantVariable(b) for b in self.needs_input_grad])
        if name in ("saved_tensors", "saved_variables"):
            if self.saved is None:
                return TupleVariable([])
            return TupleVariable(list(self.saved))
        if name in _CTX_METHODS:
            return BoundMethodVariable(self, name)
        if name == "__class__":
            from ember.capture.variables.objects import ClassVariable
            return ClassVariable(self.python_type())
        if not hasattr(self.python_type(), name):
            # never set on this ctx (hasattr(ctx, "x") is False, getattr(ctx, "x", d) gives d)
            from ember.capture.variables.objects import MissingAttribute
            raise MissingAttribute(f"'{self.python_type().__name__}' object has no attribute '{name}'")
        raise unsupported("EB0046", f"attribute {name!r} of an autograd.Function ctx")

    def setattr(self, tx, name, value):
        if name in _CTX_METHODS or name in ("needs_input_grad", "saved_tensors", "saved_variables"):
            raise unsupported("EB0046", f"assigning ctx.{name}")
        self.attrs[name] = value

    def call_method(self, tx, name, args, kwargs):
        if kwargs:
            raise unsupported("EB0046", f"ctx.{name} with keyword arguments")
        if name == "save_for_backward":
            for a in args:
                if not (isinstance(a, TensorVariable) or is_none(a)):
                    raise unsupported("EB0046", "ctx.save_for_backward of a value that is not a tensor or None")
            self.saved = list(args)
            return ConstantVariable(None)
        if name == "mark_non_differentiable":
            if not all(isinstance(a, TensorVariable) for a in args):
                raise unsupported("EB0046", "ctx.mark_non_differentiable of a value that is not a tensor")
            self.non_differentiable.extend(args)
            return ConstantVariable(None)
        if name == "set_materialize_grads":
            value = args[0] if args else ConstantVariable(True)
            if not value.is_constant():
                raise unsupported("EB0046", "ctx.set_materialize_grads with a non-constant value")
            self.materialize = bool(value.as_constant())
            return ConstantVariable(None)
        if name == "mark_dirty":
            if not all(isinstance(a, TensorVariable) for a in args):
                raise unsupported("EB0047", "ctx.mark_dirty of a value that is not a tensor")
            self.dirty.extend(args)
            return ConstantVariable(None)
        if name == "save_for_forward":  # (for jvp only: traced for its guards in function_in_transform.py)
            if not all(isinstance(a, TensorVariable) or a.is_constant() and a.as_constant() is None for a in args):
                raise unsupported("EB0046", f"ctx.{name} of a value that is not a tensor or None")
            self.saved_forward = list(args)
            return ConstantVariable(None)
        return super().call_method(tx, name, args, kwargs)


class GradFnVariable(VariableTracker):
    """``t.grad_fn`` of a tensor the graph computes: the autograd node eager would have made (the fake
    tensor's, of the same class). ``is None``, ``type(...)`` and ``.name()`` are answered; the node
    itself (its hooks, next_functions) is not available inside the graph."""

    def __init__(self, node):
        self.node_cls = type(node)
        self.node_name = node.name()

    def python_type(self):
        return self.node_cls

    def describe(self):
        return f"grad_fn {self.node_name}"

    def truth(self, tx):
        return True

    def call_method(self, tx, name, args, kwargs):
        if name == "name" and not args and not kwargs:
            return ConstantVariable(self.node_name)
        raise unsupported("EB0024", f"grad_fn.{name}() of a tensor computed in the graph")

    def getattr(self, tx, name):
        if name == "name":
            from ember.capture.variables.functions import BoundMethodVariable
            return BoundMethodVariable(self, name)
        if name == "__class__":
            from ember.capture.variables.objects import ClassVariable
            return ClassVariable(self.node_cls)
        raise unsupported("EB0024", f"grad_fn.{name} of a tensor computed in the graph")


def grad_fn_variable(node) -> VariableTracker:
    return ConstantVariable(None) if node is None else GradFnVariable(node)


def apply_with_compiled_forward(vt, resumes):
    """``MyFunction.apply`` at a graph break (the call runs eagerly): forward still gets compiled as a
    frame of its own, as torch.compile compiles any frame Python runs (Dynamo sees the forward frame the
    C++ ``apply`` calls). None where that does not apply (not an autograd.Function, no plain forward)."""
    from ember.capture.variables.functions import _FUNCTION_APPLY
    cls = getattr(vt.obj, "value", None)
    if vt.func.fn is not _FUNCTION_APPLY or not (isinstance(cls, type) and issubclass(cls, torch.autograd.Function)):
        return None
    forward = inspect.getattr_static(cls, "forward", None)
    if not isinstance(forward, staticmethod) or not isinstance(forward.__func__, types.FunctionType):
        return None
    from ember.capture.callees import _Rebuilt
    compiled = resumes.compiled_function(forward.__func__)
    if compiled is forward.__func__:
        return None
    return _Rebuilt(_ApplyWithCompiledForward(forward.__func__, compiled), bound_to=vt.obj)


class _ApplyWithCompiledForward:
    """``cls.apply(*args)`` through a subclass (same name, so the same grad_fn name) whose forward is
    the compiled one; a class whose forward changed since is applied as it is."""

    def __init__(self, original, compiled):
        self.original, self.compiled = original, compiled
        self.subclasses: dict = {}

    def __call__(self, cls, *args, **kwargs):
        if kwargs or getattr(inspect.getattr_static(cls, "forward", None), "__func__", None) is not self.original:
            return cls.apply(*args, **kwargs)  # (with keywords, apply reads forward's code object)
        sub = self.subclasses.get(cls)
        if sub is None:
            compiled = self.compiled

            @functools.wraps(self.original)  # (apply reads forward's signature: its defaults)
            def forward(*args, **kwargs):
                return compiled(*args, **kwargs)
            sub = self.subclasses[cls] = type(cls.__name__, (cls,), {
                "forward": staticmethod(forward), "__module__": cls.__module__, "__qualname__": cls.__qualname__})
        return sub.apply(*args, **kwargs)


def _user_backward(fn_cls):
    """What autograd calls for ``fn_cls``'s backward (``vjp`` when only that is overridden)."""
    base = torch.autograd.Function
    backward, vjp = fn_cls.backward, fn_cls.vjp
    if backward is not base.backward and vjp is not base.vjp:
        raise unsupported("EB0048", "an autograd.Function overriding both backward and vjp")
    chosen = vjp if vjp is not base.vjp else backward
    if chosen is base.backward:
        raise unsupported("EB0048", "an autograd.Function without a backward")
    return chosen


def _with_defaults(forward, args: list, kwargs: dict) -> list:
    try:
        bound = inspect.signature(forward).bind(*args, **kwargs)
    except TypeError:
        raise unsupported("EB0045", "torch.autograd.Function.apply with arguments forward does not take") from None
    bound.apply_defaults()
    if bound.kwargs:
        raise unsupported("EB0045", "torch.autograd.Function.apply with keyword-only arguments")
    return [a if isinstance(a, VariableTracker) else ConstantVariable(a) for a in bound.args]


def _kwargs_as_positions(forward, args: list, kwargs: dict) -> list:
    """Eager's C++ ``apply`` puts keyword arguments at their positions in ``forward(ctx, ...)`` (they are
    then inputs like the others: ``needs_input_grad`` has an entry for each); the positions before the
    last one given must all be filled (it does not apply defaults)."""
    try:
        params = list(inspect.signature(forward).parameters.values())[1:]
    except (TypeError, ValueError):
        raise unsupported("EB0045", "torch.autograd.Function.apply with keyword arguments") from None
    if any(p.kind not in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) for p in params):
        raise unsupported("EB0045", "torch.autograd.Function.apply with keyword arguments (forward takes *args or "
                          "keyword-only arguments)")
    names = [p.name for p in params]
    if any(k not in names or names.index(k) < len(args) for k in kwargs):
        raise unsupported("EB0045", "torch.autograd.Function.apply with keyword arguments forward does not take")
    last = max(names.index(k) for k in kwargs)
    if any(names[i] not in kwargs for i in range(len(args), last + 1)):
        raise unsupported("EB0045", "torch.autograd.Function.apply leaving a positional argument out (eager raises)")
    return list(args) + [kwargs[names[i]] for i in range(len(args), last + 1)]


def _plain_constant(value) -> bool:
    """A Python value nothing can change: shared by every call of the generated Function as is."""
    if value is None or isinstance(value, (bool, int, float, complex, str, bytes, torch.dtype, torch.device,
                                           torch.Size, type(Ellipsis), torch.memory_format, torch.layout)):
        return True
    import enum
    if isinstance(value, enum.Enum):
        return True
    if isinstance(value, (tuple, frozenset)):
        return all(_plain_constant(v) for v in value)
    if isinstance(value, slice):
        return all(_plain_constant(v) for v in (value.start, value.stop, value.step))
    return False


def _born_ids(vt) -> list:
    from ember.capture.variables.containers import BaseSequence, DictVariable
    found = []
    born = getattr(vt, "born", None)
    if born is not None:
        found.append(born)
    if isinstance(vt, BaseSequence):
        for item in vt.items:
            found += _born_ids(item)
    elif isinstance(vt, DictVariable):
        for item in getattr(vt, "items", {}).values() if isinstance(getattr(vt, "items", None), dict) else ():
            found += _born_ids(item)
    return found


def _outside_object(tx, vt):
    """The real object of a value read from outside the frame (a module, a function, an object), with an
    identity guard: the generated Function hands that very object to backward, as eager's ctx would."""
    if vt.source is None:
        return _NO_OBJECT
    outside = _outside_container(vt)
    if outside is not None:
        # the program's own list or dict (``ctx.layers = self.layers``): eager's ctx holds that very
        # object, and its backward sees what it holds then
        tx.guards.id_match(vt.source, outside)
        return outside
    for attr in ("module", "obj", "fn", "value"):
        if attr in vars(vt):
            obj = vars(vt)[attr]
            tx.guards.id_match(vt.source, obj)
            return obj
    return _NO_OBJECT


_NO_OBJECT = object()


def _outside_container(vt):
    """The real list or dict a tracker read from outside the frame stands for, or None."""
    from ember.capture.variables.containers import DictVariable
    from ember.capture.variables.lazy import LazyListVariable
    if vt.source is not None and isinstance(vt, LazyListVariable):
        return vt._value
    outside = getattr(vt, "outside", None) if vt.source is not None else None
    return outside if isinstance(vt, DictVariable) and type(outside) is vt.dict_cls else None


def _ctx_attr_ref(tx, name, value, forward_birth, checks):
    """How the generated Function's forward sets ``ctx.name``: ``("out", k)`` for a tensor (filled in
    by the caller), ``("const", v)`` for a value shared by every call, ``("copy", v)`` for a container
    each call gets a fresh copy of (eager's forward makes a new one on every call; backward may change it),
    ``("sym", vt)`` for a symbolic number (an output of the forward's graph, resolved by the caller),
    ``("seq", type, refs)`` for a tuple or ``torch.Size`` holding symbolic numbers."""
    from ember.capture.variables.containers import TupleVariable
    from ember.capture.variables.new_object import NewObjectVariable
    if _is_symbolic(value) or isinstance(value, TensorVariable):
        return ("sym", value)
    if isinstance(value, NewObjectVariable) and value.items is None:
        # an object made in the frame: a new one each call with what the trace set (eager's forward makes
        # a new one each call; one made before forward is the program's, so the frame checks at the end
        # of its trace that the program did not change it afterwards)
        if value.born < forward_birth:
            checks.append((name, ("object", value, {k: id(v) for k, v in value.attrs.items()}), False))
        return ("obj", value.cls, {k: _ctx_attr_ref(tx, f"{name}.{k}", v, forward_birth, checks)
                                   for k, v in value.attrs.items()})
    if isinstance(value, TupleVariable) and _has_symbols(value):
        return ("seq", value.python_type(), [_ctx_attr_ref(tx, name, v, forward_birth, checks)
                                             for v in value.items])
    if _outside_container(value) is not None:  # (the object itself, even when it holds constants)
        return ("const", _outside_object(tx, value))
    if value.is_constant():
        c = value.as_constant()
        if _plain_constant(c):
            return ("const", c)
        if isinstance(c, (list, dict, set, tuple)):
            # A container made before forward (a local list passed in) is the program's own object in
            # eager: backward sees whatever is done to it later. The copy is right only if nothing is:
            # the frame checks that when its trace ends (`check_ctx_containers`).
            old = [b for b in _born_ids(value) if b < forward_birth]
            if old:
                checks.append((name, old, False))
            return ("copy", c)
    obj = _outside_object(tx, value)
    if obj is not _NO_OBJECT:
        return ("const", obj)
    raise unsupported("EB0046", f"ctx.{name} holds a {value.describe()}")


def _is_symbolic(vt) -> bool:
    from ember.capture.variables.symbolic import SymNodeVariable
    return isinstance(vt, SymNodeVariable)


def _has_symbols(vt) -> bool:
    """Whether a tuple holds graph values (symbolic numbers, tensors)."""
    from ember.capture.variables.containers import BaseSequence
    if _is_symbolic(vt) or isinstance(vt, TensorVariable):
        return True
    return isinstance(vt, BaseSequence) and any(_has_symbols(i) for i in vt.items)


def _syms_of_ref(ref) -> list:
    if ref[0] == "sym":
        return [ref[1]]
    if ref[0] == "seq":
        return [s for r in ref[2] for s in _syms_of_ref(r)]
    if ref[0] == "obj":
        return [s for r in ref[2].values() for s in _syms_of_ref(r)]
    return []


def _resolve_ref(ref, ref_of):
    if ref[0] == "sym":
        return ref_of[id(ref[1])]
    if ref[0] == "seq":
        return ("seq", ref[1], [_resolve_ref(r, ref_of) for r in ref[2]])
    if ref[0] == "obj":
        return ("obj", ref[1], {k: _resolve_ref(r, ref_of) for k, r in ref[2].items()})
    return ref


def check_ctx_containers(tx, broke: bool) -> None:
    """At the end of a trace: a container from before a traced Function's forward that it stored on its
    ctx must not have been changed afterwards in the frame (eager's backward would see the change, the
    graph's copy would not). Otherwise the frame breaks at the ``apply`` instead, which then runs eagerly.
    (After a graph break the program holds a rebuilt container the copy does not follow either; that is
    not checked.)"""
    pending = getattr(tx.output, "ctx_container_checks", None)
    if not pending:
        return
    writes = tx.side_effects.container_writes
    for borns, pos, _sourced, offset, opname, what in pending:
        if isinstance(borns, tuple) and borns[0] == "versions":  # saved tensors changed in place later
            if any(version_of(fake) != v for fake, v in borns[1]):
                # eager's backward raises ("modified by an inplace operation"); an AOT backend would
                # fail to compile the frame: the call runs eagerly
                e = unsupported("EB0048", f"{what}: a tensor it saved for backward is changed in place later")
                e.top_offset, e.top_opname = offset, opname
                raise e
            continue
        if isinstance(borns, tuple):  # ("object", tracker, {attribute: id of its tracker} at the call)
            _, obj, seen = borns
            changed = {k: id(v) for k, v in obj.attrs.items()} != seen
        else:
            changed = any(b in borns for b in writes[pos:])
        if changed:
            e = unsupported("EB0048", f"{what} holds a container or object from outside forward that the program "
                            "changes later")
            e.top_offset, e.top_opname = offset, opname
            raise e


def _note_container_checks(tx, fn_cls, checks) -> None:
    root = tx
    while root.parent is not None:
        root = root.parent
    inst = root.instructions[root.ip - 1]
    if inst.opname == "PRECALL":
        inst = root.instructions[root.ip]
    pending = tx.output.__dict__.setdefault("ctx_container_checks", [])
    for name, borns, sourced in checks:
        pending.append((borns if isinstance(borns, tuple) else set(borns), len(tx.side_effects.container_writes),
                        sourced, inst.offset, inst.opname, f"ctx.{name} of {fn_cls.__qualname__}"))


def trace_function_apply(tx, cls_vt, args: list, kwargs: dict) -> VariableTracker:
    """The apply traced from a checkpoint: a region that turns out unsupported is rolled back (the
    graph, the trace's state, and fake tensors forward changed in place) before the break."""
    from ember.capture.speculation import Checkpoint
    with Checkpoint(tx) as cp:
        try:
            return _trace_apply(tx, cls_vt, args, kwargs, cp)
        except Unsupported:
            cp.restore()
            raise


def _trace_apply(tx, cls_vt, args: list, kwargs: dict, cp) -> VariableTracker:
    from ember.capture.variables.containers import ListVariable, TupleVariable
    fn_cls = getattr(cls_vt, "value", None)
    if not (isinstance(fn_cls, type) and issubclass(fn_cls, torch.autograd.Function)):
        raise unsupported("EB0045", "torch.autograd.Function.apply on an unknown class")
    backward_fn = _user_backward(fn_cls)
    setup_context = inspect.getattr_static(fn_cls, "setup_context", None)
    uses_setup_context = (getattr(setup_context, "__func__", setup_context)
                          is not torch.autograd.function._SingleLevelFunction.setup_context)
    if uses_setup_context:  # eager's apply binds forward's defaults first: setup_context sees them
        args = _with_defaults(fn_cls.forward, args, kwargs)
    elif kwargs:
        args = _kwargs_as_positions(fn_cls.forward, args, kwargs)
    output = tx.output
    grad_on = torch.is_grad_enabled()
    ctx = FunctionCtxVariable(fn_cls, tuple(isinstance(a, TensorVariable) and bool(a.fake.requires_grad)
                                            for a in args))
    if "jvp" in vars(fn_cls) and not tx.trace.transform_depth:  # (in one: function_in_transform.py)
        _check_no_forward_ad(tx, fn_cls, grad_on and any(ctx.needs_input_grad))
    tensor_args = [a for a in args if isinstance(a, TensorVariable)]
    layouts = [_layout(a.fake) for a in tensor_args]
    region = Region(tx, tensor_args)

    # 1. forward, under no_grad as in eager
    with GradDisabled():
        forward = tx.getattr(cls_vt, "forward")
        if uses_setup_context:
            out = forward.call(tx, list(args), {})
            tx.getattr(cls_vt, "setup_context").call(tx, [ctx, TupleVariable(list(args)), out], {})
        else:
            out = forward.call(tx, [ctx, *args], {})
    dirty_args = _dirty_arguments(ctx, args, tensor_args, layouts)
    region.check_pure(f"{fn_cls.__qualname__}.forward", changed_ok=[args[i].fake for i in dirty_args])
    body = region.nodes()

    # the outputs: as eager's apply, a tensor or a tuple (a namedtuple comes back a plain tuple) whose
    # tensors get the Function's gradient; anything else is passed through as forward made it (its
    # tensors, computed under no_grad, need no grad)
    if isinstance(out, TensorVariable):
        out_items, out_is_tuple = [out], False
    elif isinstance(out, TupleVariable):
        out_items, out_is_tuple = list(out.items), True
    else:
        out_items, out_is_tuple = [out], False
    tensor_outs = [o for o in out_items if isinstance(o, TensorVariable)]
    # each dirty input comes back as the output that is it (eager returns the input object itself)
    dirty_outs = {}
    for i in dirty_args:
        hits = [k for k, o in enumerate(tensor_outs) if o.fake is args[i].fake]
        if not hits:
            raise unsupported("EB0047", "ctx.mark_dirty of an input forward does not return (eager raises)")
        for k in hits:
            dirty_outs[k] = i
    if dirty_args and any(not (isinstance(o, TensorVariable) or o.is_constant()) for o in out_items):
        raise unsupported("EB0047", "ctx.mark_dirty with outputs that are not tensors or constants")
    if not tensor_outs:
        if ctx.non_differentiable:
            raise unsupported("EB0046", "ctx.mark_non_differentiable of a tensor that is not an output")
        _mark_body(output, body, grad_on)
        return TupleVariable(out_items) if out_is_tuple else out
    if tx.trace.transform_depth:  # inside a torch.func transform's function: the user's own apply
        from ember.capture.variables.function_in_transform import apply_in_transform
        return apply_in_transform(tx, cls_vt, fn_cls, backward_fn, ctx, args, out_items, body, region,
                                  dirty_args, uses_setup_context)
    checks: list = []
    attr_refs = {name: _ctx_attr_ref(tx, name, value, region._birth, checks)
                 for name, value in ctx.attrs.items() if not isinstance(value, TensorVariable)}
    non_diff = []
    for t in ctx.non_differentiable:
        hits = [i for i, o in enumerate(tensor_outs) if o.node is t.node]
        if not hits:
            raise unsupported("EB0046", "ctx.mark_non_differentiable of a tensor that is not an output")
        non_diff.append(hits[0])

    # 2. backward, traced once for its guards, then dropped (not where eager records no node: no grad needed)
    if grad_on and any(ctx.needs_input_grad):
        from ember.capture.variables.autograd_backward import check_backward
        check_backward(tx, cls_vt, fn_cls, backward_fn, ctx, out_items, args, forward_nodes=set(body))

    # 3. the generated Function over a copy of the forward's nodes
    ctx_tensors = [v for v in (ctx.saved or []) if isinstance(v, TensorVariable)]
    ctx_tensors += [v for v in ctx.attrs.values() if isinstance(v, TensorVariable)]
    ctx_tensors += [s for ref in attr_refs.values() for s in _syms_of_ref(ref)]  # (symbolic numbers)
    graph_args = [a for a in args if isinstance(a, TensorVariable) or _is_symbolic(a)]
    extras = region.external_inputs(body, {a.node for a in graph_args},
                                    [v.node for v in [*tensor_outs, *ctx_tensors]], symbols=True)

    call_args: list[VariableTracker] = []
    for a in args:
        call_args.append(a if isinstance(a, TensorVariable) or a.is_constant() else ConstantVariable(None))
    # Tensors from outside that forward reads (globals, closures, list members) go in one list: autograd
    # gives tensors inside a list no gradient and no needs_input_grad entry of their own, as in eager.
    from ember.capture.variables.symbolic import SymNodeVariable
    call_args.append(ListVariable([TensorVariable(node, node.meta["example_value"])
                                   if isinstance(node.meta["example_value"], torch.Tensor)
                                   else SymNodeVariable(node, node.meta["example_value"]) for node in extras]))

    gm = extract(body, [a.node if isinstance(a, TensorVariable) or _is_symbolic(a) else None for a in args] + extras,
                 [v.node for v in [*tensor_outs, *ctx_tensors]], output.submodules)
    ref_of = {id(v): ("out", k) for k, v in enumerate([*tensor_outs, *ctx_tensors])}
    saved_refs = None if ctx.saved is None else [
        ref_of[id(v)] if isinstance(v, TensorVariable) else None for v in ctx.saved]
    attr_refs = {name: (ref_of[id(v)] if isinstance(v, TensorVariable) else _resolve_ref(attr_refs[name], ref_of))
                 for name, v in ctx.attrs.items()}
    if checks:
        _note_container_checks(tx, fn_cls, checks)
    out_positions = [i for i, o in enumerate(out_items) if isinstance(o, TensorVariable)]
    wrapper = _make_function(fn_cls, backward_fn, gm, len(tensor_outs), out_is_tuple, saved_refs, attr_refs,
                             non_diff, ctx.materialize, len(args), len(out_items), out_positions, dirty_outs)
    _mark_body(output, body, grad_on)
    cp.close()  # (traced: the call below need not be undone, nor snapshot the fake tensors first)
    result = output.call_function(_apply_of(wrapper), call_args, {})
    results = [result] if isinstance(result, TensorVariable) else list(result.items)
    # the saved tensors the program can reach (inputs, outputs): changed in place later, eager's backward
    # raises; the frame checks at the end of its trace (`check_ctx_containers`)
    watched = []
    for v in [*(ctx.saved or []), *ctx.attrs.values()]:
        if not isinstance(v, TensorVariable):
            continue
        fake = next((a.fake for a in tensor_args if a.fake is v.fake), None)
        if fake is None:
            fake = next((r.fake for r, o in zip(results, tensor_outs) if o.node is v.node), None)
        if fake is not None and all(fake is not f for f, _ in watched):
            watched.append((fake, version_of(fake)))
    if watched:
        _note_container_checks(tx, fn_cls, [("saved tensors", ("versions", watched), False)])
    if not out_is_tuple:
        return results[0]
    it = iter(results)
    return TupleVariable([next(it) if isinstance(o, TensorVariable) else o for o in out_items])


def _forward_ad_level() -> int:
    import torch.autograd.forward_ad as forward_ad
    return forward_ad._current_level


def _check_no_forward_ad(tx, fn_cls, records_node: bool) -> None:
    """A Function with a ``jvp``: the generated Function has none, so the call is traced only where
    eager would not call it either (no dual level, guarded: no input carries a tangent; not inside a
    torch.func transform) and records no node (torch.compile breaks there too)."""
    if records_node or tx.trace.transform_depth or _forward_ad_level() != -1:
        raise unsupported("EB0048", f"{fn_cls.__qualname__} (forward-mode AD)")
    tx.guards.global_state("forward_ad_level", _forward_ad_level, -1, "torch.autograd.forward_ad._current_level")


def _layout(fake):
    return (tuple(fake.shape), tuple(fake.stride()), fake.storage_offset(), fake.dtype)


def _dirty_arguments(ctx, args, tensor_args, layouts) -> list:
    """Positions of the arguments ``ctx.mark_dirty`` named (forward changed them in place), where the
    generated Function can do the same: a tensor argument that is not a view, not a leaf that requires
    grad (eager raises), whose sizes and strides forward left as they were."""
    dirty = []
    for t in ctx.dirty:
        hits = [i for i, a in enumerate(args) if isinstance(a, TensorVariable) and a.fake is t.fake]
        if not hits:
            raise unsupported("EB0047", "ctx.mark_dirty of a tensor that is not an input")
        fake = t.fake
        if fake._base is not None:
            raise unsupported("EB0047", "ctx.mark_dirty of a view")
        if fake.requires_grad and fake.is_leaf:
            raise unsupported("EB0047", "ctx.mark_dirty of a leaf that requires grad (eager raises)")
        k = next(j for j, a in enumerate(tensor_args) if a.fake is fake)
        if _layout(fake) != layouts[k]:
            raise unsupported("EB0047", "ctx.mark_dirty of an input forward resized or restrided")
        if (args[hits[0]].node.op == "placeholder" and not ctx.needs_input_grad[hits[0]] and any(ctx.needs_input_grad)
                and torch.is_grad_enabled()):
            # A graph input that gains the Function's history: an AOT backend sees its mutation under
            # no_grad (torch's own keeps it out of autograd): run the call eagerly.
            raise unsupported("EB0047", "ctx.mark_dirty of a graph input that does not require grad (it would gain history)")
        dirty += [i for i in hits if i not in dirty]
    return dirty


def _mark_body(output, body, grad_on):
    """Keep the forward's nodes (for values that escape it) under no_grad; `finish` drops unused ones."""
    if not body:
        return
    tag = object()
    for n in body:
        n.meta["ember_fn_body"] = tag
    if grad_on:
        graph = output.graph
        with graph.inserting_before(body[0]):
            off = graph.call_function(torch._C._set_grad_enabled, (False,))
        with graph.inserting_after(body[-1]):
            on = graph.call_function(torch._C._set_grad_enabled, (True,))
        off.meta["ember_fn_body"] = on.meta["ember_fn_body"] = tag


def drop_unused_bodies(graph: fx.Graph) -> None:
    """Remove the kept forward nodes nothing uses (and their no-grad region when it is empty)."""
    tagged = [n for n in graph.nodes if "ember_fn_body" in n.meta]
    if not tagged:
        return
    toggles = [n for n in tagged if n.target is torch._C._set_grad_enabled]
    for n in reversed(tagged):
        if n.target is not torch._C._set_grad_enabled and not n.users:
            graph.erase_node(n)
    live = {n.meta["ember_fn_body"] for n in graph.nodes
            if "ember_fn_body" in n.meta and n.target is not torch._C._set_grad_enabled}
    for n in toggles:
        if n.meta["ember_fn_body"] not in live:
            graph.erase_node(n)
