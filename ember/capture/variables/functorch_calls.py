"""torch.func transforms called in a frame: ``torch.func.grad(f)(x)``, ``vmap(f)(x)``, ... as one node.

    def fn(x):
        return torch.func.grad(lambda t: (t.sin() ** 2).sum())(x)

Inlining torch's own Python for these meets the functorch interpreter stack (``_grad_increment_nesting``,
``_vmap_increment_nesting``): process state that the trace cannot hold, so the call used to break
the graph. torch.compile 2.13 makes one graph of it. ember traces ``f`` itself instead, as it
traces a ``torch.cond`` branch (capture/subgraph.py): on stand-in tensors that look as ``f``'s
arguments look inside the transform (a batch dimension removed for vmap, ``requires_grad`` on the
differentiated arguments and grad mode on for the grad family), cuts what ``f`` added out into a
GraphModule, and emits one node that runs ``transform(body, **options)(*args)`` — the transform
itself, so the values, the errors and what make_fx/AOT trace through are eager's. Tensors ``f``
reads from outside its arguments stay outside the transform (as a closure: not batched, not
differentiated, as in eager). ``f``'s Python runs once, at trace time, with its guards.

Refused (the call breaks the graph and runs eagerly): options that are not constants, positional
arguments other than tensors and constants in tuples,
lists and dicts, ``f`` with side effects, in-place changes to its arguments or to tensors it reads from
outside (a write into a tensor ``f`` made is fine), random operations other than draws into new
tensors under the grad family and vmap with ``randomness="same"``/``"different"`` (which draw as
eager's do when the transform runs the traced body), results other than such containers of tensors.
"""
from __future__ import annotations

import inspect

import torch
import torch.utils._pytree as pytree

from ember.capture.variables.base import ConstantVariable, VariableTracker, unsupported


def transforms() -> dict:
    """The public transform functions ember traces this way -> their kind."""
    global _TRANSFORMS
    if _TRANSFORMS is None:
        import torch._functorch.apis as apis
        import torch._functorch.eager_transforms as et
        _TRANSFORMS = {apis.grad: "grad", apis.grad_and_value: "grad", apis.vmap: "vmap",
                       et.jacrev: "grad", et.jacfwd: "forward", et.hessian: "grad",
                       et.vjp: "vjp", et.jvp: "jvp"}  # (the last two take the arguments themselves)
    return _TRANSFORMS


_TRANSFORMS = None


class _Slot:
    """Where the ``index``-th tensor goes in an argument or result template."""

    def __init__(self, index: int):
        self.index = index


def _fill(template, values):
    """``template`` with each ``_Slot`` replaced by its value."""
    if isinstance(template, _Slot):
        return values[template.index]
    if isinstance(template, (tuple, list)):
        return type(template)(_fill(t, values) for t in template)
    if isinstance(template, dict):
        return {k: _fill(v, values) for k, v in template.items()}
    return template


def _slot_positions(template) -> list[int]:
    """For each tensor slot in order, its position among the template's pytree leaves."""
    leaves = pytree.tree_leaves(template, is_leaf=lambda v: isinstance(v, _Slot))
    return [i for i, leaf in enumerate(leaves) if isinstance(leaf, _Slot)]


class FunctorchCall(torch.nn.Module):
    """``transform(f, **options)(*args)`` with ``f`` traced into ``body``; called with the arguments'
    tensors, then the tensors ``f`` reads from outside; returns the result's tensors, flat."""

    def __init__(self, transform, options: dict, in_template, out_template, body: torch.nn.Module,
                 fn_template=None):
        super().__init__()
        self.transform, self.options = transform, options
        self.in_template, self.out_template = in_template, out_template
        self.n_in = len(_slot_positions(in_template))
        # where ``f``'s own tensors are among the leaves of what ``f`` is called with (the
        # transform's arguments, or only the primals of jvp / vjp)
        self.positions = _slot_positions(in_template if fn_template is None else fn_template)
        self.body = body
        self.result_spec = None

    def forward(self, *flat):
        tensors, outside = flat[:self.n_in], flat[self.n_in:]
        body, positions, out_template = self.body, self.positions, self.out_template

        def fn(*args):
            leaves = pytree.tree_leaves(args)
            out = body(*(leaves[p] for p in positions), *outside)
            return _fill(out_template, out)
        result = self.transform(fn, **self.options)(*_fill(self.in_template, tensors))
        flat_result, spec = pytree.tree_flatten(result)
        self.result_spec = spec
        return tuple(flat_result)


