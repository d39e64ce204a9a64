"""Would eager's backward reject this program? (an input is modified in place after an op saved it)

Eager autograd checks, at backward, that each tensor an op saved still has the version it had
when saved; ``x.mul_(2)`` after ``y = x.sin()`` makes backward raise "one of the variables needed
for gradient computation has been modified by an inplace operation". A functional graph reads the
old value instead, so the compiled program would quietly return gradients eager never computes.
Only a graph that changes the data of an input requiring grad can get there. Such a graph is run
once on fake tensors, forward and backward, with eager's autograd:

* if that backward fails the check, the frame runs eagerly (and raises there, at backward, as
  the program does);
* if an op saved the input's *final* value (``y.add_(1); z = y * y``), the program may still
  modify ``y`` after the frame and before the backward, which eager rejects too. The graph keeps
  its own copy of that value, so the runtime must check ``y``'s version itself: ``final_saves``
  says, per such input, which forward returns lead (through the backward) to an op that saved
  it — the check applies when one of their gradients arrives, as eager's applies when the op's
  backward runs (see ``runtime.make_autograd_function``).
"""
from __future__ import annotations

import torch
from torch.multiprocessing.reductions import StorageWeakRef
from torch.utils import _pytree as pytree

from ember.aot.errors import MODIFIED_INPLACE as _MESSAGE


def _storage_key(t: torch.Tensor):
    """What a saved tensor shares with the input it aliases: its storage (a view, and a
    ``detach()`` alias too, which has no ``_base`` but shares the version counter)."""
    try:
        return StorageWeakRef(t.untyped_storage())
    except Exception:  # noqa: BLE001 - no storage to read (e.g. sparse): by identity
        return id(t._base if t._base is not None else t)


class _SaveLog:
    """Saved-tensor hooks that note which input (by position) each saved tensor belongs to."""

    def __init__(self, args: list, candidates: list[int]) -> None:
        self.root_of = {_storage_key(args[i]): i for i in candidates}
        self.packs: list = []  # (input position or None, version at save time)
        self.unpacked: set = set()

    def pack(self, t):
        self.packs.append((self.root_of.get(_storage_key(t)), t._version))
        return len(self.packs) - 1, t

    def unpack(self, packed):
        self.unpacked.add(packed[0])
        return packed[1]


def eager_backward_check(prog, meta) -> tuple[str | None, dict]:
    """(the error eager's backward would raise or None, ``final_saves``: input position ->
    frozenset of forward-return positions whose gradient reaches an op that saved the input's
    final value)."""
    if not meta.is_train or not any((i.mutates_data or i.touches_metadata) and i.requires_grad
                                    for i in meta.input_info):
        return None, {}
    from ember.aot.meta import quiet_unbacked
    with prog.fake_mode, torch.enable_grad(), torch.autograd.set_detect_anomaly(False), \
            quiet_unbacked(prog.fake_mode):
        leaves, args = [], []
        for a in prog.fake_args:
            if isinstance(a, torch.Tensor) and a.requires_grad:
                leaf = a.detach().clone().requires_grad_(True)
                leaves.append(leaf)
                args.append(leaf.clone())  # a non-leaf, as an input mutated in place must be
            elif isinstance(a, torch.Tensor):
                args.append(a.clone())
            else:
                args.append(a)
        candidates = [i for i, info in enumerate(meta.input_info)
                      if (info.mutates_data or info.touches_metadata) and info.requires_grad
                      and isinstance(args[i], torch.Tensor)]
        log = _SaveLog(args, candidates)
        try:
            with torch.autograd.graph.saved_tensors_hooks(log.pack, log.unpack):
                flat = pytree.tree_leaves(prog.fn(*args))
            outs = [o for o in flat
                    if isinstance(o, torch.Tensor) and o.requires_grad and o.grad_fn is not None]
            if outs:
                torch.autograd.grad(outs, leaves, [torch.ones_like(o) for o in outs], allow_unused=True,
                                    retain_graph=True)
        except RuntimeError as e:
            return (str(e).splitlines()[0] if _MESSAGE in str(e) else None), {}
        except Exception:  # noqa: BLE001 - only the version check is this function's business
            return None, {}
        final = {k for k, (i, v) in enumerate(log.packs) if i is not None and v == args[i]._version}
        if not final:
            return None, {}
        # which forward return's gradient unpacks each of those saves
        returns = [args[i] for i in meta.mutated_input_indices]
        if len(flat) == meta.num_outputs:
            returns += flat
        else:  # unexpected structure: every return counts
            returns += [None] * meta.num_outputs
        returns += [None] * meta.num_intermediate_bases
        final_saves: dict = {}
        for r, value in enumerate(returns):
            if not meta.tangent_mask[r]:
                continue
            if isinstance(value, torch.Tensor) and value.requires_grad and value.grad_fn is not None:
                log.unpacked = set()
                try:
                    torch.autograd.grad([value], leaves, [torch.ones_like(value)], allow_unused=True,
                                        retain_graph=True)
                except Exception:  # noqa: BLE001
                    reached = final
                else:
                    reached = final & log.unpacked
            elif value is None:
                reached = final
            else:
                continue
            for k in reached:
                final_saves.setdefault(log.packs[k][0], set()).add(r)
    return None, {i: frozenset(rs) for i, rs in final_saves.items()}
