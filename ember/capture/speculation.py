"""Checkpoint and rollback of the interpreter, for regions traced speculatively.

Some constructs are traced to find out whether (and how) they can be captured, and the trace is
then undone: each branch of ``torch.cond`` starts from the same state, an autograd.Function's
``backward`` is traced once for its guards and then dropped, and a region that turns out to be
unsupported is rolled back before the error leaves it. ``Checkpoint(tx)`` records:

* each running frame's stack, locals, cells, instruction pointer and pending ``KW_NAMES``;
* the side-effect tables (attribute/global/container writes, deferred calls);
* the graph: which nodes exist (the ones added later are erased) and the submodules;
* list/dict trackers written after the checkpoint (their items, copied at the first write:
  `note_container_write`), since those trackers are changed in place;
* the grad mode;
* the metadata of every fake tensor alive in the trace (the graph's example values, the fake
  converter's memo, tensors held by the frames): size, stride, storage offset, storage,
  ``requires_grad``, leaf-ness and version counter (`ember.fake.snapshot`). An in-place metadata
  op traced in the region (``x.t_()``) changed that very fake tensor; restoring it in place keeps
  every tracker that shares it consistent. The snapshot is taken lazily, just before the region's
  first op that may change a fake tensor (`may_change_fakes`, called by ``OutputGraph._call``):
  a region that changes none (most) costs no walk over the trace's tensors.

Guards are not rolled back, on purpose: the builder memoizes what it wrapped (with the guards it
installed then), so a dropped guard could be needed later without being installed again. A guard
added by an undone region only costs a recompile when it fails, never a wrong answer; and a
``cond`` wants the union of its branches' guards anyway. Guards on tensor inputs are made from
their metadata at entry (see ``builder.wrap``), never from a fake tensor changed in the trace.

``restore`` returns False when something could not be put back (a view whose autograd history
changed, a placeholder or node from the region still used); the caller then gives up on the trace
(a graph break: the frame is traced again from scratch up to the construct, which runs eagerly).
"""
from __future__ import annotations

import types

import torch

from ember.fake.snapshot import FakeSnapshot


class Checkpoint:
    def __init__(self, tx):
        self.tx = tx
        self.trace = tx.trace
        self.frames = [(f, list(f.stack), dict(f.locals), dict(f.cells), f.ip, f.kw_names)
                       for f in tx.trace.running_frames]
        if tx not in tx.trace.running_frames:
            self.frames.append((tx, list(tx.stack), dict(tx.locals), dict(tx.cells), tx.ip, tx.kw_names))
        self.side_effects = _side_effect_tables(tx.side_effects)
        self.output = tx.output
        self.last = next(iter(reversed(tx.output.graph.nodes)), None)  # nodes after it are the region's
        self.submodules = dict(tx.output.submodules)
        self.random_draws = len(tx.output.__dict__.get("random_calls", ()))  # (variables/random_draws.py)
        self.assumed = len(tx.output.__dict__.get("assumptions", ()))  # (capture/assumptions.py)
        self.grad_mode = torch.is_grad_enabled()
        self.containers: dict[int, tuple] = {}  # id(tracker) -> (tracker, its items/keys at the first write)
        # Taken lazily, before the first op that may change a fake tensor (`snapshot_pending`): until
        # then every fake tensor is as it was here, and most regions change none.
        self.fakes: FakeSnapshot | None = None
        self.active = True
        tx.trace.checkpoints.append(self)
        tx.output.__dict__.setdefault("pending_checkpoints", []).append(self)

    # -- while the region runs ---------------------------------------------------------
    def note_container_write(self, container) -> None:
        if id(container) not in self.containers:
            keys = getattr(container, "keys", None)
            self.containers[id(container)] = (container, _copy(container.items),
                                              dict(keys) if isinstance(keys, dict) else None)

    def close(self) -> None:
        """Stop journaling container writes (the region is over, kept or restored)."""
        if self.active:
            self.active = False
            if self in self.trace.checkpoints:
                self.trace.checkpoints.remove(self)
            pending = self.output.__dict__.get("pending_checkpoints")
            if pending and self in pending:
                pending.remove(self)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False

    # -- rolling back ---------------------------------------------------------------
    def restore_fakes(self) -> bool:
        """Only the fake tensors' metadata (a cond branch: the next branch starts from the same
        tensors; the nodes stay until both are cut out)."""
        return self.fakes is None or self.fakes.restore()

    def restore(self) -> bool:
        """Everything recorded, back as it was; False when something could not be."""
        ok = True
        for f, stack, locals_, cells, ip, kw_names in self.frames:
            f.stack[:] = stack
            f.locals.clear()
            f.locals.update(locals_)
            f.cells.clear()
            f.cells.update(cells)
            f.ip, f.kw_names = ip, kw_names
        _restore_side_effects(self.tx.side_effects, self.side_effects)
        for container, items, keys in self.containers.values():
            container.items = items
            if keys is not None:
                container.keys = keys
        graph = self.output.graph
        added = []
        for n in reversed(graph.nodes):  # (appended after `last`; placeholders go first: kept)
            if n is self.last:
                break
            added.append(n)
        else:
            if self.last is not None:  # (`last` itself was erased: which nodes are new is unknown)
                added, ok = [], False
        for n in added:  # (later nodes first: a node's users go before it)
            if n.op == "placeholder":
                continue
            if n.users:
                ok = False  # (cannot be: nodes from before do not use later ones)
                continue
            graph.erase_node(n)
        self.output.submodules.clear()
        self.output.submodules.update(self.submodules)
        assumed = self.output.__dict__.get("assumptions")
        if assumed:
            del assumed[self.assumed:]
        draws = self.output.__dict__.get("random_calls")
        if draws and len(draws) > self.random_draws:  # the region's draws are not made after all
            del draws[self.random_draws:]
            if any(i >= self.random_draws for i, _ in self.output.__dict__.get("random_inputs", {})):
                ok = False  # (a graph input fed from one of them: placeholders stay)
        torch._C._set_grad_enabled(self.grad_mode)
        ok = (self.fakes is None or self.fakes.restore()) and ok
        self.close()
        return ok