def run_functorch_call(holder, *flat):
    return holder(*flat)


class FunctorchTransformVariable(VariableTracker):
    """``torch.func.grad`` and its kin, the function itself."""

    def __init__(self, fn, source=None):
        self.fn, self.source = fn, source

    def describe(self):
        return f"torch.func.{self.fn.__name__}"

    def python_type(self):
        return type(self.fn)

    def truth(self, tx):
        return True

    def reconstruct(self, plan) -> str:
        from ember.capture.sources import bind
        return plan._read(self.source) if self.source is not None else bind(plan.scope, self.fn, self.fn.__name__)

    def call(self, tx, args, kwargs):
        kind = transforms()[self.fn]
        if kind in ("vjp", "jvp"):
            from ember.capture.speculation import Checkpoint
            from ember.exc import Unsupported
            with Checkpoint(tx) as cp:
                try:
                    return (_trace_vjp if kind == "vjp" else _trace_jvp)(tx, self, list(args), dict(kwargs))
                except Unsupported:
                    cp.restore()
                    raise
        try:
            bound = inspect.signature(self.fn).bind(*args, **kwargs)
        except TypeError as e:
            raise unsupported("EB0051", f"{self.describe()} called as eager would refuse: {e}") from None
        bound.apply_defaults()
        func = bound.arguments.pop("func")
        options = {}
        for name, vt in bound.arguments.items():
            if isinstance(vt, VariableTracker):
                vt = _constant_tree(vt)
                if vt is _NOT_CONSTANT:
                    raise unsupported("EB0051", f"{self.describe()} with a non-constant {name}")
            options[name] = vt
        return TransformedFunctionVariable(self, func, options)


_NOT_CONSTANT = object()


def _constant_tree(vt):
    """The value of a constant, or of tuples/lists/dicts of constants (vmap's
    ``in_dims=({"a": 0, "b": None}, None)``, read when the transform is made, as eager reads it)."""
    from ember.capture.variables.containers import DictVariable, ListVariable, TupleVariable
    if vt.is_constant() and not isinstance(vt, (ListVariable, DictVariable)):
        return vt.as_constant()
    if isinstance(vt, (TupleVariable, ListVariable)) and type(vt) in (TupleVariable, ListVariable) \
            and getattr(vt, "tuple_type", None) is None:
        items = [_constant_tree(i) for i in vt.items]
        return _NOT_CONSTANT if any(i is _NOT_CONSTANT for i in items) else \
            (tuple(items) if isinstance(vt, TupleVariable) else items)
    if isinstance(vt, DictVariable) and vt.dict_cls is dict and vt.default_factory is None \
            and all(vt.keys[k].is_constant() for k in vt.items):
        values = {vt.keys[k].as_constant(): _constant_tree(v) for k, v in vt.items.items()}
        return _NOT_CONSTANT if any(v is _NOT_CONSTANT for v in values.values()) else values
    return _NOT_CONSTANT


class TransformedFunctionVariable(VariableTracker):
    """What ``torch.func.grad(f, **options)`` returned."""

    def __init__(self, transform: FunctorchTransformVariable, func: VariableTracker, options: dict):
        self.transform, self.func, self.options = transform, func, options
        self.source = None

    def describe(self):
        return f"{self.transform.describe()}({self.func.describe()})"

    def python_type(self):
        import types
        return types.FunctionType

    def truth(self, tx):
        return True

    def reconstruct(self, plan) -> str:
        opts = ", ".join(f"{k}={plan.expr(ConstantVariable(v))}" for k, v in self.options.items())
        return f"{plan.expr(self.transform)}({plan.expr(self.func)}{', ' if opts else ''}{opts})"

    def call(self, tx, args, kwargs):
        from ember.capture.speculation import Checkpoint
        from ember.exc import Unsupported
        with Checkpoint(tx) as cp:
            try:
                return _trace_transform(tx, self, list(args), kwargs)
            except Unsupported:
                cp.restore()
                raise


