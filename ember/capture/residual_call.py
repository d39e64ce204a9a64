"""The code a graph break's entry runs after the graph: the call of the residual (which runs the
breaking instruction and the rest of the frame) with the frame's stack and live locals rebuilt
(graph_break.build_residual, or nested_breaks.nested_residual for a break inside an inlined
function), and the graph a break at a branch on an input tensor still makes."""
from __future__ import annotations

import torch

from ember.bytecode.resume import unmangle_local
from ember.capture.callees import _compiled_callee
from ember.capture.graph_break import build_residual
from ember.capture.lazy_arguments import ArgumentLocals, UnreadArgument
from ember.capture.nested_breaks import nested_residual
from ember.capture.sources import LocalSource, bind
from ember.capture.variables.base import VariableTracker
from ember.capture.variables.tensor import TensorMethodVariable, TensorVariable


def break_shape(tx, bp) -> tuple[int, list[int]]:
    """How many stack items the instruction ``tx`` stopped at consumes, and the offsets (in ``tx``'s
    code) where the frame goes on after it: none (the rest runs eagerly from it), the next
    instruction, or a branch's two."""
    from ember.capture.graph_break import _CALLS, _STORE_OPS, _VALUE_OPS, eager_here, value_op_consumed
    inst = bp.inst
    if bp.opname == "CALL":
        consumed = inst.arg + 2
    elif bp.opname == "CALL_KW":  # (3.13) the keyword names tuple on top
        consumed = inst.arg + 3
    elif bp.opname == "CALL_FUNCTION_EX":
        consumed = 3 + (inst.arg & 1)
    elif bp.opname in _VALUE_OPS or bp.opname in _STORE_OPS:
        consumed = value_op_consumed(inst)
    else:
        consumed = 1
    if eager_here(bp.opname):
        after = []  # the frame goes on eagerly from the breaking instruction itself
    elif bp.opname in _CALLS or bp.opname in _VALUE_OPS or bp.opname in _STORE_OPS:
        after = [tx.instructions[tx.ip + 0].offset]
    else:
        after = [tx.instructions[tx.ip + 0].offset, inst.argval]
    return consumed, after


class PassedOn(VariableTracker):
    """An argument handed on at a graph break as it came (never read, or a tensor argument still
    under its own name): read again from its source, unguarded, as in torch.compile: what the rest
    of the frame does with it is the rest's to guard."""

    def __init__(self, source):
        self.source = source

    def reconstruct(self, plan) -> str:
        return plan._read(self.source)


def frame_values(tx, cellvars) -> dict:
    """A stopped frame's locals by their names in the function (a resume function's may be
    mangled), arguments it did not change as `PassedOn`, and its cells (``cellvars``) by the cell
    itself: the resume function shares it with closures made before."""
    raw = tx.locals.unread_items() if isinstance(tx.locals, ArgumentLocals) else list(tx.locals.items())
    values = {}
    for n, v in raw:
        if type(v) is UnreadArgument or (isinstance(v, TensorVariable) and v.source == LocalSource(n)
                                          and v.reads_input()):
            v = PassedOn(v.source)
        values[unmangle_local(n)] = v
    for name, cell in tx.cells.items():
        if name in cellvars:
            values[name] = cell
    return values


def _residual_call(fn, tx, plan, resumes, offset_map) -> str:
    """The expression that runs the breaking instruction and the rest of the frame."""
    from ember.capture.graph_break import _CALLS, callee_position
    bp = tx.reached_break
    if getattr(bp, "inner", None) is not None:  # stopped at its call of a frame that broke inside
        return nested_residual(tx, plan, resumes, offset_map)
    consumed, after = break_shape(tx, bp)
    stack = list(bp.stack)
    if offset_map is not None:  # a resume function: speak in the root function's offsets
        bp.offset = offset_map[bp.offset]
        after = [offset_map[a] for a in after]
    # Python callees at the breaking call run through ember, so their own bodies get compiled.
    if bp.opname in _CALLS and len(stack) >= consumed:
        pos = callee_position(stack, consumed)
        stack[pos] = _compiled_callee(stack[pos], resumes, tx)
    values = frame_values(tx, fn.__code__.co_cellvars)
    bound = set(values)
    handling = not tx.exc_inherited  # the trace entered or left an except block: set sys.exc_info()
    residual, positions, live = build_residual(resumes.fn, bp, resumes, consumed, after, bound, handling)
    if bp.opname in _CALLS and len(stack) >= consumed:
        pos = callee_position(stack, consumed)
        stack[pos] = _read_only_receiver(tx, stack[pos], consumed)
    args = [plan.expr(stack[p]) for p in positions] + [plan.expr(values[n]) for n in live]
    if handling:
        current = tx.current_exception_vt
        args.append(plan.expr(current) if current is not None else "None")
    return f"{bind(plan.scope, residual, 'residual')}({', '.join(args)})"


def _read_only_receiver(tx, callee, consumed: int):
    """``t.item()`` / ``t.tolist()`` at a break, ``t`` computed by the graph and requiring grad: the
    call receives ``t.detach()`` instead (the same values; the call only reads them, and its receiver
    is not visible to the program). So ``t`` is a graph output that requires grad only if the rest of
    the frame still holds it: otherwise the compiled graph would connect ``t``'s inputs to autograd
    for an output eager never differentiates, and a backward through the graph's other outputs would
    run their producers (with undefined gradients) where eager never does, unpacking tensors they
    saved (an error if the program wrote into those since)."""
    t = getattr(callee, "tensor", None)
    if (type(callee) is not TensorMethodVariable or callee.name not in ("item", "tolist") or consumed != 2
            or not isinstance(t, TensorVariable) or t.cls not in (None, torch.Tensor) or t.source is not None):
        return callee
    fake = t.fake
    if fake is None or not fake.requires_grad:
        return callee
    return TensorMethodVariable(tx.output.call_method("detach", [t], {}), callee.name)


def _branch_on_input_tensor(bp, output, plan) -> bool:
    """A graph break at a branch on a tensor the frame received (``if flag:``, ``flag and x``) with
    no graph before it: torch.compile still compiles a graph there, one that returns the tensor
    tested, so its backend sees (and its CompileCounter counts) one more frame; ember does the same."""
    from ember.capture.graph_break import _BRANCHES, _OR_POP_BRANCHES
    if bp is None or (bp.opname not in _BRANCHES and bp.opname not in _OR_POP_BRANCHES) or output.has_compute():
        return False
    tested = bp.stack[-1] if bp.stack else None
    if not isinstance(tested, TensorVariable) or getattr(tested, "node", None) is None \
            or tested.node.op != "placeholder":
        return False
    plan._out(tested.node)
    return True