def snapshot_pending(output) -> None:
    """An op that may change fake tensors is about to run: the checkpoints opened since the last
    such op snapshot the fake tensors now (they are all as they were when those opened)."""
    pending = output.__dict__.get("pending_checkpoints")
    if not pending:
        return
    snap = FakeSnapshot.take(live_fakes(pending[0].tx))
    for cp in pending:
        cp.fakes = snap
    pending.clear()


def may_change_fakes(kind: str, target, kwargs: dict) -> bool:
    """Whether an op may change a fake tensor's metadata, version or autograd state: in-place ops
    (``t_``, ``add_``, ``set_``, ``detach_``, ``requires_grad_``, ``x += y``, ``x[i] = v``,
    ``out=``/``inplace=True``), mutable operator schemas, and Python callables run on fake tensors
    (functions, higher-order ops), conservatively."""
    name = target if isinstance(target, str) else getattr(target, "__name__", "") or ""
    if name.endswith("_") and not name.endswith("__"):
        return True
    if name.startswith("__i") and name.endswith("__") or name in ("setitem", "__setitem__", "__delitem__"):
        return True
    if getattr(target, "__module__", None) == "_operator" and name.startswith("i") and name != "index":
        return True  # operator.iadd, ...
    if "out" in kwargs or "inplace" in kwargs:
        return True
    if isinstance(target, torch._ops.OpOverload):
        return target._schema.is_mutable
    if isinstance(target, torch._ops.OpOverloadPacket):
        return any(getattr(target, o)._schema.is_mutable for o in target.overloads())
    return isinstance(target, (types.FunctionType, torch._ops.HigherOrderOperator))


def live_fakes(tx) -> list:
    """The fake tensors the trace can reach now: every graph value, the converted inputs, and what
    the running frames hold (directly or in list/tuple/dict trackers)."""
    out = []
    for n in tx.output.graph.nodes:
        _collect(n.meta.get("example_value"), out)
    for _ref, fake in tx.output.fake._memo.values():
        out.append(fake)
    frames = list(tx.trace.running_frames)
    if tx not in frames:
        frames.append(tx)
    for f in frames:
        for vt in [*f.stack, *dict.values(f.locals)]:  # (arguments not read yet stay so: lazy_arguments)
            _collect_vt(vt, out, 2)
    return out


def _collect(value, out) -> None:
    if isinstance(value, torch.Tensor):
        out.append(value)
    elif isinstance(value, (tuple, list)):
        for v in value:
            _collect(v, out)


def _collect_vt(vt, out, depth) -> None:
    from ember.capture.variables.tensor import TensorVariable
    # (a tensor input's fake read without counting as a use of it: see TensorVariable)
    fake = vt._fake if isinstance(vt, TensorVariable) else getattr(vt, "fake", None)
    if isinstance(fake, torch.Tensor):
        out.append(fake)
    if depth <= 0:
        return
    items = getattr(vt, "items", None)
    if isinstance(items, dict):
        items = list(items.values())
    if isinstance(items, list):
        for i in items:
            _collect_vt(i, out, depth - 1)


def _copy(items):
    return dict(items) if isinstance(items, dict) else list(items)


def _side_effect_tables(se) -> dict:
    return {k: (dict(v) if isinstance(v, dict) else list(v) if isinstance(v, list) else set(v))
            for k, v in vars(se).items() if isinstance(v, (dict, list, set))}


def _restore_side_effects(se, tables: dict) -> None:
    for k, v in tables.items():
        current = getattr(se, k)
        if isinstance(current, dict):
            current.clear()
            current.update(v)
        elif isinstance(current, list):
            current[:] = v
        else:
            current.clear()
            current.update(v)


def note_container_write(tx, container) -> None:
    """Called before a list/dict tracker is changed in place (see ``containers._mutable``)."""
    for cp in tx.trace.checkpoints:
        cp.note_container_write(container)
