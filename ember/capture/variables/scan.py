"""``associative_scan(combine_fn, xs, dim, reverse=False, combine_mode="generic")`` traced into the graph.

    def combine_fn(left, right):                     # mamba's selective scan on CPU
        a_left, b_left = left
        a_right, b_right = right
        return a_left * a_right, a_right * b_left + b_right
    _, states = associative_scan(combine_fn, (A, B), dim=2, combine_mode="generic")

Inlining ``associative_scan`` itself reaches ``torch.vmap``'s machinery (locks, C transforms) and
breaks the graph a dozen times. Instead, as torch.compile does, ``combine_fn`` is traced once on
one slice of each input along ``dim`` (the shapes it sees under the scan's vmap), checked to be
pure, cut out into a GraphModule, and one graph node runs the scan (``run_associative_scan``: the
same pairwise algorithm, result and layout as torch's generic mode, with the GraphModule vmapped as
the combine function): eager kernels run it, and the AOT layer traces through it (vmap included)
like any other torch code. Only the ``generic`` mode is traced
(``pointwise`` needs CUDA); anything else (closed-over tensors, side effects, a result that is not
the inputs' structure) breaks the graph at the call, which then runs as in eager. A symbolic
scan length is pinned (a guard on its value): the scan's steps depend on it.
"""
from __future__ import annotations

import torch

from ember.capture.subgraph import Region, extract
from ember.capture.variables.base import ConstantVariable, VariableTracker, bind_call_arguments, unsupported
from ember.capture.variables.containers import ListVariable, TupleVariable
from ember.capture.variables.tensor import TensorVariable
from ember.exc import PythonException, Unsupported
from ember.fake.symbolic import plain

def run_associative_scan(combine_gm, leaves: tuple, dim: int, reverse: bool, kind_name):
    """The graph's call: the inclusive scan of ``leaves`` (one tensor when ``kind_name`` is None,
    else a "tuple" or "list" of them) along ``dim``, combining with ``combine_gm(*left, *right)``
    (traced on one slice; vmapped here over the scan dimension); a tuple.

    The same result and layout as torch's generic ``associative_scan``, but written so that
    symbolic sizes of the other dimensions stay symbolic: torch's version tests
    ``result.shape.numel() > 0``, and ``torch.Size.numel()`` turns every symbol of the shape
    into a constant (a guard on each: a mamba model recompiled for every batch size)."""
    combine = torch.vmap(lambda *args: tuple(combine_gm(*args)))

    def pairwise(left: list, right: list) -> list:
        return list(combine(*left, *right))

    xs = [torch.movedim(t, dim, 0) for t in leaves]
    if reverse:
        xs = [torch.flip(t, [0]) for t in xs]
    out = _scan_dim0(pairwise, xs)
    if reverse:
        out = [torch.flip(t, [0]) for t in out]
    return tuple(torch.movedim(t, 0, dim) for t in out)


def _scan_dim0(pairwise, xs: list) -> list:
    """Inclusive scan along dimension 0 (a concrete length) by pairs: combine neighbours (0,1),
    (2,3), ...; scan those sums (the prefixes ending at odd positions); the prefixes ending at even
    positions > 0 are one more combination each; interleave the two."""
    n = xs[0].shape[0]
    if n < 2:
        return xs
    odd = _scan_dim0(pairwise, pairwise([t[0:n - 1:2] for t in xs], [t[1::2] for t in xs]))
    rest = [t[2::2] for t in xs]
    if rest[0].shape[0]:  # (prefix at 2k = prefix at 2k-1 combined with element 2k)
        later = pairwise([o[:rest[0].shape[0]] for o in odd], rest)
        even = [torch.cat([t[0:1], e]) for t, e in zip(xs, later)]
    else:
        even = [t[0:1] for t in xs]
    return [_interleave0(e, o) for e, o in zip(even, odd)]