def _template(vt, leaves: list, what: str):
    """The Python template of a tracker made of tuples/lists/dicts of tensors and constants; its
    tensors are appended to ``leaves``."""
    from ember.capture.variables.containers import DictVariable, ListVariable, TupleVariable
    from ember.capture.variables.symbolic import SymNodeVariable
    from ember.capture.variables.tensor import TensorVariable
    if isinstance(vt, TensorVariable):
        if vt.python_type() not in (torch.Tensor, torch.nn.Parameter):
            raise unsupported("EB0051", f"{what}: a tensor subclass")
        leaves.append(vt)
        return _Slot(len(leaves) - 1)
    if isinstance(vt, TupleVariable) and vt.tuple_type is None:
        return tuple(_template(v, leaves, what) for v in vt.items)
    if isinstance(vt, ListVariable) and type(vt) is ListVariable:
        return [_template(v, leaves, what) for v in vt.items]
    if isinstance(vt, DictVariable) and vt.dict_cls is dict and vt.default_factory is None \
            and all(k.is_constant() and type(k.as_constant()) in (str, int) for k in vt.keys.values()):
        return {k: _template(v, leaves, what) for k, v in vt.items.items()}
    if vt.is_constant() and not isinstance(vt, SymNodeVariable) \
            and type(vt.as_constant()) in (int, float, bool, str, type(None)):
        return vt.as_constant()
    raise unsupported("EB0051", f"{what}: {vt.describe()} (tensors and constants in tuples, lists and dicts are supported)")


def _rebuild(template, items: list):
    """Trackers for ``template`` (a pytree of Python containers), its ``_Slot``s from ``items``."""
    from ember.capture.variables.containers import DictVariable, ListVariable, TupleVariable
    if isinstance(template, _Slot):
        return items[template.index]
    if isinstance(template, tuple):
        return TupleVariable([_rebuild(t, items) for t in template])
    if isinstance(template, list):
        return ListVariable([_rebuild(t, items) for t in template])
    if isinstance(template, dict):
        return DictVariable({k: _rebuild(v, items) for k, v in template.items()})
    return ConstantVariable(template)


def _batch_dims(in_dims, template: tuple, n: int) -> list:
    """vmap's ``in_dims`` for each of the ``n`` tensors of the argument ``template``."""
    dims: list = [None] * n
    if isinstance(in_dims, tuple) and len(in_dims) != len(template) or \
            not isinstance(in_dims, (tuple, int, type(None))):
        raise unsupported("EB0051", "vmap in_dims that do not match the arguments")
    for i, arg in enumerate(template):
        d = in_dims[i] if isinstance(in_dims, tuple) else in_dims
        leaves, spec = pytree.tree_flatten(arg, is_leaf=lambda v: isinstance(v, _Slot))
        # (a nested in_dims, `({"a": 0, "b": None},)`, follows the argument's structure, as vmap reads it)
        per_leaf = [d] * len(leaves) if isinstance(d, (int, type(None))) else \
            pytree._broadcast_to_and_flatten(d, spec)
        if per_leaf is None or not all(isinstance(x, (int, type(None))) for x in per_leaf):
            raise unsupported("EB0051", "vmap in_dims nested inside an argument that do not match it")
        for leaf, leaf_dim in zip(leaves, per_leaf):
            if isinstance(leaf, _Slot):
                dims[leaf.index] = leaf_dim
    return dims


def _differentiated(options: dict, template: tuple, n: int) -> list[bool]:
    argnums = options.get("argnums", 0)
    nums = argnums if isinstance(argnums, tuple) else (argnums,)
    if not all(type(a) is int for a in nums):
        raise unsupported("EB0051", "argnums that are not ints")
    marked = [False] * n
    for a in nums:
        if not -len(template) <= a < len(template):
            raise unsupported("EB0051", "argnums out of range (eager raises)")
        for leaf in pytree.tree_leaves(template[a], is_leaf=lambda v: isinstance(v, _Slot)):
            if isinstance(leaf, _Slot):
                marked[leaf.index] = True
    return marked


def _stand_in(tx, vt, fake):
    """A temporary node and tracker standing for an argument of ``f`` inside the transform."""
    from ember.capture.variables.tensor import TensorVariable
    node = tx.output.graph.create_node("call_function", torch.empty_strided, (), {})  # (erased before the end)
    node.meta["example_value"] = fake
    return TensorVariable(node, fake)


