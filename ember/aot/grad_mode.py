"""Does a program turn grad mode on inside itself?

A captured graph may contain ``torch._C._set_grad_enabled(True)`` (an
``enable_grad`` region, or a resume function leaving a ``no_grad`` block). Then
gradients can flow even when grad mode is off when the graph is called, so the
AOT layer must take the training path, not the inference one.
"""
from __future__ import annotations

import contextlib

import torch


def graph_enables_grad(fn) -> bool:
    """True if ``fn`` (a GraphModule, or a function closing over one) contains ``_set_grad_enabled(True)``."""
    return any(n.op == "call_function" and n.target is torch._C._set_grad_enabled and n.args and n.args[0]
               for gm in _graph_modules(fn) for n in gm.graph.nodes)


def graph_in_inference_mode(fn) -> bool:
    """True if all of ``fn``'s graph runs in one ``torch.inference_mode()`` region (a compiled
    ``@torch.inference_mode()`` function: the first op enters it, the last leaves it). Eager's
    results there are inference tensors; the traced graph has no such region, so the compiled
    one must run inside the mode for its results to be inference tensors too (else an in-place
    write to one outside the mode, or saving it for backward, works where eager raises)."""
    gms = _graph_modules(fn)
    if len(gms) != 1:
        return False
    ops = [n for n in gms[0].graph.nodes if n.op in ("call_function", "call_method", "call_module")]
    if len(ops) < 3:
        return False
    first, last = ops[0], ops[-1]
    enter, leave = torch.autograd.grad_mode._enter_inference_mode, torch.autograd.grad_mode._exit_inference_mode
    return (first.target is enter and bool(first.args) and first.args[0] is True and last.target is leave
            and not any(n.target in (enter, leave) for n in ops[1:-1]))


def inference_region_outputs(fn) -> tuple:
    """Positions of ``fn``'s graph outputs (a flat tuple) that an op inside an
    ``inference_mode(True)`` region made: eager's are inference tensors (see
    ``CompiledGraph.inference_outputs``)."""
    gms = _graph_modules(fn)
    if len(gms) != 1:
        return ()
    enter, leave = torch.autograd.grad_mode._enter_inference_mode, torch.autograd.grad_mode._exit_inference_mode
    modes, inside = [False], set()
    for n in gms[0].graph.nodes:
        if n.op == "call_function" and n.target is enter:
            modes.append(bool(n.args and n.args[0]))
        elif n.op == "call_function" and n.target is leave:
            if len(modes) > 1:
                modes.pop()
        elif n.op in ("call_function", "call_method", "call_module") and modes[-1]:
            inside.add(n)
        elif n.op == "output":
            outs = n.args[0]
            if not isinstance(outs, (tuple, list)) or any(isinstance(o, (tuple, list, dict)) for o in outs):
                return ()  # (positions are those of the flat outputs)
            return tuple(i for i, o in enumerate(outs) if o in inside)
    return ()


def _graph_modules(fn, depth: int = 4) -> list:
    """The GraphModules ``fn`` is, is bound to, or closes over -- through the closures of the
    functions it closes over too (the program wrapped for a synthetic-base layout closes over the
    flat program, which closes over the graph)."""
    found = []
    if isinstance(fn, torch.fx.GraphModule):
        found.append(fn)
    owner = getattr(fn, "__self__", None)
    if isinstance(owner, torch.fx.GraphModule):
        found.append(owner)
    for cell in getattr(fn, "__closure__", None) or ():
        try:
            value = cell.cell_contents
        except ValueError:
            continue
        if isinstance(value, torch.fx.GraphModule):
            found.append(value)
        elif depth > 0 and callable(value) and getattr(value, "__closure__", None):
            found.extend(m for m in _graph_modules(value, depth - 1) if m not in found)
    return found


@contextlib.contextmanager
def program_grad_mode():
    """Run a program (to collect metadata, or to trace it) and then put grad mode back: a graph may
    set it and leave it set (torch.compile's graphs do: Dynamo restores the mode after the graph),
    and the compiler's next step must start in the mode the graph is compiled for."""
    entry = torch.is_grad_enabled()
    try:
        yield entry
    finally:
        torch._C._set_grad_enabled(entry)
