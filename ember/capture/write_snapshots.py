"""Input writes undone, so that a graph that raised half-way can run the frame again eagerly.

A graph that writes an input in place (``buf.add_(1)``, a batch norm's running statistics) cannot
run the frame again after it raised (capture/rerun.py): the write would happen twice. Its
exception then propagates as it is — eager's state for the tensors (the eager backend runs the ops
in program order), but not for what the trace deferred: a list append or attribute write made
before the failing op, a ``finally`` body. Eager::

    log.append("called")        # deferred by the trace: replayed after the graph
    buf.add_(1)                 # in the graph: the graph cannot run again
    return x.gather(0, idx)     # raises at run time: eager's `log` has "called", ember's had not

For such a graph (deferred effects, or ops under a ``finally``), the entry copies the inputs the
graph writes before calling it, and when the graph raises puts their values back and runs the
frame again eagerly (as for a graph that changed nothing). Only where that is exact: every written
tensor is a graph input (or a view of one) with no autograd history a write could rebase (it does
not require grad, or it is a leaf — written under no_grad, a parameter update) and is written by value
(no ``resize_``/``t_``-style metadata change), and the copies stay small (``MAX_BYTES``: a
compiled optimizer step is not doubled in memory traffic for an error path). Otherwise the
exception propagates as before (the effects are lost, as with torch.compile).
"""
from __future__ import annotations

import torch

MAX_BYTES = 1 << 20  # all copies of one call together

# in-place methods that change a tensor's metadata, not (only) its values: a copy cannot undo them
_METADATA = ("resize_", "resize_as_", "t_", "transpose_", "swapdims_", "swapaxes_", "squeeze_", "unsqueeze_",
             "as_strided_", "set_", "detach_", "requires_grad_", "share_memory_", "fix_", "rename_", "refine_names_",
             "retain_grad", "_coalesced_", "sparse_resize_", "sparse_resize_and_clear_")


def plan(gm: torch.fx.GraphModule, compiled, example_inputs, random_restored: bool) -> list[int] | None:
    """Indices of the graph inputs to copy before each call (they hold every write of the graph),
    or None where copying them back would not undo the graph's partial run exactly."""
    from torch.multiprocessing.reductions import StorageWeakRef
    from ember.capture.rerun import (_UPDATES_BUFFERS, _changes_state, _local_draw, _name, _only_draws, _random,
                                     _written, draws_inside, writes_graph_made)
    if not random_restored and draws_inside(compiled):
        return None  # (an AOT graph draws random numbers under a name that does not say so)
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    if len(placeholders) != len(example_inputs):
        return None
    storages: dict = {}
    try:
        for i, node in enumerate(placeholders):
            fake = node.meta.get("example_value")
            if isinstance(fake, torch.Tensor) and type(fake) is torch._subclasses.fake_tensor.FakeTensor:
                storages.setdefault(StorageWeakRef(fake.untyped_storage()), []).append(i)
    except Exception:  # noqa: BLE001 — a tensor without storage: unknown
        return None
    chosen: set[int] = set()
    for node in gm.graph.nodes:
        if not _changes_state(node, False):
            continue
        if _random(node.target):
            if random_restored and (_only_draws(node) or _local_draw(node)):
                continue
            return None  # (a rerun would draw other numbers)
        if node.op not in ("call_function", "call_method") or getattr(node.target, "ember_function", None) is not None:
            return None
        name = _name(node.target)
        if name in _METADATA:
            return None
        if any(part in name.lower() for part in _UPDATES_BUFFERS):
            written = _running_stats(node)
            if written is None:
                return None
            written = [w for w in written if w is not None]  # (no running statistics kept)
        else:
            one = _written(node.target, node.args, node.kwargs)
            written = list(one) if isinstance(one, (list, tuple)) else [one]
        for w in written:
            value = w.meta.get("example_value") if isinstance(w, torch.fx.Node) else None
            if type(value) is not torch._subclasses.fake_tensor.FakeTensor:
                return None
            try:
                key = StorageWeakRef(value.untyped_storage())
            except Exception:  # noqa: BLE001
                return None
            if key in storages:
                chosen.update(storages[key])
            elif not writes_graph_made(gm.graph, w):
                return None
    total, seen = 0, set()
    for i in chosen:
        real = example_inputs[i]
        root = real._base if real._base is not None else real
        if type(real) not in (torch.Tensor, torch.nn.Parameter) or real.layout != torch.strided \
                or root.requires_grad and not root.is_leaf:
            return None  # (a write rebased a non-leaf's autograd history: copying values back cannot undo it)
        storage = real.untyped_storage()
        if storage.data_ptr() not in seen:
            seen.add(storage.data_ptr())
            total += storage.nbytes()
    if not chosen or total > MAX_BYTES:
        return None
    return sorted(chosen)


def check_undoable(gm, example_inputs, output, label) -> None:
    """Raise ``CatchRetry`` when the trace kept ops a try may catch after writes
    (``output.undo_required``) that no entry could undo: traced again before any compile."""
    from ember.capture.caught_ops import CatchRetry
    if output.undo_required and plan(gm, None, example_inputs, bool(output.__dict__.get("assumed_draws"))) is None:
        raise CatchRetry(f"{label}: the graph's input writes cannot be undone")


def entry_lines(gm, compiled, example_inputs, input_sources, output, label, scope, body, restore_draws,
                random_restored: bool) -> bool:
    """Add to the entry's ``body`` the copies of the written inputs, and to ``restore_draws`` (run
    before a rerun) putting them back; whether the graph can now run again. A graph that must be
    undone (``output.undo_required``: ops a try may catch) and cannot be raises ``CatchRetry``."""
    from ember.capture.caught_ops import CatchRetry
    undo = plan(gm, compiled, example_inputs, random_restored)
    if undo is None:
        if output.undo_required:
            raise CatchRetry(f"{label}: the graph's input writes cannot be undone")
        return False
    scope["___take"], scope["___restore"] = take, restore
    body.append(f"___undo = ___take(({''.join(input_sources[i].expr(scope) + ', ' for i in undo)}))")
    restore_draws.append("___restore(___undo)")
    return True


def _running_stats(node: torch.fx.Node) -> list | None:
    """The running-statistics arguments a batch / instance norm call updates (None: unknown)."""
    import inspect
    try:
        bound = inspect.signature(node.target).bind(*node.args, **node.kwargs).arguments
        return [bound.get("running_mean"), bound.get("running_var")]
    except (TypeError, ValueError):  # a builtin (torch.batch_norm): input, weight, bias, mean, var, ...
        if node.op != "call_function" or node.kwargs:
            return None
        return list(node.args[3:5])


def take(tensors: tuple) -> list:
    """Copies of the storages of ``tensors`` (whole storages: a write through any view of them is
    undone; storages carry no autograd history)."""
    saved, seen = [], set()
    for t in tensors:
        storage = t.untyped_storage()
        if storage.data_ptr() not in seen:
            seen.add(storage.data_ptr())
            saved.append((storage, storage.clone()))
    return saved


def restore(saved: list) -> None:
    for storage, value in saved:
        if storage.nbytes() == value.nbytes():
            storage.copy_(value)