def _trace_transform(tx, wrapped: TransformedFunctionVariable, args: list, kwargs: dict):
    kind = transforms()[wrapped.transform.fn]
    name = wrapped.transform.describe()
    # (keyword arguments reach the function as they are: not batched, not differentiated, as in
    # eager; the traced body reads them as it reads a closure)
    traced = _trace_body(tx, name, kind, wrapped.options, wrapped.func, args, kwargs)
    holder = FunctorchCall(wrapped.transform.fn, dict(wrapped.options), traced.in_template, traced.out_template,
                           traced.body)
    return _emit(tx, name, holder, traced.leaves, traced.outside)


class _Traced:
    """A function traced for a transform: its argument tensors (``leaves``) and template, the body
    GraphModule, its result's template, and the graph values it reads from outside."""

    def __init__(self, leaves, in_template, body, out_template, outside):
        self.leaves, self.in_template, self.body = leaves, in_template, body
        self.out_template, self.outside = out_template, outside


def _trace_body(tx, name: str, kind: str, options: dict, func, args: list, kwargs=None) -> _Traced:
    from ember.capture.subgraph import Region
    from ember.exc import Unsupported
    leaves: list = []
    in_template = tuple(_template(a, leaves, f"{name}'s argument") for a in args)
    output = tx.output
    if any(t.fake.is_inference() or type(t.fake).__name__ != "FakeTensor" for t in leaves):
        raise unsupported("EB0051", f"{name} of an inference or functorch-wrapped tensor")
    try:
        fakes = _stand_in_fakes(output, name, kind, options, in_template, leaves)
    except Unsupported:
        raise
    except Exception as e:  # noqa: BLE001 — (a batch of size 0, a bad dim): the call runs eagerly
        raise unsupported("EB0051", f"{name}: its arguments as the function sees them: {type(e).__name__}") from None
    stand_ins = [_stand_in(tx, t, f) for t, f in zip(leaves, fakes)]
    region = Region(tx, stand_ins)
    return _trace_in_region(tx, name, kind, func, in_template, kwargs, stand_ins, region, leaves, options)


def _stand_in_fakes(output, name, kind, options, in_template, leaves) -> list:
    """Fakes shaped as ``f`` sees its arguments inside the transform."""
    with output.fake.enabled():
        if kind == "vmap":
            dims = _batch_dims(options.get("in_dims", 0), in_template, len(leaves))
            fakes = []
            for t, d in zip(leaves, dims):
                if d is not None and not -t.fake.dim() <= d < t.fake.dim():
                    raise unsupported("EB0051", "vmap in_dims out of range (eager raises)")
                f = t.fake.select(d, 0) if d is not None else t.fake
                fakes.append(torch.empty_strided(f.shape, f.stride(), dtype=f.dtype, device=f.device,
                                                 requires_grad=f.requires_grad))
        else:
            marked = _differentiated(options, in_template, len(leaves)) if kind == "grad" \
                else [kind == "vjp"] * len(leaves)
            fakes = []
            for t, m in zip(leaves, marked):
                if m and not (t.fake.is_floating_point() or t.fake.is_complex()):
                    raise unsupported("EB0051", f"{name} of an integer tensor (eager raises)")
                f = torch.empty_strided(t.fake.shape, t.fake.stride(), dtype=t.fake.dtype, device=t.fake.device)
                fakes.append(f.requires_grad_(m) if kind in ("grad", "vjp") else f)
    return fakes