def _interleave0(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """a[0], b[0], a[1], b[1], ... along dimension 0 (a has as many items as b, or one more)."""
    m = b.shape[0]
    pairs = torch.stack([a[:m], b], dim=1).flatten(0, 1)
    return torch.cat([pairs, a[m:]]) if a.shape[0] > m else pairs


def _constant(vt, what):
    if vt is None:
        return None
    if not vt.is_constant():
        raise unsupported("EB0055", f"associative_scan with a non-constant {what}")
    return vt.as_constant()


def trace_associative_scan(tx, args: list, kwargs: dict) -> VariableTracker:
    from ember.capture.speculation import Checkpoint
    with Checkpoint(tx) as cp:
        try:
            return _trace(tx, args, kwargs)
        except Unsupported:
            cp.restore()
            raise


def _trace(tx, args: list, kwargs: dict) -> VariableTracker:
    bound = bind_call_arguments(("combine_fn", "xs", "dim", "reverse", "combine_mode"), 3, args, kwargs)
    if isinstance(bound, str):
        raise unsupported("EB0055", f"associative_scan {bound}")
    dim = _constant(bound["dim"], "dim")
    reverse = _constant(bound.get("reverse"), "reverse") or False
    mode = _constant(bound.get("combine_mode"), "combine_mode") or "pointwise"
    if mode != "generic" or type(dim) is not int or type(reverse) is not bool:
        raise unsupported("EB0055", f"associative_scan with combine_mode={mode!r}, dim={dim!r}, reverse={reverse!r} "
                          "(only the generic mode is traced)")
    xs = bound["xs"]
    if isinstance(xs, TensorVariable):
        leaves, kind = [xs], None
    elif isinstance(xs, (TupleVariable, ListVariable)) and xs.items and \
            all(isinstance(i, TensorVariable) for i in xs.items) and getattr(xs, "tuple_type", None) is None:
        leaves, kind = list(xs.items), (list if isinstance(xs, ListVariable) else tuple)
    else:
        raise unsupported("EB0055", "associative_scan over something other than a tensor or a flat tuple/list of tensors")
    ndim = leaves[0].fake.dim()
    if not -ndim <= dim < ndim or any(t.fake.dim() != ndim for t in leaves):
        raise unsupported("EB0055", "associative_scan with leaves of different ranks or dim out of range")
    dim = dim % ndim
    # (a symbolic length is pinned, a guard on its value: the scan's steps depend on it, and an AOT
    # backend tracing the call on symbolic sizes would otherwise specialise it unguarded)
    size = plain(leaves[0].fake.shape[dim])
    if any(t.fake.layout != torch.strided for t in leaves):
        raise unsupported("EB0055", "associative_scan over a sparse tensor (torch raises)")
    if size < 1 or any(plain(t.fake.shape[dim]) != size for t in leaves):
        raise unsupported("EB0055", "associative_scan over leaves of different (or zero) lengths")

    output = tx.output
    # one slice per leaf and side, each its own node (the subgraph's placeholders)
    sides = [[output.call_method("select", [t, ConstantVariable(dim), ConstantVariable(0)], {}) for t in leaves]
             for _ in range(2)]
    slices = [n for side in sides for n in side]
    pack = (lambda items: items[0]) if kind is None else (
        (lambda items: ListVariable(list(items))) if kind is list else (lambda items: TupleVariable(list(items))))
    region = Region(tx, slices)
    try:
        out = bound["combine_fn"].call(tx, [pack(sides[0]), pack(sides[1])], {})
    except PythonException as e:
        raise unsupported("EB0055", f"associative_scan's combine_fn raised {type(e.exc).__name__} while tracing") from None
    region.check_pure("associative_scan's combine_fn")
    if isinstance(out, TensorVariable):
        flat = [out]
    elif isinstance(out, (TupleVariable, ListVariable)) and all(isinstance(i, TensorVariable) for i in out.items):
        flat = list(out.items)
    else:
        raise unsupported("EB0055", "associative_scan's combine_fn returns something other than tensors")
    if len(flat) != len(leaves) or any(o.fake.shape != s.fake.shape or o.fake.dtype != s.fake.dtype
                                       for o, s in zip(flat, sides[0])):
        raise unsupported("EB0055", "associative_scan's combine_fn returns other shapes or dtypes than its inputs")
    body = region.nodes()
    slice_nodes = [s.node for s in slices]
    if region.external_inputs(body, set(slice_nodes), [o.node for o in flat]):
        raise unsupported("EB0055", "associative_scan's combine_fn reads tensors from outside its arguments")
    gm = extract(body, slice_nodes, [o.node for o in flat], output.submodules)
    region.erase()
    for n in reversed(slice_nodes):
        output.graph.erase_node(n)

    fakes = tuple(t.fake for t in leaves)
    kind_name = None if kind is None else kind.__name__
    try:
        with output.fake.enabled():
            result = run_associative_scan(gm, fakes, dim, reverse, kind_name)
    except Exception as e:  # noqa: BLE001 — what the scan refuses here it refuses in eager: run it eagerly
        raise unsupported("EB0055", f"associative_scan: {type(e).__name__}: "
                          f"{str(e).splitlines()[0] if str(e) else ''}") from None
    attr = output.add_submodule(gm, "scan_combine")
    node = output.graph.create_node("call_function", run_associative_scan,
                                    (attr, tuple(t.node for t in leaves), dim, reverse, kind_name), {})
    if output.current_location:
        node.meta["stack_trace"] = output.stack_trace()
    items = list(output._wrap_result(node, tuple(result)).items)
    return items[0] if kind is None else pack(items)
