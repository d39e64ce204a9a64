"""``torch.cond(pred, true_fn, false_fn, operands)`` traced into the graph.

A Python-constant predicate picks its branch at trace time, as eager does. A tensor predicate
traces both branches from the same state (each inlined, checked to be free of side effects and of
in-place changes to its operands, then cut out of the frame's graph into a GraphModule) and emits
one ``torch.ops.higher_order.cond`` node whose branches are those GraphModules. Tensors a branch
reads from outside its operands (parameters, closed-over tensors) become extra operands of both.
Both branches must return the same structure: a tensor, or a tuple/list of tensors. Anything else
breaks the graph at the call, which then runs eagerly.
"""
from __future__ import annotations

import torch

from ember.capture.subgraph import Region, extract
from ember.capture.variables.base import VariableTracker, bind_call_arguments, unsupported
from ember.capture.variables.tensor import TensorVariable
from ember.exc import PythonException, Unsupported


def _flat_result(vt, which: str):
    from ember.capture.variables.containers import ListVariable, TupleVariable
    if isinstance(vt, TensorVariable):
        return [vt], None
    if isinstance(vt, (TupleVariable, ListVariable)) and all(isinstance(i, TensorVariable) for i in vt.items):
        kind = list if isinstance(vt, ListVariable) else (tuple, getattr(vt, "tuple_type", None))
        return list(vt.items), (kind, len(vt.items))
    raise unsupported("EB0050", f"torch.cond's {which} returns {vt.describe()} (a tensor or a tuple of tensors is supported)")


def _check_no_aliasing(operands, body, outputs, which: str) -> None:
    """torch.cond refuses a branch whose outputs alias its inputs or each other (an output that is an
    operand, a view of one, a closed-over tensor, or one tensor returned twice): eager raises."""
    from torch.multiprocessing.reductions import StorageWeakRef
    inside = set(body)
    storages = [StorageWeakRef(o.fake.untyped_storage()) for o in operands]
    seen = []
    for t in outputs:
        s = StorageWeakRef(t.fake.untyped_storage())
        if t.node not in inside or s in storages or s in seen:
            raise unsupported("EB0050", f"torch.cond's {which} returns a tensor that aliases an input or another output")
        seen.append(s)


def trace_cond(tx, args: list, kwargs: dict) -> VariableTracker:
    """Traced from a checkpoint: each branch starts from it (fake tensors a branch changed in place
    are put back before the next), and an unsupported cond is rolled back before the break."""
    from ember.capture.speculation import Checkpoint
    with Checkpoint(tx) as cp:
        try:
            return _trace_cond(tx, args, kwargs, cp)
        except Unsupported:
            cp.restore()
            raise


def _trace_cond(tx, args: list, kwargs: dict, cp) -> VariableTracker:
    from ember.capture.variables.containers import ListVariable, TupleVariable
    bound = bind_call_arguments(("pred", "true_fn", "false_fn", "operands"), 3, args, kwargs)
    if isinstance(bound, str):
        raise unsupported("EB0050", f"torch.cond {bound}")
    pred, true_fn, false_fn = bound["pred"], bound["true_fn"], bound["false_fn"]
    operands_vt = bound.get("operands", TupleVariable([]))
    if operands_vt.is_constant() and operands_vt.as_constant() in ((), []):
        operands_vt = TupleVariable([])
    if not isinstance(operands_vt, (TupleVariable, ListVariable)) or not all(
            isinstance(o, TensorVariable) for o in operands_vt.items):
        raise unsupported("EB0050", "torch.cond operands that are not a flat tuple/list of tensors")
    operands = list(operands_vt.items)

    if pred.is_constant():  # eager runs the chosen branch directly
        value = pred.as_constant()
        if not isinstance(value, (bool, int, float)):
            raise unsupported("EB0050", f"torch.cond with predicate {value!r}")
        return (true_fn if value else false_fn).call(tx, operands, {})
    if not isinstance(pred, TensorVariable) or pred.fake.numel() != 1:
        raise unsupported("EB0050", "torch.cond predicate that is not a one-element tensor")

    traced = []
    for which, fn in (("true branch", true_fn), ("false branch", false_fn)):
        region = Region(tx, operands)
        try:
            out = fn.call(tx, list(operands), {})
        except PythonException as e:
            raise unsupported("EB0050", f"torch.cond's {which} raised {type(e.exc).__name__} while tracing") from None
        region.check_pure(f"torch.cond's {which}")
        flat, spec = _flat_result(out, which)
        body = region.nodes()
        traced.append((region, body, flat, spec))
        if not cp.restore_fakes():  # the other branch (and what follows) sees the tensors as before
            raise unsupported("EB0050", f"torch.cond's {which} changes a view's autograd state")
    (r_true, b_true, f_true, s_true), (r_false, b_false, f_false, s_false) = traced
    if s_true != s_false:
        raise unsupported("EB0050", "torch.cond branches return different structures")
    for a, b in zip(f_true, f_false):
        fa, fb = a.fake, b.fake
        if fa.shape != fb.shape or fa.dtype != fb.dtype or fa.device != fb.device:
            raise unsupported("EB0050", "torch.cond branches return tensors of different shape, dtype or device")
    _check_no_aliasing(operands, b_true, f_true, "true branch")
    _check_no_aliasing(operands, b_false, f_false, "false branch")
    known = {o.node for o in operands}
    extras = r_true.external_inputs(b_true, known, [t.node for t in f_true])
    for node in r_false.external_inputs(b_false, known | set(b_true), [t.node for t in f_false]):
        if node not in extras:
            extras.append(node)
    # operands neither branch reads are not passed (they get no gradient, as in eager), each once
    used = {i for n in (*b_true, *b_false) for i in n.all_input_nodes}
    inputs = []
    for o in operands:
        if o.node in used and o.node not in inputs:
            inputs.append(o.node)
    inputs += extras
    output = tx.output
    true_gm = extract(b_true, inputs, [t.node for t in f_true], output.submodules)
    false_gm = extract(b_false, inputs, [t.node for t in f_false], output.submodules)
    r_false.erase()  # (the false branch's nodes come after the true branch's)
    r_true.erase()

    fakes = [n.meta["example_value"] for n in inputs]
    try:
        with output.fake.enabled():
            result = torch.ops.higher_order.cond(pred.fake, true_gm, false_gm, tuple(fakes))
    except Exception as e:  # noqa: BLE001 — what torch refuses here, eager refuses too: run it eagerly
        raise unsupported("EB0050", f"torch.cond: {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}") from None
    true_attr = output.add_submodule(true_gm, "cond_true")
    false_attr = output.add_submodule(false_gm, "cond_false")
    node = output.graph.create_node("call_function", torch.ops.higher_order.cond,
                                    (pred.node, true_attr, false_attr, tuple(inputs)), {})
    if output.current_location:
        node.meta["stack_trace"] = output.stack_trace()
    wrapped = output._wrap_result(node, tuple(result) if isinstance(result, (list, tuple)) else (result,))
    items = list(wrapped.items)
    if s_true is None:
        return items[0]
    kind = s_true[0]
    if kind is list:
        return ListVariable(items)
    return TupleVariable(items, tuple_type=kind[1])