def _trace_in_region(tx, name, kind, func, in_template, kwargs, stand_ins, region, leaves,
                     options=None) -> _Traced:
    from ember.capture.rerun import call_changes_state
    from ember.capture.subgraph import extract
    from ember.exc import PythonException
    output = tx.output
    prior = torch.is_grad_enabled()
    if kind in ("grad", "vjp"):
        torch._C._set_grad_enabled(True)  # (the transform turns it on inside; no node: it does so at run time)
    tx.trace.transform_depth += 1
    tx.trace.transform_names.append(name if kind != "forward" else f"{name} (forward mode)")
    try:
        out = func.call(tx, list(_rebuild(in_template, stand_ins).items), dict(kwargs or {}))
    except PythonException as e:
        raise unsupported("EB0051", f"{name}'s function raised {type(e.exc).__name__} while tracing") from None
    finally:
        torch._C._set_grad_enabled(prior)
        tx.trace.transform_depth -= 1
        tx.trace.transform_names.pop()
    region.check_pure(f"{name}'s function")
    body = region.nodes()
    out_leaves: list = []
    out_template = _template(out, out_leaves, f"{name}'s function returns")
    known = {s.node for s in stand_ins}
    outside = region.external_inputs(body, known, [t.node for t in out_leaves], symbols=True)
    draws_ok = _draws_as_eager(kind, options or {})
    if any(call_changes_state(n.op, n.target, n.kwargs) and not _writes_own_tensor(n, [*stand_ins, *outside])
           and not (draws_ok and _only_draw(n))
           for n in body if not (n.op == "get_attr" and isinstance(output.submodules.get(n.target), FunctorchCall))):
        raise unsupported("EB0051", f"{name}'s function changes state or draws random numbers")
    body_gm = extract(body, [s.node for s in stand_ins] + outside, [t.node for t in out_leaves], output.submodules)
    region.erase()
    for s in reversed(stand_ins):
        if s.node.users:
            raise unsupported("EB0051", f"a stand-in of {name} escapes it")
        output.graph.erase_node(s.node)
    return _Traced(leaves, in_template, body_gm, out_template, outside)


def _draws_as_eager(kind: str, options: dict) -> bool:
    """Whether random draws in the function draw as eager's do when the transform runs the traced
    body: the grad family and vjp run it once; vmap with ``randomness="same"`` or ``"different"``
    (the transform itself draws, per its rule). vmap's default ("error") raises in eager: refused,
    so the call runs eagerly and raises there."""
    if kind in ("grad", "vjp"):
        return True
    return kind == "vmap" and options.get("randomness") in ("same", "different")


def _only_draw(node) -> bool:
    """A random op that writes nothing but a tensor it makes (``torch.rand``, ``F.dropout``)."""
    from ember.capture.rerun import _random, _writes
    return node.op in ("call_function", "call_method") and _random(node.target) \
        and not _writes(node.target, node.kwargs)


def _writes_own_tensor(node, foreign: list) -> bool:
    """An in-place write (no draw) into a tensor ``f`` made itself (``b = a.clone(); b[0] = 0``):
    nothing outside the transform sees it. Not into ``f``'s arguments or the tensors it reads
    from outside (``foreign``: trackers or nodes), nor views of them: eager writes through those."""
    from torch.multiprocessing.reductions import StorageWeakRef
    from ember.capture.rerun import _random, _written
    if node.op not in ("call_function", "call_method") or _random(node.target):
        return False
    written = _written(node.target, node.args, node.kwargs)
    value = written.meta.get("example_value") if isinstance(written, torch.fx.Node) else None
    if type(value) is not torch._subclasses.fake_tensor.FakeTensor:
        return False
    mine = StorageWeakRef(value.untyped_storage())
    for f in foreign:
        fake = f.meta.get("example_value") if isinstance(f, torch.fx.Node) else getattr(f, "fake", None)
        if isinstance(fake, torch.Tensor) and StorageWeakRef(fake.untyped_storage()) == mine:
            return False
    return True


def _emit(tx, name: str, holder: FunctorchCall, leaves: list, outside: list):
    """The node running ``holder`` on the argument tensors ``leaves`` and the ``outside`` values;
    the trackers of its result, in the result's structure."""
    output = tx.output
    try:
        with output.fake.enabled():
            result = holder(*[t.fake for t in leaves], *[n.meta["example_value"] for n in outside])
    except Exception as e:  # noqa: BLE001 — what the transform refuses here, eager refuses too
        raise unsupported("EB0051", f"{name}: {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}") from None
    if not all(isinstance(r, torch.Tensor) for r in result):
        raise unsupported("EB0051", f"{name} returns something other than tensors")
    attr = output.add_submodule(holder, "functorch")
    node = output.graph.create_node("call_function", run_functorch_call,
                                    (attr, *[t.node for t in leaves], *outside), {})
    if output.current_location:
        node.meta["stack_trace"] = output.stack_trace()
    wrapped_result = output._wrap_result(node, tuple(result))
    spec = holder.result_spec
    return _rebuild(pytree.tree_unflatten([_Slot(i) for i in range(len(result))], spec),
                    list(wrapped_result.items))


