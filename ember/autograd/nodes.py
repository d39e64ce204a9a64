"""Calling one autograd Node from Python the way the engine does.

``node(*grads)`` runs a C++ Node's formula; the engine then checks its outputs against the
metadata of the inputs they go to (``validate``: a formula may return a broadcast gradient, which
is summed back, e.g. addmm's bias). An ``autograd.Function`` Node (``PyNode`` in the
engine) needs what the engine does around the user's ``backward``: undefined incoming gradients
become zeros unless the Function called ``ctx.set_materialize_grads(False)``, and the returned
gradients are checked and fixed up like the engine's ``validate_outputs`` (count, a shape that
expands to the input's is summed back, the input's dtype).
"""
from __future__ import annotations

import torch

NO_MATERIALIZE = "_ember_no_materialize"


def run_cpp(node, grads: list, expected: list | None = None) -> list:
    """``expected``: (shape, dtype) per output edge (None: no edge), read when the graph was traced
    (the key holds them), so that a compiled graph's call checks without asking the Node again."""
    if torch.is_grad_enabled():
        with torch.no_grad():
            out = node(*grads)
    else:
        out = node(*grads)
    out = list(out) if isinstance(out, (tuple, list)) else [out]
    if expected is None or len(out) != len(expected):
        return validate(node, out)
    result = []
    for g, exp in zip(out, expected):
        if exp is None or g is None:
            result.append(None)
            continue
        shape, dtype = exp
        if g.shape != shape:
            return validate(node, out)  # (sums back, or raises eager's error)
        result.append(g if g.dtype == dtype else g.to(dtype))
    return result


def expected_outputs(node) -> list:
    return [None if m is None else (torch.Size(m._input_metadata[nr].shape), m._input_metadata[nr].dtype)
            for m, nr in node.next_functions]


def run_function(node, grads: list, materialize: bool | None = None) -> list:
    if materialize is None:
        materialize = not getattr(node, NO_MATERIALIZE, False)
    if materialize and any(g is None for g in grads):
        grads = [torch.zeros(tuple(m.shape), dtype=m.dtype, device=m.device) if g is None else g
                 for g, m in zip(grads, node._input_metadata)]
    with torch.no_grad():
        out = node.apply(*grads)
    out = list(out) if isinstance(out, tuple) else [out]
    return validate(node, out)


def validate(node, out: list) -> list:
    edges = node.next_functions
    if len(out) > len(edges):
        if any(o is not None for o in out[len(edges):]):
            raise RuntimeError(f"function {node.name()} returned an incorrect number of gradients "
                               f"(expected {len(edges)}, got {len(out)})")
        out = out[:len(edges)]
    elif len(out) < len(edges):
        raise RuntimeError(f"function {node.name()} returned an incorrect number of gradients "
                           f"(expected {len(edges)}, got {len(out)})")
    result = []
    for i, (g, (m, nr)) in enumerate(zip(out, edges)):
        if m is None or g is None:
            result.append(None)
            continue
        if not isinstance(g, torch.Tensor):
            raise TypeError(f"function {node.name()} returned a gradient of type {type(g).__name__} at index {i}")
        meta = m._input_metadata[nr]
        shape = tuple(meta.shape)
        if tuple(g.shape) != shape:
            try:
                g = g.sum_to_size(shape)  # (raises unless ``shape`` expands to the gradient's)
            except RuntimeError:
                raise RuntimeError(f"Function {node.name()} returned an invalid gradient at index {i} - got "
                                   f"{list(g.shape)} but expected shape compatible with {list(shape)}") from None
        if g.dtype != meta.dtype:
            g = g.to(meta.dtype)
        result.append(g)
    return result