def _constant_options(name: str, kwargs: dict, allowed: dict) -> dict:
    options = dict(allowed)
    for key, vt in kwargs.items():
        if key not in allowed or not vt.is_constant() or type(vt.as_constant()) is not bool:
            raise unsupported("EB0051", f"{name} with {key}= that is not a constant flag")
        options[key] = vt.as_constant()
    return options


def jvp_of(fn, strict=False, has_aux=False):
    """``jvp`` as a transform: ``jvp_of(f)(primals, tangents)``."""
    return lambda primals, tangents: torch.func.jvp(fn, primals, tangents, strict=strict, has_aux=has_aux)


def vjp_output_of(fn, has_aux=False):
    """The output (and aux) of ``vjp(f, *primals)`` as a transform."""
    def run(*primals):
        result = torch.func.vjp(fn, *primals, has_aux=has_aux)
        return (result[0], result[2]) if has_aux else result[0]
    return run


def vjp_apply_of(fn, n: int, has_aux=False):
    """``vjp(f, *primals)[1](cotangents)`` as a transform: ``(*primals, cotangents)``."""
    def run(*args):
        return torch.func.vjp(fn, *args[:n], has_aux=has_aux)[1](*args[n:])
    return run


def _trace_jvp(tx, transform, args: list, kwargs: dict):
    from ember.capture.variables.containers import TupleVariable
    name = transform.describe()
    options = _constant_options(name, kwargs, {"strict": False, "has_aux": False})
    if len(args) != 3 or not all(isinstance(a, TupleVariable) and a.tuple_type is None for a in args[1:]):
        raise unsupported("EB0051", f"{name} with primals and tangents that are not tuples")
    func, primals, tangents = args
    traced = _trace_body(tx, name, "forward", options, func, list(primals.items))
    leaves = list(traced.leaves)
    tangents_template = _template(tangents, leaves, f"{name}'s tangents")
    holder = FunctorchCall(jvp_of, options, (traced.in_template, tangents_template), traced.out_template,
                           traced.body, fn_template=traced.in_template)
    return _emit(tx, name, holder, leaves, traced.outside)


def _trace_vjp(tx, transform, args: list, kwargs: dict):
    from ember.capture.variables.containers import TupleVariable
    name = transform.describe()
    options = _constant_options(name, kwargs, {"has_aux": False})
    if not args:
        raise unsupported("EB0051", f"{name} without a function")
    traced = _trace_body(tx, name, "vjp", options, args[0], args[1:])
    holder = FunctorchCall(vjp_output_of, options, traced.in_template, traced.out_template, traced.body)
    out = _emit(tx, name, holder, traced.leaves, traced.outside)
    apply = VjpFunctionVariable(traced, options)
    if options["has_aux"]:
        return TupleVariable([out.items[0], apply, out.items[1]])
    return TupleVariable([out, apply])


class VjpFunctionVariable(VariableTracker):
    """The ``vjp_fn`` that ``torch.func.vjp`` returned: called with cotangents, a node that runs
    ``vjp(f, *primals)[1](cotangents)`` (``f`` again: it is pure, so the values are eager's)."""

    def __init__(self, traced: _Traced, options: dict):
        self.traced, self.options, self.source = traced, options, None
        self.versions = self._versions()

    def _versions(self):
        return [t.fake._version for t in self.traced.leaves] + \
            [n.meta["example_value"]._version for n in self.traced.outside
             if isinstance(n.meta.get("example_value"), torch.Tensor)]

    def describe(self):
        return "the function torch.func.vjp returned"

    def python_type(self):
        import types
        return types.FunctionType

    def truth(self, tx):
        return True

    def reconstruct(self, plan) -> str:
        raise unsupported("EB0015", "returning the function torch.func.vjp returned from the compiled frame")

    def call(self, tx, args, kwargs):
        if kwargs or len(args) != 1:
            raise unsupported("EB0051", "vjp_fn called with other than one cotangent argument")
        if self._versions() != self.versions:
            raise unsupported("EB0051", "vjp_fn after an in-place change to what vjp saw")
        traced = self.traced
        leaves = list(traced.leaves)
        ct_template = _template(args[0], leaves, "vjp_fn's cotangents")
        n = len(traced.in_template)
        holder = FunctorchCall(vjp_apply_of, {"n": n, **self.options}, (*traced.in_template, ct_template),
                               traced.out_template, traced.body, fn_template=traced.in_template)
        return _emit(tx, "vjp_fn", holder, leaves, traced.outside)
